//! `vramlab oracle` rows: a table with the differences spelled out, or JSON.

use vramlab_oracle::OracleRow;

use crate::render::table::{Table, bytes};

fn pair(a: u64, b: u64, f: fn(u64) -> String) -> String {
    if a == b {
        f(a)
    } else {
        format!("{} vs {}", f(a), f(b))
    }
}

/// A count PyTorch may not report (releases before 2.3): `- vs B`.
fn pair_opt(a: Option<u64>, b: u64) -> String {
    match a {
        Some(a) => pair(a, b, |v| v.to_string()),
        None => format!("- vs {b}"),
    }
}

/// The rows as a table (PyTorch first, then vramlab, where they differ),
/// then one line per differing row with its first divergent device call.
pub fn human(rows: &[OracleRow]) -> String {
    let mut t = Table::new(vec![
        "trace".into(),
        "setting".into(),
        "torch".into(),
        "peak reserved".into(),
        "peak allocated".into(),
        "cudaMalloc".into(),
        "cudaFree".into(),
        "retries".into(),
        "verdict".into(),
    ])
    .left(1)
    .left(2)
    .left(8);
    let n = |v: u64| v.to_string();
    for r in rows {
        t.row(vec![
            r.trace.clone(),
            r.setting.clone(),
            r.torch_version.clone(),
            pair(
                r.torch_peak_reserved_bytes,
                r.vramlab_peak_reserved_bytes,
                bytes,
            ),
            pair(
                r.torch_peak_allocated_bytes,
                r.vramlab_peak_allocated_bytes,
                bytes,
            ),
            pair_opt(r.torch_num_device_alloc, r.vramlab_num_device_alloc),
            pair_opt(r.torch_num_device_free, r.vramlab_num_device_free),
            pair(r.torch_num_alloc_retries, r.vramlab_num_alloc_retries, n),
            if r.exact {
                "exact".into()
            } else {
                "DIFFERS".into()
            },
        ]);
    }
    let mut out = t.render();
    let host: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let (tp, tn) = (r.torch_host_peak_bytes?, r.torch_host_num_alloc?);
            let (vp, vn) = (
                r.vramlab_host_peak_bytes.unwrap_or(0),
                r.vramlab_host_num_alloc.unwrap_or(0),
            );
            Some(format!(
                "  {} [{}]: peak pinned {}, cudaHostAlloc {}",
                r.trace,
                r.setting,
                pair(tp, vp, bytes),
                pair(tn, vn, |v| v.to_string())
            ))
        })
        .collect();
    if !host.is_empty() {
        out.push_str("\npinned host memory (host_memory_stats()):\n");
        out.push_str(&host.join("\n"));
        out.push('\n');
    }
    let exact = rows.iter().filter(|r| r.exact).count();
    out.push_str(&format!(
        "\n{exact} of {} rows exact (PyTorch's own allocator on the fake device vs vramlab's replay; \"A vs B\" is PyTorch vs vramlab; \"-\": a count the release does not report)\n",
        rows.len()
    ));
    for r in rows.iter().filter(|r| !r.exact) {
        let what = if r.differing.is_empty() {
            String::new()
        } else {
            format!(" ({} differ)", r.differing.join(", "))
        };
        let first = r
            .first_difference
            .as_deref()
            .unwrap_or("the device calls are the same");
        out.push_str(&format!("  {} [{}]{what}: {first}\n", r.trace, r.setting));
    }
    out
}
