//! `vramlab conf`: validate a settings string and explain it.

use anyhow::Result;
use clap::Args;
use vramlab_allocator::conf::ROUNDUP_INTERVALS;
use vramlab_allocator::policies::native::rounding::{allocation_size, round_size};
use vramlab_allocator::{AllocConf, TorchVersion};

use crate::render::table::{Table, bytes};

/// Arguments of `vramlab conf`.
#[derive(Debug, Args)]
pub struct ConfArgs {
    /// The settings string, as you would export it in PYTORCH_ALLOC_CONF.
    /// Omit it (with --from-env) to explain the environment's settings.
    #[arg(value_name = "STR")]
    conf: Option<String>,
    /// Read the string from the environment, with the target version's
    /// precedence between PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF.
    #[arg(long)]
    from_env: bool,
    /// PyTorch release whose parser and rules apply.
    #[arg(long = "torch-version", value_name = "X.Y", default_value_t = TorchVersion::NEWEST)]
    torch_version: TorchVersion,
    /// Request sizes to show the rounding of (bytes or sizes like 700MiB).
    #[arg(long = "size", value_name = "SIZE", value_parser = crate::args::parse_size_arg)]
    sizes: Vec<u64>,
}

/// Runs the command.
pub fn run(args: ConfArgs) -> Result<()> {
    let v = args.torch_version;
    let conf = if args.from_env {
        let (c, var) = AllocConf::from_env(v, |k| std::env::var(k).ok())?;
        match var {
            Some(var) => outln!("read from {var}"),
            None => outln!("no allocator settings in the environment"),
        }
        c
    } else {
        let s = args.conf.clone().unwrap_or_default();
        AllocConf::parse(&s, v)?
    };
    outln!("settings: {:?} (PyTorch {v} rules)", conf.raw);
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
    for (k, meaning) in conf.effective_rows() {
        outln!("  {k:<34} {meaning}");
    }
    outln!();
    outln!("How requests are rounded and which segment a new one gets:");
    let sizes = if args.sizes.is_empty() {
        default_sizes()
    } else {
        args.sizes.clone()
    };
    let mut t = Table::new(vec![
        "request".into(),
        "rounded".into(),
        "pool".into(),
        "new segment".into(),
        "interval".into(),
        "divisions".into(),
    ]);
    for n in sizes {
        let s = round_size(&conf, n);
        let idx = vramlab_allocator::policies::native::rounding::interval_index(n);
        let d = divisions(&conf, idx);
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
                bytes(allocation_size(&conf, s))
            },
            interval_label(idx),
            if d > 1 { d.to_string() } else { "-".into() },
        ]);
    }
    out!("{}", t.render());
    Ok(())
}

/// `roundup_power2_divisions` of interval `idx` (the last for larger ones).
// Indexing: `idx` is clamped to `ROUNDUP_INTERVALS - 1`, and the table is a
// `[u32; ROUNDUP_INTERVALS]`.
#[allow(clippy::indexing_slicing)]
fn divisions(conf: &AllocConf, idx: usize) -> u32 {
    conf.roundup_power2_divisions[idx.min(ROUNDUP_INTERVALS - 1)]
}

fn default_sizes() -> Vec<u64> {
    const MIB: u64 = 1 << 20;
    vec![
        1200,
        600_000,
        MIB + 1,
        2_621_440,
        10 * MIB - 1,
        30 * MIB + 1,
        100 * MIB + 1,
        700 * MIB + 1,
        (1 << 30) + 1,
    ]
}

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
