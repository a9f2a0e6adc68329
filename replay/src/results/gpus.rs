//! The named cards as `vramlab gpus --json` prints them.

use serde::Serialize;

use crate::gpus::{GPUS, Gpu};

/// A card `--gpu NAME` knows, and the memory PyTorch can use on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuMemory {
    /// Its `--gpu` name.
    pub name: &'static str,
    /// The card.
    pub description: &'static str,
    /// The memory the driver reports.
    pub total_bytes: u64,
    /// What PyTorch can use (less the CUDA context).
    pub usable_bytes: u64,
}

impl From<&Gpu> for GpuMemory {
    fn from(g: &Gpu) -> Self {
        GpuMemory {
            name: g.name,
            description: g.description,
            total_bytes: g.total_bytes(),
            usable_bytes: g.usable_bytes(),
        }
    }
}

/// Every named card, in the order `vramlab gpus` lists them.
pub fn gpu_memory() -> Vec<GpuMemory> {
    GPUS.iter().map(GpuMemory::from).collect()
}
