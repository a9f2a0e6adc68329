//! Options and commands named in messages, as data. A library error, note
//! or report sentence that advises an option names it with [`Opt`], and a
//! command with [`Cmd`]; they are spelled when the message is written, in
//! the words of the front end that runs the library ([`Spelling`]):
//! `--trace-device N` and `vramlab gpus` on the command line, `device=N`
//! and `vramlab.run(["gpus"])` in Python.
//!
//! The spelling belongs to the process: one front end runs in it (the
//! command line, or the Python package that loads the library), and it
//! says once which it is ([`set_spelling`]); every thread, the library's
//! parallel workers included, then writes its words, with nothing to carry
//! from thread to thread. A message that must read the same from every
//! front end (a result's label) is spelled explicitly
//! ([`Advice::spelled`], [`Invocation::spelled`]).

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

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
}

impl Opt {
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
        })
    }

    /// The option alone (`--format`, `format=`).
    pub fn bare(self) -> Advice<'static> {
        OptionName::bare(self)
    }

    /// The option with a placeholder for its value (`--trace-device N`,
    /// `device=N`).
    pub fn with_placeholder(self, placeholder: &'static str) -> Advice<'static> {
        OptionName::with_placeholder(self, placeholder)
    }

    /// The option with a word for its value (`--start fresh`,
    /// `start="fresh"`).
    pub fn with_word(self, word: &str) -> Advice<'_> {
        OptionName::with_word(self, word)
    }
}

impl OptionName for Opt {
    fn cli_name(self) -> &'static str {
        Opt::cli_name(self)
    }

    fn python_name(self) -> Option<&'static str> {
        Opt::python_name(self)
    }
}

/// An option as the front ends name it, which messages advise through
/// [`Advice`]: vramlab's own ([`Opt`]) and those of the crates above
/// (a generated workload's knobs).
pub trait OptionName: Copy + fmt::Debug + PartialEq {
    /// The command line's name (`trace-device` for `--trace-device`).
    fn cli_name(self) -> &'static str;

    /// The Python package's keyword (`device` for `device=`); `None` where
    /// Python has no such keyword.
    fn python_name(self) -> Option<&'static str>;

    /// The option alone, spelled for the running front end (`--seq`,
    /// `seq=`).
    fn bare(self) -> Advice<'static, Self> {
        Advice {
            opt: self,
            value: Value::None,
        }
    }

    /// A switch turned on (`--checkpointing`, `checkpointing=True`).
    fn on(self) -> Advice<'static, Self> {
        Advice {
            opt: self,
            value: Value::On,
        }
    }

    /// The option with a placeholder for its value (`--trace-device N`,
    /// `device=N`).
    fn with_placeholder(self, placeholder: &'static str) -> Advice<'static, Self> {
        Advice {
            opt: self,
            value: Value::Placeholder(placeholder),
        }
    }

    /// The option with a number for its value (`--batch 4`, `batch=4`).
    fn with_number(self, number: u64) -> Advice<'static, Self> {
        Advice {
            opt: self,
            value: Value::Number(number),
        }
    }

    /// The option with a word for its value (`--start fresh`,
    /// `start="fresh"`).
    fn with_word(self, word: &str) -> Advice<'_, Self> {
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
pub struct Advice<'a, O = Opt> {
    opt: O,
    value: Value<'a>,
}

impl<O: OptionName> Advice<'_, O> {
    fn write_cli(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--{}", self.opt.cli_name())?;
        match self.value {
            Value::None | Value::On => Ok(()),
            Value::Placeholder(v) | Value::Word(v) => write!(f, " {v}"),
            Value::Number(n) => write!(f, " {n}"),
        }
    }
}

impl<'a, O: OptionName> Advice<'a, O> {
    /// The option in `spelling`'s words, whichever front end runs.
    pub fn spelled(self, spelling: Spelling) -> Spelled<Advice<'a, O>> {
        Spelled {
            what: self,
            spelling,
        }
    }

    fn write_in(&self, f: &mut fmt::Formatter<'_>, spelling: Spelling) -> fmt::Result {
        match (spelling, self.opt.python_name()) {
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

impl<O: OptionName> fmt::Display for Advice<'_, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_in(f, spelling())
    }
}

/// An [`Advice`] or [`Invocation`] in one front end's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spelled<T> {
    what: T,
    spelling: Spelling,
}

impl<O: OptionName> fmt::Display for Spelled<Advice<'_, O>> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.what.write_in(f, self.spelling)
    }
}

impl fmt::Display for Spelled<Invocation<'_>> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.what.write_in(f, self.spelling)
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
                .map(|o| o.spelled(Spelling::Python).to_string()),
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

impl<'a> Invocation<'a> {
    /// The command in `spelling`'s words, whichever front end runs.
    pub fn spelled(self, spelling: Spelling) -> Spelled<Invocation<'a>> {
        Spelled {
            what: self,
            spelling,
        }
    }

    fn write_in(&self, f: &mut fmt::Formatter<'_>, spelling: Spelling) -> fmt::Result {
        match (spelling, self.cmd.python_function()) {
            (Spelling::Cli, _) => self.write_cli(f),
            (Spelling::Python, Some(function)) => self.write_python_call(f, function),
            (Spelling::Python, None) => self.write_python_run(f),
        }
    }
}

impl fmt::Display for Invocation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_in(f, spelling())
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

/// The process's spelling: 0 for the command line's, 1 for Python's.
static SPELLING: AtomicU8 = AtomicU8::new(0);

/// The words messages spell options in: the front end's, as it said with
/// [`set_spelling`] (the command line's until then).
pub fn spelling() -> Spelling {
    match SPELLING.load(Ordering::Relaxed) {
        1 => Spelling::Python,
        _ => Spelling::Cli,
    }
}

/// Says which front end runs in this process, for every message written
/// from now on, on any thread: the Python package as it calls the library,
/// the command line never (its words are the default).
pub fn set_spelling(spelling: Spelling) {
    let code = match spelling {
        Spelling::Cli => 0,
        Spelling::Python => 1,
    };
    SPELLING.store(code, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_front_end_spells_options_its_way() {
        let a = Opt::TraceDevice.with_placeholder("N");
        assert_eq!(a.to_string(), "--trace-device N");
        assert_eq!(a.spelled(Spelling::Python).to_string(), "device=N");
        let s = Opt::Start.with_word("fresh");
        assert_eq!(s.to_string(), "--start fresh");
        assert_eq!(s.spelled(Spelling::Python).to_string(), "start=\"fresh\"");
        assert_eq!(Opt::Format.bare().to_string(), "--format");
        assert_eq!(
            Opt::Format.bare().spelled(Spelling::Python).to_string(),
            "format="
        );
        // No Python keyword: the command line's words.
        let csv = Opt::Csv.with_placeholder("rows.csv");
        assert_eq!(csv.spelled(Spelling::Python).to_string(), "--csv rows.csv");
    }

    #[test]
    fn each_front_end_spells_commands_its_way() {
        assert_eq!(Cmd::Gpus.alone().to_string(), "vramlab gpus");
        assert_eq!(
            Cmd::Gpus.alone().spelled(Spelling::Python).to_string(),
            "vramlab.run([\"gpus\"])"
        );
        let fresh = [Opt::Start.with_word("fresh")];
        let convert = Cmd::Convert.with(&[], &fresh);
        assert_eq!(convert.to_string(), "vramlab convert --start fresh");
        assert_eq!(
            convert.spelled(Spelling::Python).to_string(),
            "vramlab.run([\"convert\", \"--start\", \"fresh\"])"
        );
        let out = [Opt::SnapshotOut.with_placeholder("FILE")];
        let replay = Cmd::Replay.with(&[], &out);
        assert_eq!(replay.to_string(), "vramlab replay --snapshot-out FILE");
        assert_eq!(
            replay.spelled(Spelling::Python).to_string(),
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
            sweep.spelled(Spelling::Python).to_string(),
            "vramlab.sweep(t.pickle, gpu=…)"
        );
    }
}
