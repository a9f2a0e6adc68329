//! The plan's arena: one virtual range of the plan's peak, reserved at the
//! first planned request, whose pages (the device's granularity) are
//! mapped when a planned block first lies on them, so that it holds only
//! the pages the plan has used so far (and runs out of memory at the
//! request that needs a page the card cannot give). `empty_cache` unmaps
//! the pages no live block lies on.
//!
//! The mapped pages are kept as runs (first page, end page), sorted and
//! apart, so that the bookkeeping grows with the number of runs, not with
//! the arena's size.

use crate::devices::{Device, DeviceError, DevicePtr};

/// The reserved range and which of its pages are mapped.
#[derive(Debug, Clone, Default)]
pub(super) struct StaticArena {
    /// Base and size of the reservation, once made.
    range: Option<(DevicePtr, u64)>,
    /// Page size (the device's granularity when reserved).
    page: u64,
    /// Mapped pages: `[first, end)` runs, sorted, neither touching nor
    /// overlapping.
    runs: Vec<(u64, u64)>,
    /// Bytes mapped.
    mapped_bytes: u64,
}

/// What a change of the mapping cost, for the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Mapped {
    /// Bytes newly mapped (or unmapped).
    pub bytes: u64,
    /// Map (or unmap) calls made.
    pub calls: u64,
}

/// `[a, b)` runs less `[c, d)` runs, both sorted and apart.
fn subtract(runs: &[(u64, u64)], cut: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut k = 0usize;
    for &(a, b) in runs {
        let mut at = a;
        while let Some(&(c, d)) = cut.get(k) {
            if d <= at {
                k += 1;
                continue;
            }
            if c >= b {
                break;
            }
            if c > at {
                out.push((at, c));
            }
            at = at.max(d);
            if d >= b {
                break;
            }
            k += 1;
        }
        if at < b {
            out.push((at, b));
        }
    }
    out
}

/// Adds `[a, b)` to sorted, apart `runs`, merging what it touches.
fn add_run(runs: &mut Vec<(u64, u64)>, a: u64, b: u64) {
    let lo = runs.partition_point(|&(_, e)| e < a);
    let hi = runs.partition_point(|&(s, _)| s <= b);
    let (mut s, mut e) = (a, b);
    if let Some(&(x, _)) = runs.get(lo).filter(|_| lo < hi) {
        s = s.min(x);
    }
    if let Some(&(_, y)) = hi
        .checked_sub(1)
        .and_then(|i| runs.get(i))
        .filter(|_| lo < hi)
    {
        e = e.max(y);
    }
    runs.splice(lo..hi, [(s, e)]);
}

impl StaticArena {
    /// The base address, once reserved.
    pub(super) fn base(&self) -> Option<DevicePtr> {
        self.range.map(|(b, _)| b)
    }

    /// Bytes mapped.
    pub(super) fn mapped(&self) -> u64 {
        self.mapped_bytes
    }

    /// The runs of mapped pages, as (offset, bytes) from the base.
    pub(super) fn mapped_runs(&self) -> Vec<(u64, u64)> {
        self.runs
            .iter()
            .map(|&(a, b)| (a * self.page, (b - a) * self.page))
            .collect()
    }

    /// How many runs of pages are mapped (the arena's segments).
    pub(super) fn run_count(&self) -> usize {
        self.runs.len()
    }

    fn pages_of(&self, offset: u64, size: u64) -> (u64, u64) {
        let page = self.page.max(1);
        (offset / page, offset.saturating_add(size).div_ceil(page))
    }

    /// `true` when every page under `[offset, offset + size)` is mapped.
    pub(super) fn covers(&self, offset: u64, size: u64) -> bool {
        let (a, b) = self.pages_of(offset, size);
        let i = self.runs.partition_point(|&(_, e)| e <= a);
        self.runs.get(i).is_some_and(|&(s, e)| s <= a && b <= e)
    }

    /// The pages under `[offset, offset + size)` not mapped yet, as runs.
    fn missing(&self, offset: u64, size: u64) -> Vec<(u64, u64)> {
        let (a, b) = self.pages_of(offset, size);
        subtract(&[(a, b)], &self.runs)
    }

    /// Bytes a block at `[offset, offset + size)` would map (with pages of
    /// `page` bytes before the arena is reserved).
    pub(super) fn missing_bytes(&self, offset: u64, size: u64, page: u64) -> u64 {
        if self.range.is_none() {
            let page = page.max(1);
            return offset.saturating_add(size).div_ceil(page) * page - offset / page * page;
        }
        self.missing(offset, size)
            .iter()
            .map(|&(a, b)| (b - a) * self.page)
            .sum()
    }

    /// Maps the pages under `[offset, offset + size)` not mapped yet,
    /// reserving `arena` bytes of address space first if not yet done. On
    /// failure nothing new stays mapped.
    pub(super) fn map_block<D: Device>(
        &mut self,
        device: &mut D,
        arena: u64,
        offset: u64,
        size: u64,
    ) -> Result<Mapped, DeviceError> {
        // Most blocks land on pages already mapped: nothing to work out.
        if self.covers(offset, size) {
            return Ok(Mapped::default());
        }
        let base = match self.range {
            Some((b, _)) => b,
            None => {
                let page = device.granularity().max(1);
                let reserved = arena.max(offset.saturating_add(size)).div_ceil(page) * page;
                let b = device.reserve(reserved)?;
                self.range = Some((b, reserved));
                self.page = page;
                b
            }
        };
        let todo = self.missing(offset, size);
        for (k, &(a, b)) in todo.iter().enumerate() {
            if let Err(e) = device.map(base + a * self.page, (b - a) * self.page, self.page) {
                for &(x, y) in todo.iter().take(k) {
                    // Undo what this call mapped; the device accepted
                    // these ranges a moment ago.
                    device.unmap(base + x * self.page, (y - x) * self.page)?;
                }
                return Err(e);
            }
        }
        let mut out = Mapped::default();
        for (a, b) in todo {
            add_run(&mut self.runs, a, b);
            out.bytes += (b - a) * self.page;
            out.calls += 1;
        }
        self.mapped_bytes += out.bytes;
        Ok(out)
    }

    /// Unmaps every mapped page that none of `live` (offset, size) lies
    /// on; with nothing left mapped the reservation goes too.
    pub(super) fn unmap_unused<D: Device>(
        &mut self,
        device: &mut D,
        live: &[(u64, u64)],
    ) -> Result<Mapped, DeviceError> {
        let Some((base, reserved)) = self.range else {
            return Ok(Mapped::default());
        };
        let mut keep: Vec<(u64, u64)> = Vec::with_capacity(live.len());
        let mut pages: Vec<(u64, u64)> = live.iter().map(|&(o, s)| self.pages_of(o, s)).collect();
        pages.sort_unstable();
        for (a, b) in pages {
            add_run(&mut keep, a, b);
        }
        let idle = subtract(&self.runs, &keep);
        let mut out = Mapped::default();
        for &(a, b) in &idle {
            device.unmap(base + a * self.page, (b - a) * self.page)?;
            out.bytes += (b - a) * self.page;
            out.calls += 1;
        }
        self.runs = subtract(&self.runs, &idle);
        self.mapped_bytes -= out.bytes;
        if self.mapped_bytes == 0 {
            device.release(base, reserved)?;
            self.range = None;
            self.runs.clear();
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_and_subtract() {
        let mut r = Vec::new();
        add_run(&mut r, 4, 6);
        add_run(&mut r, 0, 2);
        add_run(&mut r, 2, 3);
        assert_eq!(r, vec![(0, 3), (4, 6)]);
        add_run(&mut r, 3, 4);
        assert_eq!(r, vec![(0, 6)]);
        add_run(&mut r, 8, 9);
        assert_eq!(
            subtract(&r, &[(1, 2), (5, 8)]),
            vec![(0, 1), (2, 5), (8, 9)]
        );
        assert_eq!(subtract(&[(0, 10)], &[(0, 10)]), vec![]);
        assert_eq!(subtract(&[(2, 4)], &[]), vec![(2, 4)]);
        assert_eq!(subtract(&[(0, 4), (6, 9)], &[(3, 7)]), vec![(0, 3), (7, 9)]);
    }
}
