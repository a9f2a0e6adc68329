//! Event sequences built from fuzzer input.

use arbitrary::Arbitrary;
use vramlab_traces::{Event, Trace, TraceHeader};

/// A request size.
#[derive(Debug, Arbitrary)]
pub enum SizeIn {
    /// Below 1 MiB: the small pool.
    Small(u32),
    /// Below 32 MiB.
    Medium(u32),
    /// Whole MiB up to 64 GiB.
    LargeMib(u16),
    /// Any value, including 0 and the >= 2^60 refusals.
    Exact(u64),
}

impl SizeIn {
    /// Bytes.
    pub fn bytes(&self) -> u64 {
        match *self {
            SizeIn::Small(n) => u64::from(n) % (1 << 20) + 1,
            SizeIn::Medium(n) => u64::from(n) % (32 << 20) + 1,
            SizeIn::LargeMib(m) => u64::from(m) << 20,
            SizeIn::Exact(n) => n,
        }
    }
}

/// One step of a generated trace. Frees name a live id by position, so
/// most sequences are valid; `Raw` events make invalid ones.
#[derive(Debug, Arbitrary)]
pub enum OpIn {
    /// `malloc`.
    Alloc(SizeIn, u8),
    /// Free the `n`-th live allocation.
    Free(u8),
    /// Request the free of the `n`-th live allocation.
    FreeRequested(u8),
    /// Complete the `n`-th pending free.
    FreeCompleted(u8),
    /// `empty_cache()`.
    EmptyCache,
    /// An event with an arbitrary id.
    Raw(u8, u16),
}

/// Raw stream handles the generated traces use.
pub const STREAMS: [u64; 5] = [0, 7, 0x5555_0000, u64::MAX, 1];

/// A trace of `ops` (at most `max_ops` of them).
pub fn build_trace(ops: &[OpIn], max_ops: usize) -> Trace {
    let mut t = Trace::new(TraceHeader {
        source: "fuzz".into(),
        ..Default::default()
    });
    let mut live: Vec<u32> = Vec::new();
    let mut pending: Vec<u32> = Vec::new();
    let mut next = 0u32;
    for op in ops.iter().take(max_ops) {
        match op {
            OpIn::Alloc(size, s) => {
                let stream = t.stream_index(STREAMS[usize::from(*s) % STREAMS.len()]);
                t.events.push(Event::Alloc {
                    id: next,
                    stream,
                    size: size.bytes(),
                });
                live.push(next);
                next += 1;
            }
            OpIn::Free(n) | OpIn::FreeRequested(n) if !live.is_empty() => {
                let id = live.swap_remove(usize::from(*n) % live.len());
                if matches!(op, OpIn::Free(_)) {
                    t.events.push(Event::Free { id });
                } else {
                    t.events.push(Event::FreeRequested { id });
                    pending.push(id);
                }
            }
            OpIn::FreeCompleted(n) if !pending.is_empty() => {
                let id = pending.swap_remove(usize::from(*n) % pending.len());
                t.events.push(Event::FreeCompleted { id });
            }
            OpIn::EmptyCache => t.events.push(Event::EmptyCache),
            OpIn::Raw(kind, id) => {
                let id = u32::from(*id) % (next + 2);
                t.events.push(match kind % 5 {
                    0 => Event::Alloc {
                        id,
                        stream: 0,
                        size: 4096,
                    },
                    1 => Event::Free { id },
                    2 => Event::FreeRequested { id },
                    3 => Event::FreeCompleted { id },
                    _ => Event::EmptyCache,
                });
            }
            _ => {}
        }
    }
    // Raw events may name ids beyond the allocations (the replay refuses
    // them by event).
    t.num_ids = next;
    t
}
