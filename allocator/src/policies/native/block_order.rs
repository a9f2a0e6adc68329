//! The order of free blocks in a stream's free set: by size, then the
//! segment's allocation-order counter, then address ([`Key`]), and a block
//! as the set holds it ([`Entry`]).

/// The order of a free block: size, then counter, then address. Size and
/// counter are packed in one `u128` (a `u128` comparison compiles to two
/// flag-setting instructions, where a tuple of three branches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Key {
    size_counter: u128,
    ptr: u64,
}

impl Key {
    /// The key of a block.
    #[inline]
    pub(super) fn new(size: u64, counter: u64, ptr: u64) -> Key {
        Key {
            size_counter: (u128::from(size) << 64) | u128::from(counter),
            ptr,
        }
    }

    /// The first key of blocks of `size` bytes or more.
    #[inline]
    pub(super) fn at_least(size: u64) -> Key {
        Key::new(size, 0, 0)
    }

    /// The block size.
    #[inline]
    pub(super) fn size(&self) -> u64 {
        (self.size_counter >> 64) as u64
    }

    /// The segment's allocation-order counter.
    #[inline]
    pub(super) fn counter(&self) -> u64 {
        self.size_counter as u64
    }

    /// The block address.
    #[inline]
    pub(super) fn ptr(&self) -> u64 {
        self.ptr
    }
}

/// One free block: its order key and arena index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    /// Block size.
    pub size: u64,
    /// The segment's allocation-order counter (0: order by address).
    pub counter: u64,
    /// Block address.
    pub ptr: u64,
    /// Arena index of the block.
    pub idx: u32,
}

impl Entry {
    /// A block by its fields, for the sets' tests.
    #[cfg(test)]
    pub(super) fn of(size: u64, counter: u64, ptr: u64, idx: u32) -> Entry {
        Entry {
            size,
            counter,
            ptr,
            idx,
        }
    }

    /// The order key.
    #[inline]
    pub(super) fn key(&self) -> Key {
        Key::new(self.size, self.counter, self.ptr)
    }
}

/// Where a block that leaves position `from` of a sorted run for the key
/// `new` lands, counted without it: `from` when the key is unchanged, else
/// where `new` would go (`find_new`, searched in the run with the block
/// still in it). `None` if another block already has `new`.
#[inline]
pub(super) fn landing(
    from: usize,
    old: Key,
    new: Key,
    find_new: impl FnOnce() -> Result<usize, usize>,
) -> Option<usize> {
    if new == old {
        return Some(from);
    }
    match find_new() {
        Ok(_) => None,
        // Counted without `old`, which sits before a place past it.
        Err(at) if at > from => Some(at - 1),
        Err(at) => Some(at),
    }
}
