//! The CUDA driver's placement, as measured on an H200 with driver
//! 580.159.04 (`docs/driver-placement.md`; raw data in
//! `docs/results/driver-placement-h200/`). In that data the rules
//! below predict every one of 481 cudaMalloc addresses of the `grow`,
//! `mixed`, `reuse` and `sizes` experiments exactly (relative to the first
//! address), and every rule is needed: each alternative tried breaks some.
//!
//! * **Regions.** cudaMalloc takes its address from a *region* of virtual
//!   memory. A request (rounded to 2 MiB) goes into an existing region if
//!   one has a free gap for it: regions are tried **newest first**, and in
//!   the first region that has room, the **smallest gap that fits** (the
//!   lowest of equal ones) is used, from its start.
//! * **New regions** are `size` rounded up to **32 MiB**, placed at the
//!   **top of the highest hole** of the address space (below the highest
//!   region end seen) that is **strictly larger** than the region; with
//!   no such hole, directly below the lowest region. So a run of
//!   allocations that each need a new region goes *down*, 2 MiB requests
//!   fill a 32 MiB region *upwards*, and a 20 MiB segment leaves a 12 MiB
//!   tail that later small requests fill.
//! * **Freeing** the last allocation of a region releases the region: its
//!   range becomes a hole. A region with allocations left keeps its free
//!   gaps for later requests.
//! * **Reservations** (cuMemAddressReserve) come from another part of the
//!   address space and go *up*: the lowest gap that fits, aligned to 2 MiB
//!   below 32 MiB and to 32 MiB from 32 MiB up.
//!
//! Ranges the device placed at recorded addresses (fidelity mode, a
//! recorded start) are taken as they come: inside a region's free gap they
//! are that region's allocations, elsewhere they become a region of their
//! own, of their exact size.

use std::collections::BTreeMap;

use super::free_ranges::{FreeRanges, LongestIndex};

/// cudaMalloc's alignment and size unit.
const GRANULE: u64 = 2 << 20;
/// The unit of a new region.
const REGION: u64 = 32 << 20;
/// Reservations from this size up are aligned to [`REGION`].
const BIG_RESERVATION: u64 = 32 << 20;
/// Where the reservation area starts.
const RESERVE_BASE: u64 = 0x2_0000_0000;
/// Nothing is placed below this address.
const LOWEST: u64 = 0x1_0000_0000;

/// `x` rounded up to a multiple of `unit` (`None` on overflow).
fn round_up(x: u64, unit: u64) -> Option<u64> {
    x.div_ceil(unit).checked_mul(unit)
}

/// A region: a range of virtual memory cudaMalloc results are carved from.
#[derive(Debug, Clone)]
struct Region {
    base: u64,
    end: u64,
    /// Allocations in it.
    live: u32,
    /// Its free gaps.
    free: FreeRanges,
}

impl Region {
    fn new(base: u64, end: u64) -> Self {
        let mut free = FreeRanges::default();
        free.add(base, end);
        Region {
            base,
            end,
            live: 0,
            free,
        }
    }
}

/// A decision [`Driver::pick_malloc`] made, committed when the device
/// takes that address.
#[derive(Debug, Clone, Copy)]
enum Pending {
    /// Inside an existing region (by age).
    In { age: u64, addr: u64 },
    /// A new region `[base, end)`.
    New { base: u64, end: u64 },
}

/// The driver model's state.
#[derive(Debug, Clone)]
pub(crate) struct Driver {
    /// Where the first region ends when no region was ever placed.
    first_top: u64,
    /// The highest region end seen so far: holes are looked for below it.
    top: Option<u64>,
    /// Regions by age (creation order): the newest last.
    regions: BTreeMap<u64, Region>,
    next_age: u64,
    /// Region ages by their longest free gap.
    with_room: LongestIndex,
    /// Region base → age (regions do not overlap while `space` is kept).
    region_at: BTreeMap<u64, u64>,
    /// Allocation address → (age of its region, end).
    owner: BTreeMap<u64, (u64, u64)>,
    /// Reservations: base → end.
    reservations: BTreeMap<u64, u64>,
    /// The free address space from [`LOWEST`] up, while no two taken
    /// ranges overlap (ranges placed at recorded addresses can; from then
    /// on the model walks every range instead, as the rules say).
    space: Option<FreeRanges>,
    pending: Option<Pending>,
}

impl Driver {
    /// An empty address space whose first region ends at `top`.
    pub(crate) fn new(top: u64) -> Self {
        let mut free = FreeRanges::default();
        free.add(LOWEST, u64::MAX);
        Driver {
            first_top: top,
            top: None,
            regions: BTreeMap::new(),
            next_age: 0,
            with_room: LongestIndex::default(),
            region_at: BTreeMap::new(),
            owner: BTreeMap::new(),
            reservations: BTreeMap::new(),
            space: Some(free),
            pending: None,
        }
    }

    /// The same model without the hole index (every query walks every
    /// range): the reference the index is tested against.
    #[cfg(test)]
    fn walking(top: u64) -> Self {
        Driver {
            space: None,
            ..Driver::new(top)
        }
    }

    /// Changes region `age` with `f`, keeping the index of free room.
    fn update<R>(&mut self, age: u64, f: impl FnOnce(&mut Region) -> R) -> Option<R> {
        let r = self.regions.get_mut(&age)?;
        self.with_room.remove(r.free.longest(), age);
        let out = f(r);
        self.with_room.insert(r.free.longest(), age);
        Some(out)
    }

    /// Where a cudaMalloc of `size` bytes goes.
    pub(crate) fn pick_malloc(&mut self, size: u64) -> Option<u64> {
        self.pending = None;
        let need = round_up(size.max(1), GRANULE)?;
        // The newest region with a gap that fits, best fit inside it.
        if let Some(age) = self.with_room.greatest_with_at_least(need) {
            if let Some(addr) = self.regions.get(&age).and_then(|r| r.free.best_fit(need)) {
                self.pending = Some(Pending::In { age, addr });
                return Some(addr);
            }
        }
        let len = round_up(need, REGION)?;
        let base = self.hole_for(len)?;
        self.pending = Some(Pending::New {
            base,
            end: base.checked_add(len)?,
        });
        Some(base)
    }

    /// Every taken range (regions and reservations), merged, in order.
    fn taken(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self
            .regions
            .values()
            .map(|r| (r.base, r.end))
            .chain(self.reservations.iter().map(|(&s, &e)| (s, e)))
            .collect();
        v.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (s, e) in v {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        merged
    }

    /// The base of a new region of `len` bytes: the top of the highest
    /// hole below the highest region end seen (or below the first region's
    /// end, before any) that is strictly larger than `len`.
    fn hole_for(&self, len: u64) -> Option<u64> {
        if let Some(space) = &self.space {
            let limit = self.top.unwrap_or(self.first_top);
            let (lo, hi) = space.highest_longer_than_below(len, limit)?;
            let base = (hi - len) / GRANULE * GRANULE;
            if base >= lo {
                return Some(base);
            }
            // An unaligned hole (only ranges placed at recorded addresses
            // make one): the walk below settles it.
        }
        self.hole_walking(len)
    }

    /// [`Driver::hole_for`] by walking every taken range from the top.
    fn hole_walking(&self, len: u64) -> Option<u64> {
        let top = self.top.unwrap_or(self.first_top);
        let mut hi = top;
        let taken = self.taken();
        let mut below = taken.iter().rev().filter(|&&(s, _)| s < top);
        loop {
            let (lo, next_hi) = match below.next() {
                Some(&(s, e)) => (e.min(hi).max(LOWEST), Some(s)),
                None => (LOWEST, None),
            };
            if hi > lo && hi - lo > len {
                let base = (hi - len) / GRANULE * GRANULE;
                if base >= lo {
                    return Some(base);
                }
            }
            hi = next_hi?.min(hi);
        }
    }

    /// `[start, end)` is taken: out of the holes, or, when it overlaps a
    /// taken range, the hole index is given up.
    fn occupy(&mut self, start: u64, end: u64) {
        let Some(space) = &mut self.space else {
            return;
        };
        let (s, e) = (start.max(LOWEST), end);
        if s >= e {
            return;
        }
        match space.holding(s, e) {
            Some(h) => space.take(h, s, e),
            None => self.space = None,
        }
    }

    /// `[start, end)` is no longer taken (ranges do not overlap while the
    /// hole index is kept).
    fn vacate(&mut self, start: u64, end: u64) {
        if let Some(space) = &mut self.space {
            space.add(start.max(LOWEST), end);
        }
    }

    /// A segment was placed at `[ptr, ptr + size)`.
    pub(crate) fn malloced(&mut self, ptr: u64, size: u64) {
        let end = round_up(size.max(1), GRANULE)
            .and_then(|n| ptr.checked_add(n))
            .unwrap_or(u64::MAX);
        match self.pending.take() {
            Some(Pending::In { age, addr }) if addr == ptr => {
                let took = self.update(age, |r| {
                    let g = r.free.holding(ptr, end)?;
                    r.free.take(g, ptr, end);
                    r.live += 1;
                    Some(())
                });
                if took.flatten().is_some() {
                    self.owner.insert(ptr, (age, end));
                } else {
                    self.foreign(ptr, end);
                }
            }
            Some(Pending::New { base, end: rend }) if base == ptr && end <= rend => {
                let age = self.new_region(base, rend);
                self.update(age, |r| {
                    r.free.take((base, rend), ptr, end);
                    r.live += 1;
                });
                self.owner.insert(ptr, (age, end));
            }
            _ => self.foreign(ptr, end),
        }
    }

    /// The region whose free gap holds `[ptr, end)`, if one does (the
    /// newest, when regions overlap).
    fn home_of(&self, ptr: u64, end: u64) -> Option<u64> {
        let holds =
            |r: &Region| r.base <= ptr && end <= r.end && r.free.holding(ptr, end).is_some();
        if self.space.is_some() {
            let (_, &age) = self.region_at.range(..=ptr).next_back()?;
            return self.regions.get(&age).filter(|r| holds(r)).map(|_| age);
        }
        self.regions
            .iter()
            .rev()
            .find(|(_, r)| holds(r))
            .map(|(&age, _)| age)
    }

    /// The ages of the regions that overlap `[ptr, end)`.
    fn overlapping(&self, ptr: u64, end: u64) -> Vec<u64> {
        let overlaps = |r: &Region| r.base < end && ptr < r.end;
        if self.space.is_some() {
            // Regions do not overlap each other: walk down from `end`.
            return self
                .region_at
                .range(..end)
                .rev()
                .map(|(_, &age)| age)
                .take_while(|age| self.regions.get(age).is_some_and(overlaps))
                .collect();
        }
        self.regions
            .iter()
            .filter(|(_, r)| overlaps(r))
            .map(|(&age, _)| age)
            .collect()
    }

    /// A range the model did not choose: a region's allocation when a free
    /// gap holds it, else a region of its own.
    fn foreign(&mut self, ptr: u64, end: u64) {
        if let Some(age) = self.home_of(ptr, end) {
            self.update(age, |r| {
                if let Some(g) = r.free.holding(ptr, end) {
                    r.free.take(g, ptr, end);
                }
                r.live += 1;
            });
            self.owner.insert(ptr, (age, end));
            return;
        }
        for age in self.overlapping(ptr, end) {
            self.update(age, |r| r.free.cut(ptr, end));
        }
        let age = self.new_region(ptr, end);
        self.update(age, |r| {
            r.free.take((ptr, end), ptr, end);
            r.live += 1;
        });
        self.owner.insert(ptr, (age, end));
    }

    fn new_region(&mut self, base: u64, end: u64) -> u64 {
        let age = self.next_age;
        self.next_age += 1;
        let top = self.top.map_or(end, |t| t.max(end));
        self.top = Some(top);
        self.occupy(base, end);
        let r = Region::new(base, end);
        self.with_room.insert(r.free.longest(), age);
        self.regions.insert(age, r);
        self.region_at.insert(base, age);
        age
    }

    /// The segment at `ptr` was freed; its region goes when it is empty.
    pub(crate) fn freed(&mut self, ptr: u64) {
        let Some((age, end)) = self.owner.remove(&ptr) else {
            return;
        };
        let empty = self.update(age, |r| {
            r.free.add(ptr, end);
            r.live = r.live.saturating_sub(1);
            r.live == 0
        });
        if empty == Some(true) {
            if let Some(r) = self.regions.remove(&age) {
                self.with_room.remove(r.free.longest(), age);
                if self.region_at.get(&r.base) == Some(&age) {
                    self.region_at.remove(&r.base);
                }
                self.vacate(r.base, r.end);
            }
        }
    }

    /// Where a reservation of `size` bytes goes: the lowest gap from the
    /// reservation area up.
    pub(crate) fn pick_reserve(&mut self, size: u64, align: u64) -> Option<u64> {
        let align = if size >= BIG_RESERVATION {
            align.max(REGION)
        } else {
            align.max(GRANULE)
        };
        if let Some(space) = &self.space {
            // The free space runs to the end of the address space: what
            // does not fit there fits nowhere.
            return space.lowest_fit_from(RESERVE_BASE, size, align);
        }
        let mut cursor = RESERVE_BASE;
        for (s, e) in self.taken() {
            if e <= cursor {
                continue;
            }
            let addr = round_up(cursor, align)?;
            if addr.checked_add(size).is_some_and(|end| end <= s) {
                return Some(addr);
            }
            cursor = cursor.max(e);
        }
        let addr = round_up(cursor, align)?;
        addr.checked_add(size).map(|_| addr)
    }

    /// A reservation now occupies `[ptr, ptr + size)`.
    pub(crate) fn reserved(&mut self, ptr: u64, size: u64) {
        let end = ptr.saturating_add(size);
        if self.reservations.insert(ptr, end).is_some() {
            // Two reservations at one base: the index cannot tell them apart.
            self.space = None;
        }
        self.occupy(ptr, end);
    }

    /// The reservation at `ptr` was released.
    pub(crate) fn released(&mut self, ptr: u64) {
        if let Some(end) = self.reservations.remove(&ptr) {
            self.vacate(ptr, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A small deterministic generator (xorshift), enough for a mix of calls.
    struct Mix(u64);

    impl Mix {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// The indexed model and the walking one make the same choice on every
    /// call of a long random mix of cudaMallocs, frees, reservations and
    /// ranges placed at chosen addresses (which end the index when they
    /// overlap).
    #[test]
    fn the_hole_index_chooses_as_the_walk_does() {
        let sizes = [2, 2, 2, 20, 20, 22, 40, 64, 128, 256, 512, 1024, 3000];
        for seed in 1..=6u64 {
            let top = 0x7f00_0000_0000;
            let (mut fast, mut walk) = (Driver::new(top), Driver::walking(top));
            let mut mix = Mix(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut live: Vec<u64> = Vec::new();
            let mut res: Vec<u64> = Vec::new();
            for step in 0..3000 {
                match mix.next(16) {
                    0..=6 if !live.is_empty() => {
                        let p = live.swap_remove(mix.next(live.len() as u64) as usize);
                        fast.freed(p);
                        walk.freed(p);
                    }
                    7 if !res.is_empty() => {
                        let p = res.swap_remove(mix.next(res.len() as u64) as usize);
                        fast.released(p);
                        walk.released(p);
                    }
                    8 => {
                        // Odd seeds reserve terabytes, so that reservations
                        // run past the regions at the top.
                        let size = if seed % 2 == 1 {
                            (1 + mix.next(8)) << 43
                        } else {
                            (1 + mix.next(64)) * 2 * MIB
                        };
                        let (a, b) = (
                            fast.pick_reserve(size, GRANULE),
                            walk.pick_reserve(size, GRANULE),
                        );
                        assert_eq!(a, b, "seed {seed} step {step}: reserve");
                        let a = a.unwrap();
                        fast.reserved(a, size);
                        walk.reserved(a, size);
                        res.push(a);
                    }
                    9 if seed > 3 => {
                        // A segment at a recorded address: somewhere near
                        // the others, maybe overlapping.
                        let at = top - (1 + mix.next(4096)) * 2 * MIB;
                        if live.contains(&at) {
                            continue;
                        }
                        let size = sizes[mix.next(sizes.len() as u64) as usize] * MIB;
                        fast.malloced(at, size);
                        walk.malloced(at, size);
                        live.push(at);
                    }
                    _ => {
                        let size = sizes[mix.next(sizes.len() as u64) as usize] * MIB;
                        let (a, b) = (fast.pick_malloc(size), walk.pick_malloc(size));
                        assert_eq!(a, b, "seed {seed} step {step}: malloc of {size}");
                        let a = a.unwrap();
                        if live.contains(&a) {
                            continue;
                        }
                        fast.malloced(a, size);
                        walk.malloced(a, size);
                        live.push(a);
                    }
                }
            }
            // Without ranges at chosen addresses nothing overlaps: the
            // index was used throughout.
            assert_eq!(fast.space.is_some(), seed <= 3, "seed {seed}");
        }
    }
}
