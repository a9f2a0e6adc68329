//! Structured PyTorch snapshots built from fuzzer input: segments, blocks
//! and trace entries over a small address space, so that entries, blocks
//! and segments collide often.

use arbitrary::Arbitrary;
use vramlab_traces::snapshot::*;

const BASE: u64 = 0x7f00_0000_0000;

#[derive(Debug, Arbitrary)]
enum Addr {
    /// A 512 KiB-aligned address near the base (collides with segments).
    Slot(u8),
    /// Any address.
    Raw(u64),
}

impl Addr {
    fn get(&self) -> u64 {
        match *self {
            Addr::Slot(s) => BASE + u64::from(s) * (512 << 10),
            Addr::Raw(a) => a,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Size {
    Units(u16),
    Mib(u8),
    Raw(u64),
}

impl Size {
    fn get(&self) -> u64 {
        match *self {
            Size::Units(n) => u64::from(n) * 512,
            Size::Mib(m) => u64::from(m) << 20,
            Size::Raw(n) => n,
        }
    }
}

#[derive(Debug, Arbitrary)]
struct BlockIn {
    size: Size,
    state: u8,
    requested: Option<u32>,
    address: Option<Addr>,
}

#[derive(Debug, Arbitrary)]
struct SegIn {
    device: u8,
    address: Addr,
    /// `None`: the sum of the block sizes.
    total: Option<Size>,
    segment_type: u8,
    expandable: bool,
    stream: u8,
    blocks: Vec<BlockIn>,
}

#[derive(Debug, Arbitrary)]
struct EntryIn {
    action: u8,
    addr: Option<Addr>,
    size: Size,
    stream: u8,
    device_free: Option<u32>,
}

/// A snapshot: segments with blocks, per-device trace entries, and the
/// recorded `expandable_segments` setting.
#[derive(Debug, Arbitrary)]
pub struct SnapshotIn {
    segments: Vec<SegIn>,
    devices: Vec<Vec<EntryIn>>,
    expandable_recorded: Option<bool>,
}

/// Raw stream handles of the segments and entries.
const STREAMS: [u64; 3] = [0, 7, u64::MAX];

impl SnapshotIn {
    /// Whether the snapshot records `expandable_segments:True`.
    pub fn expandable(&self) -> bool {
        self.expandable_recorded == Some(true)
    }

    /// The snapshot.
    pub fn snapshot(&self) -> Snapshot {
        let input = self;
        let mut snap = Snapshot::default();
        for s in input.segments.iter().take(16) {
            let address = s.address.get();
            let mut next = address;
            let blocks: Vec<SnapshotBlock> = s
                .blocks
                .iter()
                .take(16)
                .map(|b| {
                    let size = b.size.get();
                    let addr = b.address.as_ref().map_or(next, Addr::get);
                    next = addr.wrapping_add(size);
                    SnapshotBlock {
                        address: addr,
                        size,
                        requested_size: b.requested.map(u64::from),
                        state: match b.state % 3 {
                            0 => SnapshotBlockState::ActiveAllocated,
                            1 => SnapshotBlockState::ActivePendingFree,
                            _ => SnapshotBlockState::Inactive,
                        },
                        frames: None,
                    }
                })
                .collect();
            let total = match &s.total {
                Some(t) => t.get(),
                None => blocks.iter().fold(0u64, |a, b| a.wrapping_add(b.size)),
            };
            snap.segments.push(Segment {
                device: u32::from(s.device % 3),
                address,
                total_size: total,
                allocated_size: 0,
                active_size: 0,
                requested_size: 0,
                stream: STREAMS[usize::from(s.stream) % STREAMS.len()],
                is_small: s.segment_type % 2 == 0,
                // Private pools too: (0, 1) and (0, 2) beside the default.
                pool_id: (0, i64::from(s.segment_type / 2 % 3)),
                is_expandable: s.expandable,
                frames: None,
                blocks,
            });
        }
        for dev in input.devices.iter().take(3) {
            let entries = dev
                .iter()
                .take(256)
                .map(|e| {
                    let action = match e.action % 12 {
                        0 | 1 => Action::Alloc,
                        2 => Action::FreeRequested,
                        3 | 4 => Action::FreeCompleted,
                        5 => Action::SegmentAlloc,
                        6 => Action::SegmentFree,
                        7 => Action::SegmentMap,
                        8 => Action::SegmentUnmap,
                        9 => Action::Oom,
                        10 => Action::Snapshot,
                        _ => Action::Other("x".into()),
                    };
                    TraceEntry {
                        action,
                        addr: e.addr.as_ref().map(Addr::get),
                        device_free: e.device_free.map(u64::from),
                        size: e.size.get(),
                        stream: STREAMS[usize::from(e.stream) % STREAMS.len()],
                        time_us: None,
                        frames: None,
                        compile_context: None,
                        user_metadata: None,
                        // No pool (before 2.12), the default, a handle's, a graph's own.
                        pool_id: match e.action / 12 % 4 {
                            0 => None,
                            1 => Some((0, 0)),
                            2 => Some((0, 1)),
                            _ => Some((1, 0)),
                        },
                    }
                })
                .collect();
            snap.device_traces.push(entries);
        }
        if let Some(e) = input.expandable_recorded {
            snap.allocator_settings = Some(AllocatorSettings {
                expandable_segments: Some(e),
                ..Default::default()
            });
        }
        snap
    }
}
