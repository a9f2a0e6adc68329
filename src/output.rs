//! Where the commands' words go: stdout and stderr, or — while
//! [`crate::call`] runs a command for the Python API — a buffer of the
//! calling thread.

use std::cell::{Cell, RefCell};
use std::io::Write;

thread_local! {
    /// The capture of the command this thread is running, if any.
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
    /// The columns human output fits (`usize::MAX`: `--wide`).
    static WIDTH: Cell<usize> = const { Cell::new(DEFAULT_WIDTH) };
    /// `--verbose`: developer counts (reads, caches) on stderr too.
    static VERBOSE: Cell<bool> = const { Cell::new(false) };
}

/// The columns tables and prose fit when neither `--wide` nor `COLUMNS`
/// says otherwise.
pub const DEFAULT_WIDTH: usize = 100;

/// The narrowest width honoured from `COLUMNS`.
const MIN_WIDTH: usize = 40;

/// Sets, for this thread's command, the width human output fits: all of
/// it with `wide`, else `COLUMNS` when set (at least 40), else 100.
pub(crate) fn set_width(wide: bool) {
    let w = if wide {
        usize::MAX
    } else {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok())
            .map_or(DEFAULT_WIDTH, |c| c.max(MIN_WIDTH))
    };
    WIDTH.with(|c| c.set(w));
}

/// The columns human output fits on this thread.
pub fn width() -> usize {
    WIDTH.with(Cell::get)
}

/// Sets `--verbose` for this thread's command.
pub(crate) fn set_verbose(on: bool) {
    VERBOSE.with(|c| c.set(on));
}

/// `--verbose`: print developer counts.
pub fn verbose() -> bool {
    VERBOSE.with(Cell::get)
}

/// `text` with every prose line longer than [`width`] broken at spaces; a
/// continuation is indented two columns past its line's own indent. A
/// word longer than the width stays whole; a line laid out in columns
/// (two spaces inside it: a table row, a labelled command) is left whole.
pub fn wrap_prose(text: &str) -> std::borrow::Cow<'_, str> {
    let w = width();
    if text.lines().all(|l| l.chars().count() <= w) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        wrap_line(line, w, &mut out);
    }
    std::borrow::Cow::Owned(out)
}

fn wrap_line(line: &str, w: usize, out: &mut String) {
    // A laid-out line (a table row: columns two spaces apart, or a command
    // to copy beside its label) is never broken: tables fit themselves.
    if line.chars().count() <= w || line.trim_start().contains("  ") {
        out.push_str(line);
        return;
    }
    let indent = line.len() - line.trim_start_matches(' ').len();
    let cont = " ".repeat((indent + 2).min(w / 2));
    let mut col = 0;
    let mut first = true;
    out.push_str(&line[..indent]);
    col += indent;
    for word in line[indent..].split(' ') {
        let n = word.chars().count();
        if !first && col + 1 + n > w {
            out.push('\n');
            out.push_str(&cont);
            col = cont.len();
        } else if !first {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += n;
        first = false;
    }
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

/// Writes human output (prose and tables) to stdout, wrapped to
/// [`width`]; data (JSON, CSV) goes through [`write_stdout`] as it is.
pub fn write_human(s: &str) {
    write_stdout(&wrap_prose(s));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_and_laid_out_lines_stay_whole() {
        set_width(false);
        WIDTH.with(|c| c.set(40));
        let prose = "The defaults fit the card with room to spare, so nothing needs exporting.";
        let wrapped = wrap_prose(prose);
        assert!(wrapped.lines().count() > 1, "{wrapped}");
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 40),
            "{wrapped}"
        );
        assert!(
            wrapped.lines().skip(1).all(|l| l.starts_with("  ")),
            "{wrapped}"
        );
        // A command to copy, beside its label, and a table row: never broken.
        let export = "  bash        export PYTORCH_CUDA_ALLOC_CONF=\"expandable_segments:True,garbage_collection_threshold:0.8\"";
        assert_eq!(wrap_prose(export), export);
        let row = "1693  39.06 MiB  40.94 MiB  3,274  never  -  11.67 GiB  1023.99 MiB less";
        assert_eq!(wrap_prose(row), row);
        WIDTH.with(|c| c.set(DEFAULT_WIDTH));
    }
}
