//! Where the commands' words go: stdout and stderr, or — while
//! [`crate::call`] runs a command for the Python API — a buffer of the
//! calling thread.

use std::cell::RefCell;
use std::io::Write;

thread_local! {
    /// The capture of the command this thread is running, if any.
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// What a captured command wrote.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    /// Everything written to stdout.
    pub stdout: String,
    /// The lines written to stderr (notes, "wrote …"), without newlines.
    pub notes: Vec<String>,
}

/// Starts capturing this thread's output.
pub(crate) fn start_capture() {
    CAPTURE.with(|c| *c.borrow_mut() = Some(Capture::default()));
}

/// Stops capturing and returns what was written.
pub(crate) fn take_capture() -> Capture {
    CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default()
}

/// Writes to the captured output, if this thread captures; `false` if not.
fn captured(f: impl FnOnce(&mut Capture)) -> bool {
    CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(cap) => {
            f(cap);
            true
        }
        None => false,
    })
}

/// Writes to stdout; exits with status 0 if the reader went away (output
/// piped into `head`), with status 2 if stdout cannot be written.
pub fn write_stdout(s: &str) {
    if captured(|c| c.stdout.push_str(s)) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(2);
    }
}

/// Writes a note to stderr (captured as lines while [`crate::call`] runs).
pub fn write_stderr(s: &str) {
    if captured(|c| c.notes.extend(s.lines().map(str::to_string))) {
        return;
    }
    // stderr gone too: nothing left to tell.
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}
