//! Placeholder while the generator bench is written.
fn main() {}
