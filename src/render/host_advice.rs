//! The pinned host part of `recommend`: what the host allocator pins for
//! what was asked, and the `pinned_*` setting that pins least.

use vramlab_replay::{HostAdvice, Recommendation, Verdict};

use crate::render::table::{Table, bytes, count};

/// Prints `h`; `rec` gives the device setting to export with it.
pub fn print_host_advice(h: &HostAdvice, rec: &Recommendation) {
    let d = &h.default;
    let asked = h.peak_requested_bytes;
    let wasted = d.peak_pinned_bytes.saturating_sub(asked);
    let node = if h.ranks_per_node > 1 {
        format!(
            " ({} per node of {} ranks)",
            bytes(d.node_peak_pinned_bytes),
            h.ranks_per_node
        )
    } else {
        String::new()
    };
    outln!(
        "Pinned host memory: {} pinned at the peak for {} asked ({:.2}x; {} more){node}.",
        bytes(d.peak_pinned_bytes),
        bytes(asked),
        d.peak_pinned_bytes as f64 / asked.max(1) as f64,
        bytes(wasted),
    );
    if let (Some(false), Some(share)) = (d.fits, h.share_bytes) {
        outln!(
            "Under the defaults the host's RAM runs out: a rank needs {}, {} more than the {} it may pin (--host-ram / --ranks-per-node).",
            bytes(d.peak_pinned_bytes),
            bytes(d.peak_pinned_bytes.saturating_sub(share)),
            bytes(share)
        );
    }
    if h.sizes_are_blocks {
        outln!(
            "The trace's host sizes are PyTorch's blocks (a snapshot's host_traces), not the requests: what rounding wastes is not in it. Record with `vramlab record` to measure it."
        );
    }
    match &h.best {
        None if h.tried.len() == 1 => match &h.upgrade {
            Some((release, b)) => outln!(
                "This release has no safe key for it (pinned_max_round_threshold_mb came in 2.13, whose cache can then hand a request a smaller block: a PyTorch bug fixed in 2.14). Under {release}'s rules {} would pin {} ({} less per process).",
                b.setting,
                bytes(b.peak_pinned_bytes),
                bytes(d.peak_pinned_bytes.saturating_sub(b.peak_pinned_bytes))
            ),
            None => outln!("This release has no safe key for it, and no later one pins less."),
        },
        None => outln!("No pinned_* setting pins less: keep the defaults."),
        Some(b) => {
            let saved = h.saving_bytes();
            let calls = if b.host_allocs_from_cuda == d.host_allocs_from_cuda {
                format!(
                    "the same {} cudaHostAlloc calls",
                    count(d.host_allocs_from_cuda)
                )
            } else {
                format!(
                    "{} cudaHostAlloc calls instead of {}",
                    count(b.host_allocs_from_cuda),
                    count(d.host_allocs_from_cuda)
                )
            };
            outln!(
                "{} pins {} ({} less per process{}), with {calls}.",
                b.setting,
                bytes(b.peak_pinned_bytes),
                bytes(saved),
                if h.ranks_per_node > 1 {
                    format!(
                        ", {} less per node",
                        bytes(saved.saturating_mul(u64::from(h.ranks_per_node)))
                    )
                } else {
                    String::new()
                },
            );
            let device = rec
                .ranked
                .first()
                .filter(|_| rec.verdict == Verdict::UseSetting)
                .map(|r| r.row.grid_line.clone());
            let settings = match device {
                Some(dev) if !dev.contains('=') => format!("{dev},{}", b.setting),
                _ => b.setting.clone(),
            };
            crate::output::write_stdout(&format!(
                "  {:<11} export PYTORCH_ALLOC_CONF=\"{settings}\"\n",
                "bash"
            ));
        }
    }
    let mut head = vec![
        "pinned setting".to_string(),
        "peak pinned".into(),
        "per node".into(),
        "cudaHostAlloc".into(),
    ];
    if h.share_bytes.is_some() {
        head.push("fits the RAM".into());
    }
    let mut t = Table::new(head);
    for s in &h.tried {
        let mut row = vec![
            s.setting.clone(),
            bytes(s.peak_pinned_bytes),
            bytes(s.node_peak_pinned_bytes),
            count(s.host_allocs_from_cuda),
        ];
        if let Some(f) = s.fits {
            row.push(if f { "yes" } else { "no" }.into());
        }
        t.row(row);
    }
    outln!();
    out!("{}", t.render());
    outln!();
}
