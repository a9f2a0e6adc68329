//! OOM points for people (a table per setting, the notes on the state at
//! the first entry and on capacities that do not fit above the answer) and
//! for programs (the [`OomPoint`]s as JSON).

use anyhow::Result;
use vramlab_replay::OomPoint;
use vramlab_replay::gpus::{CONTEXT_ALLOWANCE, smallest_gpu_for};

use crate::render::table::{Table, bytes};

/// Prints the OOM points: JSON, or the table and its notes.
pub fn print_oom_points(results: &[OomPoint], json: bool) -> Result<()> {
    if json {
        return crate::render::json::print(results);
    }
    out!("{}", table(results));
    for r in results {
        if let Some(b) = r.start_reserved_bytes {
            outln!(
                "\nunder {}, the state at the first entry alone reserves {} ({} start)",
                r.setting,
                bytes(b),
                r.start.map_or("empty", |s| s.name())
            );
        }
    }
    for r in results {
        if !r.not_monotone_at.is_empty() {
            let list: Vec<String> = r.not_monotone_at.iter().map(|&c| bytes(c)).collect();
            outln!(
                "\nnote: under {}, feasibility is not monotone: it fits {} but not {} (less memory changes which blocks are cached and released)",
                r.setting,
                bytes(r.min_capacity),
                list.join(", ")
            );
        }
    }
    outln!(
        "\n(smallest card: the smallest GPU of `vramlab gpus` whose memory, less {} for the CUDA context, holds it)",
        bytes(CONTEXT_ALLOWANCE)
    );
    Ok(())
}

/// One row per setting: the smallest capacity and card, the bounds, and
/// whether the answer was checked.
fn table(results: &[OomPoint]) -> String {
    let mut tab = Table::new(vec![
        "setting".into(),
        "smallest capacity".into(),
        "smallest card".into(),
        "live peak (bound)".into(),
        "reserved, unlimited".into(),
        "checked".into(),
        "replays".into(),
    ]);
    for r in results {
        tab.row(vec![
            r.setting.clone(),
            bytes(r.min_capacity),
            smallest_gpu_for(r.min_capacity).map_or("none listed".into(), |g| g.name.to_string()),
            bytes(r.lower_bound),
            bytes(r.unlimited_peak_reserved),
            if r.verified {
                "yes".into()
            } else {
                "NO".into()
            },
            r.replays.to_string(),
        ]);
    }
    tab.render()
}
