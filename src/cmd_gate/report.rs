//! The gate's verdict for people (a table), for a pull request (Markdown)
//! and for CI (JUnit XML).

use std::fmt::Write;

use super::{GateOut, GateRow};
use crate::render::diff::signed;
use crate::render::table::{Table, bytes};

/// `+12.00 MiB (+3.1%)`.
fn change(r: &GateRow) -> String {
    let pct = r.reserved_delta_ratio.map_or(String::new(), |x| {
        format!(
            " ({}{:.1}%)",
            if x < 0.0 { "-" } else { "+" },
            x.abs() * 100.0
        )
    });
    format!("{}{pct}", signed(r.reserved_delta_bytes))
}

fn card(c: &Option<String>) -> String {
    c.clone().unwrap_or_else(|| "none".into())
}

/// What grew, a line each.
fn grew_lines(r: &GateRow) -> Vec<String> {
    r.grew
        .iter()
        .map(|g| format!("{} {}", signed(g.delta_bytes), g.key))
        .collect()
}

/// The table and the verdict.
pub(super) fn human(out: &GateOut) {
    let mut t = Table::new(vec![
        "setting".into(),
        "baseline".into(),
        "candidate".into(),
        "change".into(),
        "waste".into(),
        "smallest card".into(),
        "verdict".into(),
    ])
    .left(0);
    for r in &out.rows {
        t.row(vec![
            r.label(),
            bytes(r.baseline_peak_reserved_bytes),
            bytes(r.candidate_peak_reserved_bytes),
            change(r),
            signed(r.waste_delta_bytes),
            format!(
                "{} → {}",
                card(&r.baseline_smallest_card),
                card(&r.candidate_smallest_card)
            ),
            if r.passed {
                "pass".into()
            } else {
                "FAIL".into()
            },
        ]);
    }
    outln!(
        "memory gate: {} against {} (peak reserved may grow by at most {})",
        out.candidate,
        out.baseline,
        out.max_increase
    );
    out!("{}", t.render());
    for r in &out.rows {
        let lines = grew_lines(r);
        if let Some(why) = &r.reason {
            outln!("{}: {why}", r.label());
        }
        if !lines.is_empty() {
            outln!(
                "{}: what grew at the peak (by {}):",
                r.label(),
                r.grouped_by.replace('_', " ")
            );
            for l in lines {
                outln!("  {l}");
            }
        }
    }
    outln!("{}", if out.passed { "PASS" } else { "FAIL" });
}

/// The summary for a pull-request comment.
pub(super) fn markdown(out: &GateOut) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "### vramlab memory gate: {}\n",
        if out.passed { "✅ pass" } else { "❌ FAIL" }
    );
    let _ = writeln!(
        s,
        "`{}` against the baseline `{}`; peak reserved may grow by at most {}{}.\n",
        out.candidate,
        out.baseline,
        out.max_increase,
        out.card
            .as_ref()
            .map_or(String::new(), |c| format!(", on {c}"))
    );
    s.push_str("| setting | baseline | candidate | change | waste | smallest card | verdict |\n");
    s.push_str("|---|---:|---:|---:|---:|---|---|\n");
    for r in &out.rows {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} → {} | {} |",
            r.label(),
            bytes(r.baseline_peak_reserved_bytes),
            bytes(r.candidate_peak_reserved_bytes),
            change(r),
            signed(r.waste_delta_bytes),
            card(&r.baseline_smallest_card),
            card(&r.candidate_smallest_card),
            if r.passed { "pass" } else { "**FAIL**" }
        );
    }
    for r in &out.rows {
        if let Some(why) = &r.reason {
            let _ = writeln!(s, "\n**`{}`**: {why}.", r.label());
        }
        let lines = grew_lines(r);
        if !lines.is_empty() {
            let _ = writeln!(
                s,
                "\n<details><summary>What grew at the peak under <code>{}</code> (by {})</summary>\n",
                r.label(),
                r.grouped_by.replace('_', " ")
            );
            for l in lines {
                let _ = writeln!(s, "- `{l}`");
            }
            s.push_str("\n</details>\n");
        }
    }
    s
}

/// XML text with its five special characters escaped.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The verdict as JUnit XML: one test case per setting.
pub(super) fn junit(out: &GateOut) -> String {
    let failures = out.rows.iter().filter(|r| !r.passed).count();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"vramlab gate\" tests=\"{}\" failures=\"{failures}\">",
        out.rows.len()
    );
    let _ = writeln!(
        s,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\">",
        xml(&out.candidate),
        out.rows.len()
    );
    for r in &out.rows {
        let _ = write!(
            s,
            "    <testcase classname=\"vramlab.gate\" name=\"peak reserved under {}\"",
            xml(&r.label())
        );
        match &r.reason {
            None => s.push_str("/>\n"),
            Some(why) => {
                let detail = grew_lines(r).join("\n");
                let _ = writeln!(
                    s,
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                    xml(why),
                    xml(&format!(
                        "{} → {} ({})\n{detail}",
                        bytes(r.baseline_peak_reserved_bytes),
                        bytes(r.candidate_peak_reserved_bytes),
                        change(r)
                    ))
                );
            }
        }
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    s
}
