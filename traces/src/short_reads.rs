//! A reader over bytes that hands them out a few at a time, as a slow file
//! or a decompressor may: the tests and fuzz targets read pickles through
//! it, so that a streamed read crosses its window's end inside opcodes,
//! arguments and text lines.

/// Reads `bytes` in reads of `sizes[0]`, `sizes[1]`, … bytes, in turn (at
/// most what the caller's buffer holds).
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct ShortReads<'a> {
    rest: &'a [u8],
    sizes: &'a [usize],
    turn: usize,
}

impl<'a> ShortReads<'a> {
    /// A reader of `bytes` in reads of `sizes` bytes in turn (an empty
    /// list, or a size 0, reads one byte at a time).
    pub fn new(bytes: &'a [u8], sizes: &'a [usize]) -> ShortReads<'a> {
        ShortReads {
            rest: bytes,
            sizes,
            turn: 0,
        }
    }
}

impl std::io::Read for ShortReads<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self
            .sizes
            .get(self.turn % self.sizes.len().max(1))
            .map_or(1, |&s| s.max(1));
        self.turn += 1;
        let n = size.min(buf.len()).min(self.rest.len());
        let (head, tail) = self.rest.split_at(n);
        if let Some(out) = buf.get_mut(..n) {
            out.copy_from_slice(head);
        }
        self.rest = tail;
        Ok(n)
    }
}
