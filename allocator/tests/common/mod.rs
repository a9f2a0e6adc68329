//! What the policies' scenario tests share: a policy on a simulated device,
//! with its invariants checked after every call.

// Each test file uses the part of this it needs.
#![allow(dead_code)]

use vramlab_allocator::{Allocator, BlockHandle, SimDevice};
use vramlab_allocator::{Device, DeviceCallKind};

/// A policy `a` on a [`SimDevice`]; the scenario files construct it.
pub struct Fixture<A> {
    pub a: A,
}

impl<A: Allocator<Dev = SimDevice>> Fixture<A> {
    /// Allocates `size` bytes on the default stream.
    pub fn malloc(&mut self, size: u64) -> BlockHandle {
        self.malloc_on(size, 0)
    }

    /// Allocates `size` bytes on `stream`.
    pub fn malloc_on(&mut self, size: u64, stream: u64) -> BlockHandle {
        let h = self.a.malloc(size, stream).expect("malloc");
        self.a.check_invariants().expect("invariants");
        h
    }

    /// Frees `h`.
    pub fn free(&mut self, h: BlockHandle) {
        self.a.free(h).expect("free");
        self.a.check_invariants().expect("invariants");
    }

    /// The address of `h`.
    pub fn ptr(&self, h: BlockHandle) -> u64 {
        self.a.block_ptr(h)
    }

    /// A `torch.cuda.memory_stats()` counter.
    pub fn stat(&self, name: &str) -> i64 {
        self.a.stats().flatten()[name]
    }

    /// The device calls so far: (kind, size).
    pub fn calls(&self) -> Vec<(DeviceCallKind, u64)> {
        self.a
            .device()
            .calls()
            .iter()
            .map(|c| (c.kind, c.size))
            .collect()
    }

    /// The device calls so far: (kind, address, size).
    pub fn calls_at(&self) -> Vec<(DeviceCallKind, u64, u64)> {
        self.a
            .device()
            .calls()
            .iter()
            .map(|c| (c.kind, c.ptr, c.size))
            .collect()
    }
}
