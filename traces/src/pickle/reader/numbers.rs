//! Ints and floats: `BININT1`, `BININT2`, `BININT`, `LONG1`, `LONG4`,
//! `BINFLOAT`, and the text forms `INT`, `LONG`, `FLOAT` (protocol 0).
//! (`NONE`, `NEWTRUE` and `NEWFALSE` push their slot directly.)

use crate::pickle::bigint::{self, BigInt};
use crate::pickle::doc::{PickleDoc, Slot, Span};

use super::{Machine, Result};

/// Python's default limit on digits in `int(text)`
/// (`sys.int_info.default_max_str_digits`).
const MAX_INT_DIGITS: usize = 4300;

impl Machine<'_> {
    #[inline(always)]
    pub(super) fn load_binint1(&mut self) -> Result<()> {
        let v = self.u8()?;
        self.push(Slot::Int(i64::from(v)));
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_binint2(&mut self) -> Result<()> {
        let v = u16::from_le_bytes(self.array()?);
        self.push(Slot::Int(i64::from(v)));
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_binint(&mut self) -> Result<()> {
        let v = i32::from_le_bytes(self.array()?);
        self.push(Slot::Int(i64::from(v)));
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_long1(&mut self) -> Result<()> {
        let n = usize::from(self.u8()?);
        let b = self.take(n)?;
        let s = int_slot(&mut self.doc, self.input.bytes(b));
        self.push(s);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_long4(&mut self) -> Result<()> {
        let n = self.i32_len()?;
        let b = self.take(n)?;
        let s = int_slot(&mut self.doc, self.input.bytes(b));
        self.push(s);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_binfloat(&mut self) -> Result<()> {
        let v = f64::from_be_bytes(self.array()?);
        self.push(Slot::Float(v));
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_float(&mut self) -> Result<()> {
        let r = self.line_str()?;
        let text = self.text(r);
        let v =
            parse_float(text).ok_or_else(|| self.invalid(format!("{text:?} is not a float")))?;
        self.push(Slot::Float(v));
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_int(&mut self) -> Result<()> {
        let r = self.line_str()?;
        let s = match self.text(r.clone()) {
            "00" => Slot::Bool(false),
            "01" => Slot::Bool(true),
            _ => self.int_text(r)?,
        };
        self.push(s);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_long(&mut self) -> Result<()> {
        let r = self.line_str()?;
        let r = match self.text(r.clone()).ends_with('L') {
            true => r.start..r.end - 1,
            false => r,
        };
        let s = self.int_text(r)?;
        self.push(s);
        Ok(())
    }

    /// An `int` from the text at `r` (checked by [`Machine::line_str`]): a
    /// plain int when it fits `i64`, else a big int.
    fn int_text(&mut self, r: std::ops::Range<usize>) -> Result<Slot> {
        let text = self.text(r);
        if let Ok(v) = text.trim().parse::<i64>() {
            return Ok(Slot::Int(v));
        }
        let b = BigInt::parse_text(text, MAX_INT_DIGITS).map_err(|e| self.invalid(e))?;
        Ok(int_slot(&mut self.doc, b.as_signed_le_bytes()))
    }
}

/// Converts an `i64` value held in little-endian bytes of any length to a
/// slot (an int when it fits, else a big int stored in the byte arena).
#[inline]
fn int_slot(doc: &mut PickleDoc, le: &[u8]) -> Slot {
    if le.len() <= 8 {
        // Sign extension of up to 8 bytes is the value.
        return Slot::Int(bigint::i64_from_le(le));
    }
    let le = bigint::minimal(le);
    let n = le.len();
    if n <= 8 {
        Slot::Int(bigint::i64_from_le(le))
    } else {
        let start = doc.bytes.len();
        doc.bytes.extend_from_slice(le);
        Slot::BigInt(Span {
            start: start as u32, // bytes arena < 4 GiB: input is capped at 1 GiB
            len: n as u32,
        })
    }
}

/// Python's `float(text)` for the forms `repr` produces.
fn parse_float(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.contains('_') {
        // Python allows digit separators; Rust's parser does not.
        let cleaned: String = t.chars().filter(|&c| c != '_').collect();
        return cleaned.parse().ok();
    }
    t.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats() {
        assert_eq!(parse_float(" 1.5 "), Some(1.5));
        assert_eq!(parse_float("1_0.5"), Some(10.5));
        assert!(parse_float("inf").unwrap().is_infinite());
        assert!(parse_float("nan").unwrap().is_nan());
        assert_eq!(parse_float("x"), None);
    }
}
