//! The cards the fake device can be: what `cudaGetDeviceProperties` and
//! `cudaDeviceGetAttribute` report beyond name and memory, so that PyTorch
//! and NVIDIA's libraries choose kernels, tile sizes and workspaces as on
//! that card. Chosen by `VRAMLAB_FAKECUDA_CARD` (`vramlab record --gpu`).
//!
//! The figures are the cards' published specifications (NVIDIA's data
//! sheets and the CUDA programming guide's table of compute capabilities:
//! shared memory per SM and per block, threads and blocks per SM), not
//! read from a card; the GPU issue checks them against one.

/// One card model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Card {
    /// The `VRAMLAB_FAKECUDA_CARD` value.
    pub key: &'static str,
    /// Compute capability.
    pub major: i32,
    /// Compute capability, minor.
    pub minor: i32,
    /// Streaming multiprocessors.
    pub sm_count: i32,
    /// Boost clock, kHz.
    pub clock_khz: i32,
    /// Memory clock, kHz.
    pub memory_clock_khz: i32,
    /// Memory bus width, bits.
    pub bus_width: i32,
    /// L2 cache, bytes.
    pub l2_bytes: i32,
    /// Shared memory per SM, bytes.
    pub shared_per_sm: i32,
    /// Shared memory a block may opt in to, bytes.
    pub shared_optin: i32,
    /// Resident threads per SM.
    pub threads_per_sm: i32,
    /// Resident blocks per SM.
    pub blocks_per_sm: i32,
    /// Thread block clusters (compute capability 9.0 and later).
    pub clusters: bool,
    /// ECC memory.
    pub ecc: bool,
}

const HOPPER: Card = Card {
    key: "h200",
    major: 9,
    minor: 0,
    sm_count: 132,
    clock_khz: 1_980_000,
    memory_clock_khz: 3_201_000,
    bus_width: 6144,
    l2_bytes: 52_428_800,
    shared_per_sm: 233_472,
    shared_optin: 232_448,
    threads_per_sm: 2048,
    blocks_per_sm: 32,
    clusters: true,
    ecc: true,
};

const ADA: Card = Card {
    key: "l4",
    major: 8,
    minor: 9,
    sm_count: 58,
    clock_khz: 2_040_000,
    memory_clock_khz: 6_251_000,
    bus_width: 192,
    l2_bytes: 50_331_648,
    shared_per_sm: 102_400,
    shared_optin: 101_376,
    threads_per_sm: 1536,
    blocks_per_sm: 24,
    clusters: false,
    ecc: true,
};

/// Every card, the default first.
pub(crate) const CARDS: &[Card] = &[
    HOPPER,
    Card {
        key: "h100-80gb",
        memory_clock_khz: 2_619_000,
        bus_width: 5120,
        ..HOPPER
    },
    Card {
        key: "h100-94gb",
        memory_clock_khz: 2_619_000,
        ..HOPPER
    },
    Card {
        key: "a100",
        major: 8,
        minor: 0,
        sm_count: 108,
        clock_khz: 1_410_000,
        memory_clock_khz: 1_593_000,
        bus_width: 5120,
        l2_bytes: 41_943_040,
        shared_per_sm: 167_936,
        shared_optin: 166_912,
        threads_per_sm: 2048,
        blocks_per_sm: 32,
        clusters: false,
        ecc: true,
    },
    ADA,
    Card {
        key: "rtx4090",
        sm_count: 128,
        clock_khz: 2_520_000,
        memory_clock_khz: 10_501_000,
        bus_width: 384,
        l2_bytes: 75_497_472,
        ecc: false,
        ..ADA
    },
];

/// The card named `key`, if there is one.
pub(crate) fn find(key: &str) -> Option<&'static Card> {
    CARDS.iter().find(|c| c.key == key)
}

/// The card this process's fake device is.
pub(crate) fn card() -> &'static Card {
    static CARD: std::sync::OnceLock<&'static Card> = std::sync::OnceLock::new();
    CARD.get_or_init(|| {
        // Read here, not through the state's lock: attributes are asked for
        // while it is held.
        let key = std::env::var("VRAMLAB_FAKECUDA_CARD").unwrap_or_default();
        let key = if key.trim().is_empty() {
            "h200"
        } else {
            key.trim()
        };
        find(key).unwrap_or_else(|| {
            let known: Vec<&str> = CARDS.iter().map(|c| c.key).collect();
            eprintln!(
                "[vramlab-fakecuda] VRAMLAB_FAKECUDA_CARD={key} is not one of {}; using h200",
                known.join(", ")
            );
            &HOPPER
        })
    })
}
