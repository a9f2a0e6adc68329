//! Options named in messages, as data. A library error or note that
//! advises an option names it with [`Opt`]; it is spelled when the message
//! is written, in the words of the front end that runs the library
//! ([`Spelling`]): `--trace-device N` on the command line, `device=N` in
//! Python.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

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
        }
    }

    /// The Python package's keyword (`device` for `device=`).
    pub fn python_name(self) -> &'static str {
        match self {
            Opt::Format => "format",
            Opt::TraceDevice => "device",
            Opt::TorchVersion => "torch_version",
            Opt::Start => "start",
            Opt::Policy => "policy",
        }
    }

    /// The option alone, spelled for the running front end.
    pub fn bare(self) -> Advice<'static> {
        Advice {
            opt: self,
            value: Value::None,
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
    Placeholder(&'static str),
    Word(&'a str),
}

/// An option as a message advises it; its [`Display`](fmt::Display) spells
/// it as the running front end does ([`spelling`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advice<'a> {
    opt: Opt,
    value: Value<'a>,
}

impl fmt::Display for Advice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match spelling() {
            Spelling::Cli => {
                write!(f, "--{}", self.opt.cli_name())?;
                match self.value {
                    Value::None => Ok(()),
                    Value::Placeholder(v) | Value::Word(v) => write!(f, " {v}"),
                }
            }
            Spelling::Python => {
                let name = self.opt.python_name();
                match self.value {
                    Value::None => write!(f, "{name}="),
                    Value::Placeholder(v) => write!(f, "{name}={v}"),
                    Value::Word(v) => write!(f, "{name}=\"{v}\""),
                }
            }
        }
    }
}

/// Whose words options are spelled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spelling {
    /// The command line's flags (`--trace-device N`), the default.
    #[default]
    Cli,
    /// The Python package's keywords (`device=N`).
    Python,
}

/// Process-wide, not per thread: a replay's work (and its errors) may be
/// done on worker threads. `true`: Python's.
static PYTHON: AtomicBool = AtomicBool::new(false);

/// The spelling messages use now.
pub fn spelling() -> Spelling {
    if PYTHON.load(Ordering::Relaxed) {
        Spelling::Python
    } else {
        Spelling::Cli
    }
}

/// Runs `f` with messages spelling options as `spelling` says, then
/// restores the previous spelling. The spelling is the process's: a front
/// end sets it around what it runs.
pub fn with_spelling<R>(spelling: Spelling, f: impl FnOnce() -> R) -> R {
    let before = PYTHON.swap(spelling == Spelling::Python, Ordering::Relaxed);
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            PYTHON.store(self.0, Ordering::Relaxed);
        }
    }
    let _restore = Restore(before);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_front_end_spells_options_its_way() {
        let a = Opt::TraceDevice.with_placeholder("N");
        assert_eq!(a.to_string(), "--trace-device N");
        assert_eq!(
            with_spelling(Spelling::Python, || a.to_string()),
            "device=N"
        );
        let s = Opt::Start.with_word("fresh");
        assert_eq!(s.to_string(), "--start fresh");
        assert_eq!(
            with_spelling(Spelling::Python, || s.to_string()),
            "start=\"fresh\""
        );
        assert_eq!(Opt::Format.bare().to_string(), "--format");
    }
}
