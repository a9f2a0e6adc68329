//! The "upgrade" section: what moving to another PyTorch release does to
//! every setting of the job (`report --torch-version A --torch-version B`),
//! each release's advice, and a table of the settings whose figures move.

use std::fmt::Write as _;

use vramlab_replay::UpgradeAdvice;

use super::escape::{esc, esc_breakable};
use crate::units::{fmt_int, format_bytes};

/// Rows shown beyond the settings whose peak reserved moves.
const UNCHANGED_SHOWN: usize = 5;

/// Writes the section (nothing without an upgrade).
pub(super) fn write_upgrade(h: &mut String, u: Option<&UpgradeAdvice>) {
    let Some(u) = u else {
        return;
    };
    let (a, b) = (esc(&u.from_torch), esc(&u.to_torch));
    let _ = writeln!(
        h,
        "<h2 id=\"upgrade\">Upgrading PyTorch {a} → {b}</h2>\n<p>The same trace replayed under each release's allocator rules, every setting of the grid under both. The rest of the report is under PyTorch {a}.</p>"
    );
    h.push_str("<ul class=\"upgrade\">\n");
    for line in u.summary() {
        let _ = writeln!(h, "<li>{}</li>", esc(&line));
    }
    h.push_str("</ul>\n");
    if u.settings.is_empty() {
        h.push_str("<p>No setting was replayed under both releases.</p>\n");
        return;
    }
    let fits = u.settings.iter().any(|r| r.fit.is_some());
    let _ = write!(
        h,
        "<table id=\"upgrade-settings\">\n<thead><tr><th>setting</th><th>peak reserved, torch {a}</th><th>peak reserved, torch {b}</th><th>change</th><th>device allocs, {a} → {b}</th>{}</tr></thead>\n<tbody>\n",
        if fits { "<th>fits the card</th>" } else { "" }
    );
    // Settings that move first (in the first release's ranking order),
    // then a few that do not, with a count of the rest.
    let moved = u.settings.iter().filter(|r| r.delta_bytes() != 0);
    let same: Vec<_> = u.settings.iter().filter(|r| r.delta_bytes() == 0).collect();
    for r in moved.chain(same.iter().copied().take(UNCHANGED_SHOWN)) {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td>",
            esc_breakable(&r.setting),
            format_bytes(r.peak_reserved_before_bytes),
            format_bytes(r.peak_reserved_after_bytes),
            esc(&r.delta_words()),
            fmt_int(r.device_allocs_before),
            fmt_int(r.device_allocs_after),
        );
        if fits {
            let _ = write!(h, "<td>{}</td>", r.fit.map_or("", |f| f.words()));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
    if same.len() > UNCHANGED_SHOWN {
        let _ = writeln!(
            h,
            "<p>{} more settings reserve the same under both releases.</p>",
            fmt_int((same.len() - UNCHANGED_SHOWN) as u64)
        );
    }
}
