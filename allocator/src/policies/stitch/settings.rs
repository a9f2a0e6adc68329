//! The `stitch` settings string: [`Settings`], its parser and canonical form.

use std::fmt;
use std::str::FromStr;

use crate::policies::settings::{
    parse_bool, parse_bytes, parse_number, size_string, split_settings,
};

/// Settings of the `stitch` policy.
///
/// Settings string keys: `stitch` (bool, GMLake `vmmDefragment`),
/// `fragment_limit` (size, `fragLimit`), `reuse_limit` (number ≥ 1,
/// `reuseLimit`), `defragment_level` (0, 1 or 2, `defragLevel`),
/// `max_pieces` (integer ≥ 2 or `unlimited`), `gc_limit` (size, `autoGC`).
/// Example: `fragment_limit:64MiB,defragment_level:0,max_pieces:8`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Stitch at all (off: a PyTorch-like allocator with 2 MiB large-pool
    /// rounding and virtual-memory segments).
    pub stitch: bool,
    /// Only large requests of at least this many bytes are stitched.
    pub fragment_limit: u64,
    /// A cached sBlock serves a request when its size is at most
    /// `request × reuse_limit`.
    pub reuse_limit: f64,
    /// The first of the three stitching points of `malloc` that may stitch.
    pub defragment_level: u8,
    /// Most pieces one sBlock may have (`None` = no limit).
    pub max_pieces: Option<u32>,
    /// Cached sBlocks are dissolved when all sBlocks together exceed this
    /// many bytes.
    pub gc_limit: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            stitch: true,
            fragment_limit: 512 << 20,
            reuse_limit: 1.0,
            defragment_level: 0,
            max_pieces: None,
            gc_limit: 1000 << 30,
        }
    }
}

impl Settings {
    /// Parses a settings string (see [`Settings`] for the keys). Keys not
    /// given keep their default.
    pub fn parse(s: &str) -> Result<Settings, String> {
        const P: &str = "stitch";
        let mut c = Settings::default();
        let known = [
            "stitch",
            "fragment_limit",
            "reuse_limit",
            "defragment_level",
            "max_pieces",
            "gc_limit",
        ];
        for (k, v) in split_settings(P, s, &known)? {
            match k {
                "stitch" => c.stitch = parse_bool(P, k, v)?,
                "fragment_limit" => c.fragment_limit = parse_bytes(P, k, v)?,
                "reuse_limit" => c.reuse_limit = parse_number(P, k, v, 1.0, false, 1e6)?,
                "defragment_level" => {
                    c.defragment_level = match v {
                        "0" => 0,
                        "1" => 1,
                        "2" => 2,
                        _ => {
                            return Err(format!(
                                "stitch setting defragment_level: invalid value '{v}' (expected 0, 1 or 2)"
                            ));
                        }
                    }
                }
                "max_pieces" => {
                    c.max_pieces = if v.eq_ignore_ascii_case("unlimited") {
                        None
                    } else {
                        match v.parse::<u32>() {
                            Ok(n) if n >= 2 => Some(n),
                            _ => {
                                return Err(format!(
                                    "stitch setting max_pieces: invalid value '{v}' (expected an integer of at least 2, or unlimited)"
                                ));
                            }
                        }
                    }
                }
                "gc_limit" => c.gc_limit = parse_bytes(P, k, v)?,
                _ => unreachable!("split_settings only returns known keys"),
            }
        }
        Ok(c)
    }
}

impl fmt::Display for Settings {
    /// The canonical settings string, every key spelled out:
    /// `stitch:true,fragment_limit:512MiB,reuse_limit:1,defragment_level:0,max_pieces:unlimited,gc_limit:1000GiB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stitch:{},fragment_limit:{},reuse_limit:{},defragment_level:{},",
            self.stitch,
            size_string(self.fragment_limit),
            self.reuse_limit,
            self.defragment_level
        )?;
        match self.max_pieces {
            Some(n) => write!(f, "max_pieces:{n},")?,
            None => write!(f, "max_pieces:unlimited,")?,
        }
        write!(f, "gc_limit:{}", size_string(self.gc_limit))
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
            "stitch:true,fragment_limit:512MiB,reuse_limit:1,defragment_level:0,max_pieces:unlimited,gc_limit:1000GiB"
        );
        assert_eq!(Settings::parse(&c.to_string()), Ok(c));
        let c =
            Settings::parse("fragment_limit:64MiB,max_pieces:8,reuse_limit:2.5,defragment_level:1")
                .unwrap();
        assert_eq!(c.fragment_limit, 64 << 20);
        assert_eq!(c.max_pieces, Some(8));
        assert_eq!(Settings::parse(&c.to_string()), Ok(c));
        assert!(Settings::parse("max_pieces:1").is_err());
        assert!(Settings::parse("defragment_level:3").is_err());
        assert!(Settings::parse("reuse_limit:0.5").is_err());
    }
}
