//! What a PyTorch upgrade does to a job: each setting replayed under two
//! releases, side by side, with the sentence users read ("upgrading torch
//! 2.11 -> 2.15 under default: peak reserved … (+392.00 MiB); fits still").
//!
//! The rows come from replays already made (a sweep per release, or one
//! run per setting and release): comparing costs no replay of its own.

use serde::Serialize;
use vramlab_allocator::TorchVersion;
use vramlab_allocator::format::bytes;

use crate::analysis::recommend::{Recommendation, Verdict};
use crate::analysis::sweep::SweepRow;
use crate::engine::run::Run;

/// Whether the job fits the card before and after the upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpgradeFit {
    /// It fits under both releases.
    FitsStill,
    /// It fits under the older release only.
    NoLongerFits,
    /// It fits under the newer release only.
    FitsNow,
    /// It runs out of memory under both.
    OomUnderBoth,
}

impl UpgradeFit {
    fn of(oom_before: bool, oom_after: bool) -> Self {
        match (oom_before, oom_after) {
            (false, false) => UpgradeFit::FitsStill,
            (false, true) => UpgradeFit::NoLongerFits,
            (true, false) => UpgradeFit::FitsNow,
            (true, true) => UpgradeFit::OomUnderBoth,
        }
    }

    /// The words after the figures: `fits still`, `no longer fits`, ….
    pub fn words(self) -> &'static str {
        match self {
            UpgradeFit::FitsStill => "fits still",
            UpgradeFit::NoLongerFits => "no longer fits",
            UpgradeFit::FitsNow => "fits now",
            UpgradeFit::OomUnderBoth => "runs out of memory under both",
        }
    }
}

/// One setting under two PyTorch releases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpgradeRow {
    /// The setting's label (the same under both releases).
    pub setting: String,
    /// The release upgraded from (`2.11`).
    pub from_torch: String,
    /// The release upgraded to (`2.15`).
    pub to_torch: String,
    /// Peak reserved bytes under `from_torch`.
    pub peak_reserved_before_bytes: u64,
    /// Peak reserved bytes under `to_torch`.
    pub peak_reserved_after_bytes: u64,
    /// Device allocations (cudaMalloc + map) under `from_torch`.
    pub device_allocs_before: u64,
    /// Device allocations under `to_torch`.
    pub device_allocs_after: u64,
    /// Fits before and after (`None`: no card was given).
    pub fit: Option<UpgradeFit>,
}

impl UpgradeRow {
    /// Peak reserved after minus before, in bytes (negative: the upgrade
    /// saves memory).
    pub fn delta_bytes(&self) -> i128 {
        i128::from(self.peak_reserved_after_bytes) - i128::from(self.peak_reserved_before_bytes)
    }

    /// The change as users read it: `+392.00 MiB`, `-20.00 MiB`, `+0 B`.
    pub fn delta_words(&self) -> String {
        let (a, b) = (
            self.peak_reserved_before_bytes,
            self.peak_reserved_after_bytes,
        );
        if b >= a {
            format!("+{}", bytes(b - a))
        } else {
            format!("-{}", bytes(a - b))
        }
    }

    /// One line: `upgrading torch 2.11 -> 2.15 under default: peak
    /// reserved 5.25 GiB -> 5.63 GiB (+392.00 MiB); fits still`.
    pub fn sentence(&self) -> String {
        let fit = self
            .fit
            .map(|f| format!("; {}", f.words()))
            .unwrap_or_default();
        format!(
            "upgrading torch {} -> {} under {}: peak reserved {} -> {} ({}){fit}",
            self.from_torch,
            self.to_torch,
            self.setting,
            bytes(self.peak_reserved_before_bytes),
            bytes(self.peak_reserved_after_bytes),
            self.delta_words()
        )
    }
}

/// The upgrade rows of two sweeps of one trace, one per release: a row for
/// each setting (matched by its grid line) swept under both, in `before`'s
/// order. Settings one release refuses are left out.
pub fn upgrade_from_sweeps(
    from: TorchVersion,
    before: &[SweepRow],
    to: TorchVersion,
    after: &[SweepRow],
) -> Vec<UpgradeRow> {
    before
        .iter()
        .filter_map(|a| {
            let b = after.iter().find(|b| b.grid_line == a.grid_line)?;
            Some(UpgradeRow {
                setting: a.setting.clone(),
                from_torch: from.to_string(),
                to_torch: to.to_string(),
                peak_reserved_before_bytes: a.peak_reserved_bytes,
                peak_reserved_after_bytes: b.peak_reserved_bytes,
                device_allocs_before: a.num_device_alloc,
                device_allocs_after: b.num_device_alloc,
                fit: (a.capacity > 0).then(|| UpgradeFit::of(a.oom_event >= 0, b.oom_event >= 0)),
            })
        })
        .collect()
}

/// The upgrade rows of runs made per release: `runs` holds one run per
/// setting of `settings` for each release of `releases`, releases in the
/// order given; each later release is compared with the first.
pub fn upgrade_from_runs(
    runs: &[Run],
    settings: &[String],
    releases: &[TorchVersion],
) -> Vec<UpgradeRow> {
    let per = settings.len();
    let Some(&first) = releases.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, setting) in settings.iter().enumerate() {
        let Some(a) = runs.get(i) else { continue };
        for (k, &v) in releases.iter().enumerate().skip(1) {
            let Some(b) = runs.get(k * per + i) else {
                continue;
            };
            out.push(UpgradeRow {
                setting: setting.clone(),
                from_torch: first.to_string(),
                to_torch: v.to_string(),
                peak_reserved_before_bytes: a.summary.peak_reserved_bytes,
                peak_reserved_after_bytes: b.summary.peak_reserved_bytes,
                device_allocs_before: a.summary.num_device_alloc,
                device_allocs_after: b.summary.num_device_alloc,
                fit: a
                    .capacity
                    .map(|_| UpgradeFit::of(a.oom.is_some(), b.oom.is_some())),
            });
        }
    }
    out
}

/// A recommendation under two PyTorch releases and what the upgrade does
/// to every setting ranked under both (`recommend --torch-version A
/// --torch-version B`).
#[derive(Debug, Clone, Serialize)]
pub struct UpgradeAdvice {
    /// The release upgraded from.
    pub from_torch: String,
    /// The release upgraded to.
    pub to_torch: String,
    /// The recommendation under `from_torch`.
    pub before: Recommendation,
    /// The recommendation under `to_torch`.
    pub after: Recommendation,
    /// Each setting ranked under both, in `before`'s ranking order.
    pub settings: Vec<UpgradeRow>,
}

impl UpgradeAdvice {
    /// Compares two recommendations of one trace on one card.
    pub fn new(
        from: TorchVersion,
        before: Recommendation,
        to: TorchVersion,
        after: Recommendation,
    ) -> Self {
        let rows = |r: &Recommendation| -> Vec<SweepRow> {
            r.ranked.iter().map(|k| k.row.clone()).collect()
        };
        let settings = upgrade_from_sweeps(from, &rows(&before), to, &rows(&after));
        UpgradeAdvice {
            from_torch: from.to_string(),
            to_torch: to.to_string(),
            before,
            after,
            settings,
        }
    }

    /// What users read first: whether the advice changes, then the lines
    /// of the settings that matter (the defaults and each release's
    /// choice), then how many settings the upgrade moves at all.
    pub fn summary(&self) -> Vec<String> {
        let (a, b) = (choice(&self.before), choice(&self.after));
        let mut out = vec![if a == b {
            format!(
                "upgrading torch {} -> {}: the advice stays ({a})",
                self.from_torch, self.to_torch
            )
        } else {
            format!(
                "upgrading torch {} -> {}: the advice changes (torch {}: {a}; torch {}: {b})",
                self.from_torch, self.to_torch, self.from_torch, self.to_torch
            )
        }];
        let mut named: Vec<&str> = vec!["default"];
        for r in [&self.before, &self.after] {
            if r.verdict == Verdict::UseSetting {
                if let Some(w) = r.ranked.first() {
                    named.push(&w.row.setting);
                }
            }
        }
        let mut shown = Vec::new();
        for n in named {
            if shown.contains(&n) {
                continue;
            }
            if let Some(row) = self.settings.iter().find(|r| r.setting == n) {
                out.push(row.sentence());
                shown.push(n);
            }
        }
        let moved: Vec<&UpgradeRow> = self
            .settings
            .iter()
            .filter(|r| r.delta_bytes() != 0)
            .collect();
        let largest = moved.iter().max_by_key(|r| r.delta_bytes().unsigned_abs());
        out.push(match largest {
            None => format!(
                "the upgrade changes the peak reserved of none of the {} settings ranked under both",
                self.settings.len()
            ),
            Some(r) => format!(
                "the upgrade changes the peak reserved of {} of the {} settings ranked under both; the most under {} ({})",
                moved.len(),
                self.settings.len(),
                r.setting,
                r.delta_words()
            ),
        });
        out
    }
}

/// A recommendation's choice in a few words.
fn choice(r: &Recommendation) -> String {
    match (r.verdict, r.ranked.first()) {
        (Verdict::DefaultsAreFine, _) => "the defaults are fine".to_string(),
        (Verdict::UseSetting, Some(w)) => format!("use {}", w.row.setting),
        (Verdict::UseSetting, None) => "use a setting".to_string(),
        (Verdict::NothingFits, _) => "nothing fits".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(before: u64, after: u64, fit: Option<UpgradeFit>) -> UpgradeRow {
        UpgradeRow {
            setting: "default".into(),
            from_torch: "2.11".into(),
            to_torch: "2.15".into(),
            peak_reserved_before_bytes: before,
            peak_reserved_after_bytes: after,
            device_allocs_before: 3,
            device_allocs_after: 2,
            fit,
        }
    }

    #[test]
    fn sentence_names_both_releases_the_change_and_the_fit() {
        let mib = 1 << 20;
        let r = row(5376 * mib, 5768 * mib, Some(UpgradeFit::FitsStill));
        assert_eq!(r.delta_bytes(), 392 * mib as i128);
        assert_eq!(
            r.sentence(),
            "upgrading torch 2.11 -> 2.15 under default: peak reserved 5.25 GiB -> 5.63 GiB (+392.00 MiB); fits still"
        );
        let r = row(40 * mib, 20 * mib, None);
        assert_eq!(r.delta_words(), "-20.00 MiB");
        assert!(r.sentence().ends_with("(-20.00 MiB)"));
    }

    #[test]
    fn fit_words_cover_every_case() {
        assert_eq!(UpgradeFit::of(false, true).words(), "no longer fits");
        assert_eq!(UpgradeFit::of(true, false).words(), "fits now");
        assert_eq!(
            UpgradeFit::of(true, true).words(),
            "runs out of memory under both"
        );
    }
}
