//! Progress bars for long reads and replays, on stderr when it is a
//! terminal (never in pipes, files or CI logs).

use std::cell::RefCell;
use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use vramlab_replay::Reading;

/// Files at least this large show a reading bar.
const READ_BAR_BYTES: u64 = 64 << 20;

fn bar(total: u64, template: &str, message: String) -> ProgressBar {
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_message(message);
    pb
}

/// A bar of the bytes read for each large file on a terminal, moved by
/// [`vramlab_replay::Inputs`]'s progress ([`ReadBar::report`]).
#[derive(Default)]
pub struct ReadBar {
    bar: RefCell<Option<ProgressBar>>,
}

impl ReadBar {
    /// Starts, moves or clears the bar.
    pub fn report(&self, reading: Reading<'_>) {
        match reading {
            Reading::Started { path, bytes } => {
                if bytes >= READ_BAR_BYTES && std::io::stderr().is_terminal() {
                    *self.bar.borrow_mut() = Some(bar(
                        bytes,
                        "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} (eta {eta})",
                        format!("reading {}", path.display()),
                    ));
                }
            }
            Reading::Read(n) => {
                if let Some(pb) = self.bar.borrow().as_ref() {
                    pb.set_position(n);
                }
            }
            Reading::Finished => {
                if let Some(pb) = self.bar.borrow_mut().take() {
                    pb.finish_and_clear();
                }
            }
        }
    }
}

/// Moves a [`stream_bar`] from the reading thread.
pub type StreamHook = Box<dyn Fn(u64) + Send>;

/// A bar of the bytes read while a large file on a terminal is replayed as
/// it is read, and the hook that moves it; `None` otherwise.
pub fn stream_bar(path: &std::path::Path, doing: &str) -> Option<(ProgressBar, StreamHook)> {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    if bytes < READ_BAR_BYTES || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = bar(
        bytes,
        "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} (eta {eta})",
        format!("{doing} {}", path.display()),
    );
    let moved = pb.clone();
    Some((pb, Box::new(move |n| moved.set_position(n))))
}

/// A bar of replays done, on stderr when it is a terminal.
pub fn replay_count_bar(total: u64, quiet: bool) -> indicatif::ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(total);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} replays  {elapsed_precise} (eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb
}
