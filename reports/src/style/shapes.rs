//! Line and fill styles and the shapes drawn with them: lines, dashes,
//! rectangles, hatching.

use plotters::prelude::*;

use super::Area;
use crate::Result;

/// A line style.
pub(crate) fn stroke(color: RGBColor, width: u32) -> ShapeStyle {
    ShapeStyle {
        color: color.to_rgba(),
        filled: false,
        stroke_width: width,
    }
}

/// A fill style.
pub(crate) fn fill(color: RGBColor) -> ShapeStyle {
    ShapeStyle {
        color: color.to_rgba(),
        filled: true,
        stroke_width: 0,
    }
}

/// A straight line between two pixels.
pub(crate) fn line<DB: DrawingBackend>(
    area: &Area<DB>,
    a: (i32, i32),
    b: (i32, i32),
    style: ShapeStyle,
) -> Result<()> {
    area.draw(&PathElement::new(vec![a, b], style))?;
    Ok(())
}

/// A dashed straight line between two pixels.
pub(crate) fn dashed<DB: DrawingBackend>(
    area: &Area<DB>,
    a: (i32, i32),
    b: (i32, i32),
    style: ShapeStyle,
    dash: i32,
    gap: i32,
) -> Result<()> {
    for d in dash_path(&[a, b], dash, gap, 0) {
        area.draw(&PathElement::new(d, style))?;
    }
    Ok(())
}

/// Cuts a pixel path into dashes `on` pixels long, `off` pixels apart,
/// the pattern shifted `phase` pixels along the path (a dash starts at
/// `phase`). Phases let several dashed lines on one path take turns.
pub(crate) fn dash_path(
    path: &[(i32, i32)],
    on: i32,
    off: i32,
    phase: i32,
) -> Vec<Vec<(i32, i32)>> {
    let (on, off) = (on.max(1) as f64, off.max(0) as f64);
    let period = on + off;
    let mut out: Vec<Vec<(i32, i32)>> = Vec::new();
    let mut cur: Vec<(i32, i32)> = Vec::new();
    let mut pos = (-(phase as f64)).rem_euclid(period);
    let mut flush = |cur: &mut Vec<(i32, i32)>| {
        if cur.len() >= 2 {
            out.push(std::mem::take(cur));
        } else {
            cur.clear();
        }
    };
    for w in path.windows(2) {
        let [a, b] = w else { continue };
        let (dx, dy) = ((b.0 - a.0) as f64, (b.1 - a.1) as f64);
        let len = (dx * dx + dy * dy).sqrt();
        if len <= 0.0 {
            continue;
        }
        let at = |t: f64| {
            (
                (a.0 as f64 + dx * t / len).round() as i32,
                (a.1 as f64 + dy * t / len).round() as i32,
            )
        };
        let mut t = 0.0;
        while t < len - 1e-9 {
            let in_dash = pos < on;
            let boundary = if in_dash { on } else { period };
            let step = (boundary - pos).min(len - t).max(1e-9);
            if in_dash {
                let (p0, p1) = (at(t), at(t + step));
                if cur.last() != Some(&p0) {
                    if !cur.is_empty() {
                        flush(&mut cur);
                    }
                    cur.push(p0);
                }
                if cur.last() != Some(&p1) {
                    cur.push(p1);
                }
            }
            t += step;
            pos += step;
            if in_dash && pos >= on - 1e-9 {
                flush(&mut cur);
            }
            if pos >= period - 1e-9 {
                pos = 0.0;
            }
        }
    }
    flush(&mut cur);
    out
}

/// A filled rectangle between two corners (any order).
pub(crate) fn rect<DB: DrawingBackend>(
    area: &Area<DB>,
    a: (i32, i32),
    b: (i32, i32),
    style: ShapeStyle,
) -> Result<()> {
    area.draw(&Rectangle::new([a, b], style))?;
    Ok(())
}

/// Diagonal hatching (`/`) inside a rectangle.
pub(crate) fn hatch<DB: DrawingBackend>(
    area: &Area<DB>,
    a: (i32, i32),
    b: (i32, i32),
    color: RGBColor,
    spacing: i32,
) -> Result<()> {
    let (x0, x1) = (a.0.min(b.0), a.0.max(b.0));
    let (y0, y1) = (a.1.min(b.1), a.1.max(b.1));
    let h = y1 - y0;
    if h <= 0 || x1 <= x0 {
        return Ok(());
    }
    let mut k = x0 - h;
    while k < x1 {
        // The line (k + t, y1 - t) for t in 0..=h, clipped to x0..=x1.
        let t0 = (x0 - k).max(0);
        let t1 = (x1 - k).min(h);
        if t0 < t1 {
            line(area, (k + t0, y1 - t0), (k + t1, y1 - t1), stroke(color, 1))?;
        }
        k += spacing.max(2);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashes_take_turns() {
        let a = dash_path(&[(0, 0), (40, 0)], 5, 5, 0);
        assert_eq!(a[0], vec![(0, 0), (5, 0)]);
        assert_eq!(a.len(), 4);
        let b = dash_path(&[(0, 0), (40, 0)], 5, 5, 5);
        assert_eq!(b[0], vec![(5, 0), (10, 0)]);
        assert!(dash_path(&[(3, 3)], 5, 5, 0).is_empty());
    }
}
