//! Reading opcode arguments: fixed-width integers, length prefixes, byte
//! runs and `\n`-terminated text lines (protocol 0).

use super::{Machine, Result};

impl<'i> Machine<'i> {
    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<&'i [u8]> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        let s = self
            .input
            .get(self.pos..end)
            .ok_or_else(|| self.truncated())?;
        self.pos = end;
        Ok(s)
    }

    #[inline]
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        <[u8; N]>::try_from(s).map_err(|_| self.truncated())
    }

    #[inline]
    pub(super) fn u8(&mut self) -> Result<u8> {
        let b = *self.input.get(self.pos).ok_or_else(|| self.truncated())?;
        self.pos += 1;
        Ok(b)
    }

    pub(super) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A length prefix that must be non-negative (Python reads these
    /// `BINSTRING`/`LONG4` lengths as signed).
    pub(super) fn i32_len(&mut self) -> Result<usize> {
        let n = i32::from_le_bytes(self.array()?);
        usize::try_from(n).map_err(|_| self.invalid(format!("negative byte count {n}")))
    }

    pub(super) fn u64_len(&mut self) -> Result<usize> {
        let n = u64::from_le_bytes(self.array()?);
        // A length beyond usize cannot be satisfied by the input anyway.
        usize::try_from(n).map_err(|_| self.truncated())
    }

    /// Text up to (not including) the next `\n`, which is consumed.
    pub(super) fn line(&mut self) -> Result<&'i [u8]> {
        let rest = self.input.get(self.pos..).unwrap_or(&[]);
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.truncated())?;
        let line = self.take(n)?;
        self.pos += 1; // the `\n`
        Ok(line)
    }

    pub(super) fn line_str(&mut self) -> Result<&'i str> {
        let line = self.line()?;
        std::str::from_utf8(line).map_err(|_| self.invalid("text line is not ASCII"))
    }

    /// A memo key written as decimal text (`PUT`, `GET`).
    pub(super) fn line_key(&mut self) -> Result<u64> {
        let text = self.line_str()?;
        text.trim()
            .parse::<u64>()
            .map_err(|_| self.invalid(format!("memo key {text:?} is not a non-negative integer")))
    }
}
