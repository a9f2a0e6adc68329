//! Messages name options in the words of the front end that runs in the
//! process: the command line's flags, or the Python package's keywords once
//! it says it runs (`call(…, Spelling::Python)`), on every thread. A test
//! binary of its own: the spelling belongs to the process.

use vramlab_cli::{Spelling, call};
use vramlab_traces::advice::Opt;

#[test]
fn library_errors_name_options_in_the_front_ends_words() {
    let trace = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/workloads/data/gpt-small-train.csv"
    );
    let out = std::env::temp_dir().join("vramlab-advice-test.pickle");
    let out = out.to_str().expect("a UTF-8 temporary path");
    let convert = ["convert", trace, out];
    let cli = call(convert, Spelling::Cli).expect_err("no snapshot writer");
    assert!(
        cli.message
            .contains("use `vramlab replay --snapshot-out FILE`"),
        "{}",
        cli.message
    );
    let py = call(convert, Spelling::Python).expect_err("no snapshot writer");
    assert!(
        py.message
            .contains("use `vramlab.replay(…, snapshot_out=FILE)`"),
        "{}",
        py.message
    );
    let made = std::env::temp_dir().join("vramlab-advice-test.csv");
    let made = made.to_str().expect("a UTF-8 temporary path");
    let gen_ = ["gen", "sd15", "--seq", "77", "-o", made];
    let cli = call(gen_, Spelling::Cli).expect_err("sd15 has no --seq");
    assert_eq!(cli.message, "sd15 scales with --resolution, not --seq");
    let py = call(gen_, Spelling::Python).expect_err("sd15 has no seq=");
    assert_eq!(py.message, "sd15 scales with resolution=, not seq=");
    // A worker thread the library starts writes the same words, with
    // nothing carried over to it.
    let on_worker = std::thread::spawn(|| Opt::TraceDevice.bare().to_string())
        .join()
        .expect("worker runs");
    assert_eq!(on_worker, "device=");
}
