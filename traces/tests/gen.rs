//! The generator against the recorded corpus.

use vramlab_traces::r#gen::{
    CheckKind, GenRequest, PRESETS, Variant, check_family, corpus, generate, preset,
};

#[test]
fn gpt_small_checks() {
    let p = preset("gpt-small").unwrap();
    for c in check_family(p, &Variant::default_for(p)).unwrap() {
        println!(
            "{:<40} {:<12} b{} {}: allocs {} vs {}, peak {} vs {} ({:+.3}%)",
            c.file,
            c.kind.to_string(),
            c.batch,
            c.value,
            c.recorded_allocs,
            c.generated_allocs,
            c.recorded_peak,
            c.generated_peak,
            100.0 * c.peak_error()
        );
    }
}
