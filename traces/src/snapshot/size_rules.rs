//! The allocator's size rules a conversion needs, given by the caller
//! (the traces crate knows no allocator settings).

const MIB: u64 = 1 << 20;

/// The allocator's size rules the converter needs (from the recorded
/// settings): rounding and splitting decide the layout of an initial state
/// and whether a cached block could have served a request.
pub struct SizeRules<'a> {
    /// `round_size` of the recorded settings.
    pub round: &'a dyn Fn(u64) -> u64,
    /// `max_split_size` in bytes (`u64::MAX` = unlimited).
    pub max_split_size: u64,
    /// `max_non_split_rounding_mb` in bytes (20 MiB by default).
    pub max_non_split_rounding: u64,
    /// Page size of large expandable segments (20 MiB by default).
    pub large_page: u64,
}

fn default_round(n: u64) -> u64 {
    n.max(1).div_ceil(512) * 512
}

impl Default for SizeRules<'_> {
    fn default() -> Self {
        SizeRules {
            round: &default_round,
            max_split_size: u64::MAX,
            max_non_split_rounding: 20 * MIB,
            large_page: 20 * MIB,
        }
    }
}
