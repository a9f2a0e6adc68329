//! The `bfc` settings string: [`Settings`], its parser and canonical form.

use std::fmt;
use std::str::FromStr;

use crate::policies::settings::{
    parse_bool, parse_bytes, parse_number, size_string, split_settings,
};

/// Settings of the `bfc` policy.
///
/// Settings string keys: `allow_growth` (bool), `memory_limit` (size,
/// e.g. `8GiB`), `memory_fraction` (fraction of the device's total memory,
/// in (0, 1]; used when `memory_limit` is absent), `preallocate` (a
/// fraction: JAX's shorthand for `allow_growth:false,memory_fraction:F`),
/// `garbage_collection` (bool), `fragmentation_fraction` (in [0, 1]; 0 =
/// the 128 MiB split cap). Example: `allow_growth:true,memory_limit:8GiB,
/// garbage_collection:true`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Grow regions on demand (`allow_growth`) instead of one region of the
    /// whole limit.
    pub allow_growth: bool,
    /// Absolute memory limit in bytes; overrides `memory_fraction`.
    pub memory_limit: Option<u64>,
    /// Fraction of the device's total memory used as the limit when
    /// `memory_limit` is `None` (JAX's `XLA_PYTHON_CLIENT_MEM_FRACTION`).
    pub memory_fraction: f64,
    /// Free whole unused regions and retry when extending fails.
    pub garbage_collection: bool,
    /// `Options::fragmentation_fraction`: when positive, the split cap is
    /// this fraction of the memory limit instead of 128 MiB.
    pub fragmentation_fraction: f64,
}

impl Default for Settings {
    /// JAX's defaults: preallocate 75 % of the device, no garbage collection.
    fn default() -> Self {
        Settings {
            allow_growth: false,
            memory_limit: None,
            memory_fraction: 0.75,
            garbage_collection: false,
            fragmentation_fraction: 0.0,
        }
    }
}

impl Settings {
    /// Parses a settings string (see [`Settings`] for the keys). Keys not
    /// given keep their default.
    pub fn parse(s: &str) -> Result<Settings, String> {
        const P: &str = "bfc";
        let pairs = split_settings(
            P,
            s,
            &[
                "allow_growth",
                "memory_limit",
                "memory_fraction",
                "preallocate",
                "garbage_collection",
                "fragmentation_fraction",
            ],
        )?;
        let mut c = Settings::default();
        let has = |k: &str| pairs.iter().any(|(key, _)| *key == k);
        if has("memory_limit") && has("memory_fraction") {
            return Err(
                "bfc settings memory_limit and memory_fraction exclude each other".to_string(),
            );
        }
        if has("preallocate") && (has("allow_growth") || has("memory_fraction")) {
            return Err("bfc setting preallocate:F stands for allow_growth:false,memory_fraction:F; do not combine it with allow_growth or memory_fraction".to_string());
        }
        for (k, v) in pairs {
            match k {
                "allow_growth" => c.allow_growth = parse_bool(P, k, v)?,
                "memory_limit" => {
                    let n = parse_bytes(P, k, v)?;
                    if n == 0 {
                        return Err("bfc setting memory_limit: must be more than 0 bytes".into());
                    }
                    c.memory_limit = Some(n);
                }
                "memory_fraction" => c.memory_fraction = parse_number(P, k, v, 0.0, true, 1.0)?,
                "preallocate" => {
                    c.allow_growth = false;
                    c.memory_fraction = parse_number(P, k, v, 0.0, true, 1.0)?;
                }
                "garbage_collection" => c.garbage_collection = parse_bool(P, k, v)?,
                "fragmentation_fraction" => {
                    c.fragmentation_fraction = parse_number(P, k, v, 0.0, false, 1.0)?
                }
                _ => unreachable!("split_settings only returns known keys"),
            }
        }
        Ok(c)
    }
}

impl fmt::Display for Settings {
    /// The canonical settings string, every key spelled out:
    /// `allow_growth:false,memory_fraction:0.75,garbage_collection:false,fragmentation_fraction:0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "allow_growth:{},", self.allow_growth)?;
        match self.memory_limit {
            Some(n) => write!(f, "memory_limit:{},", size_string(n))?,
            None => write!(f, "memory_fraction:{},", self.memory_fraction)?,
        }
        write!(
            f,
            "garbage_collection:{},fragmentation_fraction:{}",
            self.garbage_collection, self.fragmentation_fraction
        )
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
            "allow_growth:false,memory_fraction:0.75,garbage_collection:false,fragmentation_fraction:0"
        );
        assert_eq!(Settings::parse(&c.to_string()), Ok(c));
        let c =
            Settings::parse("allow_growth:true,memory_limit:8GiB,garbage_collection:true").unwrap();
        assert!(c.allow_growth && c.garbage_collection);
        assert_eq!(c.memory_limit, Some(8 << 30));
        assert_eq!(Settings::parse(&c.to_string()), Ok(c));
        let p = Settings::parse("preallocate:0.9").unwrap();
        assert!(!p.allow_growth);
        assert_eq!(p.memory_fraction, 0.9);
    }
}
