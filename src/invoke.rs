//! Running the command line: as a program ([`run_cli`]), or in-process
//! with the output captured and the error kept as a value ([`call`]), which
//! is how the Python package's API runs the same commands with the same
//! numbers and the same messages.

use std::ffi::OsString;

use clap::Parser;

use vramlab_replay::InputError;
pub use vramlab_traces::advice::Spelling;
use vramlab_traces::advice::set_spelling;

use crate::output::{start_capture, take_capture};
use crate::{CheckFailed, Cli, dispatch};

/// Runs the command line `args` (the program name first) and returns the
/// exit status: 0 on success, 1 when a check failed (`fidelity`,
/// `bench-check`), 2 on an error, which is printed to stderr as
/// `error: …`. Usage errors, `--help` and `--version` are clap's.
pub fn run_cli<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Prints help and version to stdout, usage errors to stderr.
            let _ = e.print();
            return e.exit_code();
        }
    };
    match dispatch(cli) {
        Ok(()) => 0,
        Err(e) if e.is::<CheckFailed>() => 1,
        Err(e) => {
            eprintln!("error: {e:#}");
            2
        }
    }
}

/// What a command run by [`call`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// Its standard output (the JSON of `--json`, a table, …).
    pub stdout: String,
    /// Lines it wrote to stderr: notes on the input, files written.
    pub notes: Vec<String>,
    /// `true` when a check failed (`fidelity` found a difference); the
    /// output says where.
    pub check_failed: bool,
}

/// What went wrong, for the caller to raise as its own error type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The command line itself: an unknown option, a value that does not
    /// parse (a setting, a size, a GPU name).
    Usage,
    /// An input file: unreadable, malformed, inconsistent.
    Trace,
    /// Anything else (a replay the trace cannot drive, an output that
    /// cannot be written).
    Other,
}

/// A command run by [`call`] that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The message the command line prints after `error: `.
    pub message: String,
    /// Notes written before the failure.
    pub notes: Vec<String>,
}

/// Runs one command (`args` without the program name, e.g. `["replay",
/// "t.pickle", "--json"]`) in this thread with its output captured; the
/// options that messages advise are spelled as `spelling` says (the
/// Python package's keywords, or the command line's flags), which becomes
/// the spelling of the process ([`set_spelling`]): one front end runs in a
/// process.
pub fn call<I, T>(args: I, spelling: Spelling) -> Result<Captured, Failure>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    set_spelling(spelling);
    call_here(args)
}

fn call_here<I, T>(args: I) -> Result<Captured, Failure>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv = std::iter::once(OsString::from("vramlab")).chain(args.into_iter().map(Into::into));
    let cli = Cli::try_parse_from(argv).map_err(|e| Failure {
        kind: FailureKind::Usage,
        message: usage_message(&e),
        notes: Vec::new(),
    })?;
    start_capture();
    let result = dispatch(cli);
    let out = take_capture();
    match result {
        Ok(()) => Ok(Captured {
            stdout: out.stdout,
            notes: out.notes,
            check_failed: false,
        }),
        Err(e) if e.is::<CheckFailed>() => Ok(Captured {
            stdout: out.stdout,
            notes: out.notes,
            check_failed: true,
        }),
        Err(e) => Err(Failure {
            kind: kind_of(&e),
            message: format!("{e:#}"),
            notes: out.notes,
        }),
    }
}

/// clap's message without its `error: ` prefix and usage footer.
fn usage_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let body = text.split("\n\nUsage:").next().unwrap_or(text);
    body.trim().to_string()
}

/// An argument the command cannot use (a policy's settings string, a
/// memory fraction out of range): a usage failure for [`call`].
#[derive(Debug)]
pub struct BadArgument(pub String);

impl std::fmt::Display for BadArgument {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadArgument {}

fn kind_of(e: &anyhow::Error) -> FailureKind {
    let has = |f: &dyn Fn(&(dyn std::error::Error + 'static)) -> bool| e.chain().any(f);
    let unreadable = |c: &(dyn std::error::Error + 'static)| {
        c.is::<vramlab_traces::TraceError>()
            || matches!(c.downcast_ref::<InputError>(), Some(InputError::Trace(_)))
    };
    if has(&unreadable) {
        FailureKind::Trace
    } else if has(&|c| {
        c.is::<vramlab_allocator::ConfError>()
            || c.is::<BadArgument>()
            || c.is::<vramlab_allocator::format::SizeParseError>()
    }) {
        FailureKind::Usage
    } else {
        FailureKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_runs_captured() {
        let out = call(["gpus"], Spelling::Cli).expect("gpus runs");
        assert!(out.stdout.contains("h100"), "{}", out.stdout);
        assert!(!out.check_failed);
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        let e = call(["replay", "--no-such-option"], Spelling::Cli).expect_err("bad option");
        assert_eq!(e.kind, FailureKind::Usage);
        assert!(e.message.contains("--no-such-option"), "{}", e.message);
        assert!(!e.message.starts_with("error:"), "{}", e.message);
    }

    #[test]
    fn bad_settings_are_usage_failures() {
        let trace = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/workloads/data/gpt-small-train.csv"
        );
        for args in [
            &["replay", trace, "--conf", "max_split_size_mb:banana"][..],
            &["replay", trace, "--policy", "bfc", "--conf", "foo:1"],
            &["replay", trace, "--fraction", "1.5"],
        ] {
            let e = call(args.iter().copied(), Spelling::Cli).expect_err("bad settings");
            assert_eq!(e.kind, FailureKind::Usage, "{args:?}: {}", e.message);
        }
    }

    #[test]
    fn a_missing_file_is_a_trace_failure() {
        let e = call(["stats", "/no/such/trace.csv"], Spelling::Cli).expect_err("missing file");
        assert_eq!(e.kind, FailureKind::Trace, "{}", e.message);
        assert!(e.message.contains("/no/such/trace.csv"), "{}", e.message);
    }
}
