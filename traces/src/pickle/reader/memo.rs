//! The memo: `PUT`, `BINPUT`, `LONG_BINPUT` and `MEMOIZE` store the top of
//! the stack under a key, `GET`, `BINGET` and `LONG_BINGET` push it again
//! (the same slot, so a memoized container stays one node). Each
//! container's key is noted in its `Meta`, so that a container a sink took
//! can leave the memo ([`FREED`]) and its id can be used again.

use crate::pickle::doc::Slot;
use crate::pickle::error::PickleError;

use super::nesting::{MANY_MEMOS, NO_MEMO};
use super::{Machine, Result};

/// The id the memo holds (as `Slot::Node`) under the key of a container a
/// sink took, once the container's id may be given to another (no
/// container has this id: the arena holds fewer nodes than input bytes,
/// at most 1 GiB).
pub(super) const FREED: u32 = u32::MAX;

impl Machine<'_> {
    fn memo_put(&mut self, key: u64) -> Result<()> {
        let v = self.top()?;
        if let Slot::Node(id) = v {
            if let Some(m) = self.meta.get_mut(id as usize) {
                m.memo = match u32::try_from(key) {
                    Ok(k) if m.memo == NO_MEMO && k < MANY_MEMOS => k,
                    Ok(k) if m.memo == k => k,
                    _ => MANY_MEMOS,
                };
            }
        }
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
            // A container a sink took and freed: the read gives up.
            Some(Slot::Node(FREED)) => Err(self.gave_up()),
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
