//! Trace shapes that stress a policy's data structures: many deferred
//! frees, many streams, many free blocks in one segment, many unmaps of
//! one expandable reservation. Each is built at any size `n`, so that a
//! replay's time can be compared at `n` and `16 n`: linear code takes
//! about 16 times longer, quadratic code 256 times (`benches/scaling.rs`
//! measures it; `replay/tests/properties.rs` checks the invariants on them).

use vramlab_traces::{Event, Trace, TraceHeader};

const MIB: u64 = 1 << 20;

/// A named trace shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Short name.
    pub name: &'static str,
    /// Builds the trace of size `n` (events grow linearly with `n`).
    pub build: fn(u32) -> Trace,
}

/// Every shape.
pub const SHAPES: [Shape; 4] = [
    Shape {
        name: "pending frees",
        build: many_pending_frees,
    },
    Shape {
        name: "streams",
        build: many_streams,
    },
    Shape {
        name: "tiny blocks",
        build: many_tiny_blocks,
    },
    Shape {
        name: "holes",
        build: many_holes_then_empty_cache,
    },
];

/// `n` deferred frees requested, then completed oldest first.
pub(crate) fn many_pending_frees(n: u32) -> Trace {
    let mut t = Trace::new(TraceHeader::default());
    for id in 0..n {
        t.events.push(Event::Alloc {
            id,
            stream: 0,
            size: 512,
        });
    }
    for id in 0..n {
        t.events.push(Event::FreeRequested { id });
    }
    for id in 0..n {
        t.events.push(Event::FreeCompleted { id });
    }
    t.num_ids = n;
    t
}

/// `n` allocations, each on its own stream, then their frees.
pub fn many_streams(n: u32) -> Trace {
    let mut t = Trace::new(TraceHeader::default());
    for id in 0..n {
        let stream = t.stream_index(0x1000 + u64::from(id));
        t.events.push(Event::Alloc {
            id,
            stream,
            size: 512,
        });
    }
    for id in 0..n {
        t.events.push(Event::Free { id });
    }
    t.num_ids = n;
    t
}

/// `n` tiny blocks carved from one large segment, every other one freed,
/// then the rest: many free blocks in one segment, merging on the way out.
pub(crate) fn many_tiny_blocks(n: u32) -> Trace {
    let mut t = Trace::new(TraceHeader::default());
    // One oversize block that leaves a segment of n * 2 MiB... then tiny
    // large-pool blocks (1 MiB + 512) split off its free remainder.
    t.events.push(Event::Alloc {
        id: 0,
        stream: 0,
        size: u64::from(n) * (2 * MIB),
    });
    t.events.push(Event::Free { id: 0 });
    for id in 1..=n {
        t.events.push(Event::Alloc {
            id,
            stream: 0,
            size: MIB + 512,
        });
    }
    for id in (1..=n).step_by(2) {
        t.events.push(Event::Free { id });
    }
    for id in (2..=n).step_by(2) {
        t.events.push(Event::Free { id });
    }
    t.events.push(Event::EmptyCache);
    t.num_ids = n + 1;
    t
}

/// `n` blocks of 21 MiB, every other one freed, `empty_cache` (with
/// expandable segments: many unmaps of one reservation), then the rest.
pub(crate) fn many_holes_then_empty_cache(n: u32) -> Trace {
    let mut t = Trace::new(TraceHeader::default());
    for id in 0..n {
        t.events.push(Event::Alloc {
            id,
            stream: 0,
            size: 21 * MIB,
        });
    }
    for id in (0..n).step_by(2) {
        t.events.push(Event::Free { id });
    }
    t.events.push(Event::EmptyCache);
    for id in (1..n).step_by(2) {
        t.events.push(Event::Free { id });
    }
    t.events.push(Event::EmptyCache);
    t.num_ids = n;
    t
}
