//! A pool's streams, sorted by raw handle: a binary search over a short
//! array (almost every trace has one to four streams per pool) in place of
//! a B-tree lookup on every insert and remove of a free block.

/// Values keyed by raw stream handle, in handle order.
#[derive(Debug, Clone)]
pub(super) struct StreamTable<T> {
    entries: Vec<(u64, T)>,
}

impl<T> Default for StreamTable<T> {
    fn default() -> Self {
        StreamTable {
            entries: Vec::new(),
        }
    }
}

impl<T> StreamTable<T> {
    #[inline]
    fn position(&self, stream: u64) -> Result<usize, usize> {
        // One stream is the common case: no search at all.
        match self.entries.as_slice() {
            [(s, _)] if *s == stream => Ok(0),
            _ => self.entries.binary_search_by_key(&stream, |(s, _)| *s),
        }
    }

    /// The value of `stream`.
    #[inline]
    pub(super) fn get(&self, stream: u64) -> Option<&T> {
        let i = self.position(stream).ok()?;
        self.entries.get(i).map(|(_, v)| v)
    }

    /// The value of `stream`, mutably.
    #[inline]
    pub(super) fn get_mut(&mut self, stream: u64) -> Option<&mut T> {
        let i = self.position(stream).ok()?;
        self.entries.get_mut(i).map(|(_, v)| v)
    }

    /// Adds `stream` with `value` unless it is there; `true` if added.
    pub(super) fn insert(&mut self, stream: u64, value: T) -> bool {
        match self.position(stream) {
            Ok(_) => false,
            Err(at) => {
                self.entries.insert(at, (stream, value));
                true
            }
        }
    }

    /// Number of streams.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Streams and values in handle order.
    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &T)> + '_ {
        self.entries.iter().map(|(s, v)| (*s, v))
    }

    /// Values in handle order, mutably.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// Values in handle order.
    pub(super) fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.entries.iter().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_handle_order_and_finds_every_stream() {
        let mut t = StreamTable::default();
        for (i, s) in [7u64, 3, u64::MAX, 0, 5].into_iter().enumerate() {
            assert!(t.insert(s, i));
            assert!(!t.insert(s, 99), "a second insert keeps the first value");
        }
        let order: Vec<u64> = t.iter().map(|(s, _)| s).collect();
        assert_eq!(order, [0, 3, 5, 7, u64::MAX]);
        assert_eq!(t.get(u64::MAX), Some(&2));
        assert_eq!(t.get(4), None);
        if let Some(v) = t.get_mut(3) {
            *v = 10;
        }
        assert_eq!(t.get(3), Some(&10));
        assert_eq!(t.len(), 5);
    }
}
