//! Ascending placement: a bump allocator. Every new segment or reservation
//! starts at the first aligned address above everything placed so far
//! (including ranges placed at recorded addresses); freed ranges are not
//! reused. This is what the drivers that recorded the real snapshots did
//! for as long as their recordings last (they never freed a segment).

/// The bump pointer.
#[derive(Debug, Clone)]
pub(crate) struct Ascending {
    next: u64,
}

impl Ascending {
    pub(crate) fn new(base: u64) -> Self {
        Ascending { next: base }
    }

    /// The next aligned address, if `size` bytes fit there below 2^64.
    pub(crate) fn pick(&self, size: u64, align: u64) -> Option<u64> {
        let addr = self.next.div_ceil(align.max(1)).checked_mul(align.max(1))?;
        addr.checked_add(size).map(|_| addr)
    }

    /// `[ptr, ptr + size)` is taken: the next range goes above it.
    pub(crate) fn taken(&mut self, ptr: u64, size: u64) {
        self.next = self.next.max(ptr.saturating_add(size));
    }
}
