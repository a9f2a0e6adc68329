//! A small deterministic random number source for the crate's tests
//! (xorshift64): mutation and program-generating tests replay the same
//! inputs on every run.

/// Successive pseudo-random numbers from `seed` (which must not be 0).
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
