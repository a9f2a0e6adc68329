//! The largest workload that fits, for people (a row per setting) and for
//! programs (the [`FitResult`]s as JSON).

use anyhow::Result;
use vramlab_replay::FitResult;

use crate::render::table::{Table, bytes};

/// What a fit search was over, for the heading and the sizes.
pub struct FitHeading<'a> {
    /// The workload preset's name.
    pub workload: &'a str,
    /// The card's memory.
    pub capacity: u64,
    /// The varied dimension (`batch size`, `resolution (pixels)`, …).
    pub dimension: &'a str,
    /// A searched size times `step` is the size shown (64 for
    /// resolutions, else 1).
    pub step: u64,
}

/// Prints the searches: JSON, or the heading and a row per setting.
pub fn print_fits(results: &[FitResult], h: &FitHeading<'_>, json: bool) -> Result<()> {
    if json {
        return crate::render::json::print(results);
    }
    let step = h.step;
    outln!(
        "{} on {}: the largest {} that fits",
        h.workload,
        bytes(h.capacity),
        h.dimension
    );
    let mut t = Table::new(vec![
        "setting".into(),
        "largest that fits".into(),
        "peak reserved there".into(),
        "first that does not".into(),
    ]);
    for r in results {
        let best = r.max_size;
        let at = best.and_then(|b| r.probes.iter().find(|p| p.size == b));
        let first_bad = r.probes.iter().filter(|p| !p.fits).map(|p| p.size).min();
        t.row(vec![
            r.setting.clone(),
            match best {
                None => "none".into(),
                Some(b) if r.hit_limit => format!(">= {} (limit)", b * step),
                Some(b) => (b * step).to_string(),
            },
            at.map_or("-".into(), |p| bytes(p.peak_reserved_bytes)),
            first_bad.map_or("-".into(), |b| (b * step).to_string()),
        ]);
    }
    out!("{}", t.render());
    Ok(())
}
