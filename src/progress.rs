//! Progress bars for long reads and replays, on stderr when it is a
//! terminal (never in pipes, files or CI logs).

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use vramlab_allocator::TorchVersion;
use vramlab_replay::ProgressHook;
use vramlab_replay::io::load::Loaded;
use vramlab_traces::io::Format;
use vramlab_traces::{Trace, TraceError};

/// Files at least this large show a reading bar.
const READ_BAR_BYTES: u64 = 64 << 20;
/// Traces with at least this many events show a replay bar.
const REPLAY_BAR_EVENTS: usize = 5_000_000;

fn bar(total: u64, template: &str, message: String) -> ProgressBar {
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_message(message);
    pb
}

/// Reads every device's trace from `path`, with a bar of the bytes read
/// for a large file on a terminal. One device's failure does not stop the
/// others ([`Loaded::failed`]).
pub fn load_devices(
    path: &Path,
    format: Option<Format>,
    version: Option<TorchVersion>,
) -> Result<Loaded, TraceError> {
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    if size < READ_BAR_BYTES || !std::io::stderr().is_terminal() {
        return vramlab_replay::io::load::load_devices(path, format, version, None);
    }
    let pb = bar(
        size,
        "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} (eta {eta})",
        format!("reading {}", path.display()),
    );
    let report = |n: u64| pb.set_position(n);
    let out = vramlab_replay::io::load::load_devices(path, format, version, Some(&report));
    pb.finish_and_clear();
    out
}

/// A bar of the events replayed, and the hook that moves it, for a long
/// trace on a terminal; `None` otherwise. Call
/// [`ProgressBar::finish_and_clear`] when the replay ends.
pub fn replay_bar(trace: &Trace, label: &str) -> Option<(ProgressBar, ProgressHook)> {
    if trace.events.len() < REPLAY_BAR_EVENTS || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = bar(
        trace.events.len() as u64,
        "{msg} {bar:30} {human_pos}/{human_len} events {per_sec} (eta {eta})",
        format!("replaying under {label}"),
    );
    let moved = pb.clone();
    Some((pb, ProgressHook::new(move |n| moved.set_position(n))))
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
