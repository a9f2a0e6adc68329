//! Which PyTorch release's rules apply to a trace, and which settings every
//! release that could have recorded it accepts.
//!
//! A snapshot says which releases could have written it (see
//! `vramlab_traces::snapshot::releases_of`); a native trace may name its
//! framework in its header. The user's `--torch-version` wins over both.
//! Replays use the newest release of the range; recommendations use only
//! settings, and the environment variable, that every release in the range
//! accepts.

use vramlab_traces::advice::Opt;

use vramlab_allocator::{AllocConf, TorchVersion};
use vramlab_traces::Trace;

/// Where the release came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReleaseSource {
    /// `--torch-version`.
    User,
    /// The snapshot's keys (the signals, for people).
    Snapshot(String),
    /// The trace header's framework line.
    Header(String),
    /// Nothing said: the newest release modelled.
    Assumed,
}

/// The PyTorch release(s) a command applies to a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchTarget {
    /// The releases that could have recorded it, oldest first (one for the
    /// user's choice or an assumption).
    pub releases: Vec<TorchVersion>,
    /// Whose rules replays use: the newest of `releases`.
    pub rules: TorchVersion,
    /// Where that came from.
    pub(crate) source: ReleaseSource,
}

impl TorchTarget {
    /// One release, named by the user.
    pub fn user(v: TorchVersion) -> Self {
        TorchTarget {
            releases: vec![v],
            rules: v,
            source: ReleaseSource::User,
        }
    }

    /// `2.5–2.7` or `2.11`.
    pub(crate) fn label(&self) -> String {
        match (self.releases.first(), self.releases.last()) {
            (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
            (Some(a), _) => a.to_string(),
            _ => self.rules.to_string(),
        }
    }

    /// A line for people: "PyTorch 2.5–2.7 (detected from the snapshot:
    /// …); rules of 2.7".
    pub fn describe(&self) -> String {
        let how = match &self.source {
            ReleaseSource::User => Opt::TorchVersion.bare().to_string(),
            ReleaseSource::Snapshot(ev) => format!("recorded by, detected from the snapshot: {ev}"),
            ReleaseSource::Header(f) => format!("the trace says {f}"),
            ReleaseSource::Assumed => {
                format!(
                    "assumed: the trace does not say; name it with {}",
                    Opt::TorchVersion.bare()
                )
            }
        };
        let rules = if self.releases.len() > 1 {
            format!("; replays use the rules of {}", self.rules)
        } else {
            String::new()
        };
        format!("PyTorch {} ({how}){rules}", self.label())
    }

    /// `true` when every release in the range accepts `conf`'s string.
    pub(crate) fn all_accept(&self, settings: &str) -> bool {
        self.releases
            .iter()
            .all(|&v| AllocConf::parse(settings, v).is_ok())
    }

    /// The environment variable every release in the range reads CUDA
    /// settings from: `PYTORCH_CUDA_ALLOC_CONF` while any release of the
    /// range is older than 2.10 (2.9's CUDA parser reads only that name,
    /// pytorch/pytorch#183387), else `PYTORCH_ALLOC_CONF`.
    pub(crate) fn env_var(&self) -> &'static str {
        if self.releases.iter().all(|v| v.at_least(2, 10)) {
            "PYTORCH_ALLOC_CONF"
        } else {
            "PYTORCH_CUDA_ALLOC_CONF"
        }
    }
}

/// The target for `trace`: `user` when given, else what the trace says.
pub fn target_of(trace: &Trace, user: Option<TorchVersion>) -> TorchTarget {
    if let Some(v) = user {
        return TorchTarget::user(v);
    }
    let h = &trace.header;
    if let Some(range) = h.releases() {
        return TorchTarget {
            releases: range.modelled(),
            rules: range.rules(),
            source: ReleaseSource::Snapshot(range.evidence.join("; ")),
        };
    }
    if let Some(f) = &h.framework {
        if let Some(v) = framework_release(f) {
            return TorchTarget {
                releases: vec![v],
                rules: v,
                source: ReleaseSource::Header(f.clone()),
            };
        }
    }
    TorchTarget {
        releases: vec![TorchVersion::NEWEST],
        rules: TorchVersion::NEWEST,
        source: ReleaseSource::Assumed,
    }
}

/// `torch 2.6.0+cu124 (…)` → 2.6, for releases vramlab models; a newer
/// release maps to the newest modelled one.
fn framework_release(f: &str) -> Option<TorchVersion> {
    let rest = f.trim().strip_prefix("torch")?.trim_start();
    let token = rest.split_whitespace().next()?;
    let core = token.split('+').next()?;
    let mut parts = core.split('.');
    let major: u16 = parts.next()?.parse().ok()?;
    let minor: u16 = parts.next()?.parse().ok()?;
    let v = TorchVersion::new(major, minor);
    if v < TorchVersion::OLDEST {
        None
    } else {
        Some(v.min(TorchVersion::NEWEST))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramlab_traces::TraceHeader;
    use vramlab_traces::snapshot::{EVIDENCE_KEY, RELEASES_KEY};

    fn trace(extra: &[(&str, &str)], framework: Option<&str>) -> Trace {
        let mut h = TraceHeader {
            framework: framework.map(str::to_string),
            ..Default::default()
        };
        for (k, v) in extra {
            h.extra.insert(k.to_string(), v.to_string());
        }
        Trace::new(h)
    }

    #[test]
    fn the_user_wins_then_the_snapshot_then_the_header() {
        let v26 = TorchVersion::new(2, 6);
        let t = trace(
            &[(RELEASES_KEY, "2.5–2.7"), (EVIDENCE_KEY, "x")],
            Some("torch 2.11"),
        );
        assert_eq!(target_of(&t, Some(v26)).label(), "2.6");
        let d = target_of(&t, None);
        assert_eq!(d.label(), "2.5–2.7");
        assert_eq!(d.rules, TorchVersion::new(2, 7));
        assert_eq!(d.env_var(), "PYTORCH_CUDA_ALLOC_CONF");
        let t = trace(&[], Some("torch 2.15.0+cu132 (python 3.11.7)"));
        assert_eq!(target_of(&t, None).label(), "2.15");
        let t = trace(&[], Some("torch 2.16.0"));
        assert_eq!(target_of(&t, None).label(), "2.15");
        let t = trace(&[], Some("torch 2.10.1"));
        assert_eq!(target_of(&t, None).env_var(), "PYTORCH_ALLOC_CONF");
        assert_eq!(
            target_of(&trace(&[], None), None).source,
            ReleaseSource::Assumed
        );
    }

    #[test]
    fn ranges_parse_and_clamp() {
        let v = |m| TorchVersion::new(2, m);
        let parse_range =
            |s: &str| vramlab_torch::ReleaseRange::from_label(s, "").map(|r| r.modelled());
        assert_eq!(parse_range("2.9"), Some(vec![v(9)]));
        assert_eq!(parse_range("2.10–2.11"), Some(vec![v(10), v(11)]));
        assert_eq!(parse_range("2.11 or later"), Some(vec![v(11)]));
        assert_eq!(parse_range("2.0"), Some(vec![v(1)]));
        assert_eq!(parse_range("2.0–2.2"), Some(vec![v(1), v(2)]));
        assert_eq!(parse_range("x"), None);
    }

    #[test]
    fn only_settings_every_release_accepts() {
        let t = target_of(&trace(&[(RELEASES_KEY, "2.5–2.7")], None), None);
        assert!(t.all_accept("expandable_segments:True"));
        assert!(!t.all_accept("large_segment_size_mb:64"));
        assert!(
            !t.all_accept("max_non_split_rounding_mb:128"),
            "2.5 lacks it"
        );
    }
}
