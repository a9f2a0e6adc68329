//! The `plan` policy's settings: the fallback's `PYTORCH_ALLOC_CONF`, and
//! the static plan a replay hands it (made from the trace it replays).

use std::fmt;
use std::sync::Arc;

use crate::{AllocConf, TorchVersion};

/// One planned allocation: its size, rounded to 512 bytes, and its offset
/// in the static arena ([`Slot::ONLINE`]: left to the fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Bytes (a multiple of 512).
    pub size: u64,
    /// Offset from the arena's base.
    pub offset: u64,
}

impl Slot {
    /// The offset of an allocation the plan leaves to the fallback.
    pub const ONLINE: u64 = u64::MAX;
}

/// A static plan: the offset of each allocation, by its position among
/// the non-empty requests of the run, and the arena's size.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticPlan {
    slots: Vec<Slot>,
    peak: u64,
}

impl StaticPlan {
    /// A plan of `slots` in an arena of `peak` bytes; `Err` when a slot
    /// ends above it or has a size that is not a positive multiple of 512.
    pub fn new(slots: Vec<Slot>, peak: u64) -> Result<StaticPlan, String> {
        for (k, s) in slots.iter().enumerate() {
            if s.size == 0 || s.size % 512 != 0 {
                return Err(format!(
                    "slot {k}: size {} is not a positive multiple of 512",
                    s.size
                ));
            }
            if s.offset != Slot::ONLINE && s.offset.saturating_add(s.size) > peak {
                return Err(format!(
                    "slot {k} ends at {} above the arena's {peak} bytes",
                    s.offset.saturating_add(s.size)
                ));
            }
        }
        Ok(StaticPlan { slots, peak })
    }

    /// The slot of the `k`-th non-empty request.
    pub fn slot(&self, k: usize) -> Option<Slot> {
        self.slots.get(k).copied()
    }

    /// The arena's size: the plan's peak.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// The number of planned requests.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// `true` when nothing is planned.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

impl fmt::Debug for StaticPlan {
    /// The counts, not every slot.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticPlan")
            .field("slots", &self.slots.len())
            .field("peak", &self.peak)
            .finish()
    }
}

/// Settings of the `plan` policy: the settings string is the fallback's
/// `PYTORCH_ALLOC_CONF`; the plan itself comes from the trace replayed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    /// The native allocator serving what the plan does not place.
    pub fallback: AllocConf,
    /// The plan (`None`: not made yet; every request goes to the
    /// fallback).
    pub plan: Option<Arc<StaticPlan>>,
}

impl Settings {
    /// Parses the fallback's `PYTORCH_ALLOC_CONF` under `version`.
    pub fn parse(s: &str, version: TorchVersion) -> Result<Settings, String> {
        let fallback = AllocConf::parse(s, version).map_err(|e| e.to_string())?;
        Ok(Settings {
            fallback,
            plan: None,
        })
    }

    /// The same settings with `plan`.
    pub fn with_plan(&self, plan: Arc<StaticPlan>) -> Settings {
        Settings {
            fallback: self.fallback.clone(),
            plan: Some(plan),
        }
    }
}

impl fmt::Display for Settings {
    /// The fallback's canonical settings string (empty for defaults).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.fallback)
    }
}
