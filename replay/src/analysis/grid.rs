//! Grids of settings to sweep: the default grid of the settings people
//! actually use, and grid files.
//!
//! A grid file has one setting per line; `#` starts a comment. A line is a
//! `PYTORCH_ALLOC_CONF` string (or `default`), optionally preceded by
//! `policy=NAME` (another policy with its settings string) and/or
//! `fraction=F` (a per-process memory fraction):
//!
//! ```text
//! # baseline and two alternatives
//! default
//! expandable_segments:True
//! fraction=0.9 garbage_collection_threshold:0.8
//! policy=bfc allow_growth:true
//! ```

use vramlab_allocator::TorchVersion;

use crate::engine::scenario::Scenario;
use vramlab_allocator::PolicySpec;

/// One setting of a grid: a policy with its settings and an optional
/// memory fraction.
#[derive(Debug, Clone, PartialEq)]
pub struct GridEntry {
    /// Policy and settings.
    pub policy: PolicySpec,
    /// `set_per_process_memory_fraction`, native policy only.
    pub fraction: Option<f64>,
}

impl GridEntry {
    /// The scenario of this entry on a device of `capacity` bytes.
    pub fn scenario(&self, capacity: Option<u64>) -> Scenario {
        let mut s = Scenario::new(self.policy.clone()).with_capacity(capacity);
        s.memory_fraction = self.fraction;
        s
    }

    /// The label used in tables (`default`, `expandable_segments:True
    /// (fraction 0.9)`, `bfc(allow_growth:true)`).
    pub fn label(&self) -> String {
        self.scenario(None).label()
    }

    /// A line of a grid file that reads back as this entry.
    pub fn to_line(&self) -> String {
        let mut parts = Vec::new();
        if self.policy.name() != "native" {
            parts.push(format!("policy={}", self.policy.name()));
        }
        if let Some(f) = self.fraction {
            parts.push(format!("fraction={f}"));
        }
        let s = self.policy.settings();
        parts.push(if s.is_empty() {
            "default".to_string()
        } else {
            s
        });
        parts.join(" ")
    }
}

/// Parses one grid line (see the module docs).
pub fn parse_grid_line(line: &str, version: TorchVersion) -> Result<GridEntry, String> {
    let mut policy = "native".to_string();
    let mut fraction = None;
    let mut rest = Vec::new();
    for tok in line.split_whitespace() {
        if let Some(p) = tok.strip_prefix("policy=") {
            policy = p.to_string();
        } else if let Some(f) = tok.strip_prefix("fraction=") {
            let v: f64 = f
                .parse()
                .map_err(|_| format!("fraction '{f}' is not a number"))?;
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("fraction {v} is not between 0 and 1"));
            }
            fraction = Some(v);
        } else {
            rest.push(tok);
        }
    }
    if fraction.is_some() && policy != "native" {
        return Err(
            "fraction= is PyTorch's memory fraction: it applies to the native policy only".into(),
        );
    }
    let settings = rest.join(" ");
    let policy = PolicySpec::parse(&policy, settings.trim(), version)?;
    Ok(GridEntry { policy, fraction })
}

/// Parses a grid file's text; errors name the line.
pub fn parse_grid(text: &str, version: TorchVersion) -> Result<Vec<GridEntry>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        out.push(parse_grid_line(line, version).map_err(|e| format!("line {}: {e}", n + 1))?);
    }
    if out.is_empty() {
        return Err("the grid has no settings".into());
    }
    Ok(out)
}

/// The default grid: the settings the OOM guides and PyTorch's docs
/// suggest, alone and in the combinations people try (44 entries for 2.11;
/// fewer for releases without `max_non_split_rounding_mb` or
/// `large_segment_size_mb`).
pub fn default_grid(version: TorchVersion) -> Vec<GridEntry> {
    default_grid_lines(version)
        .iter()
        .filter_map(|l| parse_grid_line(l, version).ok())
        .collect()
}

/// The default grid for a range of releases: the lines of the newest
/// release's grid that every release of the range accepts (a snapshot
/// recorded by 2.5–2.7 gets no `max_non_split_rounding_mb`, which 2.5
/// rejects, and no `large_segment_size_mb`).
pub fn default_grid_for(target: &crate::torch_release::TorchTarget) -> Vec<GridEntry> {
    default_grid(target.rules)
        .into_iter()
        .filter(|e| {
            e.policy
                .native_conf()
                .is_none_or(|c| target.all_accept(&c.to_string()))
        })
        .collect()
}

/// The lines of [`default_grid`] in grid-file syntax.
pub(crate) fn default_grid_lines(version: TorchVersion) -> Vec<String> {
    let mut lines: Vec<String> = vec!["default".into(), "expandable_segments:True".into()];
    let mss_min = if version.at_least(2, 10) { 20 } else { 21 };
    for mb in [mss_min, 64, 128, 256, 512, 1024] {
        lines.push(format!("max_split_size_mb:{mb}"));
    }
    for d in [2, 4, 8, 16] {
        lines.push(format!("roundup_power2_divisions:{d}"));
    }
    lines.push("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]".into());
    lines.push("roundup_power2_divisions:[64:8,256:4,1024:2,>:1]".into());
    lines.push("roundup_power2_divisions:[1:16,64:8,>:4]".into());
    for gc in [0.6, 0.8] {
        for f in [0.8, 0.9, 0.95] {
            lines.push(format!("fraction={f} garbage_collection_threshold:{gc}"));
        }
    }
    for mb in [128, 512] {
        for d in [4, 8] {
            lines.push(format!(
                "max_split_size_mb:{mb},roundup_power2_divisions:{d}"
            ));
        }
        lines.push(format!(
            "fraction=0.9 max_split_size_mb:{mb},garbage_collection_threshold:0.8"
        ));
    }
    for d in [2, 4, 8] {
        lines.push(format!(
            "expandable_segments:True,roundup_power2_divisions:{d}"
        ));
    }
    lines.push("fraction=0.9 expandable_segments:True,garbage_collection_threshold:0.8".into());
    lines.push("expandable_segments:True,max_split_size_mb:512".into());
    if version.at_least(2, 6) {
        for (mss, nsr) in [(256, 64), (512, 128), (512, 1024)] {
            lines.push(format!(
                "max_split_size_mb:{mss},max_non_split_rounding_mb:{nsr}"
            ));
        }
    }
    if version.at_least(2, 11) {
        for ls in [32, 64] {
            lines.push(format!("large_segment_size_mb:{ls}"));
            lines.push(format!(
                "expandable_segments:True,large_segment_size_mb:{ls}"
            ));
        }
    }
    lines.push("fraction=0.95 garbage_collection_threshold:0.95".into());
    lines.push("policy=direct".into());
    lines.push("policy=async".into());
    lines.push("policy=stitch".into());
    lines.push("policy=bfc allow_growth:true".into());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_grid_is_large_and_parses_for_every_version() {
        for v in ["2.1", "2.6", "2.9", "2.11"] {
            let v: TorchVersion = v.parse().unwrap();
            for l in default_grid_lines(v) {
                assert!(
                    parse_grid_line(&l, v).is_ok(),
                    "{v}: {l}: {:?}",
                    parse_grid_line(&l, v)
                );
            }
            let g = default_grid(v);
            assert!(
                g.len() >= if v.at_least(2, 6) { 40 } else { 35 },
                "{v}: {} entries",
                g.len()
            );
            // every line round-trips through the grid syntax
            for e in &g {
                let back = parse_grid_line(&e.to_line(), v).unwrap();
                assert_eq!(back.to_line(), e.to_line());
                assert_eq!(back.fraction, e.fraction);
                if let (Some(a), Some(b)) = (back.policy.native_conf(), e.policy.native_conf()) {
                    assert_eq!(a.roundup_power2_divisions, b.roundup_power2_divisions);
                }
            }
        }
        assert_eq!(default_grid(TorchVersion::NEWEST).len(), 44);
    }

    #[test]
    fn grid_files() {
        let v = TorchVersion::NEWEST;
        let g = parse_grid("# c\ndefault\n\nexpandable_segments:True # the fix\nfraction=0.9 garbage_collection_threshold:0.8\npolicy=bfc allow_growth:true\n", v).unwrap();
        assert_eq!(g.len(), 4);
        assert_eq!(g[2].fraction, Some(0.9));
        assert_eq!(g[3].label(), "bfc(allow_growth:true)");
        assert_eq!(
            parse_grid("default\nmax_split_size_mb:x\n", v)
                .unwrap_err()
                .split(':')
                .next(),
            Some("line 2")
        );
        assert!(
            parse_grid("fraction=2 default", v)
                .unwrap_err()
                .contains("between 0 and 1")
        );
        assert!(parse_grid("policy=bfc fraction=0.5", v).is_err());
        assert!(parse_grid("# nothing\n", v).is_err());
    }
}
