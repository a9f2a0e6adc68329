//! Recommendations: settings ranked for a device, the verdict, the reasons
//! (every direction word taken from the sign of the numbers it describes)
//! and the lines to export.
//!
//! What the user asked comes first: does the job fit, with how much
//! headroom, and the smallest card each setting needs.
//!
//! **The rule** (the one place it is written; `recommend`, `report`,
//! `demo` and the Python API all come here): a PyTorch setting is
//! recommended over the defaults only when the defaults do not fit the
//! card, or leave less than 10% of it free and the setting lowers the peak
//! reserved by at least 2% and 64 MiB. Otherwise — and always without a
//! card, where there is nothing to fit — the defaults stand, and the words
//! say what the best setting would save.

use serde::Serialize;
use vramlab_traces::advice::Cmd;

use crate::analysis::placement::SettingRange;
use crate::analysis::sweep::SweepRow;
use crate::gpus::smallest_gpu_for;
use crate::torch_release::TorchTarget;

/// Headroom, as a share of the capacity, above which the defaults are
/// fine: a setting is recommended only when the defaults do not fit, or fit
/// with less than this to spare.
pub(crate) const COMFORTABLE_HEADROOM: f64 = 0.10;

/// A setting must save at least this share of the defaults' peak reserved
/// (and [`MIN_SAVING_BYTES`]) to be recommended over them.
pub(crate) const MIN_SAVING_SHARE: f64 = 0.02;

/// See [`MIN_SAVING_SHARE`]: 64 MiB.
pub(crate) const MIN_SAVING_BYTES: u64 = 64 << 20;

/// One ranked setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// Rank, 1 = best.
    pub rank: u32,
    /// The sweep row.
    pub row: SweepRow,
    /// Capacity − peak reserved (negative when it does not fit).
    pub headroom_bytes: i64,
}

/// What the recommendation says, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// PyTorch's defaults fit (with room to spare, or nothing does better
    /// by enough to matter): change nothing.
    DefaultsAreFine,
    /// Export the first-ranked setting.
    UseSetting,
    /// Nothing fits the capacity.
    NothingFits,
}

/// The smallest capacity a setting fits (from an OOM-point search).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MinCapacity {
    /// The grid line.
    pub grid_line: String,
    /// Smallest capacity (bytes) it fits on.
    pub bytes: u64,
}

/// A recommendation for one trace and capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    /// All native settings ranked: those that fit first, then by peak
    /// reserved, device calls and synchronising flushes.
    pub ranked: Vec<Ranked>,
    /// Other policies, ranked the same way, for comparison.
    pub other_policies: Vec<Ranked>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in a few sentences generated from the numbers.
    pub why: String,
    /// The PyTorch release(s) the advice is for (`2.5–2.7`).
    pub torch: String,
    /// `export …` for bash/zsh, `$env:…` for PowerShell, `set …` for cmd;
    /// empty unless the verdict is [`Verdict::UseSetting`].
    pub export: Vec<(String, String)>,
    /// A Python line for a memory fraction, when the winner uses one.
    pub python: Option<String>,
    /// The defaults' and the first-ranked setting's peak reserved under
    /// both placements of the simulated driver; empty
    /// unless `recommend_trace` made the recommendation.
    pub placement_ranges: Vec<SettingRange>,
    /// A sentence for the settings whose prediction the driver's address
    /// order decides (`None`: it decides none of them).
    pub placement_note: Option<String>,
    /// Smallest capacities found for the settings the text names.
    pub min_capacities: Vec<MinCapacity>,
    /// The pinned host memory's cost and best `pinned_*` setting (traces
    /// with host requests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::analysis::host_advice::HostAdvice>,
}

fn rank(rows: &[SweepRow], capacity: u64) -> Vec<Ranked> {
    let mut v: Vec<&SweepRow> = rows.iter().collect();
    // Settings that fit first, by peak reserved, then device calls and
    // flushes; then those that do not, the ones that get furthest first.
    let key = |r: &SweepRow| {
        if r.fits() {
            (
                0,
                r.peak_reserved_bytes,
                r.num_device_alloc + r.num_device_free,
                r.num_sync_all_streams,
                r.index,
            )
        } else {
            (
                1,
                u64::MAX - r.oom_event as u64,
                r.peak_reserved_bytes,
                0,
                r.index,
            )
        }
    };
    v.sort_by_key(|r| key(r));
    v.into_iter()
        .enumerate()
        .map(|(i, r)| Ranked {
            rank: i as u32 + 1,
            row: r.clone(),
            headroom_bytes: if capacity == 0 {
                0
            } else if r.fits() {
                capacity as i64 - r.peak_reserved_bytes as i64
            } else {
                -(r.oom_requested_bytes as i64)
            },
        })
        .collect()
}

/// Bytes for a sentence (the workspace's one formatter for sentences).
use vramlab_allocator::format::bytes_words as size_words;

/// "drops from A to B", "rises from A to B" or "stays at A": the word
/// follows the sign of `to − from`, never the other way round.
pub(crate) fn change_words(from: u64, to: u64) -> String {
    let (a, b) = (size_words(from), size_words(to));
    if a == b {
        format!("stays at {a}")
    } else if to < from {
        format!("drops from {a} to {b}")
    } else {
        format!("rises from {a} to {b}")
    }
}

/// [`change_words`] for a percentage.
fn change_percent(from: f64, to: f64) -> String {
    let (a, b) = (
        format!("{:.1}%", from * 100.0),
        format!("{:.1}%", to * 100.0),
    );
    if a == b {
        format!("stays at {a}")
    } else if to < from {
        format!("falls from {a} to {b}")
    } else {
        format!("rises from {a} to {b}")
    }
}

/// Every "drops/falls/rises from X to Y" in `text` says what the numbers
/// do; `Err` names the first phrase that does not.
pub fn check_direction_words(text: &str) -> Result<(), String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let down = matches!(*w, "drops" | "falls" | "shrinks");
        let up = matches!(*w, "rises" | "grows");
        if !(down || up) || words.get(i + 1) != Some(&"from") {
            continue;
        }
        // "from A UNIT to B UNIT" or "from A% to B%"
        let num = |j: usize| -> Option<f64> {
            let t = words.get(j)?.trim_end_matches([',', '.', ':', ';', ')']);
            let (v, unit) = match t.strip_suffix('%') {
                Some(p) => (p.parse::<f64>().ok()?, 1.0),
                None => {
                    let v = t.parse::<f64>().ok()?;
                    let u = words
                        .get(j + 1)?
                        .trim_end_matches([',', '.', ':', ';', ')']);
                    let scale = match u {
                        "B" => 1.0,
                        "KiB" => 1024.0,
                        "MiB" => 1048576.0,
                        "GiB" => 1073741824.0,
                        "TiB" => 1099511627776.0,
                        _ => return None,
                    };
                    (v, scale)
                }
            };
            Some(v * unit)
        };
        let a = num(i + 2);
        let to_at = words
            .iter()
            .skip(i + 2)
            .position(|x| *x == "to")
            .map(|p| p + i + 2);
        let b = to_at.and_then(|t| num(t + 1));
        let (Some(a), Some(b)) = (a, b) else {
            return Err(format!("cannot read the numbers after '{w} from'"));
        };
        if (down && b > a) || (up && b < a) {
            let phrase = words
                .get(i..(to_at.unwrap_or(i) + 3).min(words.len()))
                .unwrap_or_default()
                .join(" ");
            return Err(format!("'{phrase}' says the opposite of its numbers"));
        }
    }
    Ok(())
}

fn smallest_card_words(bytes: u64, outside: u64) -> String {
    match smallest_gpu_for(bytes.saturating_add(outside)) {
        Some(g) if outside > 0 => format!(
            "{} (smallest card: {}, with {} outside the allocator)",
            size_words(bytes),
            g.name,
            size_words(outside)
        ),
        Some(g) => format!("{} (smallest card: {})", size_words(bytes), g.name),
        None => format!(
            "{} (more than any card in `{}`)",
            size_words(bytes),
            Cmd::Gpus.alone()
        ),
    }
}

/// The settings part of a grid line (`fraction=F` removed).
fn settings_of(grid_line: &str) -> String {
    grid_line
        .split_whitespace()
        .filter(|t| !t.starts_with("fraction="))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Ranks the rows of one trace (a sweep at `capacity`, 0 = unlimited);
/// `peak_live` is the trace's peak of live bytes (the bound no setting can
/// beat); `min_capacities` are the OOM points found for some settings
/// (the defaults and the best, when the caller searched them).
pub fn recommend(
    rows: &[SweepRow],
    capacity: u64,
    peak_live: u64,
    target: &TorchTarget,
    min_capacities: &[MinCapacity],
) -> Recommendation {
    recommend_outside(rows, capacity, peak_live, target, min_capacities, 0)
}

/// [`recommend`] for a job whose GPU also holds `outside` bytes beyond
/// the allocator (`capacity` is what is left for it): the smallest cards
/// the advice names hold the capacities found plus `outside`.
pub fn recommend_outside(
    rows: &[SweepRow],
    capacity: u64,
    peak_live: u64,
    target: &TorchTarget,
    min_capacities: &[MinCapacity],
    outside: u64,
) -> Recommendation {
    // Only settings every release of the target accepts are ranked: an
    // export line must work with whichever of them recorded the trace.
    let native: Vec<SweepRow> = rows
        .iter()
        .filter(|r| r.is_pytorch_setting())
        .filter(|r| {
            let s = settings_of(&r.grid_line);
            s == "default" || target.all_accept(&s)
        })
        .cloned()
        .collect();
    let others: Vec<SweepRow> = rows
        .iter()
        .filter(|r| !r.is_pytorch_setting())
        .cloned()
        .collect();
    let ranked = rank(&native, capacity);
    let other_policies = rank(&others, capacity);
    let baseline = native.iter().find(|r| r.grid_line == "default");
    let min_cap = |line: &str| {
        min_capacities
            .iter()
            .find(|m| m.grid_line == line)
            .map(|m| m.bytes)
    };
    let (verdict, why) = match (ranked.first(), baseline) {
        (None, _) => (
            Verdict::NothingFits,
            "no PyTorch settings were replayed".to_string(),
        ),
        (Some(w), _) if !w.row.fits() => {
            (Verdict::NothingFits, nothing_fits(w, capacity, peak_live))
        }
        (Some(w), Some(b)) => verdict_against_defaults(w, b, capacity, &min_cap, outside),
        (Some(w), None) => (
            Verdict::UseSetting,
            format!(
                "{} ranks first: {} reserved at peak.",
                w.row.setting,
                size_words(w.row.peak_reserved_bytes)
            ),
        ),
    };
    let mut export = Vec::new();
    let mut python = None;
    if let (Verdict::UseSetting, Some(w)) = (verdict, ranked.first()) {
        let settings = settings_of(&w.row.grid_line);
        if settings != "default" {
            let var = target.env_var();
            export.push(("bash".to_string(), format!("export {var}=\"{settings}\"")));
            export.push((
                "PowerShell".to_string(),
                format!("$env:{var}=\"{settings}\""),
            ));
            export.push(("cmd".to_string(), format!("set {var}={settings}")));
        }
        if let Some(f) = w
            .row
            .grid_line
            .split_whitespace()
            .find_map(|t| t.strip_prefix("fraction="))
        {
            python = Some(format!("torch.cuda.set_per_process_memory_fraction({f})"));
        }
    }
    Recommendation {
        ranked,
        other_policies,
        verdict,
        why,
        torch: target.label(),
        export,
        python,
        min_capacities: min_capacities.to_vec(),
        placement_ranges: Vec::new(),
        placement_note: None,
        host: None,
    }
}

fn nothing_fits(w: &Ranked, capacity: u64, peak_live: u64) -> String {
    let at = if w.row.oom_at_start {
        "before its first event (the state the recording began with does not fit)".to_string()
    } else {
        format!("at event {} of {}", w.row.oom_event, w.row.events)
    };
    format!(
        "No setting fits {}. The one that gets furthest, {}, runs out of memory {at} ({} requested). The job holds {} of live tensors at its peak{}",
        size_words(capacity),
        w.row.setting,
        size_words(w.row.oom_requested_bytes),
        size_words(peak_live),
        if peak_live > capacity {
            ": more than the device has, whatever the allocator does — reduce the batch, sequence length or precision, or use a larger GPU.".to_string()
        } else {
            format!(
                ", so a better-packed allocator could fit in principle ({} of slack).",
                size_words(capacity - peak_live)
            )
        }
    )
}

/// The verdict when a setting fits and the defaults were replayed.
fn verdict_against_defaults(
    w: &Ranked,
    b: &SweepRow,
    capacity: u64,
    min_cap: &dyn Fn(&str) -> Option<u64>,
    outside: u64,
) -> (Verdict, String) {
    let mut s = String::new();
    let cards = |line: &str| min_cap(line).map(|b| smallest_card_words(b, outside));
    if !b.fits() {
        s.push_str(&format!(
            "With the defaults the job does not fit {}: it runs out of memory {} with {} reserved, {} of it reserved but unallocated. ",
            size_words(capacity),
            if b.oom_at_start {
                "before its first event".to_string()
            } else {
                format!("at event {}", b.oom_event)
            },
            size_words(b.peak_reserved_bytes),
            size_words(b.waste_at_peak_bytes),
        ));
        s.push_str(&format!(
            "{} fits: {} reserved at peak, {} headroom.",
            w.row.setting,
            size_words(w.row.peak_reserved_bytes),
            size_words(capacity.saturating_sub(w.row.peak_reserved_bytes))
        ));
        if let (Some(d), Some(x)) = (cards("default"), cards(&w.row.grid_line)) {
            s.push_str(&format!(
                " Smallest capacity: {d} with the defaults, {x} with {}.",
                w.row.setting
            ));
        }
        return (Verdict::UseSetting, s);
    }
    let default_peak = b.peak_reserved_bytes;
    let saving = default_peak.saturating_sub(w.row.peak_reserved_bytes);
    let worth =
        saving as f64 >= MIN_SAVING_SHARE * default_peak as f64 && saving >= MIN_SAVING_BYTES;
    let no_card = format!(
        " — with no card given there is nothing it must fit ({} weighs it against one).",
        vramlab_traces::advice::Opt::Gpu.with_placeholder("NAME")
    );
    let headroom = capacity.saturating_sub(default_peak);
    // Without a card there is no headroom to run short of.
    let comfortable = capacity == 0 || headroom as f64 >= COMFORTABLE_HEADROOM * capacity as f64;
    if capacity > 0 {
        s.push_str(&format!(
            "The defaults fit {}: {} reserved at peak, {} headroom{}.",
            size_words(capacity),
            size_words(default_peak),
            size_words(headroom),
            if comfortable {
                ""
            } else {
                " (little to spare: less than 10% of the card)"
            }
        ));
    } else {
        s.push_str(&format!(
            "The defaults reserve {} at peak.",
            size_words(default_peak)
        ));
    }
    if let Some(d) = cards("default") {
        s.push_str(&format!(" Smallest capacity with the defaults: {d}."));
    }
    if w.row.grid_line == "default" || !worth || comfortable {
        if w.row.grid_line != "default" && saving > 0 {
            s.push_str(&format!(
                " The best setting, {}, would save {}{}",
                w.row.setting,
                size_words(saving),
                if !worth {
                    " — too little to matter."
                } else if capacity == 0 {
                    &no_card
                } else {
                    " — not needed with that much headroom."
                }
            ));
        }
        s.push_str(" The defaults are fine.");
        return (Verdict::DefaultsAreFine, s);
    }
    s.push_str(&format!(
        " {} reserves {} at peak ({} less{}): reserved-but-unallocated memory at the peak {}, utilization {}.",
        w.row.setting,
        size_words(w.row.peak_reserved_bytes),
        size_words(saving),
        if capacity > 0 {
            format!(
                ", {} headroom",
                size_words(capacity.saturating_sub(w.row.peak_reserved_bytes))
            )
        } else {
            String::new()
        },
        change_words(b.waste_at_peak_bytes, w.row.waste_at_peak_bytes),
        change_percent(b.utilization, w.row.utilization)
    ));
    if let Some(x) = cards(&w.row.grid_line) {
        s.push_str(&format!(" Smallest capacity with it: {x}."));
    }
    (Verdict::UseSetting, s)
}

/// Checks the advice for one trace's rows (a sweep on an unlimited
/// device) at capacities around the defaults' peak (none, 97%, 105% and
/// 200% of it): every direction word must follow its numbers. A row whose
/// peak exceeds a capacity counts as not fitting there. `Err` names the
/// capacity and the phrase.
pub(crate) fn check_advice_words(
    rows: &[SweepRow],
    peak_live: u64,
    target: &TorchTarget,
) -> Result<(), String> {
    let Some(default_peak) = rows
        .iter()
        .find(|r| r.grid_line == "default")
        .map(|r| r.peak_reserved_bytes)
    else {
        return Ok(());
    };
    for capacity in [
        0,
        default_peak / 100 * 97,
        default_peak / 100 * 105,
        default_peak.saturating_mul(2),
    ] {
        let at: Vec<SweepRow> = rows
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if capacity > 0 && r.fits() && r.peak_reserved_bytes > capacity {
                    r.oom_event = r.events.saturating_sub(1) as i64;
                    r.oom_requested_bytes = r.peak_reserved_bytes - capacity;
                }
                r
            })
            .collect();
        let rec = recommend(&at, capacity, peak_live, target, &[]);
        check_direction_words(&rec.why)
            .map_err(|e| format!("at capacity {capacity}: {e}: {}", rec.why))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramlab_allocator::TorchVersion;

    fn row(i: u64, line: &str, peak: u64, oom: i64, calls: u64) -> SweepRow {
        SweepRow {
            index: i,
            trace: "t".into(),
            setting: line.into(),
            policy: if line.starts_with("policy=") {
                "bfc".into()
            } else {
                "native".into()
            },
            grid_line: line.into(),
            capacity: 1000 << 20,
            events: 10,
            peak_requested_bytes: 500 << 20,
            peak_allocated_bytes: 500 << 20,
            peak_reserved_bytes: peak << 20,
            waste_at_peak_bytes: (peak - 500) << 20,
            utilization: 500.0 / peak as f64,
            num_device_alloc: calls,
            num_device_free: 0,
            num_sync_all_streams: 0,
            num_alloc_retries: 0,
            device_time_us: 0.0,
            oom_event: oom,
            oom_requested_bytes: if oom >= 0 { 64 << 20 } else { 0 },
            start: String::new(),
            oom_at_start: false,
            same_as: String::new(),
            placement_free: false,
        }
    }

    fn t(v: &str) -> TorchTarget {
        TorchTarget::user(v.parse::<TorchVersion>().unwrap())
    }

    #[test]
    fn fitting_settings_rank_first_then_by_peak_then_calls() {
        let rows = vec![
            row(0, "default", 1100, 40, 10),
            row(1, "expandable_segments:True", 900, -1, 30),
            row(2, "max_split_size_mb:128", 900, -1, 20),
            row(3, "roundup_power2_divisions:4", 950, -1, 5),
            row(4, "policy=bfc", 600, -1, 1),
        ];
        let r = recommend(&rows, 1000 << 20, 500 << 20, &t("2.11"), &[]);
        let order: Vec<&str> = r.ranked.iter().map(|x| x.row.grid_line.as_str()).collect();
        assert_eq!(
            order,
            [
                "max_split_size_mb:128",
                "expandable_segments:True",
                "roundup_power2_divisions:4",
                "default"
            ]
        );
        assert_eq!(r.verdict, Verdict::UseSetting);
        assert_eq!(r.ranked[0].headroom_bytes, 100 << 20);
        assert!(r.ranked[3].headroom_bytes < 0);
        assert_eq!(
            r.other_policies.len(),
            1,
            "other policies are shown, not recommended"
        );
        assert_eq!(
            r.export[0].1,
            "export PYTORCH_ALLOC_CONF=\"max_split_size_mb:128\""
        );
        assert_eq!(
            r.export[1].1,
            "$env:PYTORCH_ALLOC_CONF=\"max_split_size_mb:128\""
        );
        assert_eq!(
            r.export[2].1,
            "set PYTORCH_ALLOC_CONF=max_split_size_mb:128"
        );
        assert!(
            r.why.starts_with(
                "With the defaults the job does not fit 1000.00 MiB: it runs out of memory at event 40"
            ),
            "{}",
            r.why
        );
        // Older releases read the CUDA variable.
        let r29 = recommend(&rows, 1000 << 20, 500 << 20, &t("2.9"), &[]);
        assert!(
            r29.export[0]
                .1
                .starts_with("export PYTORCH_CUDA_ALLOC_CONF=")
        );
        check_direction_words(&r.why).unwrap();
    }

    #[test]
    fn the_defaults_are_fine_with_room_to_spare_or_a_small_saving() {
        // 24 GiB card, a 650.00 MiB job: a 40.00 MiB saving is not advice.
        let mut rows = vec![
            row(0, "default", 650, -1, 10),
            row(1, "expandable_segments:True", 610, -1, 10),
        ];
        for r in &mut rows {
            r.peak_requested_bytes = 600 << 20;
            r.waste_at_peak_bytes = r.peak_reserved_bytes - (600 << 20);
        }
        let r = recommend(&rows, 24 << 30, 600 << 20, &t("2.11"), &[]);
        assert_eq!(r.verdict, Verdict::DefaultsAreFine, "{}", r.why);
        assert!(r.export.is_empty());
        assert!(r.why.ends_with("The defaults are fine."), "{}", r.why);
        assert!(
            r.why
                .starts_with("The defaults fit 24.00 GiB: 650.00 MiB reserved at peak"),
            "{}",
            r.why
        );
        // Tight on the card, but the saving is tiny: still fine.
        let r = recommend(&rows, 680 << 20, 600 << 20, &t("2.11"), &[]);
        assert_eq!(r.verdict, Verdict::DefaultsAreFine, "{}", r.why);
        // Tight, and the saving matters: recommended, with the words right.
        rows[1].peak_reserved_bytes = 560 << 20;
        rows[1].waste_at_peak_bytes = 80 << 20;
        let r = recommend(&rows, 680 << 20, 600 << 20, &t("2.11"), &[]);
        assert_eq!(r.verdict, Verdict::UseSetting, "{}", r.why);
        check_direction_words(&r.why).unwrap();
    }

    #[test]
    fn direction_words_follow_the_numbers() {
        assert_eq!(
            change_words(90 << 20, 306 << 20),
            "rises from 90.00 MiB to 306.00 MiB"
        );
        assert_eq!(
            change_words(306 << 20, 90 << 20),
            "drops from 306.00 MiB to 90.00 MiB"
        );
        assert_eq!(change_words(5 << 20, 5 << 20), "stays at 5.00 MiB");
        assert!(check_direction_words("waste drops from 90.00 MiB to 306.00 MiB.").is_err());
        assert!(check_direction_words("waste drops from 11.00 GiB to 306.00 MiB.").is_ok());
        assert!(check_direction_words("utilization falls from 98.7% to 99.5%.").is_err());
        assert!(check_direction_words("utilization rises from 98.7% to 99.5%, ok").is_ok());
    }

    #[test]
    fn smallest_cards_lead_when_known() {
        let rows = vec![
            row(0, "default", 1100, 40, 10),
            row(1, "expandable_segments:True", 900, -1, 30),
        ];
        let caps = [
            MinCapacity {
                grid_line: "default".into(),
                bytes: 23 << 30,
            },
            MinCapacity {
                grid_line: "expandable_segments:True".into(),
                bytes: 15 << 30,
            },
        ];
        let r = recommend(&rows, 1000 << 20, 500 << 20, &t("2.11"), &caps);
        assert!(
            r.why.contains("Smallest capacity: 23.00 GiB (smallest card: rtx4090) with the defaults, 15.00 GiB (smallest card: v100-16gb) with expandable_segments:True."),
            "{}",
            r.why
        );
    }

    #[test]
    fn fractions_and_nothing_fits() {
        let rows = vec![
            row(0, "default", 1100, 40, 10),
            row(
                1,
                "fraction=0.9 garbage_collection_threshold:0.8",
                900,
                -1,
                10,
            ),
        ];
        let r = recommend(&rows, 1000 << 20, 500 << 20, &t("2.11"), &[]);
        assert_eq!(
            r.export[0].1,
            "export PYTORCH_ALLOC_CONF=\"garbage_collection_threshold:0.8\""
        );
        assert_eq!(
            r.python.as_deref(),
            Some("torch.cuda.set_per_process_memory_fraction(0.9)")
        );
        let none = vec![
            row(0, "default", 1100, 40, 10),
            row(1, "expandable_segments:True", 1100, 60, 10),
        ];
        let r = recommend(&none, 1000 << 20, 1200 << 20, &t("2.11"), &[]);
        assert_eq!(r.verdict, Verdict::NothingFits);
        assert!(r.export.is_empty());
        assert!(r.why.contains("more than the device has"), "{}", r.why);
        assert!(
            r.why.starts_with(
                "No setting fits 1000.00 MiB. The one that gets furthest, expandable_segments:True"
            ),
            "{}",
            r.why
        );
    }
}
