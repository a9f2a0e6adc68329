//! Named GPUs: the memory PyTorch can use on common cards.
//!
//! `total` is the memory the driver reports (`nvidia-smi --query-gpu=
//! memory.total`, which is also `torch.cuda.get_device_properties(0)
//! .total_memory` up to rounding) for the usual board with ECC as shipped.
//! PyTorch cannot use all of it: the CUDA context (driver state, kernels
//! of the loaded libraries) takes some first. vramlab subtracts a fixed
//! [`CONTEXT_ALLOWANCE`] of 512 MiB, about what CUDA 12+ with lazy module
//! loading takes on these cards before the first kernel of cuBLAS/cuDNN is
//! loaded; the real figure depends on the driver, the CUDA version and the
//! libraries used (measure yours: `torch.cuda.mem_get_info()` after the
//! first kernel, or the `device_free` of an OOM entry in a snapshot). Use
//! `--capacity` for an exact byte count.
//!
//! The H200 figure (143,771 MiB) was read on the GPU of
//! docs/results/gpu-2026-11-29; the others are the totals these boards
//! report as commonly published by their vendors and cloud providers.

use vramlab_traces::advice::{Cmd, Opt};

/// Memory the CUDA context takes before PyTorch allocates (512 MiB).
pub const CONTEXT_ALLOWANCE: u64 = 512 << 20;

/// A GPU model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpu {
    /// The name `--gpu` takes (lower case).
    pub name: &'static str,
    /// What it is, for people.
    pub description: &'static str,
    /// Memory the driver reports, MiB.
    pub total_mib: u64,
}

impl Gpu {
    /// Bytes the driver reports.
    pub fn total_bytes(&self) -> u64 {
        self.total_mib << 20
    }

    /// Bytes PyTorch can use: total minus [`CONTEXT_ALLOWANCE`].
    pub fn usable_bytes(&self) -> u64 {
        self.total_bytes().saturating_sub(CONTEXT_ALLOWANCE)
    }
}

/// The table, smallest card first.
pub const GPUS: &[Gpu] = &[
    Gpu {
        name: "t4",
        description: "NVIDIA T4 16 GB",
        total_mib: 15_360,
    },
    Gpu {
        name: "v100-16gb",
        description: "NVIDIA V100 16 GB",
        total_mib: 16_160,
    },
    Gpu {
        name: "a10g",
        description: "NVIDIA A10G 24 GB (AWS g5)",
        total_mib: 23_028,
    },
    Gpu {
        name: "l4",
        description: "NVIDIA L4 24 GB",
        total_mib: 23_034,
    },
    Gpu {
        name: "rtx3090",
        description: "GeForce RTX 3090 24 GB",
        total_mib: 24_576,
    },
    Gpu {
        name: "rtx4090",
        description: "GeForce RTX 4090 24 GB",
        total_mib: 24_564,
    },
    Gpu {
        name: "v100-32gb",
        description: "NVIDIA V100 32 GB",
        total_mib: 32_510,
    },
    Gpu {
        name: "rtx5090",
        description: "GeForce RTX 5090 32 GB",
        total_mib: 32_607,
    },
    Gpu {
        name: "a100-40gb",
        description: "NVIDIA A100 40 GB",
        total_mib: 40_960,
    },
    Gpu {
        name: "l40s",
        description: "NVIDIA L40S 48 GB",
        total_mib: 46_068,
    },
    Gpu {
        name: "h100-80gb",
        description: "NVIDIA H100 80 GB (SXM or PCIe)",
        total_mib: 81_559,
    },
    Gpu {
        name: "a100-80gb",
        description: "NVIDIA A100 80 GB",
        total_mib: 81_920,
    },
    Gpu {
        name: "h100-94gb",
        description: "NVIDIA H100 NVL 94 GB",
        total_mib: 95_830,
    },
    Gpu {
        name: "h200",
        description: "NVIDIA H200 141 GB",
        total_mib: 143_771,
    },
];

/// The card `name` names (case and `-`/`_` insensitive: `H100-80GB`,
/// `h100_80gb`, `rtx4090`).
pub fn find_gpu(name: &str) -> Result<&'static Gpu, String> {
    let norm = |s: &str| {
        s.to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
    };
    let want = norm(name);
    GPUS.iter().find(|g| norm(g.name) == want).ok_or_else(|| {
        format!(
            "unknown GPU '{name}' (known: {}; `{}` lists them; {} takes any size)",
            GPUS.iter().map(|g| g.name).collect::<Vec<_>>().join(", "),
            Cmd::Gpus.alone(),
            Opt::Capacity.bare()
        )
    })
}

/// The smallest card in the table whose usable memory holds `bytes`.
pub fn smallest_gpu_for(bytes: u64) -> Option<&'static Gpu> {
    GPUS.iter()
        .filter(|g| g.usable_bytes() >= bytes)
        .min_by_key(|g| (g.usable_bytes(), g.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_found_in_any_spelling() {
        assert_eq!(find_gpu("H100-80GB").unwrap().name, "h100-80gb");
        assert_eq!(find_gpu("rtx_4090").unwrap().name, "rtx4090");
        let e = find_gpu("h800").unwrap_err();
        assert!(
            e.contains("unknown GPU 'h800'") && e.contains("a100-80gb"),
            "{e}"
        );
    }

    #[test]
    fn usable_memory_is_the_total_less_the_context() {
        let h200 = find_gpu("h200").unwrap();
        assert_eq!(h200.usable_bytes(), (143_771 - 512) << 20);
        for g in GPUS {
            assert!(g.usable_bytes() < g.total_bytes(), "{}", g.name);
        }
    }

    #[test]
    fn the_smallest_card_that_holds_a_job() {
        assert_eq!(smallest_gpu_for(10 << 30).unwrap().name, "t4");
        assert_eq!(smallest_gpu_for(23 << 30).unwrap().name, "rtx4090");
        assert_eq!(smallest_gpu_for(79 << 30).unwrap().name, "h100-80gb");
        assert!(smallest_gpu_for(200 << 30).is_none());
    }
}
