//! Random valid traces for the property tests: frees name live
//! allocations, completions pending ones, over three streams.

use proptest::prelude::*;
use vramlab_traces::{Event, Trace, TraceHeader};

const MIB: u64 = 1 << 20;

#[derive(Debug, Clone)]
pub enum Op {
    Alloc(u64, usize),
    Free(usize),
    FreeRequested(usize),
    FreeCompleted(usize),
    EmptyCache,
}

pub const STREAMS: [u64; 3] = [0, 7, 0x5555_0000];

pub fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 1..=MIB,                    // small pool
        4 => MIB + 1..=24 * MIB,         // large pool, shared segments
        1 => 24 * MIB..=160 * MIB,       // own segments, oversize
        1 => Just(0u64),                 // PyTorch's null allocation
        1 => (1u64..64).prop_map(|k| k * 512),
    ]
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (size(), 0..STREAMS.len()).prop_map(|(s, st)| Op::Alloc(s, st)),
        4 => any::<usize>().prop_map(Op::Free),
        2 => any::<usize>().prop_map(Op::FreeRequested),
        2 => any::<usize>().prop_map(Op::FreeCompleted),
        1 => Just(Op::EmptyCache),
    ]
}

/// A valid trace: frees name live allocations, completions pending ones.
pub fn build(ops: &[Op]) -> Trace {
    let mut t = Trace::new(TraceHeader {
        source: "proptest".into(),
        ..Default::default()
    });
    let (mut live, mut pending) = (Vec::new(), Vec::new());
    for op in ops {
        match *op {
            Op::Alloc(size, s) => {
                let stream = t.stream_index(STREAMS[s]);
                let id = t.num_ids;
                t.num_ids += 1;
                t.events.push(Event::Alloc { id, stream, size });
                live.push(id);
            }
            Op::Free(k) if !live.is_empty() => {
                let id = live.swap_remove(k % live.len());
                t.events.push(Event::Free { id });
            }
            Op::FreeRequested(k) if !live.is_empty() => {
                let id = live.swap_remove(k % live.len());
                t.events.push(Event::FreeRequested { id });
                pending.push(id);
            }
            Op::FreeCompleted(k) if !pending.is_empty() => {
                let id = pending.swap_remove(k % pending.len());
                t.events.push(Event::FreeCompleted { id });
            }
            Op::EmptyCache => t.events.push(Event::EmptyCache),
            _ => {}
        }
    }
    t
}

pub fn trace(max_ops: usize) -> impl Strategy<Value = Trace> {
    prop::collection::vec(op(), 0..max_ops).prop_map(|ops| build(&ops))
}
