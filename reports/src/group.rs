//! Settings whose replays came out the same, shown once: one table row,
//! one bar, one segment map, named with every setting of the group.

use crate::input::SettingRun;

/// `true` when two replays are the same result: figures, timeline, OOM
/// and the segments at the peak (what the page draws), and the same
/// smallest capacity.
fn same_result(a: &SettingRun, b: &SettingRun, min_capacity: &dyn Fn(&str) -> Option<u64>) -> bool {
    let (x, y) = (&a.run, &b.run);
    x.summary == y.summary
        && x.timeline == y.timeline
        && x.oom == y.oom
        && x.segments_at_peak == y.segments_at_peak
        && x.device_log == y.device_log
        && x.alloc_addresses == y.alloc_addresses
        && x.alloc_block_sizes == y.alloc_block_sizes
        && min_capacity(&a.label) == min_capacity(&b.label)
}

/// `settings` with every run identical to an earlier one folded into it
/// (its name in [`SettingRun::same_as`]), in the order of first appearance,
/// and the index in `settings` of each one kept (to pick the same columns
/// of per-setting tables).
pub(crate) fn group_identical(
    settings: &[SettingRun],
    min_capacity: &dyn Fn(&str) -> Option<u64>,
) -> (Vec<SettingRun>, Vec<usize>) {
    let mut out: Vec<SettingRun> = Vec::with_capacity(settings.len());
    let mut kept = Vec::with_capacity(settings.len());
    for (i, s) in settings.iter().enumerate() {
        match out.iter_mut().find(|g| same_result(g, s, min_capacity)) {
            Some(g) => {
                g.same_as.push(s.label.clone());
                g.same_as.extend(s.same_as.iter().cloned());
            }
            None => {
                out.push(s.clone());
                kept.push(i);
            }
        }
    }
    (out, kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramlab_replay::Run;

    fn run(peak: u64) -> Run {
        let mut r = Run::default();
        r.summary.peak_reserved_bytes = peak;
        r
    }

    #[test]
    fn identical_runs_fold_into_the_first_and_others_stay() {
        let s = vec![
            SettingRun::new("default", run(10)),
            SettingRun::new("gc:0.6", run(8)),
            SettingRun::new("gc:0.7", run(8)),
            SettingRun::new("es", run(6)),
            SettingRun::new("gc:0.8", run(8)),
        ];
        let (g, kept) = group_identical(&s, &|_| None);
        assert_eq!(kept, vec![0, 1, 3]);
        let names: Vec<(&str, Vec<&str>)> = g
            .iter()
            .map(|r| {
                (
                    r.label.as_str(),
                    r.same_as.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                ("default", vec![]),
                ("gc:0.6", vec!["gc:0.7", "gc:0.8"]),
                ("es", vec![]),
            ]
        );
        // A different smallest capacity keeps them apart.
        let cap = |l: &str| (l == "gc:0.7").then_some(1u64);
        assert_eq!(group_identical(&s, &cap).0.len(), 4);
    }
}
