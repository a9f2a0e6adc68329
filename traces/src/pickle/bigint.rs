//! Arbitrary-precision integers as pickles store them (`LONG1`, `LONG4`):
//! little-endian two's complement bytes.

use std::fmt;

/// An integer of any size, kept as its shortest little-endian two's
/// complement byte string (the encoding of pickle's `LONG1`/`LONG4`; zero is
/// the empty string).
///
/// The reader only produces `BigInt`s for values outside `i64`; smaller
/// values are plain ints. Conversions to machine integers return `None`
/// when the value does not fit.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BigInt {
    bytes: Box<[u8]>,
}

/// The shortest two's complement encoding of `bytes`: the prefix left after
/// stripping trailing sign-extension bytes.
pub(crate) fn minimal(bytes: &[u8]) -> &[u8] {
    let mut rest = bytes;
    while let Some((&last, init)) = rest.split_last() {
        let prev_sign = init.last().map_or(0, |b| b & 0x80);
        let redundant = match last {
            0x00 => prev_sign == 0,
            // A lone 0xff is -1 and must stay.
            0xff => !init.is_empty() && prev_sign != 0,
            _ => false,
        };
        if !redundant {
            break;
        }
        rest = init;
    }
    rest
}

/// Sign-extends up to 8 little-endian two's complement bytes to an `i64`.
/// Callers pass at most 8 bytes; longer input keeps the low 8.
pub(crate) fn i64_from_le(bytes: &[u8]) -> i64 {
    let negative = bytes.last().is_some_and(|b| b & 0x80 != 0);
    let mut buf = if negative { [0xff; 8] } else { [0; 8] };
    for (dst, src) in buf.iter_mut().zip(bytes) {
        *dst = *src;
    }
    i64::from_le_bytes(buf)
}

impl BigInt {
    /// From little-endian two's complement bytes (any length; redundant
    /// sign bytes are dropped).
    pub(crate) fn from_signed_le_bytes(bytes: &[u8]) -> BigInt {
        BigInt {
            bytes: minimal(bytes).into(),
        }
    }

    /// The shortest little-endian two's complement encoding (empty for zero).
    pub(crate) fn as_signed_le_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether the value is below zero.
    pub(crate) fn is_negative(&self) -> bool {
        self.bytes.last().is_some_and(|b| b & 0x80 != 0)
    }

    /// The value as an `i64`, if it fits.
    pub(crate) fn to_i64(&self) -> Option<i64> {
        (self.bytes.len() <= 8).then(|| i64_from_le(&self.bytes))
    }

    /// The value as a `u64`, if it fits.
    pub(crate) fn to_u64(&self) -> Option<u64> {
        if self.is_negative() {
            return None;
        }
        // A non-negative value of up to 64 bits takes up to 9 bytes (the
        // ninth a zero sign byte).
        let mag = match &*self.bytes {
            b if b.len() <= 8 => b,
            [b @ .., 0] if b.len() == 8 => b,
            _ => return None,
        };
        let mut buf = [0u8; 8];
        for (dst, src) in buf.iter_mut().zip(mag) {
            *dst = *src;
        }
        Some(u64::from_le_bytes(buf))
    }

    /// The value as an `i128`, if it fits.
    #[cfg(test)]
    pub(crate) fn to_i128(&self) -> Option<i128> {
        if self.bytes.len() > 16 {
            return None;
        }
        let mut buf = if self.is_negative() {
            [0xff; 16]
        } else {
            [0; 16]
        };
        for (dst, src) in buf.iter_mut().zip(&self.bytes) {
            *dst = *src;
        }
        Some(i128::from_le_bytes(buf))
    }

    /// The nearest `f64` (infinite when the value is beyond `f64`'s range).
    pub(crate) fn to_f64(&self) -> f64 {
        let (negative, mag) = self.magnitude();
        let mut f = 0.0f64;
        for limb in mag.iter().rev() {
            f = f * 4294967296.0 + f64::from(*limb);
        }
        if negative { -f } else { f }
    }

    /// Sign and magnitude as little-endian base-2^32 limbs.
    fn magnitude(&self) -> (bool, Vec<u32>) {
        let negative = self.is_negative();
        let mut bytes: Vec<u8> = self.bytes.to_vec();
        if negative {
            // Two's complement negation: invert and add one.
            let mut carry = true;
            for b in &mut bytes {
                let (v, c) = (!*b).overflowing_add(u8::from(carry));
                *b = v;
                carry = c;
            }
        }
        let limbs = bytes
            .chunks(4)
            .map(|c| {
                let mut buf = [0u8; 4];
                for (dst, src) in buf.iter_mut().zip(c) {
                    *dst = *src;
                }
                u32::from_le_bytes(buf)
            })
            .collect();
        (negative, limbs)
    }

    /// From sign and little-endian base-2^32 magnitude limbs.
    fn from_magnitude(negative: bool, limbs: &[u32]) -> BigInt {
        let mut bytes: Vec<u8> = limbs.iter().flat_map(|l| l.to_le_bytes()).collect();
        bytes.push(0);
        if negative {
            let mut carry = true;
            for b in &mut bytes {
                let (v, c) = (!*b).overflowing_add(u8::from(carry));
                *b = v;
                carry = c;
            }
        }
        BigInt::from_signed_le_bytes(&bytes)
    }

    /// Parses Python integer text: optional surrounding whitespace, an
    /// optional sign, an optional `0x`/`0o`/`0b` prefix, digits with single
    /// underscores between them. At most `max_digits` digits.
    pub(crate) fn parse_text(text: &str, max_digits: usize) -> Result<BigInt, String> {
        let t = text.trim();
        // Slicing is in bounds and on char boundaries: after an ASCII sign
        // byte, and after a 2-byte prefix that `get(..2)` found.
        let (negative, t) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let lower = t.get(..2).map(str::to_ascii_lowercase);
        let (radix, digits) = match lower.as_deref() {
            Some("0x") => (16u32, &t[2..]),
            Some("0o") => (8, &t[2..]),
            Some("0b") => (2, &t[2..]),
            _ => (10, t),
        };
        if digits.is_empty() {
            return Err(format!("{text:?} is not an integer"));
        }
        if digits.len() > max_digits {
            return Err(format!("integer text longer than {max_digits} digits"));
        }
        let mut limbs: Vec<u32> = Vec::new();
        let mut prev_underscore = true; // no leading underscore
        for c in digits.chars() {
            if c == '_' {
                if prev_underscore {
                    return Err(format!("{text:?} is not an integer"));
                }
                prev_underscore = true;
                continue;
            }
            prev_underscore = false;
            let d = c
                .to_digit(radix)
                .ok_or_else(|| format!("{text:?} is not an integer"))?;
            // limbs = limbs * radix + d
            let mut carry = u64::from(d);
            for limb in &mut limbs {
                let v = u64::from(*limb) * u64::from(radix) + carry;
                *limb = v as u32; // low 32 bits, truncation intended
                carry = v >> 32;
            }
            if carry != 0 {
                limbs.push(carry as u32); // carry < 2^32 here
            }
        }
        if prev_underscore {
            return Err(format!("{text:?} is not an integer"));
        }
        Ok(BigInt::from_magnitude(negative, &limbs))
    }
}

impl From<i64> for BigInt {
    fn from(v: i64) -> Self {
        BigInt::from_signed_le_bytes(&v.to_le_bytes())
    }
}

impl From<u64> for BigInt {
    fn from(v: u64) -> Self {
        BigInt::from(i128::from(v))
    }
}

impl From<i128> for BigInt {
    fn from(v: i128) -> Self {
        BigInt::from_signed_le_bytes(&v.to_le_bytes())
    }
}

impl From<u128> for BigInt {
    fn from(v: u128) -> Self {
        let mut bytes = v.to_le_bytes().to_vec();
        bytes.push(0);
        BigInt::from_signed_le_bytes(&bytes)
    }
}

impl fmt::Display for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (negative, mut limbs) = self.magnitude();
        // Repeated division by 10^9, collecting base-10^9 digits.
        let mut chunks: Vec<u32> = Vec::new();
        while limbs.last() == Some(&0) {
            limbs.pop();
        }
        while !limbs.is_empty() {
            let mut rem = 0u64;
            for limb in limbs.iter_mut().rev() {
                let cur = (rem << 32) | u64::from(*limb);
                *limb = (cur / 1_000_000_000) as u32; // < 2^32 as rem < 10^9
                rem = cur % 1_000_000_000;
            }
            chunks.push(rem as u32); // < 10^9
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
        }
        let mut digits = String::new();
        match chunks.split_last() {
            None => digits.push('0'),
            Some((top, rest)) => {
                digits.push_str(&top.to_string());
                for c in rest.iter().rev() {
                    digits.push_str(&format!("{c:09}"));
                }
            }
        }
        f.pad_integral(!negative, "", &digits)
    }
}

impl fmt::Debug for BigInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BigInt({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_forms() {
        assert_eq!(minimal(&[]).len(), 0);
        assert_eq!(minimal(&[0]).len(), 0);
        assert_eq!(minimal(&[0xff]).len(), 1);
        assert_eq!(minimal(&[0xff, 0xff]).len(), 1);
        assert_eq!(minimal(&[0x80, 0x00]).len(), 2);
        assert_eq!(minimal(&[0x7f, 0x00, 0x00]).len(), 1);
        assert_eq!(minimal(&[0x00, 0x80, 0xff]).len(), 2);
    }

    #[test]
    fn display_and_parse() {
        for s in [
            "0",
            "1",
            "-1",
            "9223372036854775808",
            "-9223372036854775809",
            "18446744073709551616",
            "-340282366920938463463374607431768211456",
            "123456789012345678901234567890123456789012345678901234567890",
        ] {
            let b = BigInt::parse_text(s, 4300).unwrap();
            assert_eq!(b.to_string(), s);
        }
        assert_eq!(BigInt::parse_text("0x10", 10).unwrap().to_i64(), Some(16));
        assert_eq!(BigInt::parse_text("-0b101", 10).unwrap().to_i64(), Some(-5));
        assert_eq!(
            BigInt::parse_text("1_000", 10).unwrap().to_i64(),
            Some(1000)
        );
        assert!(BigInt::parse_text("1__0", 10).is_err());
        assert!(BigInt::parse_text("_1", 10).is_err());
        assert!(BigInt::parse_text("1_", 10).is_err());
        assert!(BigInt::parse_text("", 10).is_err());
        assert!(BigInt::parse_text("12a", 10).is_err());
        assert!(BigInt::parse_text("12345", 4).is_err());
    }

    #[test]
    fn conversions() {
        let b = BigInt::from(u64::MAX);
        assert_eq!(b.to_u64(), Some(u64::MAX));
        assert_eq!(b.to_i64(), None);
        assert_eq!(b.as_signed_le_bytes().len(), 9);
        assert_eq!(BigInt::from(-1i64).to_u64(), None);
        assert_eq!(BigInt::from(i128::MIN).to_i128(), Some(i128::MIN));
        assert_eq!(BigInt::from(u128::MAX).to_i128(), None);
        assert_eq!(BigInt::from(u128::MAX).to_string(), u128::MAX.to_string());
        assert_eq!(BigInt::from(-(1i128 << 70)).to_f64(), -(2f64.powi(70)));
        assert_eq!(format!("{:>5}", BigInt::from(-12i64)), "  -12");
    }
}
