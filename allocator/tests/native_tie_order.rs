//! Which of two free blocks of one size a request takes, release by
//! release — the differential tests that found the rule, run against each
//! release's own allocator on the fake CUDA device
//! (`bash scripts/oracle_experiments/run.sh X.Y tie_order.py [driver|ascending]`),
//! pinned here on the simulated device with both address orders:
//!
//! * 2.11: the lower address (`BlockComparatorSize`).
//! * 2.12: the older `Block` object: every new block (a new segment, the
//!   allocated front of a split) takes a global counter (pytorch#178362).
//! * 2.13–2.15: the older segment: the counter is taken at cudaMalloc and
//!   inherited by every block of the segment (pytorch#183591).
//!
//! Measured (torch 2.11.0, 2.12.1, 2.13.0, 2.14.1, 2.15.0 wheels; raw output in
//! docs/results/releases/tie-order.txt):
//!
//! | experiment | placement | 2.11 | 2.12 | 2.13, 2.15 |
//! |---|---|---|---|---|
//! | two whole 30 MiB segments | driver | newer (lower) | older | older |
//! | newer block of the older segment vs older block of the newer | driver | newer segment | newer segment | older segment |
//! | the same | ascending | older segment | newer segment | older segment |

mod common;

use common::Fixture;
use vramlab_allocator::{AllocConf, NativeAllocator, Placement, SimDevice, TorchVersion};

const MIB: u64 = 1 << 20;

fn fixture(v: TorchVersion, placement: Placement) -> Fixture<NativeAllocator<SimDevice>> {
    let mut dev = SimDevice::unlimited();
    dev.set_placement(placement);
    Fixture {
        a: NativeAllocator::new(AllocConf::new(v), dev),
    }
}

/// Two whole 30 MiB segments, the first made first; both freed; a 3 MiB
/// request takes the first (older) one? On the driver's order the older
/// one is the higher address.
fn takes_older_segment(v: TorchVersion) -> bool {
    let mut f = fixture(v, Placement::Driver);
    let a = f.malloc(30 * MIB);
    let b = f.malloc(30 * MIB);
    let (pa, pb) = (f.ptr(a), f.ptr(b));
    assert!(pa > pb, "the driver model puts the newer region lower");
    f.free(a);
    f.free(b);
    let c = f.malloc(3 * MIB);
    assert_eq!(f.calls().len(), 2, "no new segment");
    f.ptr(c) == pa
}

#[test]
fn two_whole_segments() {
    assert!(!takes_older_segment(TorchVersion::new(2, 11)));
    assert!(takes_older_segment(TorchVersion::new(2, 12)));
    assert!(takes_older_segment(TorchVersion::new(2, 13)));
    assert!(takes_older_segment(TorchVersion::new(2, 15)));
}

/// Segment A (30 MiB) is made before B. B is split first (its 12 MiB
/// front is an older `Block` than A's), then A; both fronts are freed; a
/// 12 MiB request takes A's front (older segment) or B's (older block, or
/// lower address).
fn takes_front_of_a(v: TorchVersion, placement: Placement) -> bool {
    let mut f = fixture(v, placement);
    let a = f.malloc(30 * MIB);
    let b = f.malloc(30 * MIB);
    let (pa, pb) = (f.ptr(a), f.ptr(b));
    f.free(b);
    let b1 = f.malloc(12 * MIB);
    let _b2 = f.malloc(18 * MIB);
    f.free(a);
    let a1 = f.malloc(12 * MIB);
    let _a2 = f.malloc(18 * MIB);
    assert_eq!((f.ptr(a1), f.ptr(b1)), (pa, pb));
    f.free(a1);
    f.free(b1);
    let c = f.malloc(12 * MIB);
    assert_eq!(f.calls().len(), 2, "no new segment");
    f.ptr(c) == pa
}

#[test]
fn older_segment_against_older_block() {
    let cases = [
        (TorchVersion::new(2, 11), Placement::Driver, false),
        (TorchVersion::new(2, 11), Placement::Ascending, true),
        (TorchVersion::new(2, 12), Placement::Driver, false),
        (TorchVersion::new(2, 12), Placement::Ascending, false),
        (TorchVersion::new(2, 13), Placement::Driver, true),
        (TorchVersion::new(2, 13), Placement::Ascending, true),
        (TorchVersion::new(2, 15), Placement::Driver, true),
        (TorchVersion::new(2, 15), Placement::Ascending, true),
    ];
    for (v, placement, want) in cases {
        assert_eq!(takes_front_of_a(v, placement), want, "{v} {placement}");
    }
}
