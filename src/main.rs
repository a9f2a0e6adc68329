//! `vramlab`: replay GPU allocation traces through PyTorch's caching
//! allocator (and other policies) on a simulated GPU.

mod cmd_conf;
mod cmd_fidelity;
mod cmd_replay;
mod common;
mod table;

use clap::{Parser, Subcommand};

/// Replay GPU allocation traces through PyTorch's CUDA caching allocator on a
/// simulated GPU: peak reserved memory, fragmentation and OOM points under
/// any PYTORCH_ALLOC_CONF setting, without a GPU.
#[derive(Debug, Parser)]
#[command(name = "vramlab", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a trace under one or more allocator settings and report memory.
    Replay(cmd_replay::ReplayArgs),
    /// Validate a PYTORCH_ALLOC_CONF string and explain what it does.
    Conf(cmd_conf::ConfArgs),
    /// Replay a PyTorch memory snapshot under its recorded settings and
    /// compare every allocation address and segment decision with PyTorch's.
    Fidelity(cmd_fidelity::FidelityArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(a) => cmd_replay::run(a),
        Command::Conf(a) => cmd_conf::run(a),
        Command::Fidelity(a) => cmd_fidelity::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}
