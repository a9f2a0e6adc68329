//! `vramlab`: replay GPU allocation traces through PyTorch's caching
//! allocator (and other policies) on a simulated GPU. The whole program is
//! [`vramlab_cli::run_cli`].

fn main() {
    std::process::exit(vramlab_cli::run_cli(std::env::args_os()));
}
