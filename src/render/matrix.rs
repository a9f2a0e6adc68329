//! A workload's matrix of remedies for people (a table, best cells
//! named) and for programs (CSV, one row per cell).

use vramlab_replay::{Matrix, MatrixCell};

use crate::render::replay::csv_quote;
use crate::render::table::{Table, bytes};

/// The CSV header of [`matrix_csv`].
pub const MATRIX_CSV_HEADER: &str = "preset,dimension,size,batch,capacity,variant,setting,peak_reserved_bytes,peak_live_bytes,min_capacity_bytes,smallest_gpu,saved_vs_baseline,fits,largest_fitting,largest_hit_limit";

/// The matrix as CSV: one row per cell (capacity 0 = none given; empty
/// `fits` and `largest_fitting` when not measured).
pub fn matrix_csv(m: &Matrix) -> String {
    let mut s = String::from(MATRIX_CSV_HEADER);
    s.push('\n');
    for c in &m.cells {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{:.6},{},{},{}\n",
            m.preset,
            m.dimension,
            m.size,
            m.batch,
            m.capacity.unwrap_or(0),
            csv_quote(&c.variant),
            csv_quote(&c.setting),
            c.peak_reserved_bytes,
            c.peak_live_bytes,
            c.min_capacity_bytes,
            c.smallest_gpu.as_deref().unwrap_or(""),
            c.saved_vs_baseline,
            c.fits.map_or(String::new(), |f| f.to_string()),
            c.largest_fitting.map_or(String::new(), |n| n.to_string()),
            c.largest_hit_limit,
        ));
    }
    s
}

/// `-12.3%` / `+4.0%` / `baseline`: the change of peak reserved against
/// the baseline (negative: less memory).
fn change(m: &Matrix, c: &MatrixCell) -> String {
    let pct = -100.0 * c.saved_vs_baseline;
    if c.variant == m.baseline_variant && c.setting == m.baseline_setting {
        "baseline".into()
    } else if pct.abs() < 0.05 {
        "0.0%".into()
    } else {
        format!("{pct:+.1}%")
    }
}

/// The matrix for people: the workload and card, the baseline, a row per
/// cell, then the cell that needs the least memory and (with a card) the
/// one that fits the largest size.
pub fn matrix_table(m: &Matrix, card: Option<&str>) -> String {
    let mut out = format!(
        "{} at {} {}, batch {}{}\n",
        m.preset,
        m.dimension,
        m.size,
        m.batch,
        card.map_or(String::new(), |c| format!(", on {c}"))
    );
    if let Some(b) = m.cell(&m.baseline_variant, &m.baseline_setting) {
        out.push_str(&format!(
            "baseline: {} under {}: {} reserved at peak ({} of live tensors)\n\n",
            b.variant,
            b.setting,
            bytes(b.peak_reserved_bytes),
            bytes(b.peak_live_bytes)
        ));
    }
    let searched = m.searched_largest;
    let mut header = vec![
        "variant".to_string(),
        "setting".into(),
        "peak reserved".into(),
        "vs baseline".into(),
        "smallest capacity".into(),
        "smallest card".into(),
    ];
    if m.capacity.is_some() {
        header.push("fits".into());
    }
    if searched {
        header.push(format!("largest {} that fits", m.dimension));
    }
    let mut t = Table::new(header).left(1);
    for c in &m.cells {
        let mut row = vec![
            c.variant.clone(),
            c.setting.clone(),
            bytes(c.peak_reserved_bytes),
            change(m, c),
            bytes(c.min_capacity_bytes),
            c.smallest_gpu
                .clone()
                .unwrap_or_else(|| "none listed".into()),
        ];
        if m.capacity.is_some() {
            row.push(match c.fits {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "-".into(),
            });
        }
        if searched {
            row.push(match (c.largest_fitting, c.largest_hit_limit) {
                (None, _) if c.search_note.is_some() => "not searched".into(),
                (None, _) => "none".into(),
                (Some(n), true) => format!(">= {n} (limit)"),
                (Some(n), false) => n.to_string(),
            });
        }
        t.row(row);
    }
    out.push_str(&t.render());
    if let Some(best) = m.cells.iter().min_by_key(|c| c.min_capacity_bytes) {
        let versus = match change(m, best).as_str() {
            "baseline" => "the baseline itself".to_string(),
            c => format!("{c} peak reserved against the baseline"),
        };
        out.push_str(&format!(
            "\nleast memory: {} under {}: runs on {} ({}; {versus})\n",
            best.variant,
            best.setting,
            bytes(best.min_capacity_bytes),
            best.smallest_gpu.as_deref().unwrap_or("no listed card"),
        ));
    }
    if let Some(big) = m
        .cells
        .iter()
        .filter(|c| c.largest_fitting.is_some())
        .max_by_key(|c| (c.largest_fitting, std::cmp::Reverse(c.min_capacity_bytes)))
    {
        out.push_str(&format!(
            "largest {} on the card: {} under {} ({})\n",
            m.dimension,
            big.variant,
            big.setting,
            big.largest_fitting.map_or(String::new(), |n| n.to_string())
        ));
    }
    for n in &m.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    // One note per variant (every setting of it stops at the same size).
    let mut noted: Vec<&str> = Vec::new();
    for c in &m.cells {
        if let (Some(n), false) = (&c.search_note, noted.contains(&c.variant.as_str())) {
            noted.push(&c.variant);
            let short = n.split("; recorded variants").next().unwrap_or(n);
            let close = if short.len() < n.len() { ")" } else { "" };
            out.push_str(&format!("note: {}: {short}{close}\n", c.variant));
        }
    }
    out
}
