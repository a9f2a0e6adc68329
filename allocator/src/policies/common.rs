//! Pieces every policy of this module shares: the slot arena behind block
//! handles, the `key:value` settings grammar, canonical size strings, the
//! statistics cross-check of the invariant checkers and the out-of-memory
//! report.

use crate::devices::Device;
use crate::format::parse_size;
use crate::policy::{AllocError, BlockHandle, OomReport};
use crate::stats::{MemoryStats, StatArray};

/// Requests of 2^60 bytes or more are refused before any policy looks at
/// them, as PyTorch's `allocate` front end does for every backend.
pub(crate) const MAX_REQUEST: u64 = 1 << 60;

/// "No slot" marker for links between slots.
pub(crate) const NIL: u32 = u32::MAX;

/// Fails with a formatted message unless the condition holds (for
/// invariant checkers).
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(format!($($arg)*));
        }
    };
}
pub(crate) use ensure;

/// One slot of a [`Slots`] arena.
#[derive(Debug, Clone)]
struct Slot<T> {
    generation: u32,
    live: bool,
    value: T,
}

/// A flat arena whose slots are recycled through a free list. Every reuse of
/// a slot bumps its generation, so a [`BlockHandle`] issued for an earlier
/// occupant no longer resolves (double frees are detected). Once the arena
/// has grown to its working size, inserting and removing never allocate.
#[derive(Debug, Clone)]
pub(crate) struct Slots<T> {
    slots: Vec<Slot<T>>,
    vacant: Vec<u32>,
    live: usize,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            vacant: Vec::new(),
            live: 0,
        }
    }
}

// Indexing: `slots` only ever grows (`push` in `insert_with`; the field is
// private and nothing truncates it), so every index `insert_with` returned
// stays in bounds. `vacant` holds only indices given to `remove`, which
// just indexed `slots` with them, so a recycled index is in bounds too.
// `remove`, `handle`, `renew` and `Index` are called with slot indices the
// policies keep in their own links, bins, pools and queues, all of them
// `insert` results; a caller's `BlockHandle::index` reaches them only after
// `is_current` (a checked `get`) accepted it: in each policy's `resolve`,
// `complete_free` and `block_ptr`, and in `StitchAllocator::pieces`.
#[allow(clippy::indexing_slicing)]
impl<T> Slots<T> {
    /// Stores `value` and returns its slot index. `reuse` may recycle parts
    /// of the previous occupant of a recycled slot (buffers) into `value`.
    pub(crate) fn insert_with(&mut self, mut value: T, reuse: impl FnOnce(&mut T, &mut T)) -> u32 {
        self.live += 1;
        if let Some(i) = self.vacant.pop() {
            let slot = &mut self.slots[i as usize];
            reuse(&mut slot.value, &mut value);
            slot.generation = slot.generation.wrapping_add(1);
            slot.live = true;
            slot.value = value;
            i
        } else {
            let i = self.slots.len();
            assert!(i < (u32::MAX >> 1) as usize, "slot arena exhausted");
            self.slots.push(Slot {
                generation: 0,
                live: true,
                value,
            });
            i as u32
        }
    }

    /// Stores `value` and returns its slot index.
    pub(crate) fn insert(&mut self, value: T) -> u32 {
        self.insert_with(value, |_, _| {})
    }

    /// Frees slot `i` (its value stays in place until the slot is reused).
    pub(crate) fn remove(&mut self, i: u32) {
        let slot = &mut self.slots[i as usize];
        debug_assert!(slot.live, "removing a vacant slot");
        slot.live = false;
        self.live -= 1;
        self.vacant.push(i);
    }

    /// `true` if slot `i` is occupied by the value issued with `generation`.
    pub(crate) fn is_current(&self, i: u32, generation: u32) -> bool {
        self.slots
            .get(i as usize)
            .is_some_and(|s| s.live && s.generation == generation)
    }

    /// `true` if slot `i` is occupied.
    pub(crate) fn is_live(&self, i: u32) -> bool {
        self.slots.get(i as usize).is_some_and(|s| s.live)
    }

    /// The handle naming the current occupant of slot `i`.
    pub(crate) fn handle(&self, i: u32) -> BlockHandle {
        BlockHandle {
            index: i,
            generation: self.slots[i as usize].generation,
        }
    }

    /// Gives the occupant of slot `i` a new generation (every hand-out of a
    /// block gets one, so a stale handle can never name a later allocation
    /// of the same slot) and returns its handle.
    pub(crate) fn renew(&mut self, i: u32) -> BlockHandle {
        let slot = &mut self.slots[i as usize];
        slot.generation = slot.generation.wrapping_add(1);
        BlockHandle {
            index: i,
            generation: slot.generation,
        }
    }

    /// Number of occupied slots.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// Indices of the occupied slots, in index order.
    pub(crate) fn live(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .map(|(i, _)| i as u32)
    }
}

// Indexing: see the proof on `impl Slots`.
#[allow(clippy::indexing_slicing)]
impl<T> std::ops::Index<u32> for Slots<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: u32) -> &T {
        &self.slots[i as usize].value
    }
}

// Indexing: see the proof on `impl Slots`.
#[allow(clippy::indexing_slicing)]
impl<T> std::ops::IndexMut<u32> for Slots<T> {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut T {
        &mut self.slots[i as usize].value
    }
}

/// Splits a settings string `key:value,key:value` into trimmed pairs.
///
/// Empty items are ignored (an empty string gives no pairs). Errors name the
/// policy and the offending item: a missing `:`, a key not in `known`, or a
/// key given twice.
pub(crate) fn split_settings<'a>(
    policy: &str,
    s: &'a str,
    known: &[&str],
) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for item in s.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let Some((key, value)) = item.split_once(':') else {
            return Err(format!(
                "{policy} setting '{item}' has no value (expected key:value)"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if !known.contains(&key) {
            if known.is_empty() {
                return Err(format!(
                    "unknown {policy} setting '{key}': the {policy} policy takes no settings"
                ));
            }
            return Err(format!(
                "unknown {policy} setting '{key}' (known settings: {})",
                known.join(", ")
            ));
        }
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("{policy} setting '{key}' is given twice"));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// `true`/`false` (any case) or `1`/`0`.
pub(crate) fn parse_bool(policy: &str, key: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!(
            "{policy} setting {key}: invalid value '{v}' (expected true or false)"
        )),
    }
}

/// A byte size (`8GiB`, `512MiB`, `1048576`).
pub(crate) fn parse_bytes(policy: &str, key: &str, v: &str) -> Result<u64, String> {
    parse_size(v).map_err(|_| {
        format!(
            "{policy} setting {key}: invalid size '{v}' (expected bytes or a number with a unit such as 512MiB or 8GiB)"
        )
    })
}

/// A finite number in `[lo, hi]` (`lo` excluded when `lo_open`).
pub(crate) fn parse_number(
    policy: &str,
    key: &str,
    v: &str,
    lo: f64,
    lo_open: bool,
    hi: f64,
) -> Result<f64, String> {
    let range = if lo_open {
        format!("({lo}, {hi}]")
    } else {
        format!("[{lo}, {hi}]")
    };
    let x: f64 = v.parse().map_err(|_| {
        format!("{policy} setting {key}: invalid number '{v}' (expected a number in {range})")
    })?;
    let ok = x.is_finite() && (if lo_open { x > lo } else { x >= lo }) && x <= hi;
    if !ok {
        return Err(format!(
            "{policy} setting {key}: {v} is out of range (expected a number in {range})"
        ));
    }
    Ok(x)
}

pub(crate) use crate::format::size_string;

/// Rounds `n` up to a multiple of `m` (a power of two or any positive
/// number), saturating.
#[inline]
pub(crate) fn round_up(n: u64, m: u64) -> u64 {
    n.div_ceil(m).saturating_mul(m)
}

/// The report of a request of 2^60 bytes or more (PyTorch's "more than 1EB").
pub(crate) fn exceeds_limit<D: Device>(
    device: &D,
    stats: &MemoryStats,
    size: u64,
    allowed: Option<u64>,
) -> AllocError {
    let info = device.mem_info();
    AllocError::OutOfMemory(Box::new(OomReport {
        exceeds_limit: true,
        requested: size,
        rounded: size,
        device_request: size,
        device_free: info.free,
        device_total: info.total,
        allowed,
        allocated: stats.allocated_bytes.all.current as u64,
        reserved: stats.reserved_bytes.all.current as u64,
    }))
}

/// Counts the OOM in `stats` and builds the report.
pub(crate) fn out_of_memory<D: Device>(
    device: &D,
    stats: &mut MemoryStats,
    requested: u64,
    rounded: u64,
    device_request: u64,
    allowed: Option<u64>,
) -> AllocError {
    stats.num_ooms += 1;
    let info = device.mem_info();
    AllocError::OutOfMemory(Box::new(OomReport {
        exceeds_limit: false,
        requested,
        rounded,
        device_request,
        device_free: info.free,
        device_total: info.total,
        allowed,
        allocated: stats.allocated_bytes.all.current as u64,
        reserved: stats.reserved_bytes.all.current as u64,
    }))
}

/// Compares every statistic an invariant checker recomputed from the blocks
/// (`want`) with the running statistics (`got`): the current values must be
/// equal, and every running statistic must satisfy
/// `current == allocated - freed` and `peak >= current`.
pub(crate) fn compare_stats(got: &MemoryStats, want: &MemoryStats) -> Result<(), String> {
    let pairs: [(&str, &StatArray, &StatArray); 9] = [
        ("allocation", &got.allocation, &want.allocation),
        ("segment", &got.segment, &want.segment),
        ("active", &got.active, &want.active),
        ("inactive_split", &got.inactive_split, &want.inactive_split),
        (
            "allocated_bytes",
            &got.allocated_bytes,
            &want.allocated_bytes,
        ),
        ("reserved_bytes", &got.reserved_bytes, &want.reserved_bytes),
        ("active_bytes", &got.active_bytes, &want.active_bytes),
        (
            "inactive_split_bytes",
            &got.inactive_split_bytes,
            &want.inactive_split_bytes,
        ),
        (
            "requested_bytes",
            &got.requested_bytes,
            &want.requested_bytes,
        ),
    ];
    for (name, g, w) in pairs {
        for (pool, gs, ws) in [
            ("all", &g.all, &w.all),
            ("small_pool", &g.small_pool, &w.small_pool),
            ("large_pool", &g.large_pool, &w.large_pool),
        ] {
            ensure!(
                gs.current == ws.current,
                "{name}.{pool}.current is {} but the blocks say {}",
                gs.current,
                ws.current
            );
            ensure!(
                gs.current == gs.allocated.wrapping_sub(gs.freed) && gs.peak >= gs.current,
                "{name}.{pool}: current/allocated/freed/peak inconsistent"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_recycle_with_new_generation() {
        let mut s: Slots<u64> = Slots::default();
        let a = s.insert(1);
        let h = s.handle(a);
        s.remove(a);
        assert!(!s.is_current(h.index, h.generation));
        let b = s.insert(2);
        assert_eq!(a, b);
        assert!(!s.is_current(h.index, h.generation));
        assert!(s.is_current(b, s.handle(b).generation));
        assert_eq!(s.len(), 1);
        assert_eq!(s.live().collect::<Vec<_>>(), vec![b]);
    }

    #[test]
    fn settings_grammar() {
        let known = ["a", "b"];
        assert_eq!(split_settings("p", "", &known), Ok(vec![]));
        assert_eq!(
            split_settings("p", " a : 1 , b:x,", &known),
            Ok(vec![("a", "1"), ("b", "x")])
        );
        assert_eq!(
            split_settings("p", "c:1", &known).unwrap_err(),
            "unknown p setting 'c' (known settings: a, b)"
        );
        assert_eq!(
            split_settings("p", "a", &known).unwrap_err(),
            "p setting 'a' has no value (expected key:value)"
        );
        assert_eq!(
            split_settings("p", "a:1,a:2", &known).unwrap_err(),
            "p setting 'a' is given twice"
        );
        assert!(parse_bool("p", "a", "TRUE").unwrap());
        assert!(parse_bool("p", "a", "yes").is_err());
        assert!(parse_number("p", "a", "0", 0.0, true, 1.0).is_err());
        assert_eq!(parse_number("p", "a", "0.5", 0.0, true, 1.0), Ok(0.5));
    }

    #[test]
    fn canonical_sizes_read_back() {
        for n in [
            0,
            1,
            512,
            1 << 10,
            3 << 20,
            8 << 30,
            (1 << 30) + 512,
            5 << 40,
        ] {
            let s = size_string(n);
            assert_eq!(parse_size(&s).unwrap(), n, "{s}");
        }
        assert_eq!(size_string(8 << 30), "8GiB");
        assert_eq!(size_string(1536 << 20), "1536MiB");
        assert_eq!(size_string(1000), "1000");
    }
}
