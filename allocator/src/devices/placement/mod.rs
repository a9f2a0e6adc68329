//! Where the simulated GPU puts a new segment or reservation.
//!
//! Addresses matter to PyTorch's allocator only through their order: its
//! best fit takes, among free blocks of the same size, the one at the lowest
//! address, so the order in which the driver hands out segments decides
//! ties, and a different tie can change every decision after it. The
//! simulated device therefore follows a placement policy:
//!
//! * [`Placement::Driver`] ([`driver`]): the CUDA driver's placement as
//!   measured on an H200 (driver 580.159.04): cudaMalloc results are carved
//!   out of 32 MiB-granular regions placed downwards, newest region first,
//!   best fit inside a region; reservations ascend.
//! * [`Placement::Ascending`] ([`ascending`]): every new range above the
//!   previous one (a bump allocator), as the drivers that recorded the real
//!   snapshots in `../shared/traces/real` did.
//!
//! Placements requested by fidelity mode (`SimDevice::place_next`) take
//! precedence over either; the policy is told about them and continues
//! from there. The measurements behind both models, and how well each
//! predicts real drivers, are in `docs/driver-placement.md`.

mod ascending;
mod driver;
mod free_ranges;

use std::fmt;

use ascending::Ascending;
use driver::Driver;

/// A placement policy of the simulated device (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// The CUDA driver's placement measured on an H200 (driver 580): the
    /// default, because it predicted PyTorch's peak reserved on that GPU in
    /// every measured case where ascending addresses missed one (see
    /// `docs/driver-placement.md`).
    #[default]
    Driver,
    /// Increasing addresses: each new segment or reservation above the
    /// previous one (older drivers, and vramlab before 0.2).
    Ascending,
}

impl Placement {
    /// Every policy, the default first.
    pub const ALL: [Placement; 2] = [Placement::Driver, Placement::Ascending];

    /// `driver` or `ascending`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Driver => "driver",
            Placement::Ascending => "ascending",
        }
    }

    /// The policy in words, for sentences: `the H200 driver's order`,
    /// `ascending addresses`.
    pub fn describe(self) -> &'static str {
        match self {
            Placement::Driver => "the H200 driver's order",
            Placement::Ascending => "ascending addresses",
        }
    }

    /// The other policy (the one a range check replays under).
    pub fn other(self) -> Placement {
        match self {
            Placement::Driver => Placement::Ascending,
            Placement::Ascending => Placement::Driver,
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Placement {
    type Err = String;
    fn from_str(s: &str) -> Result<Placement, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "driver" => Ok(Placement::Driver),
            "ascending" => Ok(Placement::Ascending),
            other => Err(format!(
                "unknown placement '{other}' (known: driver, ascending)"
            )),
        }
    }
}

/// The state of a placement policy. The device asks it for an address
/// ([`Placer::pick_malloc`], [`Placer::pick_reserve`]) and tells it about
/// every range that was taken or given back, wherever it came from.
#[derive(Debug, Clone)]
pub(crate) enum Placer {
    Ascending(Ascending),
    Driver(Box<Driver>),
}

impl Placer {
    /// A fresh policy over an empty address space that starts at `base`.
    pub(crate) fn new(p: Placement, base: u64) -> Placer {
        match p {
            Placement::Ascending => Placer::Ascending(Ascending::new(base)),
            Placement::Driver => Placer::Driver(Box::new(Driver::new(base))),
        }
    }

    /// An address for a cudaMalloc of `size` bytes aligned to `align`
    /// (`None`: the policy has none; the device then looks for a gap).
    pub(crate) fn pick_malloc(&mut self, size: u64, align: u64) -> Option<u64> {
        match self {
            Placer::Ascending(a) => a.pick(size, align),
            Placer::Driver(d) => d.pick_malloc(size),
        }
    }

    /// An address for a reservation of `size` bytes aligned to `align`.
    pub(crate) fn pick_reserve(&mut self, size: u64, align: u64) -> Option<u64> {
        match self {
            Placer::Ascending(a) => a.pick(size, align),
            Placer::Driver(d) => d.pick_reserve(size, align),
        }
    }

    /// A segment now occupies `[ptr, ptr + size)`.
    pub(crate) fn malloced(&mut self, ptr: u64, size: u64) {
        match self {
            Placer::Ascending(a) => a.taken(ptr, size),
            Placer::Driver(d) => d.malloced(ptr, size),
        }
    }

    /// The segment at `ptr` was freed.
    pub(crate) fn freed(&mut self, ptr: u64) {
        if let Placer::Driver(d) = self {
            d.freed(ptr);
        }
    }

    /// A reservation now occupies `[ptr, ptr + size)`.
    pub(crate) fn reserved(&mut self, ptr: u64, size: u64) {
        match self {
            Placer::Ascending(a) => a.taken(ptr, size),
            Placer::Driver(d) => d.reserved(ptr, size),
        }
    }

    /// The reservation at `ptr` was released.
    pub(crate) fn released(&mut self, ptr: u64) {
        if let Placer::Driver(d) = self {
            d.released(ptr);
        }
    }
}
