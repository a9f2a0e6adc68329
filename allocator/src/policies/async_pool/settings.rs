//! The `async` settings string: [`Config`], its parser and canonical form.

use std::fmt;
use std::str::FromStr;

use crate::policies::settings::{parse_bool, parse_bytes, size_string, split_settings};

/// Settings of the `async` policy.
///
/// Settings string keys: `release_threshold` (a size, or `max` for
/// `UINT64_MAX`, PyTorch's value) and `reuse_across_streams` (bool).
/// Example: `release_threshold:1GiB,reuse_across_streams:false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// `cudaMemPoolAttrReleaseThreshold` in bytes (`u64::MAX` = never trim
    /// at a synchronisation).
    pub release_threshold: u64,
    /// Let any stream reuse freed memory at once (see the module docs).
    pub reuse_across_streams: bool,
}

impl Default for Config {
    /// CUDA's default threshold (0) and the conservative reuse bound.
    fn default() -> Self {
        Config {
            release_threshold: 0,
            reuse_across_streams: false,
        }
    }
}

impl Config {
    /// Parses a settings string (see [`Config`] for the keys). Keys not
    /// given keep their default.
    pub fn parse(s: &str) -> Result<Config, String> {
        const P: &str = "async";
        let mut c = Config::default();
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

impl fmt::Display for Config {
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

impl FromStr for Config {
    type Err = String;
    fn from_str(s: &str) -> Result<Config, String> {
        Config::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trips() {
        let c = Config::default();
        assert_eq!(
            c.to_string(),
            "release_threshold:0,reuse_across_streams:false"
        );
        assert_eq!(Config::parse(&c.to_string()), Ok(c));
        let c = Config::parse("release_threshold:1GiB,reuse_across_streams:true").unwrap();
        assert_eq!(c.release_threshold, 1 << 30);
        assert_eq!(Config::parse(&c.to_string()), Ok(c));
        let m = Config::parse("release_threshold:MAX").unwrap();
        assert_eq!(
            m.to_string(),
            "release_threshold:max,reuse_across_streams:false"
        );
        assert!(Config::parse("release_threshold:lots").is_err());
    }
}
