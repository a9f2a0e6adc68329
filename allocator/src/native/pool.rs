//! Block pools: the ordered sets of cached blocks (spec §3.1).
//!
//! PyTorch keeps one `std::set` per pool ordered by (stream, size, address).
//! Here each stream of a pool has its own B-tree keyed by one `u128`
//! (`size << 64 | address`), and the streams are kept in a map ordered by
//! their raw handle, which gives the same order with cheaper comparisons.
//! A pool rarely sees more than a few streams, but a trace with thousands
//! of them must not make every lookup scan them all.

use std::cell::Cell;
use std::collections::BTreeMap;

/// A free block as the pool orders it: stream (unsigned), then size, then
/// address; `idx` is the block's arena index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FreeKey {
    /// Raw stream handle.
    pub stream: u64,
    /// Block size.
    pub size: u64,
    /// Block address.
    pub ptr: u64,
    /// Arena index of the block.
    pub idx: u32,
}

/// An unmapped expandable block, ordered by (stream, address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnmappedKey {
    /// Raw stream handle.
    pub stream: u64,
    /// Block address.
    pub ptr: u64,
    /// Arena index of the block.
    pub idx: u32,
}

#[inline]
fn pack(size: u64, ptr: u64) -> u128 {
    ((size as u128) << 64) | ptr as u128
}

#[derive(Debug, Clone, Default)]
struct StreamBlocks {
    /// `size << 64 | ptr` → arena index.
    free: BTreeMap<u128, u32>,
    /// address → arena index.
    unmapped: BTreeMap<u64, u32>,
}

impl StreamBlocks {
    fn free_keys(&self, stream: u64) -> impl DoubleEndedIterator<Item = FreeKey> + '_ {
        self.free.iter().map(move |(&k, &idx)| FreeKey {
            stream,
            size: (k >> 64) as u64,
            ptr: k as u64,
            idx,
        })
    }
}

/// One of the allocator's pools (`BlockPool`).
#[derive(Debug, Clone, Default)]
pub struct Pool {
    /// Per-stream block sets by raw stream handle.
    streams: BTreeMap<u64, StreamBlocks>,
    /// Number of free blocks.
    free_len: usize,
    /// `get_free_blocks_call_count`: the garbage collector's clock.
    pub clock: u64,
    /// The largest free size and how many free blocks have it, kept up to
    /// date by `insert`/`remove` until the last such block goes (then
    /// `None` until [`Pool::max_size`] rescans the streams): the replay asks
    /// for it at every timeline point, and a scan of every stream each time
    /// is slow with thousands of streams.
    max: Cell<Option<(u64, usize)>>,
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Pool::default()
    }

    #[inline]
    fn find(&self, stream: u64) -> Option<&StreamBlocks> {
        self.streams.get(&stream)
    }

    #[inline]
    fn entry(&mut self, stream: u64) -> &mut StreamBlocks {
        self.streams.entry(stream).or_default()
    }

    /// Adds a free block.
    #[inline]
    pub fn insert(&mut self, k: FreeKey) {
        if self
            .entry(k.stream)
            .free
            .insert(pack(k.size, k.ptr), k.idx)
            .is_none()
        {
            self.free_len += 1;
            match self.max.get() {
                Some((m, _)) if k.size > m => self.max.set(Some((k.size, 1))),
                Some((m, n)) if k.size == m => self.max.set(Some((m, n + 1))),
                _ => {}
            }
        }
    }

    /// Removes a free block; `true` if it was there.
    #[inline]
    pub fn remove(&mut self, k: &FreeKey) -> bool {
        let removed = self
            .streams
            .get_mut(&k.stream)
            .is_some_and(|s| s.free.remove(&pack(k.size, k.ptr)).is_some());
        if removed {
            self.free_len -= 1;
            match self.max.get() {
                Some((m, n)) if k.size == m && n > 1 => self.max.set(Some((m, n - 1))),
                Some((m, _)) if k.size == m => self.max.set(None),
                _ => {}
            }
        }
        removed
    }

    /// The first free block of `stream` with size ≥ `size` (ties: lowest
    /// address) — PyTorch's `lower_bound` restricted to the stream.
    #[inline]
    pub fn lower_bound(&self, stream: u64, size: u64) -> Option<FreeKey> {
        let s = self.find(stream)?;
        s.free
            .range(pack(size, 0)..)
            .next()
            .map(|(&k, &idx)| FreeKey {
                stream,
                size: (k >> 64) as u64,
                ptr: k as u64,
                idx,
            })
    }

    /// Free blocks of `key.stream` strictly after `key`, in order.
    pub fn after(&self, key: FreeKey) -> impl Iterator<Item = FreeKey> + '_ {
        let stream = key.stream;
        self.find(stream)
            .into_iter()
            .flat_map(move |s| s.free.range(pack(key.size, key.ptr) + 1..))
            .map(move |(&k, &idx)| FreeKey {
                stream,
                size: (k >> 64) as u64,
                ptr: k as u64,
                idx,
            })
    }

    /// Free blocks of `stream` smaller than `(size, 0)`, largest first.
    pub fn before_desc(&self, stream: u64, size: u64) -> impl Iterator<Item = FreeKey> + '_ {
        self.find(stream)
            .into_iter()
            .flat_map(move |s| s.free.range(..pack(size, 0)).rev())
            .map(move |(&k, &idx)| FreeKey {
                stream,
                size: (k >> 64) as u64,
                ptr: k as u64,
                idx,
            })
    }

    /// Every free block in (stream, size, address) order.
    pub fn iter(&self) -> impl Iterator<Item = FreeKey> + '_ {
        self.streams.iter().flat_map(|(&stream, s)| s.free_keys(stream))
    }

    /// Number of free blocks.
    pub fn len(&self) -> usize {
        self.free_len
    }

    /// Largest free block size.
    pub fn max_size(&self) -> u64 {
        if let Some((m, _)) = self.max.get() {
            return m;
        }
        let m = self
            .streams
            .values()
            .filter_map(|s| s.free.last_key_value().map(|(&k, _)| (k >> 64) as u64))
            .max()
            .unwrap_or(0);
        let n = self
            .streams
            .values()
            .map(|s| s.free.range(pack(m, 0)..).count())
            .sum();
        self.max.set(Some((m, n)));
        m
    }

    /// Adds an unmapped block.
    pub fn insert_unmapped(&mut self, k: UnmappedKey) {
        self.entry(k.stream).unmapped.insert(k.ptr, k.idx);
    }

    /// Removes an unmapped block.
    pub fn remove_unmapped(&mut self, k: &UnmappedKey) {
        if let Some(s) = self.streams.get_mut(&k.stream) {
            s.unmapped.remove(&k.ptr);
        }
    }

    /// Unmapped blocks of `stream` in address order.
    pub fn unmapped_of(&self, stream: u64) -> impl Iterator<Item = UnmappedKey> + '_ {
        self.find(stream)
            .into_iter()
            .flat_map(|s| s.unmapped.iter())
            .map(move |(&ptr, &idx)| UnmappedKey { stream, ptr, idx })
    }

    /// Every unmapped block in (stream, address) order.
    pub fn unmapped_iter(&self) -> impl Iterator<Item = UnmappedKey> + '_ {
        self.streams.iter().flat_map(|(&stream, s)| {
            s.unmapped
                .iter()
                .map(move |(&ptr, &idx)| UnmappedKey { stream, ptr, idx })
        })
    }
}
