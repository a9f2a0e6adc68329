//! PyTorch release numbers that select version-dependent behaviour.

use std::fmt;
use std::str::FromStr;

/// A PyTorch release (`major.minor`) whose rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TorchVersion {
    /// Major version (2).
    pub major: u16,
    /// Minor version.
    pub minor: u16,
}

impl TorchVersion {
    /// The newest release whose behaviour vramlab models.
    pub const NEWEST: TorchVersion = TorchVersion::new(2, 15);
    /// The oldest release whose behaviour vramlab models.
    pub const OLDEST: TorchVersion = TorchVersion::new(2, 1);

    /// `major.minor`.
    pub const fn new(major: u16, minor: u16) -> Self {
        TorchVersion { major, minor }
    }

    /// Every release modelled, oldest first.
    pub fn all() -> impl Iterator<Item = TorchVersion> {
        (Self::OLDEST.minor..=Self::NEWEST.minor).map(|minor| TorchVersion::new(2, minor))
    }

    /// `true` if this release is `major.minor` or newer.
    pub fn at_least(self, major: u16, minor: u16) -> bool {
        self >= TorchVersion::new(major, minor)
    }
}

impl Default for TorchVersion {
    fn default() -> Self {
        TorchVersion::NEWEST
    }
}

impl fmt::Display for TorchVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Error for a version string that is not `MAJOR.MINOR[.PATCH][+local]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid PyTorch version '{0}': expected MAJOR.MINOR such as 2.11 (supported: {min} to {max})", min = TorchVersion::OLDEST, max = TorchVersion::NEWEST)]
pub struct VersionParseError(pub String);

impl FromStr for TorchVersion {
    type Err = VersionParseError;

    /// Accepts `2.11`, `2.11.0`, `2.6.0+cu124`, `v2.9`; clamps nothing, but
    /// rejects majors other than 2 and minors outside the supported range.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || VersionParseError(s.to_string());
        let t = s.trim().trim_start_matches(['v', 'V']);
        let t = t.split(['+', ' ']).next().unwrap_or("");
        let mut parts = t.split('.');
        let major: u16 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(err)?;
        let minor: u16 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(err)?;
        let v = TorchVersion::new(major, minor);
        if v < TorchVersion::OLDEST || v > TorchVersion::NEWEST {
            return Err(err());
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_release_strings() {
        assert_eq!("2.11".parse(), Ok(TorchVersion::new(2, 11)));
        assert_eq!("2.6.0+cu124".parse(), Ok(TorchVersion::new(2, 6)));
        assert_eq!("v2.9.1".parse(), Ok(TorchVersion::new(2, 9)));
        assert!("1.13".parse::<TorchVersion>().is_err());
        assert!("2.99".parse::<TorchVersion>().is_err());
        assert!("two".parse::<TorchVersion>().is_err());
        assert!(TorchVersion::new(2, 10).at_least(2, 9));
    }

    #[test]
    fn every_release_is_listed_once_in_order() {
        let all: Vec<TorchVersion> = TorchVersion::all().collect();
        assert_eq!(all.first(), Some(&TorchVersion::OLDEST));
        assert_eq!(all.last(), Some(&TorchVersion::NEWEST));
        assert!(all.windows(2).all(|w| matches!(w, [a, b] if a < b)));
        assert_eq!(all.len(), 15);
    }
}
