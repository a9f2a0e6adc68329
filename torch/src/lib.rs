//! What a PyTorch release means to vramlab, in one place: the release type
//! ([`TorchVersion`]) and the releases modelled, the allocator settings
//! keys each release accepts ([`CONF_KEY_SINCE`]), and the range of
//! releases that could have recorded a trace ([`ReleaseRange`], kept in
//! the trace's header). The allocator, the trace readers and the replay
//! crate all take them from here, so that a new release touches this crate
//! and the rules that differ, nothing else.

mod keys;
mod range;
mod version;

pub use keys::{CONF_KEY_SINCE, conf_key_since};
pub use range::{EVIDENCE_KEY, RELEASES_KEY, ReleaseRange};
pub use version::{TorchVersion, VersionParseError};
