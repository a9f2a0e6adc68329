//! `vramlab._native`: the vramlab command line, in-process, for the Python
//! package. [`main`] is the `vramlab` command; [`call`] runs one command
//! with its output captured, which `vramlab/_api.py` turns into results and
//! exceptions. The GIL is released while a command runs.

use pyo3::prelude::*;

/// Runs the `vramlab` command line (`argv[0]` is the program name) and
/// returns its exit status, writing to the process's stdout and stderr.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| vramlab_cli::run_cli(argv))
}

/// Runs one command (`args` without the program name) with its output
/// captured. Returns `(ok, kind, text, notes)`: on success `kind` is
/// `"ok"` or `"check_failed"` and `text` the command's stdout; on failure
/// `kind` is `"usage"`, `"trace"` or `"other"` and `text` the message the
/// command line prints after `error: `. The options that messages and
/// notes advise are spelled as Python keywords (`device=N`, not
/// `--trace-device N`).
#[pyfunction]
fn call(py: Python<'_>, args: Vec<String>) -> (bool, &'static str, String, Vec<String>) {
    match py.detach(|| vramlab_cli::call(args, vramlab_cli::Spelling::Python)) {
        Ok(c) => (
            true,
            if c.check_failed { "check_failed" } else { "ok" },
            c.stdout,
            c.notes,
        ),
        Err(f) => {
            let kind = match f.kind {
                vramlab_cli::FailureKind::Usage => "usage",
                vramlab_cli::FailureKind::Trace => "trace",
                vramlab_cli::FailureKind::Other => "other",
            };
            (false, kind, f.message, f.notes)
        }
    }
}

/// The command line's commands and options as JSON (`vramlab
/// command-table`): what `scripts/gen_python_api.py` generates the Python
/// functions from, and what the package's test checks them against.
#[pyfunction]
fn command_table() -> String {
    vramlab_cli::command_table_json()
}

/// The vramlab release this module was built from.
#[pyfunction]
fn version() -> &'static str {
    vramlab_cli::VERSION
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add_function(wrap_pyfunction!(call, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(command_table, m)?)?;
    Ok(())
}
