//! The native CSV reader: never panics; a trace it reads validates,
//! replays without an invariant violation and survives a write/read round
//! trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vramlab_traces::csv::{read_csv, write_csv};

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = read_csv(data, "fuzz.csv") else {
        return;
    };
    vramlab_fuzz::check_read_trace(&trace);
    let mut out = Vec::new();
    write_csv(&trace, &mut out, "out.csv").expect("writing to memory");
    let back = read_csv(out.as_slice(), "fuzz.csv")
        .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}"));
    assert_eq!(back, trace, "read(write(trace)) differs");
});
