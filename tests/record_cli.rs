//! `vramlab record` refuses what it cannot record, with messages that say
//! why, before installing anything (recording itself needs a torch wheel:
//! scripts/check_recorder.py, run by CI).

mod common;
use common::vramlab;

const SCRIPT: &str = "tests/record/linear_train.py";

#[test]
fn a_missing_script_is_named() {
    let (code, _, err) = vramlab(&["record", "-o", "x.pickle", "--", "no/such/train.py"]);
    assert_eq!(code, 2);
    assert!(err.contains("no/such/train.py: no such script"), "{err}");
}

#[test]
fn a_card_without_a_property_table_is_refused() {
    let (code, _, err) = vramlab(&["record", "--gpu", "t4", "-o", "x.pickle", "--", SCRIPT]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--gpu t4: the fake GPU has the properties of h100-80gb, h100-94gb, h200, a100-40gb, a100-80gb, l4, rtx4090 only"),
        "{err}"
    );
    let (code, _, err) = vramlab(&["record", "--gpu", "h800", "-o", "x.pickle", "--", SCRIPT]);
    assert_eq!(code, 2);
    assert!(err.contains("h800"), "{err}");
}

#[test]
fn ranks_need_a_world_and_must_be_in_it() {
    let (code, _, err) = vramlab(&["record", "--ranks", "1", "-o", "job", "--", SCRIPT]);
    assert_eq!(code, 2);
    assert!(err.contains("--ranks needs --world-size N"), "{err}");
    let args = [
        "record",
        "--world-size",
        "4",
        "--ranks",
        "2-5",
        "-o",
        "job",
        "--",
        SCRIPT,
    ];
    let (code, _, err) = vramlab(&args);
    assert_eq!(code, 2);
    assert!(
        err.contains("--ranks: rank 4 is outside the world of 4 ranks (0..3)"),
        "{err}"
    );
    let args = ["record", "--world-size", "0", "-o", "job", "--", SCRIPT];
    let (code, _, err) = vramlab(&args);
    assert_eq!(code, 2);
    assert!(err.contains("--world-size must be at least 1"), "{err}");
}

#[test]
fn the_script_comes_after_two_dashes() {
    let (code, _, err) = vramlab(&["record", "-o", "x.pickle"]);
    assert_eq!(code, 2);
    assert!(err.contains("<SCRIPT>"), "{err}");
}
