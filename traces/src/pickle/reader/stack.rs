//! The value stack and the mark stack: `MARK`, `POP`, `POP_MARK`, `DUP`,
//! and the pops every other opcode makes.

use crate::pickle::doc::Slot;
use crate::pickle::error::PickleError;
use crate::pickle::opcodes as op;

use super::{Machine, Result};

impl Machine<'_> {
    #[inline]
    pub(super) fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    #[inline]
    pub(super) fn push(&mut self, v: Slot) {
        self.stack.push(v);
    }

    #[inline]
    pub(super) fn pop(&mut self) -> Result<Slot> {
        if self.stack.len() > self.floor() {
            self.stack.pop().ok_or_else(|| self.underflow())
        } else {
            Err(self.underflow())
        }
    }

    #[inline]
    pub(super) fn top(&self) -> Result<Slot> {
        if self.stack.len() > self.floor() {
            self.stack.last().copied().ok_or_else(|| self.underflow())
        } else {
            Err(self.underflow())
        }
    }

    /// Pops the innermost MARK; the values above it are `stack[mark..]`.
    #[inline]
    pub(super) fn pop_mark(&mut self) -> Result<usize> {
        self.marks.pop().ok_or(PickleError::MarkMismatch {
            opcode: op::name(self.op),
            offset: self.op_start,
            problem: "without a preceding MARK",
        })
    }

    /// After `pop_mark`: the container just below the marked values, which
    /// must itself be above the enclosing MARK.
    pub(super) fn target_below(&self, mark: usize) -> Result<(usize, Slot)> {
        if mark > self.floor() {
            let i = mark - 1;
            let slot = *self.stack.get(i).ok_or_else(|| self.underflow())?;
            Ok((i, slot))
        } else {
            Err(self.underflow())
        }
    }

    // ---- opcodes ----

    #[inline(always)]
    pub(super) fn load_mark(&mut self) {
        self.marks.push(self.stack.len());
    }

    #[inline(always)]
    pub(super) fn load_pop(&mut self) -> Result<()> {
        if self.stack.len() > self.floor() {
            self.stack.pop();
        } else if self.marks.pop().is_none() {
            // Python's POP discards the innermost MARK when nothing is
            // above it.
            return Err(self.underflow());
        }
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_pop_mark(&mut self) -> Result<()> {
        let mark = self.pop_mark()?;
        self.stack.truncate(mark);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_dup(&mut self) -> Result<()> {
        let v = self.top()?;
        self.push(v);
        Ok(())
    }
}
