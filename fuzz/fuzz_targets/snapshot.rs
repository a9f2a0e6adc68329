//! PyTorch snapshot pickles as arbitrary bytes: reading, the typed model and
//! the conversion to traces never panic, and what they produce is a valid
//! trace that replays without an invariant violation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vramlab_traces::snapshot::{SizeRules, read_snapshot, snapshot_to_traces};

fuzz_target!(|data: &[u8]| {
    let Ok(snap) = read_snapshot(data, "fuzz.pickle") else {
        return;
    };
    let Ok(traces) = snapshot_to_traces(&snap, "fuzz.pickle", &SizeRules::default()) else {
        return;
    };
    for t in &traces {
        vramlab_fuzz::check_read_trace(t);
    }
});
