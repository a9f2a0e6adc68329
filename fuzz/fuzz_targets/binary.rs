//! The binary (.vlt) reader: never panics or allocates beyond the input; a
//! trace it reads validates, replays (including any initial state) without
//! an invariant violation, and round-trips through the writer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vramlab_traces::binary::{read_binary, write_binary};

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = read_binary(data, "fuzz.vlt") else {
        return;
    };
    vramlab_fuzz::check_read_trace(&trace);
    for compress in [false, true] {
        let mut out = Vec::new();
        write_binary(&trace, &mut out, compress, "out.vlt").expect("writing to memory");
        let back = read_binary(out.as_slice(), "out.vlt")
            .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}"));
        assert_eq!(back, trace, "read(write(trace)) differs");
    }
});
