//! Exact size functions: an allocation's size as a constant, linear or
//! quadratic function of the scaling variable, fitted with integer
//! arithmetic through the recorded points.

use std::fmt;

/// How a size function was fitted (the simplest form that passes exactly
/// through every recorded point, preferring non-negative coefficients,
/// since tensor sizes are sums of products of non-negative dimensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum FitKind {
    /// `c`
    Constant,
    /// `a·x`
    Proportional,
    /// `c·x²`
    Square,
    /// `c + a·x`, c ≥ 0
    Affine,
    /// `a·x + c·x²`
    LinearSquare,
    /// Any quadratic through three points (or, from two points, an affine
    /// function with a negative constant).
    Quadratic,
}

impl fmt::Display for FitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FitKind::Constant => "constant",
            FitKind::Proportional => "proportional",
            FitKind::Square => "square",
            FitKind::Affine => "affine",
            FitKind::LinearSquare => "linear+square",
            FitKind::Quadratic => "quadratic",
        })
    }
}

/// `y = (c[0] + c[1]·x + c[2]·x²) / den`, exact rational coefficients
/// (`den > 0`, reduced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Poly {
    /// Numerator coefficients of x⁰, x¹, x².
    pub c: [i128; 3],
    /// Common denominator, > 0.
    pub den: i128,
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    a = a.abs();
    b = b.abs();
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// A reduced fraction with a positive denominator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Q {
    n: i128,
    d: i128,
}

impl Q {
    fn new(n: i128, d: i128) -> Option<Q> {
        if d == 0 {
            return None;
        }
        let g = gcd(n, d).max(1);
        let s = if d < 0 { -1 } else { 1 };
        Some(Q {
            n: s * n / g,
            d: s * d / g,
        })
    }
    fn int(n: i128) -> Q {
        Q { n, d: 1 }
    }
    fn add(self, o: Q) -> Option<Q> {
        let g = gcd(self.d, o.d).max(1);
        let l = (self.d / g).checked_mul(o.d)?;
        let a = self.n.checked_mul(l / self.d)?;
        let b = o.n.checked_mul(l / o.d)?;
        Q::new(a.checked_add(b)?, l)
    }
    fn mul(self, o: Q) -> Option<Q> {
        let g1 = gcd(self.n, o.d).max(1);
        let g2 = gcd(o.n, self.d).max(1);
        Q::new(
            (self.n / g1).checked_mul(o.n / g2)?,
            (self.d / g2).checked_mul(o.d / g1)?,
        )
    }
    fn neg(self) -> Q {
        Q {
            n: -self.n,
            d: self.d,
        }
    }
    fn is_nonneg(self) -> bool {
        self.n >= 0
    }
}

impl Poly {
    /// The constant `v`.
    pub(crate) fn constant(v: i128) -> Poly {
        Poly {
            c: [v, 0, 0],
            den: 1,
        }
    }

    fn from_q(c: [Q; 3]) -> Option<Poly> {
        let mut den: i128 = 1;
        for q in c {
            let g = gcd(den, q.d).max(1);
            den = (den / g).checked_mul(q.d)?;
        }
        let mut n = [0i128; 3];
        for (ni, q) in n.iter_mut().zip(c) {
            *ni = q.n.checked_mul(den / q.d)?;
        }
        let g = gcd(gcd(gcd(n[0], n[1]), n[2]), den).max(1);
        Some(Poly {
            c: [n[0] / g, n[1] / g, n[2] / g],
            den: den / g,
        })
    }

    /// The numerator at `x`, exactly, when it fits in i128.
    fn numerator(&self, x: i128) -> Option<i128> {
        let x2 = x.checked_mul(x)?;
        self.c[0]
            .checked_add(self.c[1].checked_mul(x)?)?
            .checked_add(self.c[2].checked_mul(x2)?)
    }

    /// The exact value at `x` when it is an integer.
    pub(crate) fn eval_exact(&self, x: i128) -> Option<i128> {
        let n = self.numerator(x)?;
        (n % self.den == 0).then_some(n / self.den)
    }

    /// The value at `x`, rounded to the nearest integer (halves away from
    /// zero); falls back to floating point when the exact numerator would
    /// overflow 128 bits.
    pub(crate) fn eval(&self, x: i128) -> i128 {
        match self.numerator(x) {
            Some(n) => div_round(n, self.den),
            None => {
                let xf = x as f64;
                let v = (self.c[0] as f64 + self.c[1] as f64 * xf + self.c[2] as f64 * xf * xf)
                    / self.den as f64;
                v.round() as i128
            }
        }
    }
}

/// `n / d` rounded to nearest, halves away from zero (`d > 0`).
pub(crate) fn div_round(n: i128, d: i128) -> i128 {
    let q = n / d;
    let r = (n % d).abs();
    // 2·r >= d, without overflowing for d near i128::MAX (r < d).
    if r >= d - r { q + n.signum() } else { q }
}

fn fits(p: &Poly, pts: &[(i128, i128)]) -> bool {
    pts.iter().all(|&(x, y)| p.eval_exact(x) == Some(y))
}

fn poly(c0: Q, c1: Q, c2: Q) -> Option<Poly> {
    Poly::from_q([c0, c1, c2])
}

/// Fits `y(x)` exactly through `pts` (one, two or three points with
/// distinct x). Tries, in order: constant, proportional, square, affine
/// with non-negative coefficients, `a·x + c·x²` with non-negative
/// coefficients, and last any quadratic (three points) or any affine
/// function (two points). Returns `None` only when the arithmetic
/// overflows 128 bits or the points are degenerate.
pub(crate) fn fit(pts: &[(i128, i128)]) -> Option<(Poly, FitKind)> {
    let (&(x1, y1), rest) = pts.split_first()?;
    if pts.iter().all(|&(_, y)| y == y1) {
        return Some((Poly::constant(y1), FitKind::Constant));
    }
    let Some(&(x2, y2)) = rest.first() else {
        return Some((Poly::constant(y1), FitKind::Constant));
    };
    let zero = Q::int(0);
    let mut candidates: Vec<(Poly, FitKind, bool)> = Vec::new();
    if x1 != 0 {
        let a = Q::new(y1, x1)?;
        candidates.push((poly(zero, a, zero)?, FitKind::Proportional, a.is_nonneg()));
        let c = Q::new(y1, x1.checked_mul(x1)?)?;
        candidates.push((poly(zero, zero, c)?, FitKind::Square, c.is_nonneg()));
    }
    if x2 == x1 {
        return None;
    }
    // Affine through the first two points.
    let a = Q::new(y2 - y1, x2 - x1)?;
    let c0 = Q::int(y1).add(a.mul(Q::int(x1))?.neg())?;
    let affine = poly(c0, a, zero)?;
    candidates.push((affine, FitKind::Affine, c0.is_nonneg() && a.is_nonneg()));
    // a·x + c·x² through the first two points: y/x is affine in x.
    if x1 != 0 && x2 != 0 {
        let r1 = Q::new(y1, x1)?;
        let r2 = Q::new(y2, x2)?;
        let c = r2.add(r1.neg())?.mul(Q::new(1, x2 - x1)?)?;
        let a = r1.add(c.mul(Q::int(x1))?.neg())?;
        candidates.push((
            poly(zero, a, c)?,
            FitKind::LinearSquare,
            a.is_nonneg() && c.is_nonneg(),
        ));
    }
    for (p, kind, nonneg) in &candidates {
        if *nonneg && fits(p, pts) {
            return Some((*p, *kind));
        }
    }
    // Lagrange through the first three points.
    let Some(&(x3, y3)) = rest.get(1) else {
        return Some((affine, FitKind::Quadratic));
    };
    if x3 == x1 || x3 == x2 {
        return None;
    }
    let mut c = [zero; 3];
    for &(xi, yi, xj, xk) in &[(x1, y1, x2, x3), (x2, y2, x1, x3), (x3, y3, x1, x2)] {
        let d = Q::new(yi, (xi - xj).checked_mul(xi - xk)?)?;
        c[2] = c[2].add(d)?;
        c[1] = c[1].add(d.mul(Q::int(-(xj + xk)))?)?;
        c[0] = c[0].add(d.mul(Q::int(xj.checked_mul(xk)?))?)?;
    }
    let p = poly(c[0], c[1], c[2])?;
    fits(&p, pts).then_some((p, FitKind::Quadratic))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pts: &[(i128, i128)], kind: FitKind) -> Poly {
        let (p, k) = fit(pts).unwrap();
        assert_eq!(k, kind, "{pts:?} -> {p:?}");
        for &(x, y) in pts {
            assert_eq!(p.eval_exact(x), Some(y));
        }
        p
    }

    #[test]
    fn picks_the_simplest_exact_form() {
        check(&[(512, 7), (1024, 7), (2048, 7)], FitKind::Constant);
        let p = check(&[(512, 1024), (2048, 4096)], FitKind::Proportional);
        assert_eq!(p.eval(1000), 2000);
        let p = check(
            &[(512, 512 * 512 * 3), (2048, 2048 * 2048 * 3)],
            FitKind::Square,
        );
        assert_eq!(p.eval(1024), 1024 * 1024 * 3);
        // K·(s + 8): affine with a non-negative constant.
        let p = check(&[(512, 520 * 6), (2048, 2056 * 6)], FitKind::Affine);
        assert_eq!(p.eval(1024), 1032 * 6);
        // K·s·(s + 8): the affine fit has a negative constant, a·x + c·x² fits.
        let p = check(
            &[(512, 512 * 520 * 2), (2048, 2048 * 2056 * 2)],
            FitKind::LinearSquare,
        );
        assert_eq!(p.eval(1024), 1024 * 1032 * 2);
        // A general quadratic through three points.
        let f = |x: i128| 5 + 3 * x + 7 * x * x;
        let p = check(&[(1, f(1)), (4, f(4)), (9, f(9))], FitKind::Quadratic);
        assert_eq!(p.eval(100), f(100));
        // Rounded sizes (ceil to 32): exact at the points, rounded between.
        let r = |x: i128| (x + 31) / 32 * 32 * 4;
        let pts = [(100, r(100)), (150, r(150)), (310, r(310))];
        let (p, _) = fit(&pts).unwrap();
        for (x, y) in pts {
            assert_eq!(p.eval_exact(x), Some(y));
        }
        assert!((p.eval(200) - r(200)).abs() < 200);
    }

    #[test]
    fn rounding_and_large_values() {
        assert_eq!(div_round(7, 2), 4);
        assert_eq!(div_round(-7, 2), -4);
        assert_eq!(div_round(5, 3), 2);
        let p = Poly {
            c: [0, 0, i128::MAX / 4],
            den: 1,
        };
        // Overflowing numerators fall back to floating point.
        assert!(p.eval(1 << 40) > 0);
    }
}
