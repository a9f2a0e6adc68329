//! Block pools: the ordered sets of cached blocks (`BlockPool`, ordered by
//! `BlockComparatorSize`, in c10/cuda/CUDACachingAllocator.cpp).
//!
//! PyTorch keeps one `std::set` per pool ordered by (stream, size, address).
//! Here each stream of a pool has its own [`FreeSet`] ordered by (size,
//! address), and the streams are kept in a map ordered by their raw
//! handle, which gives the same order with cheaper comparisons.
//! A pool rarely sees more than a few streams, but a trace with thousands
//! of them must not make every lookup scan them all.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::free_set::{self, FreeSet};
pub(super) use super::pool_ref::PoolRef;
use super::stream_table::StreamTable;

/// The allocator's block pools, indexed by [`PoolRef`]: the default pair,
/// then each private pool's pair.
///
/// Indexing cannot go out of bounds: a `PoolRef` of a private pool is
/// made only for a pool that exists (`NativeAllocator::make_or_hold` grows
/// this list first and it never shrinks), and the default pair is always
/// there.
#[derive(Debug, Clone)]
pub(super) struct Pools(Vec<Pool>);

impl Pools {
    /// The default small and large pools.
    pub(super) fn new() -> Self {
        Pools(vec![Pool::new(), Pool::new()])
    }

    /// Grows the list to hold `r`.
    pub(super) fn make_room(&mut self, r: PoolRef) {
        if self.0.len() <= r.index() {
            self.0.resize_with(r.index() + 1, Pool::new);
        }
    }

    /// Every pool, with its reference.
    pub(super) fn iter(&self) -> impl Iterator<Item = (PoolRef, &Pool)> + '_ {
        self.0
            .iter()
            .enumerate()
            .map(|(i, p)| (PoolRef(i as u32), p))
    }
}

// Indexing: see the proof on `Pools`.
#[allow(clippy::indexing_slicing)]
impl std::ops::Index<PoolRef> for Pools {
    type Output = Pool;
    #[inline]
    fn index(&self, r: PoolRef) -> &Pool {
        &self.0[r.index()]
    }
}

// Indexing: see the proof on `Pools`.
#[allow(clippy::indexing_slicing)]
impl std::ops::IndexMut<PoolRef> for Pools {
    #[inline]
    fn index_mut(&mut self, r: PoolRef) -> &mut Pool {
        &mut self.0[r.index()]
    }
}

/// Above this many streams, a pool keeps [`Pool::maxima`] so that its
/// largest free size needs no scan of the streams.
const MANY_STREAMS: usize = 32;

/// A free block as the pool orders it: stream (unsigned), then size, then
/// the segment's allocation-order counter (0 under releases that order by
/// address alone), then address; `idx` is the block's arena index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct FreeKey {
    /// Raw stream handle.
    pub stream: u64,
    /// Block size.
    pub size: u64,
    /// The segment's allocation-order counter.
    pub counter: u64,
    /// Block address.
    pub ptr: u64,
    /// Arena index of the block.
    pub idx: u32,
}

/// An unmapped expandable block, ordered by (stream, address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct UnmappedKey {
    /// Raw stream handle.
    pub stream: u64,
    /// Block address.
    pub ptr: u64,
    /// Arena index of the block.
    pub idx: u32,
}

impl FreeKey {
    /// The block as its stream's free set holds it.
    #[inline]
    fn entry(&self) -> free_set::Entry {
        free_set::Entry {
            size: self.size,
            counter: self.counter,
            ptr: self.ptr,
            idx: self.idx,
        }
    }
}

#[inline]
fn free_key(stream: u64, e: free_set::Entry) -> FreeKey {
    FreeKey {
        stream,
        size: e.size,
        counter: e.counter,
        ptr: e.ptr,
        idx: e.idx,
    }
}

#[derive(Debug, Clone, Default)]
struct StreamBlocks {
    /// Free blocks by (size, address).
    free: FreeSet,
    /// The largest size in `free` (0 when empty), kept (next to the map,
    /// so that [`Pool::max_size`] reads one value per stream) only while
    /// the pool keeps [`Pool::maxima`].
    max_free: u64,
    /// address → arena index.
    unmapped: BTreeMap<u64, u32>,
}

impl StreamBlocks {
    fn free_keys(&self, stream: u64) -> impl DoubleEndedIterator<Item = FreeKey> + '_ {
        self.free.iter().map(move |e| free_key(stream, e))
    }
}

/// One of the allocator's pools (`BlockPool`).
#[derive(Debug, Clone, Default)]
pub(super) struct Pool {
    /// Per-stream block sets by raw stream handle.
    streams: StreamTable<StreamBlocks>,
    /// Number of free blocks.
    free_len: usize,
    /// `get_free_blocks_call_count`: the garbage collector's clock.
    pub clock: u64,
    /// With more than [`MANY_STREAMS`] streams: the number of streams by
    /// their largest free size. The replay asks for the pool's largest free
    /// size at every timeline point; scanning thousands of streams each
    /// time was slow.
    maxima: Option<BTreeMap<u64, usize>>,
}

/// Moves one stream from `old` to `new` in `maxima`.
#[inline]
fn move_max(maxima: &mut Option<BTreeMap<u64, usize>>, old: u64, new: u64) {
    if old == new {
        return;
    }
    if let Some(m) = maxima {
        if let Entry::Occupied(mut e) = m.entry(old) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
        *m.entry(new).or_default() += 1;
    }
}

impl Pool {
    /// An empty pool.
    pub(super) fn new() -> Self {
        Pool::default()
    }

    #[inline]
    fn find(&self, stream: u64) -> Option<&StreamBlocks> {
        self.streams.get(stream)
    }

    /// Adds an empty stream; past [`MANY_STREAMS`] streams, starts keeping
    /// [`Pool::maxima`] (and each stream's `max_free`).
    #[cold]
    fn add_stream(&mut self, stream: u64) {
        if !self.streams.insert(stream, StreamBlocks::default()) {
            return;
        }
        if let Some(m) = &mut self.maxima {
            *m.entry(0).or_default() += 1;
        } else if self.streams.len() > MANY_STREAMS {
            let mut m = BTreeMap::new();
            for s in self.streams.values_mut() {
                s.max_free = s.free.max_size();
                *m.entry(s.max_free).or_default() += 1;
            }
            self.maxima = Some(m);
        }
    }

    /// Adds a free block.
    #[inline]
    pub(super) fn insert(&mut self, k: FreeKey) {
        if self.streams.get(k.stream).is_none() {
            self.add_stream(k.stream);
        }
        let Some(s) = self.streams.get_mut(k.stream) else {
            return; // added just above
        };
        let entry = k.entry();
        if s.free.insert(entry) {
            self.free_len += 1;
            // Per-stream maxima are kept only with many streams.
            if self.maxima.is_some() && k.size > s.max_free {
                move_max(&mut self.maxima, s.max_free, k.size);
                s.max_free = k.size;
            }
        }
    }

    /// Removes a free block; `true` if it was there.
    #[inline]
    pub(super) fn remove(&mut self, k: &FreeKey) -> bool {
        let Some(s) = self.streams.get_mut(k.stream) else {
            return false;
        };
        if !s.free.remove(k.entry().key()) {
            return false;
        }
        if self.maxima.is_some() && k.size == s.max_free {
            let new = s.free.max_size();
            move_max(&mut self.maxima, s.max_free, new);
            s.max_free = new;
        }
        self.free_len -= 1;
        true
    }

    /// Replaces the free block `old` by `new` (same stream): what a remove
    /// and an insert would do, in one move of the set when possible.
    #[inline]
    pub(super) fn replace(&mut self, old: &FreeKey, new: FreeKey) {
        if self.maxima.is_none() && old.stream == new.stream {
            if let Some(s) = self.streams.get_mut(old.stream) {
                if s.free.replace(old.entry().key(), new.entry()) {
                    return;
                }
            }
        }
        self.remove(old);
        self.insert(new);
    }

    /// The first free block of `stream` with size ≥ `size` (ties: lowest
    /// counter, then lowest address) — PyTorch's `lower_bound` restricted to the stream.
    #[inline]
    pub(super) fn lower_bound(&self, stream: u64, size: u64) -> Option<FreeKey> {
        let s = self.find(stream)?;
        s.free
            .first_from(free_set::Key::at_least(size))
            .map(|e| free_key(stream, e))
    }

    /// The free block right after `key` (same stream) when it has
    /// `key`'s size.
    #[inline]
    pub(super) fn next_of_size(&self, key: FreeKey) -> Option<FreeKey> {
        let stream = key.stream;
        self.find(stream)?
            .free
            .next_of_size(key.entry().key())
            .map(|e| free_key(stream, e))
    }

    /// Free blocks of `key.stream` strictly after `key`, in order.
    pub(super) fn after(&self, key: FreeKey) -> impl Iterator<Item = FreeKey> + '_ {
        let stream = key.stream;
        self.find(stream)
            .into_iter()
            .flat_map(move |s| s.free.after(key.entry().key()))
            .map(move |e| free_key(stream, e))
    }

    /// Free blocks of `stream` smaller than `(size, 0)`, largest first.
    pub(super) fn before_desc(&self, stream: u64, size: u64) -> impl Iterator<Item = FreeKey> + '_ {
        self.find(stream)
            .into_iter()
            .flat_map(move |s| s.free.below_size(size).rev())
            .map(move |e| free_key(stream, e))
    }

    /// Every free block in (stream, size, counter, address) order.
    pub(super) fn iter(&self) -> impl Iterator<Item = FreeKey> + '_ {
        self.streams
            .iter()
            .flat_map(|(stream, s)| s.free_keys(stream))
    }

    /// Number of free blocks.
    pub(super) fn len(&self) -> usize {
        self.free_len
    }

    /// Largest free block size.
    pub(super) fn max_size(&self) -> u64 {
        match &self.maxima {
            Some(m) => m.last_key_value().map_or(0, |(&k, _)| k),
            // At most MANY_STREAMS streams: a scan is cheap.
            None => self
                .streams
                .values()
                .map(|s| s.free.max_size())
                .max()
                .unwrap_or(0),
        }
    }

    /// Checks the cached largest sizes (per stream, and the count of streams
    /// by largest size) against the blocks; for the invariant checker.
    pub(super) fn check_max(&self) -> Result<(), String> {
        let Some(maxima) = &self.maxima else {
            if self.streams.len() > MANY_STREAMS {
                return Err(format!("{} streams but no maxima", self.streams.len()));
            }
            return Ok(());
        };
        let mut by_max: BTreeMap<u64, usize> = BTreeMap::new();
        for (stream, s) in self.streams.iter() {
            let m = s.free.max_size();
            if s.max_free != m {
                return Err(format!(
                    "stream {stream:#x}: cached largest free size {} but {m} in the set",
                    s.max_free
                ));
            }
            *by_max.entry(m).or_default() += 1;
        }
        if *maxima != by_max {
            return Err(format!(
                "streams by largest free size {maxima:?}, but the sets say {by_max:?}"
            ));
        }
        Ok(())
    }

    /// Adds an unmapped block.
    pub(super) fn insert_unmapped(&mut self, k: UnmappedKey) {
        if self.streams.get(k.stream).is_none() {
            self.add_stream(k.stream);
        }
        if let Some(s) = self.streams.get_mut(k.stream) {
            s.unmapped.insert(k.ptr, k.idx);
        }
    }

    /// Removes an unmapped block.
    pub(super) fn remove_unmapped(&mut self, k: &UnmappedKey) {
        if let Some(s) = self.streams.get_mut(k.stream) {
            s.unmapped.remove(&k.ptr);
        }
    }

    /// Unmapped blocks of `stream` in address order.
    pub(super) fn unmapped_of(&self, stream: u64) -> impl Iterator<Item = UnmappedKey> + '_ {
        self.find(stream)
            .into_iter()
            .flat_map(|s| s.unmapped.iter())
            .map(move |(&ptr, &idx)| UnmappedKey { stream, ptr, idx })
    }

    /// Every unmapped block in (stream, address) order.
    pub(super) fn unmapped_iter(&self) -> impl Iterator<Item = UnmappedKey> + '_ {
        self.streams.iter().flat_map(|(stream, s)| {
            s.unmapped
                .iter()
                .map(move |(&ptr, &idx)| UnmappedKey { stream, ptr, idx })
        })
    }
}
