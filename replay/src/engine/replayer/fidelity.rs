//! Fidelity mode (`ReplayOptions::place_at_expected`): the device places
//! new segments where the recording's did and refuses what the real one
//! refused.

use vramlab_allocator::{Allocator, Refusal};
use vramlab_traces::SegmentEventKind;

use super::Replayer;
use crate::engine::ReplayDevice;

impl Replayer<'_> {
    /// Fidelity mode: tells the device where event `i`'s new segments go.
    pub(super) fn place_segments<A>(&mut self, alloc: &mut A, i: usize) -> bool
    where
        A: Allocator,
        A::Dev: ReplayDevice,
    {
        let mut placed = false;
        while let Some((s, rest)) = self.expected_segments.split_first() {
            if s.event_index as usize > i {
                break;
            }
            if s.event_index as usize == i
                && matches!(s.kind, SegmentEventKind::Alloc | SegmentEventKind::Map)
            {
                alloc.device_mut().place_next(s.address);
                placed = true;
            }
            self.expected_segments = rest;
        }
        placed
    }

    /// Fidelity mode: makes the device refuse event `i`'s allocations as
    /// the real one did (a recorded OOM, or a malloc that had to release
    /// the cache and retry).
    pub(super) fn refuse_as_recorded<A>(&mut self, alloc: &mut A, i: usize) -> bool
    where
        A: Allocator,
        A::Dev: ReplayDevice,
    {
        let i = i as u32;
        let mut refusal = Refusal::None;
        while let Some((&r, rest)) = self.expected_retries.split_first() {
            if r > i {
                break;
            }
            if r == i {
                refusal = Refusal::UntilRelease;
            }
            self.expected_retries = rest;
        }
        while let Some((o, rest)) = self.expected_ooms.split_first() {
            if o.event_index > i {
                break;
            }
            if o.event_index == i {
                refusal = Refusal::All;
            }
            self.expected_ooms = rest;
        }
        if refusal == Refusal::None {
            return false;
        }
        alloc.device_mut().refuse(refusal);
        true
    }
}
