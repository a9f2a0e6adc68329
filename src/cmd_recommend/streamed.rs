//! `vramlab recommend` of a native trace file (`.csv`, `.csv.gz`, `.vlt`,
//! `.vlt.zst`, an RMM log) read again for each pass instead of held: one
//! read sweeps every setting (in parallel), one counts the live peak, the
//! searches for the smallest cards read it once per step, and the other
//! placement's replays once each. Memory is bounded by what is live; the
//! advice is that of the trace read whole. A snapshot or `--trace-device`
//! take the path that reads the trace whole.

use anyhow::Result;
use vramlab_allocator::TorchVersion;
use vramlab_replay::{ReplayPasses, TraceFile};
use vramlab_traces::{EventBlocks, IdUse, open_events};

use super::RecommendArgs;

/// Recommends as the file is read; `Ok(false)` when the trace must be
/// read whole (the caller does).
pub(super) fn run(
    args: &RecommendArgs,
    capacity: u64,
    upgrade_to: Option<TorchVersion>,
) -> Result<bool> {
    let path = &args.trace.trace;
    if args.trace.device.is_some() {
        return Ok(false);
    }
    let open_plain = || open_events(path, args.trace.format, IdUse::Recycled, None::<fn(u64)>);
    // A file that does not open is read whole, whose errors name it.
    let Ok(Some(first)) = open_plain() else {
        return Ok(false);
    };
    let noted = first.trace().notes.len();
    crate::inputs::print_streamed_notes(path, &first.trace().notes, None);
    let name = vramlab_replay::input_label(path, first.trace().header.device);
    drop(first);
    let rereads = crate::rereads::Rereads::new(path, args.trace.format, "recommending");
    let file = TraceFile::new(|| rereads.open())?;
    // The advice is printed as it is made; a trace without events must be
    // refused before, as a whole read refuses it: the read that counts the
    // live peak (which the advice needs) says.
    let empty = file.peak_live().map(|_| file.first_end());
    if let Ok(Some(end)) = &empty {
        if end.counts.events == 0 {
            rereads.done();
            return Err(crate::inputs::nothing_to_replay(path, &end.trace.notes));
        }
    }
    empty?;
    let advised = super::advise(args, &file, &name, capacity, upgrade_to);
    rereads.done();
    advised?;
    if let Some(end) = file.first_end() {
        let later = end.trace.notes.get(noted..).unwrap_or_default();
        crate::inputs::print_streamed_notes(path, later, Some(end.counts));
    }
    if crate::output::verbose() {
        errln!("the trace was read {} times, not held", file.reads());
    }
    Ok(true)
}
