//! The shared library is built with the CUDA 13 runtime's soname so that a
//! preloaded copy satisfies the wheels' `DT_NEEDED libcudart.so.13`; the
//! oracle writes a copy with another soname of the same length
//! (`libcudart.so.12`) for wheels built against CUDA 12
//! (`patch_soname` in `oracle/src/elf.rs`).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcudart.so.13");
    println!("cargo:rerun-if-changed=build.rs");
}
