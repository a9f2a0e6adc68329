//! The range of releases that could have recorded a trace, and how it is
//! kept in a trace's header.

use std::fmt;

use crate::version::TorchVersion;

/// Trace header key under which the range is kept, in words (`2.5–2.7`,
/// `2.15 or later`), so that CSV and `.vlt` files carry it readably.
pub const RELEASES_KEY: &str = "torch_releases";
/// Trace header key of the signals that decided the range, for people.
pub const EVIDENCE_KEY: &str = "torch_releases_evidence";

/// The releases that could have recorded a trace, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseRange {
    /// Oldest release the signals allow (2.0 is possible: older than any
    /// release modelled).
    pub oldest: TorchVersion,
    /// Newest release the signals allow ([`TorchVersion::NEWEST`] when
    /// nothing bounds it).
    pub newest: TorchVersion,
    /// The trace holds signals of a release newer than
    /// [`TorchVersion::NEWEST`].
    pub later: bool,
    /// The signals that decided it, for people.
    pub evidence: Vec<String>,
}

impl ReleaseRange {
    /// `oldest` to `newest`, for the signals in `evidence`.
    pub fn new(oldest: TorchVersion, newest: TorchVersion, evidence: Vec<String>) -> Self {
        ReleaseRange {
            oldest,
            newest,
            later: false,
            evidence,
        }
    }

    /// `2.5–2.7`, `2.9`, `2.15 or later`: how the header keeps it.
    pub fn label(&self) -> String {
        if self.later {
            format!("{} or later", self.newest)
        } else if self.oldest == self.newest {
            self.oldest.to_string()
        } else {
            format!("{}–{}", self.oldest, self.newest)
        }
    }

    /// The range a header kept as [`ReleaseRange::label`] words, with its
    /// evidence as one sentence; `None` for words that are not a range.
    pub fn from_label(label: &str, evidence: &str) -> Option<Self> {
        let later = label.ends_with(" or later");
        let words = label.trim_end_matches(" or later");
        let (a, b) = words.split_once('–').unwrap_or((words, words));
        let release = |t: &str| -> Option<TorchVersion> {
            let (major, minor) = t.trim().split_once('.')?;
            Some(TorchVersion::new(major.parse().ok()?, minor.parse().ok()?))
        };
        Some(ReleaseRange {
            oldest: release(a)?,
            newest: release(b)?,
            later,
            evidence: (!evidence.is_empty())
                .then(|| evidence.to_string())
                .into_iter()
                .collect(),
        })
    }

    /// The releases modelled in the range, oldest first: releases older
    /// than [`TorchVersion::OLDEST`] are left out (none left means the
    /// oldest), newer ones are the newest modelled.
    pub fn modelled(&self) -> Vec<TorchVersion> {
        let lo = self.oldest.max(TorchVersion::OLDEST);
        let hi = self
            .newest
            .clamp(TorchVersion::OLDEST, TorchVersion::NEWEST);
        TorchVersion::all()
            .filter(|v| *v >= lo && *v <= hi.max(lo))
            .collect()
    }

    /// Whose rules replays of the trace use: the newest release modelled
    /// in the range.
    pub fn rules(&self) -> TorchVersion {
        self.modelled()
            .last()
            .copied()
            .unwrap_or(TorchVersion::NEWEST)
    }
}

impl fmt::Display for ReleaseRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u16) -> TorchVersion {
        TorchVersion::new(2, minor)
    }

    #[test]
    fn a_range_reads_back_from_its_words() {
        for (oldest, newest, later) in [(5, 7, false), (9, 9, false), (15, 15, true), (0, 1, false)]
        {
            let r = ReleaseRange {
                later,
                ..ReleaseRange::new(v(oldest), v(newest), vec!["why".into()])
            };
            assert_eq!(ReleaseRange::from_label(&r.label(), "why"), Some(r));
        }
        assert_eq!(ReleaseRange::from_label("soon", ""), None);
    }

    #[test]
    fn the_modelled_releases_of_a_range() {
        let r = |a, b| ReleaseRange::new(v(a), v(b), Vec::new());
        assert_eq!(r(5, 7).modelled(), vec![v(5), v(6), v(7)]);
        assert_eq!(r(0, 1).modelled(), vec![v(1)]);
        assert_eq!(r(0, 0).modelled(), vec![v(1)]);
        assert_eq!(r(14, 15).rules(), v(15));
        assert_eq!(r(0, 0).rules(), v(1));
    }
}
