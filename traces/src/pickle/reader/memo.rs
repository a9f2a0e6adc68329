//! The memo: `PUT`, `BINPUT`, `LONG_BINPUT` and `MEMOIZE` store the top of
//! the stack under a key, `GET`, `BINGET` and `LONG_BINGET` push it again
//! (the same slot, so a memoized container stays one node).

use crate::pickle::error::PickleError;

use super::{Machine, Result};

impl Machine<'_> {
    fn memo_put(&mut self, key: u64) -> Result<()> {
        let v = self.top()?;
        let dense = self.memo.len() as u64;
        if let Some(cell) = usize::try_from(key).ok().and_then(|k| self.memo.get_mut(k)) {
            if cell.is_none() {
                self.memo_count += 1;
            }
            *cell = Some(v);
        } else if key == dense {
            self.memo.push(Some(v));
            if self.sparse_memo.is_empty() || self.sparse_memo.remove(&key).is_none() {
                self.memo_count += 1;
            }
            // Pull in sparse keys that the dense part now reaches.
            while !self.sparse_memo.is_empty() {
                let next = self.memo.len() as u64;
                match self.sparse_memo.remove(&next) {
                    Some(s) => self.memo.push(Some(s)),
                    None => break,
                }
            }
        } else if self.sparse_memo.insert(key, v).is_none() {
            self.memo_count += 1;
        }
        Ok(())
    }

    #[inline(always)]
    fn memo_get(&mut self, key: u64) -> Result<()> {
        let found = match usize::try_from(key).ok().and_then(|k| self.memo.get(k)) {
            Some(&dense) => dense,
            None => self.sparse_memo.get(&key).copied(),
        };
        match found {
            Some(v) => {
                self.push(v);
                Ok(())
            }
            None => Err(PickleError::MemoKeyMissing {
                key,
                opcode: self.name(),
                offset: self.op_start,
            }),
        }
    }

    // ---- opcodes ----

    #[inline(always)]
    pub(super) fn load_long_binget(&mut self) -> Result<()> {
        let k = self.u32()?;
        self.memo_get(u64::from(k))
    }

    #[inline(always)]
    pub(super) fn load_binget(&mut self) -> Result<()> {
        let k = self.u8()?;
        self.memo_get(u64::from(k))
    }

    #[inline(always)]
    pub(super) fn load_get(&mut self) -> Result<()> {
        let k = self.line_key()?;
        self.memo_get(k)
    }

    #[inline(always)]
    pub(super) fn load_memoize(&mut self) -> Result<()> {
        let k = self.memo_count;
        self.memo_put(k)
    }

    #[inline(always)]
    pub(super) fn load_binput(&mut self) -> Result<()> {
        let k = self.u8()?;
        self.memo_put(u64::from(k))
    }

    #[inline(always)]
    pub(super) fn load_long_binput(&mut self) -> Result<()> {
        let k = self.u32()?;
        self.memo_put(u64::from(k))
    }

    #[inline(always)]
    pub(super) fn load_put(&mut self) -> Result<()> {
        let k = self.line_key()?;
        self.memo_put(k)
    }
}
