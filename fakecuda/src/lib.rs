//! A fake CUDA device for PyTorch's own caching allocator: the CUDA runtime
//! (`libcudart.so.N`), the driver entry points PyTorch looks up
//! (`libcuda.so.1`) and NVML (`libnvidia-ml.so.1`) in one shared library,
//! so that the unmodified `libc10_cuda.so` of an official PyPI torch wheel
//! runs its allocator on a machine without a GPU. This is vramlab's
//! oracle: PyTorch's decisions, judged on any machine.
//!
//! Nothing here touches device memory. Addresses, capacity and the
//! virtual-memory calls of expandable segments are answered by vramlab's
//! own [`SimDevice`](vramlab_allocator::SimDevice) — the same placement
//! model (`driver` or `ascending`) and accounting a simulated replay uses —
//! so the oracle and vramlab differ only where PyTorch's decisions and
//! vramlab's do. Kernels do not run (launches succeed and do nothing),
//! events are complete at once unless `VRAMLAB_FAKECUDA_EVENTS` says they
//! wait for a synchronize (`events.rs`); copies and sets keep small values
//! (`values.rs`), so that what a script sends to the device and reads back
//! round-trips and every other read is zero.
//!
//! How it is loaded (`vramlab_oracle` does all of this): the library is
//! copied into a folder under the soname of the wheel's runtime
//! (`libcudart.so.13` or `.12`), with `libcuda.so.1` and
//! `libnvidia-ml.so.1` as symbolic links to the same file; the process runs
//! with `LD_PRELOAD` naming the copy (so the wheels' `DT_NEEDED` binds to
//! it before their RPATH finds the real runtime) and `LD_LIBRARY_PATH`
//! naming the folder (so PyTorch's `dlopen("libcuda.so.1")` and
//! `dlopen("libnvidia-ml.so.1")` open the same file, which the dynamic
//! loader recognises as already loaded: one instance, one state).
//!
//! NVIDIA's own libraries run on it unchanged (the wheels' `nvidia-*`
//! packages: cuBLAS, cuBLASLt, cuDNN, and Triton's launcher), because the
//! driver is faked far enough for their host code: `cuGetProcAddress` of
//! every version resolves through the driver's own table of versioned
//! entry points (`driver_table.rs`), the private export tables the CUDA
//! runtime statically linked into those libraries asks for
//! (`export_tables.rs`), module and library loading with function
//! attributes and occupancy (`modules.rs`), the driver's memory calls
//! (`driver_memory.rs`, on the same device as `cudaMalloc`) and its
//! streams, events and contexts (`driver_streams.rs`). So their workspace
//! sizes and algorithm choices are theirs, made for the card the device
//! reports; only the kernels do nothing.
//!
//! Every other export — of the runtimes of CUDA 12.4–13.0 (`stubs.rs`) and
//! of the driver (`driver_table.rs`) — is a stub that returns 801 (not
//! supported) and says so once on stderr: that is where a run needs more
//! fakes.
//!
//! Settings come from the environment (read once, at the first call):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `VRAMLAB_FAKECUDA_DEVICES` | device count | 1 |
//! | `VRAMLAB_FAKECUDA_CAPACITY` | bytes each device can hold | unlimited |
//! | `VRAMLAB_FAKECUDA_TOTAL` | total memory `cudaMemGetInfo` reports | the capacity, else 1 TiB |
//! | `VRAMLAB_FAKECUDA_PLACEMENT` | `driver` or `ascending` | `driver` |
//! | `VRAMLAB_FAKECUDA_NAME` | device name | `NVIDIA H200` |
//! | `VRAMLAB_FAKECUDA_CARD` | the card's other properties: `h200`, `h100-80gb`, `h100-94gb`, `a100`, `l4`, `rtx4090` (`cards.rs`) | `h200` |
//! | `VRAMLAB_FAKECUDA_RUNTIME_VERSION` | `cudaRuntimeGetVersion` (12040, 13000, …); also picks the struct layouts | 13000 |
//! | `VRAMLAB_FAKECUDA_LOG` | file that gets one line per device call | none |
//! | `VRAMLAB_FAKECUDA_QUIET` | no "not faked" lines on stderr | off |
//! | `VRAMLAB_FAKECUDA_EVENTS` | when a recorded event completes: `complete` (at once), `sync` (when its stream, the event or the device is synchronized), `never` (only at a device synchronize) (`events.rs`) | `complete` |
//! | `VRAMLAB_FAKECUDA_HOST_CAPACITY` | bytes of pinned host memory (`cudaHostAlloc`ed and `cudaHostRegister`ed) live at once; past it those calls fail with 2 (`host_memory.rs`) | unlimited |
//! | `VRAMLAB_FAKECUDA_SHARED` | a file (e.g. under `/dev/shm`) that makes every process naming it share one device: each one's `cudaMalloc` and `cuMemCreate` count the memory the others hold, `cudaMemGetInfo` reports the device's free memory at that moment; the first process sets the device count, capacity, total and placement, and a later one whose settings differ is refused (its device memory calls fail with 3) (`shared.rs`) | none: a device of the process's own |
//!
//! The log lines are `EVENT KIND DEVICE PTR SIZE` (`malloc`, `free`,
//! `reserve`, `release`, `map`, `unmap`; `EVENT` is the last value given to
//! [`vramlab_fakecuda_mark`], or `-`). On a shared device each process
//! still logs its own calls alone: give each its own file.
//!
//! Its surface is the C ABI (the `#[no_mangle] pub extern "C"` functions,
//! exported whatever module they are in); every module is private, and
//! the Rust names at the root are the two calls the oracle's script makes
//! besides CUDA's, [`vramlab_fakecuda_mark`] and [`vramlab_fakecuda_flush`].

#![allow(non_snake_case)]

mod cards;
mod config;
mod driver;
mod driver_memory;
mod driver_streams;
mod driver_table;
mod entry;
mod errors;
mod events;
mod export_tables;
mod ffi;
mod host_memory;
mod launch;
mod memory;
mod modules;
mod nvml;
mod props;
mod runtime_device;
mod shared;
mod state;
mod streams;
mod stubs;
mod values;
mod vmm;

pub use state::{vramlab_fakecuda_flush, vramlab_fakecuda_mark};
