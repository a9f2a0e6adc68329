//! Options and commands named in messages, as data. A library error, note
//! or report sentence that advises an option names it with [`Opt`], and a
//! command with [`Cmd`]; they are spelled when the message is written, in
//! the words of the front end that runs the library ([`Spelling`]):
//! `--trace-device N` and `vramlab gpus` on the command line, `device=N`
//! and `vramlab.run(["gpus"])` in Python.
//!
//! The spelling is a per-thread setting that a front end sets around one
//! call ([`with_spelling`]), so two calls in one process (two Python
//! threads, a test harness) each get their own. Work the library hands to
//! other threads (rayon's `par_iter`) carries it over: each worker's
//! closure is wrapped in [`with_callers_spelling`] (see
//! `replay/src/analysis/sweep.rs`). A message written on a thread that was
//! not given the spelling uses the command line's, so a new parallel part
//! that forgets the wrapper shows Python users `--flag` words, never wrong
//! ones.

use std::cell::Cell;
use std::fmt;

/// An option of vramlab's front ends that a message may advise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// The input file's format.
    Format,
    /// Which device of a multi-device snapshot.
    TraceDevice,
    /// The PyTorch release whose rules apply.
    TorchVersion,
    /// How a replay of a recording that starts mid-run begins.
    Start,
    /// The allocator policy.
    Policy,
    /// The GPU a job runs on, by name.
    Gpu,
    /// The device's capacity, as a size.
    Capacity,
    /// The file a replay writes its end state to as a snapshot.
    SnapshotOut,
    /// The CSV file `sweep` writes its rows to (the command line's only:
    /// Python's `sweep()` returns the rows).
    Csv,
    /// A generated workload's sequence length.
    Seq,
    /// A generated workload's image side.
    Resolution,
    /// A generated workload's batch size.
    Batch,
    /// A generated workload's training or denoising steps.
    Steps,
    /// A generated workload's number of new tokens (generation presets).
    NewTokens,
    /// A generated workload's numeric precision.
    Precision,
    /// A generated workload's attention kernel.
    Attention,
    /// Activation checkpointing in a generated workload.
    Checkpointing,
    /// A generated workload's KV cache kind.
    KvCache,
    /// A generated workload's model size.
    Size,
    /// VAE tiling in a generated diffusion workload.
    VaeTiling,
    /// VAE slicing in a generated diffusion workload.
    VaeSlicing,
    /// Model offload in a generated diffusion workload.
    Offload,
    /// The leak of the gpt-small workload.
    Leak,
    /// `empty_cache()` after each step of the gpt-small workload.
    EmptyCache,
}

impl Opt {
    /// The options a workload preset may expose, by their parameter names
    /// (`vae_tiling`); see [`Opt::of_workload_param`].
    const WORKLOAD: [Opt; 15] = [
        Opt::Seq,
        Opt::Resolution,
        Opt::Batch,
        Opt::Steps,
        Opt::NewTokens,
        Opt::Precision,
        Opt::Attention,
        Opt::Checkpointing,
        Opt::KvCache,
        Opt::Size,
        Opt::VaeTiling,
        Opt::VaeSlicing,
        Opt::Offload,
        Opt::Leak,
        Opt::EmptyCache,
    ];

    /// The workload option whose parameter (and Python keyword) is `name`
    /// (`vae_tiling` → [`Opt::VaeTiling`]).
    pub fn of_workload_param(name: &str) -> Option<Opt> {
        Opt::WORKLOAD
            .into_iter()
            .find(|o| o.python_name() == Some(name))
    }

    /// The command line's name (`trace-device` for `--trace-device`).
    pub fn cli_name(self) -> &'static str {
        match self {
            Opt::Format => "format",
            Opt::TraceDevice => "trace-device",
            Opt::TorchVersion => "torch-version",
            Opt::Start => "start",
            Opt::Policy => "policy",
            Opt::Gpu => "gpu",
            Opt::Capacity => "capacity",
            Opt::SnapshotOut => "snapshot-out",
            Opt::Csv => "csv",
            Opt::Seq => "seq",
            Opt::Resolution => "resolution",
            Opt::Batch => "batch",
            Opt::Steps => "steps",
            Opt::NewTokens => "new-tokens",
            Opt::Precision => "precision",
            Opt::Attention => "attention",
            Opt::Checkpointing => "checkpointing",
            Opt::KvCache => "kv-cache",
            Opt::Size => "size",
            Opt::VaeTiling => "vae-tiling",
            Opt::VaeSlicing => "vae-slicing",
            Opt::Offload => "offload",
            Opt::Leak => "leak",
            Opt::EmptyCache => "empty-cache",
        }
    }

    /// The Python package's keyword (`device` for `device=`), as the
    /// generated API names it (python/vramlab/_commands.py: the long flag in
    /// snake case, `--trace-device` as `device`); `None` where Python has
    /// no such keyword.
    pub fn python_name(self) -> Option<&'static str> {
        Some(match self {
            Opt::Format => "format",
            Opt::TraceDevice => "device",
            Opt::TorchVersion => "torch_version",
            Opt::Start => "start",
            Opt::Policy => "policy",
            Opt::Gpu => "gpu",
            Opt::Capacity => "capacity",
            Opt::SnapshotOut => "snapshot_out",
            Opt::Csv => return None,
            Opt::Seq => "seq",
            Opt::Resolution => "resolution",
            Opt::Batch => "batch",
            Opt::Steps => "steps",
            Opt::NewTokens => "new_tokens",
            Opt::Precision => "precision",
            Opt::Attention => "attention",
            Opt::Checkpointing => "checkpointing",
            Opt::KvCache => "kv_cache",
            Opt::Size => "size",
            Opt::VaeTiling => "vae_tiling",
            Opt::VaeSlicing => "vae_slicing",
            Opt::Offload => "offload",
            Opt::Leak => "leak",
            Opt::EmptyCache => "empty_cache",
        })
    }

    /// The option alone, spelled for the running front end (`--seq`,
    /// `seq=`).
    pub fn bare(self) -> Advice<'static> {
        Advice {
            opt: self,
            value: Value::None,
        }
    }

    /// A switch turned on (`--checkpointing`, `checkpointing=True`).
    pub fn on(self) -> Advice<'static> {
        Advice {
            opt: self,
            value: Value::On,
        }
    }

    /// The option with a placeholder for its value (`--trace-device N`,
    /// `device=N`).
    pub fn with_placeholder(self, placeholder: &'static str) -> Advice<'static> {
        Advice {
            opt: self,
            value: Value::Placeholder(placeholder),
        }
    }

    /// The option with a number for its value (`--batch 4`, `batch=4`).
    pub fn with_number(self, number: u64) -> Advice<'static> {
        Advice {
            opt: self,
            value: Value::Number(number),
        }
    }

    /// The option with a word for its value (`--start fresh`,
    /// `start="fresh"`).
    pub fn with_word(self, word: &str) -> Advice<'_> {
        Advice {
            opt: self,
            value: Value::Word(word),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value<'a> {
    None,
    On,
    Placeholder(&'a str),
    Number(u64),
    Word(&'a str),
}

/// An option as a message advises it; its [`Display`](fmt::Display) spells
/// it as the running front end does ([`spelling`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advice<'a> {
    opt: Opt,
    value: Value<'a>,
}

impl Advice<'_> {
    fn write_cli(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--{}", self.opt.cli_name())?;
        match self.value {
            Value::None | Value::On => Ok(()),
            Value::Placeholder(v) | Value::Word(v) => write!(f, " {v}"),
            Value::Number(n) => write!(f, " {n}"),
        }
    }
}

impl fmt::Display for Advice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (spelling(), self.opt.python_name()) {
            (Spelling::Python, Some(name)) => match self.value {
                Value::None => write!(f, "{name}="),
                Value::On => write!(f, "{name}=True"),
                Value::Placeholder(v) => write!(f, "{name}={v}"),
                Value::Number(n) => write!(f, "{name}={n}"),
                Value::Word(v) => write!(f, "{name}=\"{v}\""),
            },
            _ => self.write_cli(f),
        }
    }
}

/// A vramlab command that a message may advise running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    /// `vramlab gpus`: the named GPUs.
    Gpus,
    /// `vramlab convert`: a trace in another format.
    Convert,
    /// `vramlab replay`: one replay.
    Replay,
    /// `vramlab sweep`: many settings.
    Sweep,
}

impl Cmd {
    /// The command line's name (`gpus`).
    pub fn cli_name(self) -> &'static str {
        match self {
            Cmd::Gpus => "gpus",
            Cmd::Convert => "convert",
            Cmd::Replay => "replay",
            Cmd::Sweep => "sweep",
        }
    }

    /// The Python package's function (`replay` for `vramlab.replay()`);
    /// `None` for a command Python runs through `vramlab.run([...])`.
    pub fn python_function(self) -> Option<&'static str> {
        match self {
            Cmd::Replay => Some("replay"),
            Cmd::Sweep => Some("sweep"),
            Cmd::Gpus | Cmd::Convert => None,
        }
    }

    /// The command alone (`vramlab gpus`, `vramlab.run(["gpus"])`).
    pub fn alone(self) -> Invocation<'static> {
        self.with(&[], &[])
    }

    /// The command with arguments (placeholders or words, written as they
    /// are) and options: `vramlab replay --snapshot-out FILE`,
    /// `vramlab.replay(…, snapshot_out=FILE)`.
    pub fn with<'a>(self, arguments: &'a [&'a str], options: &'a [Advice<'a>]) -> Invocation<'a> {
        Invocation {
            cmd: self,
            arguments,
            options,
        }
    }
}

/// A command as a message advises running it; its
/// [`Display`](fmt::Display) spells it as the running front end does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invocation<'a> {
    cmd: Cmd,
    arguments: &'a [&'a str],
    options: &'a [Advice<'a>],
}

impl Invocation<'_> {
    fn write_cli(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vramlab {}", self.cmd.cli_name())?;
        for a in self.arguments {
            write!(f, " {a}")?;
        }
        for o in self.options {
            f.write_str(" ")?;
            o.write_cli(f)?;
        }
        Ok(())
    }

    /// `vramlab.replay(…, snapshot_out=FILE)`: the Python function, with
    /// the options Python has keywords for.
    fn write_python_call(&self, f: &mut fmt::Formatter<'_>, function: &str) -> fmt::Result {
        let mut parts: Vec<String> = self.arguments.iter().map(|a| a.to_string()).collect();
        if parts.is_empty() {
            parts.push("…".into());
        }
        parts.extend(
            self.options
                .iter()
                .filter(|o| o.opt.python_name().is_some())
                .map(|o| o.to_string()),
        );
        write!(f, "vramlab.{function}({})", parts.join(", "))
    }

    /// `vramlab.run(["convert", "--start", "fresh"])`: the command line's
    /// words, for a command without a Python function.
    fn write_python_run(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words = vec![format!("\"{}\"", self.cmd.cli_name())];
        words.extend(self.arguments.iter().map(|a| a.to_string()));
        for o in self.options {
            words.push(format!("\"--{}\"", o.opt.cli_name()));
            match o.value {
                Value::None | Value::On => {}
                Value::Placeholder(v) => words.push(v.to_string()),
                Value::Number(n) => words.push(format!("\"{n}\"")),
                Value::Word(v) => words.push(format!("\"{v}\"")),
            }
        }
        write!(f, "vramlab.run([{}])", words.join(", "))
    }
}

impl fmt::Display for Invocation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (spelling(), self.cmd.python_function()) {
            (Spelling::Cli, _) => self.write_cli(f),
            (Spelling::Python, Some(function)) => self.write_python_call(f, function),
            (Spelling::Python, None) => self.write_python_run(f),
        }
    }
}

/// Whose words options and commands are spelled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spelling {
    /// The command line's flags (`--trace-device N`), the default.
    #[default]
    Cli,
    /// The Python package's keywords (`device=N`).
    Python,
}

thread_local! {
    /// This thread's spelling: set by [`with_spelling`] for one call.
    static SPELLING: Cell<Spelling> = const { Cell::new(Spelling::Cli) };
}

/// The spelling messages written on this thread use now.
pub fn spelling() -> Spelling {
    SPELLING.with(Cell::get)
}

/// Runs `f` with messages written on this thread spelling options as
/// `spelling` says, then restores the previous spelling (also when `f`
/// panics). A front end sets it around one call; the library's parallel
/// parts set it in each worker to the caller's (see the module's doc).
pub fn with_spelling<R>(spelling: Spelling, f: impl FnOnce() -> R) -> R {
    struct Restore(Spelling);
    impl Drop for Restore {
        fn drop(&mut self) {
            SPELLING.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SPELLING.with(|s| s.replace(spelling)));
    f()
}

/// Wraps `f`, a worker's closure (for rayon's `map`), so that it runs
/// with the spelling of the thread that wraps it: what the library's
/// parallel parts pass their workers.
pub fn with_callers_spelling<A, R>(
    f: impl Fn(A) -> R + Sync + Send,
) -> impl Fn(A) -> R + Sync + Send {
    let spelling = spelling();
    move |a| with_spelling(spelling, || f(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python<R>(f: impl FnOnce() -> R) -> R {
        with_spelling(Spelling::Python, f)
    }

    #[test]
    fn each_front_end_spells_options_its_way() {
        let a = Opt::TraceDevice.with_placeholder("N");
        assert_eq!(a.to_string(), "--trace-device N");
        assert_eq!(python(|| a.to_string()), "device=N");
        let s = Opt::Start.with_word("fresh");
        assert_eq!(s.to_string(), "--start fresh");
        assert_eq!(python(|| s.to_string()), "start=\"fresh\"");
        assert_eq!(Opt::Format.bare().to_string(), "--format");
        assert_eq!(python(|| Opt::VaeTiling.bare().to_string()), "vae_tiling=");
        assert_eq!(Opt::Batch.with_number(4).to_string(), "--batch 4");
        assert_eq!(Opt::Leak.on().to_string(), "--leak");
        assert_eq!(python(|| Opt::Leak.on().to_string()), "leak=True");
        assert_eq!(python(|| Opt::Batch.with_number(4).to_string()), "batch=4");
        // No Python keyword: the command line's words.
        let csv = Opt::Csv.with_placeholder("rows.csv");
        assert_eq!(python(|| csv.to_string()), "--csv rows.csv");
    }

    #[test]
    fn each_front_end_spells_commands_its_way() {
        assert_eq!(Cmd::Gpus.alone().to_string(), "vramlab gpus");
        assert_eq!(
            python(|| Cmd::Gpus.alone().to_string()),
            "vramlab.run([\"gpus\"])"
        );
        let fresh = [Opt::Start.with_word("fresh")];
        let convert = Cmd::Convert.with(&[], &fresh);
        assert_eq!(convert.to_string(), "vramlab convert --start fresh");
        assert_eq!(
            python(|| convert.to_string()),
            "vramlab.run([\"convert\", \"--start\", \"fresh\"])"
        );
        let out = [Opt::SnapshotOut.with_placeholder("FILE")];
        let replay = Cmd::Replay.with(&[], &out);
        assert_eq!(replay.to_string(), "vramlab replay --snapshot-out FILE");
        assert_eq!(
            python(|| replay.to_string()),
            "vramlab.replay(…, snapshot_out=FILE)"
        );
        let opts = [
            Opt::Gpu.with_placeholder("…"),
            Opt::Csv.with_placeholder("rows.csv"),
        ];
        let sweep = Cmd::Sweep.with(&["t.pickle"], &opts);
        assert_eq!(
            sweep.to_string(),
            "vramlab sweep t.pickle --gpu … --csv rows.csv"
        );
        assert_eq!(
            python(|| sweep.to_string()),
            "vramlab.sweep(t.pickle, gpu=…)"
        );
    }

    #[test]
    fn workload_params_name_their_options() {
        assert_eq!(Opt::of_workload_param("vae_tiling"), Some(Opt::VaeTiling));
        assert_eq!(Opt::of_workload_param("kv_cache"), Some(Opt::KvCache));
        assert_eq!(Opt::of_workload_param("device"), None);
        for o in Opt::WORKLOAD {
            assert_eq!(
                o.python_name(),
                Some(o.cli_name().replace('-', "_").as_str())
            );
        }
    }

    #[test]
    fn workers_get_the_callers_spelling() {
        let spelled = python(|| with_callers_spelling(|o: Opt| o.bare().to_string()));
        let on_worker = std::thread::scope(|s| s.spawn(|| spelled(Opt::Seq)).join());
        assert_eq!(on_worker.expect("worker runs"), "seq=");
    }

    #[test]
    fn the_spelling_is_per_thread() {
        python(|| {
            assert_eq!(spelling(), Spelling::Python);
            let other = std::thread::spawn(spelling).join().expect("thread runs");
            assert_eq!(other, Spelling::Cli);
        });
        assert_eq!(spelling(), Spelling::Cli);
    }
}
