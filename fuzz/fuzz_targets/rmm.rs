//! The RMM log reader: never panics; a trace it reads validates and replays
//! without an invariant violation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vramlab_traces::rmm::read_rmm;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = read_rmm(data, "fuzz.csv") {
        vramlab_fuzz::check_read_trace(&trace);
    }
});
