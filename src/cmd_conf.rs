//! `vramlab conf`: validate a settings string and explain it.

use anyhow::Result;
use clap::Args;
use vramlab_allocator::{AllocConf, TorchVersion};

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
        crate::render::conf::print_env_source(var);
        c
    } else {
        let s = args.conf.clone().unwrap_or_default();
        AllocConf::parse(&s, v)?
    };
    let sizes = if args.sizes.is_empty() {
        default_sizes()
    } else {
        args.sizes.clone()
    };
    crate::render::conf::print_conf(&conf, &sizes);
    Ok(())
}

/// The request sizes shown without `--size`.
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
