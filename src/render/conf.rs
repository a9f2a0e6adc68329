//! A settings string explained: where it came from, its canonical form,
//! what every key means, and how requests are rounded under it.

use vramlab_allocator::AllocConf;
use vramlab_allocator::ROUNDUP_INTERVALS;
use vramlab_allocator::host::HostRules;
use vramlab_allocator::policies::native::{allocation_size, interval_index, round_size};

use crate::render::table::{Table, bytes};

/// Prints which environment variable the settings came from (`None`: none
/// was set).
pub fn print_env_source(var: Option<&str>) {
    match var {
        Some(var) => outln!("read from {var}"),
        None => outln!("no allocator settings in the environment"),
    }
}

/// Prints the settings, their effective values, and the rounding of each
/// of `sizes`.
pub fn print_conf(conf: &AllocConf, sizes: &[u64]) {
    outln!("settings: {:?} (PyTorch {} rules)", conf.raw, conf.version);
    let canonical = conf.to_string();
    outln!(
        "canonical: {}",
        if canonical.is_empty() {
            "(all defaults)".to_string()
        } else {
            canonical
        }
    );
    outln!();
    let mut keys = Table::new(vec!["key".into(), "in effect".into()]).left(1);
    for (k, meaning) in conf.effective_rows() {
        keys.row(vec![k.to_string(), meaning.to_string()]);
    }
    out!("{}", keys.render_indented("  "));
    outln!();
    outln!("How requests are rounded and which segment a new one gets:");
    let mut t = Table::new(vec![
        "request".into(),
        "rounded".into(),
        "pool".into(),
        "new segment".into(),
        "interval".into(),
        "divisions".into(),
    ]);
    for &n in sizes {
        let s = round_size(conf, n);
        let idx = interval_index(n);
        let d = divisions(conf, idx);
        t.row(vec![
            bytes(n),
            bytes(s),
            if s <= 1 << 20 {
                "small".into()
            } else {
                "large".into()
            },
            if conf.expandable_segments {
                "expandable".into()
            } else {
                bytes(allocation_size(conf, s))
            },
            interval_label(idx),
            if d > 1 { d.to_string() } else { "-".into() },
        ]);
    }
    out!("{}", t.render());
    outln!();
    outln!("How pinned host requests are sized (pin_memory(), non_blocking copies to the CPU):");
    let host = HostRules::of(conf);
    let mut t = Table::new(vec!["request".into(), "block".into(), "when freed".into()]);
    for &n in sizes {
        let block = host.block_size(n);
        let freed = match host.caches(block) {
            true => "cached",
            false => "given back",
        };
        t.row(vec![bytes(n), bytes(block), freed.into()]);
    }
    out!("{}", t.render());
}

/// `roundup_power2_divisions` of interval `idx` (the last for larger ones).
// Indexing: `idx` is clamped to `ROUNDUP_INTERVALS - 1`, and the table is a
// `[u32; ROUNDUP_INTERVALS]`.
#[allow(clippy::indexing_slicing)]
fn divisions(conf: &AllocConf, idx: usize) -> u32 {
    conf.roundup_power2_divisions[idx.min(ROUNDUP_INTERVALS - 1)]
}

/// The size interval `idx` of `roundup_power2_divisions`.
fn interval_label(idx: usize) -> String {
    const MIB: u64 = 1 << 20;
    if idx == 0 {
        "< 2 MiB".into()
    } else if idx == ROUNDUP_INTERVALS - 1 {
        format!(">= {}", bytes(MIB << idx))
    } else {
        format!("{}..{}", bytes(MIB << idx), bytes(MIB << (idx + 1)))
    }
}
