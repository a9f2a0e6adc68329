//! What `vramlab report` and `vramlab demo` print besides the page: the
//! demo's question, the recommendation, and where the report went.

use std::path::Path;

use vramlab_replay::Recommendation;

use crate::render::recommendation::print_recommendation;

/// The demo's question about its bundled trace of `events` events and `card`.
pub fn print_demo_question(events: usize, card: &str) {
    outln!(
        "Llama-3-8B full fine-tuning step (bf16, AdamW, batch 1, sequence 1024), recorded on the CPU with\nfake tensors ({events} events). Does it fit {card}, and with which PYTORCH_ALLOC_CONF?\n",
    );
}

/// The demo's answer: the recommendation (the best `top` settings) and the
/// report's page.
pub fn print_demo_answer(name: &str, card: &str, rec: &Recommendation, top: usize, index: &Path) {
    print_recommendation(name, card, rec, top);
    outln!("\nreport with plots: {}", index.display());
}

/// A report's outcome: the recommendation (the page's, by the one rule,
/// with or without a card), then the page.
pub fn print_report(
    name: &str,
    card: Option<&str>,
    rec: &Recommendation,
    top: usize,
    index: &Path,
) {
    print_recommendation(
        name,
        card.unwrap_or("no card given (unlimited memory)"),
        rec,
        top,
    );
    outln!("\nreport: {}", index.display());
}

/// The page of a report of a recorded allocator state.
pub fn print_state_report(index: &Path) {
    outln!("report of the allocator state: {}", index.display());
}
