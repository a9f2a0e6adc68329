//! The plan's arena: one virtual range of the plan's peak, reserved at the
//! first planned request, whose pages (the device's granularity) are
//! mapped when a planned block first lies on them, so that it holds only
//! the pages the plan has used so far (and runs out of memory at the
//! request that needs a page the card cannot give). `empty_cache` unmaps
//! the pages no live block lies on.

use crate::devices::{Device, DeviceError, DevicePtr};

/// The reserved range and which of its pages are mapped.
#[derive(Debug, Clone, Default)]
pub(super) struct StaticArena {
    /// Base and size of the reservation, once made.
    range: Option<(DevicePtr, u64)>,
    /// Page size (the device's granularity when reserved).
    page: u64,
    /// One flag per page: mapped.
    mapped: Vec<bool>,
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

/// The runs of consecutive pages in `pages` (first page, count).
fn runs(pages: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for p in pages {
        match out.last_mut() {
            Some((first, n)) if *first + *n == p => *n += 1,
            _ => out.push((p, 1)),
        }
    }
    out
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
        runs(
            self.mapped
                .iter()
                .enumerate()
                .filter(|(_, m)| **m)
                .map(|(p, _)| p as u64),
        )
        .into_iter()
        .map(|(first, n)| (first * self.page, n * self.page))
        .collect()
    }

    /// `true` when every page under `[offset, offset + size)` is mapped.
    pub(super) fn covers(&self, offset: u64, size: u64) -> bool {
        self.pages_of(offset, size)
            .all(|p| self.mapped.get(p as usize).copied().unwrap_or(false))
    }

    fn pages_of(&self, offset: u64, size: u64) -> std::ops::Range<u64> {
        let page = self.page.max(1);
        offset / page..(offset + size).div_ceil(page)
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
        let base = match self.range {
            Some((b, _)) => b,
            None => {
                let page = device.granularity().max(1);
                let reserved = arena.max(offset + size).div_ceil(page) * page;
                let b = device.reserve(reserved)?;
                self.range = Some((b, reserved));
                self.page = page;
                self.mapped = vec![false; (reserved / page) as usize];
                b
            }
        };
        let todo = runs(
            self.pages_of(offset, size)
                .filter(|&p| !self.mapped.get(p as usize).copied().unwrap_or(true)),
        );
        let mut done: Vec<(u64, u64)> = Vec::with_capacity(todo.len());
        for &(first, n) in &todo {
            if let Err(e) = device.map(base + first * self.page, n * self.page, self.page) {
                for &(f, k) in &done {
                    // Undo what this call mapped; the device accepted
                    // these ranges a moment ago.
                    device.unmap(base + f * self.page, k * self.page)?;
                }
                return Err(e);
            }
            done.push((first, n));
        }
        let mut out = Mapped::default();
        for (first, n) in done {
            for p in first..first + n {
                if let Some(m) = self.mapped.get_mut(p as usize) {
                    *m = true;
                }
            }
            out.bytes += n * self.page;
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
        let mut keep = vec![false; self.mapped.len()];
        for &(offset, size) in live {
            for p in self.pages_of(offset, size) {
                if let Some(k) = keep.get_mut(p as usize) {
                    *k = true;
                }
            }
        }
        let idle = runs((0..self.mapped.len() as u64).filter(|&p| {
            self.mapped.get(p as usize).copied().unwrap_or(false)
                && !keep.get(p as usize).copied().unwrap_or(true)
        }));
        let mut out = Mapped::default();
        for (first, n) in idle {
            device.unmap(base + first * self.page, n * self.page)?;
            for p in first..first + n {
                if let Some(m) = self.mapped.get_mut(p as usize) {
                    *m = false;
                }
            }
            out.bytes += n * self.page;
            out.calls += 1;
        }
        self.mapped_bytes -= out.bytes;
        if self.mapped_bytes == 0 {
            device.release(base, reserved)?;
            self.range = None;
            self.mapped.clear();
        }
        Ok(out)
    }
}
