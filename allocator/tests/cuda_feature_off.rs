//! Built without the `cuda` feature, the GPU tests of `cuda_device.rs` do
//! not exist; this placeholder makes that visible in the test summary (as
//! one ignored test) instead of silence.

#![cfg(not(feature = "cuda"))]

#[test]
#[ignore = "the GPU tests need the cuda feature: cargo test -p vramlab-allocator --features cuda -- --ignored, on a GPU machine"]
fn gpu_tests_need_the_cuda_feature() {}
