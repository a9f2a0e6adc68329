//! The oracle's own pieces, and (ignored by default: they need a torch
//! wheel, ~6 GB, installed by `vramlab oracle --torch 2.11` or CI) PyTorch
//! 2.11 on the fake device reproducing what PyTorch 2.11 measured on an
//! H200 (docs/results/gpu-2026-11-29).

use std::path::PathBuf;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_oracle::fake::{locate, prepare};
use vramlab_oracle::{Installer, JudgeOptions, judge_trace, oracle_trace};
use vramlab_replay::Scenario;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramlab-oracle-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The fake library is copied under the wheel's soname, with the driver
/// and NVML names linked to it; `cargo test --workspace` builds it.
#[test]
fn the_fake_takes_the_wheels_soname() {
    let lib = locate().expect("cargo test --workspace builds libvramlab_fakecuda.so");
    let cache = scratch("soname");
    let dir = prepare(&lib, "libcudart.so.12", &cache).unwrap();
    let bytes = std::fs::read(&dir.runtime).unwrap();
    let needle = b"libcudart.so.12\0";
    assert!(bytes.windows(needle.len()).any(|w| w == needle));
    for alias in ["libcuda.so.1", "libnvidia-ml.so.1"] {
        assert_eq!(
            std::fs::read_link(dir.dir.join(alias)).unwrap(),
            PathBuf::from("libcudart.so.12")
        );
    }
    // Prepared again: nothing to redo, same result.
    let again = prepare(&lib, "libcudart.so.12", &cache).unwrap();
    assert_eq!(std::fs::read(&again.runtime).unwrap(), bytes);
    let err = prepare(&lib, "libcudart.so.1", &cache)
        .unwrap_err()
        .to_string();
    assert!(err.contains("has 14 bytes, the library's has 15"), "{err}");
    let _ = std::fs::remove_dir_all(&cache);
}

/// PyTorch 2.11's allocator on the fake device = PyTorch 2.11 on an H200
/// (docs/results/gpu-2026-11-29/gpt-small-train: 864 MiB in 50 cudaMallocs
/// under the defaults, 780 MiB in 37 maps with expandable segments) =
/// vramlab's replay, device call for device call.
#[test]
#[ignore = "needs torch 2.11 (vramlab oracle --torch 2.11 installs it)"]
fn oracle_torch_2_11_reproduces_the_h200() {
    let interp = Installer::default().ensure("2.11").unwrap();
    let fake = prepare(
        &locate().unwrap(),
        &interp.wheel.soname,
        &scratch("h200-cache"),
    )
    .unwrap();
    let path = repo().join("workloads/data/gpt-small-train.csv");
    let trace = vramlab_replay::Inputs::new([&path]).trace().unwrap();
    let (t, notes) = oracle_trace(&trace);
    assert!(notes.is_empty());
    let v = TorchVersion::new(2, 11);
    let scenarios: Vec<Scenario> = ["", "expandable_segments:True"]
        .iter()
        .map(|c| Scenario::native(AllocConf::parse(c, v).unwrap()))
        .collect();
    let opts = JudgeOptions {
        interp: &interp,
        fake: &fake,
        work: scratch("h200"),
        snapshot_out: None,
        vramlab_rules: v.to_string(),
    };
    let rows = judge_trace("gpt-small-train.csv", &t, &scenarios, &opts, |_| {}).unwrap();
    let got: Vec<(u64, Option<u64>, bool)> = rows
        .iter()
        .map(|r| {
            (
                r.torch_peak_reserved_bytes,
                r.torch_num_device_alloc,
                r.exact,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![(864 << 20, Some(50), true), (780 << 20, Some(37), true)],
        "{rows:#?}"
    );
    assert!(rows[0].torch_version.starts_with("2.11."));
}
