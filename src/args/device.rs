//! `--gpu NAME`, `--capacity SIZE` and `--placement`: the simulated card.

use clap::Args;
use vramlab_allocator::Placement;
use vramlab_allocator::format::parse_size;
use vramlab_replay::gpus::{Gpu, find_gpu};

/// The simulated device: a card by name, or a capacity in bytes.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// The GPU the job runs on, by name (`vramlab gpus` lists them: h100-80gb,
    /// a100-40gb, rtx4090, …): its memory less the CUDA context.
    #[arg(long, value_name = "NAME", value_parser = parse_gpu_arg, conflicts_with = "capacity")]
    pub gpu: Option<&'static Gpu>,
    /// Device capacity, exact: bytes or a size like 24GiB, 80GB (= 80·10^9
    /// bytes, not 80 GiB), 512MiB. For a card, prefer --gpu (default:
    /// unlimited).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub capacity: Option<u64>,
    /// Where the simulated driver puts new segments: `driver` (the CUDA
    /// driver's order as measured on an H200, driver 580: new regions
    /// downwards) or `ascending` (each above the last, as older drivers
    /// did). Up to 2.11 PyTorch breaks ties between equal free blocks by
    /// address, so the order can change the result; when it does, `replay`,
    /// `recommend` and `report` give the peak under both
    /// (docs/driver-placement.md). From 2.12 ties go by allocation order and
    /// the order no longer matters.
    #[arg(long, value_name = "ORDER", default_value = "driver", value_parser = parse_placement_arg)]
    pub placement: Placement,
}

impl DeviceArgs {
    /// The capacity in bytes (`None` = unlimited).
    pub fn bytes(&self) -> Option<u64> {
        self.capacity.or(self.gpu.map(Gpu::usable_bytes))
    }

    /// How the capacity was given, for people: `rtx4090 (23.49 GiB
    /// usable)` or `24.00 GiB`.
    pub fn describe(&self) -> Option<String> {
        match (self.gpu, self.capacity) {
            (Some(g), _) => Some(format!(
                "{} ({} usable of {})",
                g.name,
                crate::render::table::bytes(g.usable_bytes()),
                crate::render::table::bytes(g.total_bytes())
            )),
            (None, Some(c)) => Some(crate::render::table::bytes(c)),
            (None, None) => None,
        }
    }
}

/// clap value parser for `--gpu NAME`.
pub fn parse_gpu_arg(s: &str) -> Result<&'static Gpu, String> {
    find_gpu(s)
}

/// clap value parser for `--placement`.
pub fn parse_placement_arg(s: &str) -> Result<Placement, String> {
    s.parse()
}

/// clap value parser for sizes.
pub fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// `--host-ram SIZE` and `--ranks-per-node N`: the host the processes pin
/// on (the commands that replay pinned host memory: replay, recommend,
/// report).
#[derive(Debug, Clone, Args)]
pub struct HostArgs {
    /// The node's RAM that pinned host memory may take, for all the ranks
    /// on it (a size like 2TiB): a pinned request beyond a rank's share is
    /// a host out-of-memory, as PyTorch raises it (no retry). Default: no
    /// limit.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub host_ram: Option<u64>,
    /// Processes (ranks) per node that pin memory alike: the pinned host
    /// figures are also given per node, and each rank's share of
    /// --host-ram is 1/N of it.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub ranks_per_node: u32,
}

impl HostArgs {
    /// The pinned host bytes one process may hold: its share of
    /// `--host-ram` (`None`: no limit).
    pub fn limit(&self) -> Option<u64> {
        self.host_ram.map(|r| r / u64::from(self.ranks_per_node))
    }

    /// Both, for the analyses.
    pub fn limits(&self) -> vramlab_replay::HostLimits {
        vramlab_replay::HostLimits {
            host_ram: self.host_ram,
            ranks_per_node: self.ranks_per_node,
        }
    }
}
