//! Breaking text into lines no wider than a given width, never dropping a
//! character.

use plotters::prelude::*;

use super::font::measure;

/// `s` cut after each of `breaks` (the break character stays with the
/// part before it).
fn split_after(s: &str, breaks: &[char]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        cur.push(c);
        if breaks.contains(&c) {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Where setting labels and sentences may break: after these.
const FINE_BREAKS: [char; 8] = [',', ':', '_', ' ', '/', ';', '=', '-'];
/// Preferred breaks: between the options of a setting, between words.
const COARSE_BREAKS: [char; 3] = [',', ' ', ';'];

/// `parts` that are wider than `max_w` cut further after [`FINE_BREAKS`],
/// and anywhere when that is not enough.
fn fit_parts(parts: Vec<String>, style: &TextStyle, max_w: i32) -> Vec<String> {
    let mut out = Vec::new();
    for p in parts {
        if measure(p.trim_end(), style).0 <= max_w {
            out.push(p);
            continue;
        }
        for t in split_after(&p, &FINE_BREAKS) {
            if measure(t.trim_end(), style).0 <= max_w {
                out.push(t);
                continue;
            }
            let mut piece = String::new();
            for c in t.chars() {
                let mut cand = piece.clone();
                cand.push(c);
                if !piece.is_empty() && measure(&cand, style).0 > max_w {
                    out.push(std::mem::take(&mut piece));
                    piece.push(c);
                } else {
                    piece = cand;
                }
            }
            if !piece.is_empty() {
                out.push(piece);
            }
        }
    }
    out
}

/// Width of the widest piece [`wrap_lines`] would not break (without
/// cutting a word) in `s`.
pub(crate) fn widest_word(s: &str, style: &TextStyle) -> i32 {
    split_after(s, &FINE_BREAKS)
        .iter()
        .map(|w| measure(w.trim(), style).0)
        .max()
        .unwrap_or(0)
}

/// Fills lines greedily with `parts`.
fn fill_lines(parts: &[String], style: &TextStyle, max_w: i32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for p in parts {
        let cand = format!("{line}{p}");
        if !line.trim().is_empty() && measure(cand.trim_end(), style).0 > max_w {
            lines.push(line.trim_end().to_string());
            line = p.trim_start().to_string();
        } else {
            line = cand;
        }
    }
    if !line.trim().is_empty() {
        lines.push(line.trim_end().to_string());
    }
    lines
}

/// Breaks `s` into lines at most `max_w` pixels wide, never dropping a
/// character: between a setting's options (after commas) and between
/// words where that takes no more lines, else also after `:`, `_`, `/`,
/// `=`, `-`, and inside a word only when a word is wider than a line.
pub(crate) fn wrap_lines(s: &str, style: &TextStyle, max_w: i32) -> Vec<String> {
    if s.trim().is_empty() {
        return Vec::new();
    }
    if measure(s, style).0 <= max_w {
        return vec![s.to_string()];
    }
    let fine = balanced(
        &fit_parts(split_after(s, &FINE_BREAKS), style, max_w),
        style,
        max_w,
    );
    let coarse = balanced(
        &fit_parts(split_after(s, &COARSE_BREAKS), style, max_w),
        style,
        max_w,
    );
    if coarse.len() <= fine.len() {
        coarse
    } else {
        fine
    }
}

/// [`fill_lines`] with the fewest lines it takes at `max_w`, made as even
/// as they can be (no short last line left dangling): the narrowest width
/// that still needs no more lines.
fn balanced(parts: &[String], style: &TextStyle, max_w: i32) -> Vec<String> {
    let lines = fill_lines(parts, style, max_w);
    let widest_part = parts
        .iter()
        .map(|p| measure(p.trim(), style).0)
        .max()
        .unwrap_or(0);
    let (mut lo, mut hi) = (widest_part.min(max_w), max_w);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fill_lines(parts, style, mid).len() <= lines.len() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    fill_lines(parts, style, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::style::{INK, LABEL_SIZE, font};

    #[test]
    fn wrapping_keeps_every_character_and_prefers_commas() {
        let style = font(LABEL_SIZE, INK);
        let s = "max_split_size_mb:512,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]";
        for w in [60, 120, 200, 400, 2000] {
            let lines = wrap_lines(s, &style, w);
            assert_eq!(lines.concat(), s, "width {w}");
            for l in &lines {
                assert!(measure(l, &style).0 <= w.max(measure("W", &style).0), "{l}");
            }
        }
        let lines = wrap_lines(
            "expandable_segments:True,max_split_size_mb:128",
            &style,
            260,
        );
        assert_eq!(
            lines,
            vec!["expandable_segments:True,", "max_split_size_mb:128"]
        );
        assert!(wrap_lines("", &style, 100).is_empty());
    }
}
