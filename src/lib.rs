//! The `vramlab` command line as a library: [`run_cli`] is the whole
//! program (the `vramlab` binary and the Python package's `vramlab`
//! command call it), [`call`] runs one command in-process with its output
//! captured (the Python API is built on it). Every subcommand lives in its
//! own `cmd_*` module: parse → call the library → render.
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

/// `print!` that ends the process quietly when stdout is closed (e.g. piped
/// into `head`), instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_human(&format!($($arg)*))
    };
}

/// `println!` with the same handling as [`out!`].
macro_rules! outln {
    () => {
        $crate::output::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::write_human(&format!("{}\n", format!($($arg)*)))
    };
}

/// `eprintln!` for notes and progress words: to stderr, or into the
/// captured notes when [`call`] runs the command.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(&format!("{}\n", format!($($arg)*)))
    };
}

mod args;
mod cmd_bench;
mod cmd_bench_check;
mod cmd_colocate;
mod cmd_concat;
mod cmd_conf;
mod cmd_convert;
mod cmd_demo;
mod cmd_diff;
mod cmd_explain;
mod cmd_fidelity;
mod cmd_fit;
mod cmd_gate;
mod cmd_gen;
mod cmd_gpus;
mod cmd_matrix;
mod cmd_oom_point;
mod cmd_oracle;
mod cmd_plan;
mod cmd_recommend;
mod cmd_record;
mod cmd_replay;
mod cmd_replay_cuda;
mod cmd_report;
mod cmd_run_case;
mod cmd_serve_budget;
mod cmd_stats;
mod cmd_sweep;
mod command_table;
mod inputs;
pub mod invoke;
mod job;
pub mod output;
mod progress;
mod render;
mod rereads;
mod scratch;
mod source;

use clap::{Parser, Subcommand};

pub use command_table::{ArgKind, ArgSpec, CommandSpec, command_table, command_table_json};
pub use invoke::{Captured, Failure, FailureKind, Spelling, call, run_cli};

/// This release of vramlab.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Replay GPU allocation traces through PyTorch's CUDA caching allocator on a
/// simulated GPU: peak reserved memory, fragmentation and OOM points under
/// any PYTORCH_ALLOC_CONF setting, without a GPU.
#[derive(Debug, Parser)]
#[command(
    name = "vramlab",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = "Developer commands (not listed above): bench (every policy on the bundled \
                  traces), bench-check (the regression gate; see docs/guide/performance.md)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print tables and prose at full width (by default they fit 100
    /// columns, or COLUMNS when it is set).
    #[arg(long, global = true)]
    wide: bool,
    /// Also print developer counts on stderr (how often a trace was read,
    /// replays per pass).
    #[arg(long, global = true)]
    verbose: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a trace under one or more allocator settings and report memory.
    ///
    /// TRACE may also be a multi-rank job: a folder with a job.json (or the
    /// job.json itself), one trace per rank; the job's answer is its worst
    /// rank, on the card less the memory each rank spends outside the
    /// allocator.
    ///
    /// A native trace (.csv, .csv.gz, .vlt, .vlt.zst) or an RMM log is
    /// replayed while it is read: the read on one thread, every setting on
    /// another, in memory bounded by the allocations live at once rather
    /// than by the trace's length (a snapshot's pickle is parsed as it is
    /// read, but its entries are kept until the replay).
    Replay(cmd_replay::ReplayArgs),
    /// Validate a PYTORCH_ALLOC_CONF string and explain what it does.
    Conf(cmd_conf::ConfArgs),
    /// Replay a PyTorch memory snapshot under its recorded settings and
    /// compare every allocation address and segment decision with PyTorch's.
    Fidelity(cmd_fidelity::FidelityArgs),
    /// Judge vramlab by PyTorch's own allocator: the official wheel of a
    /// release, run on a fake CUDA device on this machine, replays each
    /// trace next to vramlab ("exact", or the first decision that differs).
    Oracle(cmd_oracle::OracleArgs),
    /// Run a script unchanged on a fake GPU and write PyTorch's memory
    /// snapshot of it: PyTorch's allocator and NVIDIA's own libraries
    /// (cuBLAS, cuDNN, Triton) decide every allocation, no GPU needed.
    ///
    /// The script runs under a torch wheel's interpreter (--torch, the
    /// oracle's cached environment, or --python) on vramlab's fake CUDA
    /// device, which reports the card's name, memory and properties.
    /// Kernels do not run: a value the script reads back from the device is
    /// what it sent there, a value known without running kernels (see
    /// --values: `generate` runs to `max_new_tokens`), or zero
    /// (`loss.item()` is 0.0); so control flow that depends on computed
    /// values (early stopping, data-dependent shapes such as `nonzero`) may
    /// take another path than on a GPU.
    Record(cmd_record::RecordArgs),
    /// Replay traces under a grid of settings in parallel (table, CSV, JSON).
    Sweep(cmd_sweep::SweepArgs),
    /// The smallest GPU capacity on which a trace runs without OOM, or
    /// (with --capacity) where and why it runs out.
    ///
    /// TRACE may also be a multi-rank job: a folder with a job.json (or the
    /// job.json itself), one trace per rank; the job's answer is its worst
    /// rank (its smallest capacity, the largest of the ranks'), and the card
    /// it needs with the memory each rank spends outside the allocator.
    OomPoint(cmd_oom_point::OomPointArgs),
    /// Rank settings for a GPU capacity and print the line to export.
    ///
    /// TRACE may also be a multi-rank job: a folder with a job.json (or the
    /// job.json itself), one trace per rank; the job's answer is its worst
    /// rank, on the card less the memory each rank spends outside the
    /// allocator.
    Recommend(cmd_recommend::RecommendArgs),
    /// A serving engine's CUDA graph pool for a list of capture sizes, and
    /// the largest KV cache left on a card, from forwards recorded at a few
    /// batch sizes.
    ServeBudget(cmd_serve_budget::ServeBudgetArgs),
    /// Why a trace reserves more than it allocates at its peak: the waste by
    /// cause, the culprits (the live allocations, and source lines, whose
    /// removal lowers the peak: each candidate replayed without it), and
    /// the settings aimed at it.
    ///
    /// Unlike `replay`, it holds the whole trace and every allocation's
    /// lifetime in memory, about 60 bytes per event (a 10M-event CSV: 0.6 GB;
    /// docs/perf-log.md has the measurement). It replays the trace once per
    /// candidate, on every core (docs/results/explain.md has the cost).
    Explain(cmd_explain::ExplainArgs),
    /// Two runs compared at their reserved peaks (two traces, or one trace
    /// under two settings): the change in allocated bytes by source line,
    /// and in waste.
    ///
    /// Unlike `replay`, it holds both traces and their lifetimes in memory,
    /// about 70 bytes per event (a 10M-event CSV against itself: 0.7 GB;
    /// docs/perf-log.md has the measurement).
    Diff(cmd_diff::DiffArgs),
    /// A memory regression gate for CI: a baseline recording against the
    /// same job recorded on a change, under each setting — the change in
    /// peak reserved, waste and smallest card, what grew by source line,
    /// and a verdict against --max-increase (Markdown for a pull-request
    /// comment, JSON, JUnit XML); exit status 1 when it fails.
    Gate(cmd_gate::GateArgs),
    /// The offline plan of a trace: every allocation placed in one address
    /// range knowing all lifetimes (greedy by size; a branch and bound
    /// search on small traces), against peak live bytes — the bound no
    /// placement beats — and each setting's gap to both.
    Plan(cmd_plan::PlanArgs),
    /// Recommend a setting for Llama-3-8B fine-tuning on an 80 GB GPU and
    /// write an HTML report (a bundled recorded trace).
    Demo(cmd_demo::DemoArgs),
    /// Sweep, rank and plot one trace: an HTML report with its data.
    ///
    /// Unlike `replay`, it holds the whole trace in memory: 60–70 bytes per
    /// event, and about 140 more for the explorer (a 10M-event CSV:
    /// 0.6–0.7 GB with --no-explorer, 2.1 GB with it; docs/perf-log.md has the
    /// measurement).
    Report(cmd_report::ReportArgs),
    /// Generate the trace of an LLM or diffusion workload at any size,
    /// from templates learned from the recorded corpus.
    Gen(cmd_gen::GenArgs),
    /// The largest batch, sequence length or resolution of a generated
    /// workload that fits a GPU, per setting.
    Fit(cmd_fit::FitArgs),
    /// One workload across its remedies: every recorded variant (precision,
    /// attention, checkpointing, KV cache, model size, VAE tiling, offload, …)
    /// × allocator settings, with peak reserved, the smallest card, the
    /// saving and the largest size that fits.
    Matrix(cmd_matrix::MatrixArgs),
    /// Compare every policy on the bundled traces: memory and replay speed
    /// (a developer command).
    #[command(hide = true)]
    Bench(cmd_bench::BenchArgs),
    /// The regression gate: deterministic metrics against a committed
    /// baseline (a developer command).
    #[command(hide = true)]
    BenchCheck(cmd_bench_check::BenchCheckArgs),
    /// One case of a sweep planned with `sweep --plan`, replayed alone: its
    /// row as JSON (what `vramlab.run_case` runs; a developer command).
    #[command(hide = true)]
    RunCase(cmd_run_case::RunCaseArgs),
    /// The GPUs --gpu NAME knows, and the memory PyTorch can use on each.
    Gpus(cmd_gpus::GpusArgs),
    /// Convert a trace between formats (snapshot, RMM log, CSV, binary).
    Convert(cmd_convert::ConvertArgs),
    /// Two jobs one after the other in one process (job A, optionally
    /// empty_cache(), job B) as one trace.
    Concat(cmd_concat::ConcatArgs),
    /// Several processes on one GPU (an RL trainer and its rollout engine,
    /// co-located services): each replays its trace through its own
    /// allocator, all drawing on one device; who holds what, phase by
    /// phase, and who runs out of memory first.
    Colocate(cmd_colocate::ColocateArgs),
    /// Describe a trace: events, allocations, streams, sizes, peak live bytes.
    Stats(cmd_stats::StatsArgs),
    /// The commands and their options as JSON, for the Python package's
    /// generated wrappers (a developer command).
    #[command(hide = true)]
    #[command(name = "command-table")]
    DescribeCommands(command_table::CommandTableArgs),
}

/// Runs a parsed command line.
fn dispatch(cli: Cli) -> anyhow::Result<()> {
    output::set_width(cli.wide);
    output::set_verbose(cli.verbose);
    match cli.command {
        Command::Replay(a) => cmd_replay::run(a),
        Command::Conf(a) => cmd_conf::run(a),
        Command::Fidelity(a) => cmd_fidelity::run(a),
        Command::Oracle(a) => cmd_oracle::run(a),
        Command::Record(a) => cmd_record::run(a),
        Command::Convert(a) => cmd_convert::run_convert(a),
        Command::Sweep(a) => cmd_sweep::run(a),
        Command::Gen(a) => cmd_gen::run(a),
        Command::Fit(a) => cmd_fit::run(a),
        Command::Matrix(a) => cmd_matrix::run(a),
        Command::Demo(a) => cmd_demo::run(a),
        Command::Report(a) => cmd_report::run(a),
        Command::Bench(a) => cmd_bench::run(a),
        Command::BenchCheck(a) => cmd_bench_check::run(a),
        Command::OomPoint(a) => cmd_oom_point::run(a),
        Command::Recommend(a) => cmd_recommend::run(a),
        Command::ServeBudget(a) => cmd_serve_budget::run(a),
        Command::Explain(a) => cmd_explain::run(a),
        Command::Diff(a) => cmd_diff::run(a),
        Command::Gate(a) => cmd_gate::run(a),
        Command::Plan(a) => cmd_plan::run(a),
        Command::Stats(a) => cmd_stats::run(a),
        Command::Concat(a) => cmd_concat::run(a),
        Command::Colocate(a) => cmd_colocate::run(a),
        Command::Gpus(a) => cmd_gpus::run(a),
        Command::RunCase(a) => cmd_run_case::run(a),
        Command::DescribeCommands(a) => command_table::run(a),
    }
}

/// A command that ran to its end but whose check failed (`fidelity` found
/// a difference, `bench-check` a regression): exit status 1, and its
/// output has already said why.
#[derive(Debug)]
pub struct CheckFailed;

impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the check failed")
    }
}

impl std::error::Error for CheckFailed {}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every subcommand's arguments are consistent (unique names, valid
    /// defaults and conflicts).
    #[test]
    fn the_whole_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
