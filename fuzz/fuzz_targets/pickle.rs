//! The pickle reader on arbitrary bytes: never panics; what it reads can be
//! written back and read again to the same document.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vramlab_traces::pickle::{PickleDoc, PickleWriter};

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = PickleDoc::from_slice(data) else {
        return;
    };
    assert!(doc.bytes_read() <= data.len());
    let _ = format!("{doc:?}");
    let value = doc.root().to_value();
    let bytes = PickleWriter::new().to_vec(&value);
    let again = PickleDoc::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}"));
    // Byte equality of the rewritten documents (tolerates NaN floats, which
    // compare unequal to themselves).
    let rewritten = PickleWriter::new().to_vec(&again.root().to_value());
    assert_eq!(bytes, rewritten, "read(write(doc)) differs from doc");
});
