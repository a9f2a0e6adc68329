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

/// `placement_may_have_decided`: a choice between free blocks of one size
/// in two segments is noted (the placement could have decided it); one
/// between blocks of one segment, or between blocks of different sizes,
/// is not.
#[test]
fn a_choice_between_segments_is_noted_as_placement_dependent() {
    use vramlab_allocator::Inspect;
    let v = TorchVersion::new(2, 11);
    // Two whole 30 MiB segments, both free: which one a request takes
    // depends on their addresses.
    let mut f = fixture(v, Placement::Driver);
    let (a, b) = (f.malloc(30 * MIB), f.malloc(30 * MIB));
    f.free(a);
    f.free(b);
    assert!(!f.a.placement_may_have_decided(), "no choice made yet");
    f.malloc(3 * MIB);
    assert!(f.a.placement_may_have_decided());
    // Two free 4 MiB blocks of one 30 MiB segment (split by 2 MiB blocks
    // kept live): their order is their offsets, the same at any address.
    let mut f = fixture(v, Placement::Driver);
    let x = f.malloc(4 * MIB);
    let _keep = f.malloc(2 * MIB);
    let y = f.malloc(4 * MIB);
    let _keep2 = f.malloc(2 * MIB);
    assert_eq!(f.calls().len(), 1, "one segment");
    f.free(x);
    f.free(y);
    f.malloc(4 * MIB);
    assert!(!f.a.placement_may_have_decided());
    // Free blocks of two sizes in two segments: best fit by size alone.
    let mut f = fixture(v, Placement::Driver);
    let (a, b) = (f.malloc(30 * MIB), f.malloc(40 * MIB));
    f.free(a);
    f.free(b);
    f.malloc(35 * MIB);
    assert!(!f.a.placement_may_have_decided());
}
