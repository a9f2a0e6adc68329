//! The `async` settings string: [`Settings`], its parser and canonical form.

use std::fmt;
use std::str::FromStr;

use crate::policies::settings::{parse_bool, parse_bytes, size_string, split_settings};

/// Settings of the `async` policy.
///
/// Settings string keys: `release_threshold` (a size, or `max` for
/// `UINT64_MAX`, PyTorch's value) and `reuse_across_streams` (bool).
/// Example: `release_threshold:1GiB,reuse_across_streams:false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `cudaMemPoolAttrReleaseThreshold` in bytes (`u64::MAX` = never trim
    /// at a synchronisation).
    pub release_threshold: u64,
    /// Let any stream reuse freed memory at once (see the module docs).
    pub reuse_across_streams: bool,
}

impl Default for Settings {
    /// CUDA's default threshold (0) and the conservative reuse bound.
    fn default() -> Self {
        Settings {
            release_threshold: 0,
            reuse_across_streams: false,
        }
    }
}

impl Settings {
    /// Parses a settings string (see [`Settings`] for the keys). Keys not
    /// given keep their default.
    pub fn parse(s: &str) -> Result<Settings, String> {
        const P: &str = "async";
        let mut c = Settings::default();
        for (k, v) in split_settings(P, s, &["release_threshold", "reuse_across_streams"])? {
            match k {
                "release_threshold" => {
                    c.release_threshold = if v.eq_ignore_ascii_case("max") {
                        u64::MAX
                    } else {
                        parse_bytes(P, k, v)?
                    }
                }
                "reuse_across_streams" => c.reuse_across_streams = parse_bool(P, k, v)?,
                _ => unreachable!("split_settings only returns known keys"),
            }
        }
        Ok(c)
    }
}

impl fmt::Display for Settings {
    /// The canonical settings string: `release_threshold:0,reuse_across_streams:false`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.release_threshold == u64::MAX {
            write!(f, "release_threshold:max,")?;
        } else {
            write!(
                f,
                "release_threshold:{},",
                size_string(self.release_threshold)
            )?;
        }
        write!(f, "reuse_across_streams:{}", self.reuse_across_streams)
    }
}

impl FromStr for Settings {
    type Err = String;
    fn from_str(s: &str) -> Result<Settings, String> {
        Settings::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trips() {
        let c = Settings::default();
        assert_eq!(
            c.to_string(),
            "release_threshold:0,reuse_across_streams:false"
        );
        assert_eq!(Settings::parse(&c.to_string()), Ok(c));
        let c = Settings::parse("release_threshold:1GiB,reuse_across_streams:true").unwrap();
        assert_eq!(c.release_threshold, 1 << 30);
        assert_eq!(Settings::parse(&c.to_string()), Ok(c));
        let m = Settings::parse("release_threshold:MAX").unwrap();
        assert_eq!(
            m.to_string(),
            "release_threshold:max,reuse_across_streams:false"
        );
        assert!(Settings::parse("release_threshold:lots").is_err());
    }
}
