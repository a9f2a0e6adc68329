//! The segment map: every segment a bar, its blocks coloured by state.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use vramlab_allocator::{BlockState, PoolKind, SegmentView};

use super::{Figure, HEIGHT, WIDTH};
use crate::Result;
use crate::style::*;
use crate::units::{fmt_int, fmt_tick, format_bytes, unit_for};

/// Up to this many segments get rows of their own, labelled.
const OWN_ROWS_MAX: usize = 40;
/// With rows of their own, the segments are wrapped into at most this many
/// rows (or one per segment when there are more segments).
const OWN_ROWS_TARGET: usize = 24;
/// Left and right page margins.
const SIDE: i32 = 24;
/// Bar height.
const BAR: i32 = 22;
/// Gap between the rows of one segment.
const GAP_IN: i32 = 4;
/// Gap between segments (and between packed rows).
const GAP_OUT: i32 = 10;
/// Height of the title, subtitle, statistics line and legend.
const HEADER_H: i32 = 160;
/// Height kept under the bars for the scale.
const FOOTER_H: i32 = 70;

/// A part of a segment drawn in one row.
#[derive(Debug, Clone, Copy)]
struct Piece {
    /// Index into the sorted segments.
    seg: usize,
    /// Byte offset of the piece in its segment.
    start: u64,
    /// Bytes.
    len: u64,
    /// Row.
    row: usize,
    /// Byte offset of the piece in its row.
    at: u64,
}

/// How the segments are laid out: rows of `row_bytes` each, pieces placed
/// in them.
struct Layout {
    /// `true`: every segment starts a row of its own and wraps within its
    /// own rows (labelled); `false`: packed first-fit, largest first.
    own_rows: bool,
    row_bytes: u64,
    pieces: Vec<Piece>,
    /// One entry per row: whether it starts a new segment (own rows) —
    /// wider gap above.
    row_starts_segment: Vec<bool>,
}

/// A segment map.
pub(crate) struct SegmentMap<'a> {
    title: &'a str,
    segs: Vec<&'a SegmentView>,
    layout: Layout,
}

/// Bytes a segment spans: its size, or its blocks if they add up to more.
fn seg_len(s: &SegmentView) -> u64 {
    let blocks = s
        .blocks
        .iter()
        .fold(0u64, |acc, b| acc.saturating_add(b.size));
    s.size.max(blocks)
}

fn state_color(s: BlockState) -> RGBColor {
    match s {
        BlockState::Allocated => ALLOCATED,
        BlockState::PendingFree => PENDING,
        BlockState::Free => FREE,
    }
}

/// Rows that segments of `lens` bytes take when each starts a row of
/// `row_bytes` of its own.
fn own_rows_needed(lens: &[u64], row_bytes: u64) -> u128 {
    lens.iter()
        .map(|&l| (l.max(1) as u128).div_ceil(row_bytes as u128))
        .sum()
}

/// Every segment in rows of its own, wrapped at the smallest row width that
/// keeps the row count at most `max(OWN_ROWS_TARGET, segments)`.
fn own_rows(segs: &[&SegmentView]) -> Layout {
    let lens: Vec<u64> = segs.iter().map(|s| seg_len(s)).collect();
    let max_rows = OWN_ROWS_TARGET.max(segs.len()) as u128;
    let (mut lo, mut hi) = (1u64, lens.iter().copied().max().unwrap_or(1).max(1));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if own_rows_needed(&lens, mid) <= max_rows {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let row_bytes = nice_ceil(hi);
    let mut pieces = Vec::new();
    let mut row_starts_segment = Vec::new();
    for (k, &len) in lens.iter().enumerate() {
        let mut start = 0u64;
        loop {
            let part = (len - start).min(row_bytes);
            row_starts_segment.push(start == 0);
            pieces.push(Piece {
                seg: k,
                start,
                len: part,
                row: row_starts_segment.len() - 1,
                at: 0,
            });
            start += part;
            if start >= len {
                break;
            }
        }
    }
    Layout {
        own_rows: true,
        row_bytes,
        pieces,
        row_starts_segment,
    }
}

/// First-fit-decreasing packing of `segs` (sorted largest first) into
/// rows; a segment longer than a row continues on the next rows.
// Indexing: `free[row]` with `row` either found by `position` in `free` or
// `free.len() - 1` right after a push.
#[allow(clippy::indexing_slicing)]
fn pack(segs: &[&SegmentView]) -> Layout {
    let total: u128 = segs.iter().map(|s| seg_len(s) as u128).sum();
    let target_rows = segs.len().div_ceil(6).clamp(10, 44) as u128;
    let row_bytes = nice_ceil(total.div_ceil(target_rows).clamp(1, u64::MAX as u128) as u64);
    let mut free: Vec<u64> = Vec::new();
    let mut pieces = Vec::new();
    for (k, s) in segs.iter().enumerate() {
        let mut len = seg_len(s);
        let mut start = 0u64;
        if len == 0 {
            continue;
        }
        while len > row_bytes {
            pieces.push(Piece {
                seg: k,
                start,
                len: row_bytes,
                row: free.len(),
                at: 0,
            });
            free.push(0);
            start += row_bytes;
            len -= row_bytes;
        }
        let row = match free.iter().position(|&f| f >= len) {
            Some(r) => r,
            None => {
                free.push(row_bytes);
                free.len() - 1
            }
        };
        pieces.push(Piece {
            seg: k,
            start,
            len,
            row,
            at: row_bytes - free[row],
        });
        free[row] -= len;
    }
    Layout {
        own_rows: false,
        row_bytes,
        pieces,
        row_starts_segment: vec![true; free.len()],
    }
}

impl<'a> SegmentMap<'a> {
    /// Sorts the segments (largest first, then by address) and lays them
    /// out.
    pub(crate) fn new(title: &'a str, segments: &'a [SegmentView]) -> Self {
        let mut segs: Vec<&SegmentView> = segments.iter().collect();
        segs.sort_by(|a, b| seg_len(b).cmp(&seg_len(a)).then(a.ptr.cmp(&b.ptr)));
        let layout = if segs.len() <= OWN_ROWS_MAX {
            own_rows(&segs)
        } else {
            pack(&segs)
        };
        SegmentMap {
            title,
            segs,
            layout,
        }
    }

    /// Top of each row relative to the first, and the total height.
    fn row_offsets(&self) -> (Vec<i32>, i32) {
        let mut y = 0;
        let rows = &self.layout.row_starts_segment;
        let mut out = Vec::with_capacity(rows.len());
        for (r, &starts_segment) in rows.iter().enumerate() {
            if r > 0 {
                y += BAR + if starts_segment { GAP_OUT } else { GAP_IN };
            }
            out.push(y);
        }
        let total = if rows.is_empty() { 0 } else { y + BAR };
        (out, total)
    }

    /// The statistics line.
    fn stats(&self) -> String {
        let (mut alloc, mut pending, mut free, mut largest) = (0u64, 0u64, 0u64, 0u64);
        for s in &self.segs {
            for b in &s.blocks {
                match b.state {
                    BlockState::Allocated => alloc = alloc.saturating_add(b.size),
                    BlockState::PendingFree => pending = pending.saturating_add(b.size),
                    BlockState::Free => {
                        free = free.saturating_add(b.size);
                        largest = largest.max(b.size);
                    }
                }
            }
        }
        let reserved = self
            .segs
            .iter()
            .fold(0u64, |acc, s| acc.saturating_add(s.size));
        format!(
            "Reserved {} · allocated {} · pending free {} · free cached {} · largest free block {}",
            format_bytes(reserved),
            format_bytes(alloc),
            format_bytes(pending),
            format_bytes(free),
            format_bytes(largest)
        )
    }

    fn subtitle(&self) -> String {
        let n = self.segs.len();
        let small = self
            .segs
            .iter()
            .filter(|s| s.pool == PoolKind::Small)
            .count();
        let exp = self.segs.iter().filter(|s| s.is_expandable).count();
        let mut s = format!(
            "{} segment{} ({} large-pool, {} small-pool{})",
            fmt_int(n as u64),
            if n == 1 { "" } else { "s" },
            fmt_int((n - small) as u64),
            fmt_int(small as u64),
            if exp > 0 {
                format!(", {} expandable", fmt_int(exp as u64))
            } else {
                String::new()
            }
        );
        if self.layout.own_rows {
            s.push_str(&format!(
                ", largest first; one row = {}",
                format_bytes(self.layout.row_bytes)
            ));
        } else {
            s.push_str(&format!(
                ", packed largest first; one row = {}",
                format_bytes(self.layout.row_bytes)
            ));
        }
        s
    }
}

/// The smallest 1, 2, 2.5 or 5 × 10^k (in the unit of `bytes`) that is at
/// least `bytes`, in bytes (saturating).
fn nice_ceil(bytes: u64) -> u64 {
    let unit = unit_for(bytes.max(1));
    let v = unit.of(bytes.max(1));
    let mut base = 1.0;
    while base * 10.0 <= v {
        base *= 10.0;
    }
    let nice = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * base)
        .find(|&x| x >= v)
        .unwrap_or(10.0 * base);
    let b = nice * unit.div;
    if b >= u64::MAX as f64 {
        u64::MAX
    } else {
        (b.round() as u64).max(bytes)
    }
}

/// The largest 1, 2 or 5 × 10^k (in the unit of `max_bytes`) that is at
/// most `max_bytes`, in bytes, with its label.
fn nice_scale(max_bytes: u64) -> (u64, String) {
    let unit = unit_for(max_bytes.max(1));
    let v = unit.of(max_bytes.max(1));
    let mut base = 1.0;
    while base * 10.0 <= v {
        base *= 10.0;
    }
    let nice = [5.0, 2.0, 1.0]
        .iter()
        .map(|m| m * base)
        .find(|&x| x <= v)
        .unwrap_or(base);
    let bytes = (nice * unit.div).round() as u64;
    (bytes.max(1), format!("{} {}", fmt_tick(nice), unit.name))
}

/// Draws bytes `start .. start + len` of `seg` into the box `a`–`b`.
fn draw_piece<DB: DrawingBackend>(
    root: &Area<DB>,
    seg: &SegmentView,
    start: u64,
    len: u64,
    a: (i32, i32),
    b: (i32, i32),
) -> Result<()> {
    let (x0, y0, x1, y1) = (a.0, a.1, b.0, b.1);
    rect(root, (x0, y0), (x1, y1), fill(WHITE))?;
    if len == 0 || x1 <= x0 {
        return rect(root, (x0, y0), (x1.max(x0 + 1), y1), stroke(INK, 1));
    }
    let scale = (x1 - x0) as f64 / len as f64;
    let px = |off: u64| x0 + ((off - start) as f64 * scale).round() as i32;
    let end = start + len;
    let visible = seg
        .blocks
        .iter()
        .scan(0u64, |off, bl| {
            let s = *off;
            *off = off.saturating_add(bl.size);
            Some((s, *off, bl.state))
        })
        .filter(|&(s, e, _)| e > start && s < end)
        .collect::<Vec<_>>();
    let separators = !visible.is_empty() && (x1 - x0) / visible.len() as i32 >= 4;
    for &(s, e, state) in &visible {
        let (bs, be) = (s.max(start), e.min(end));
        let (p0, mut p1) = (px(bs), px(be));
        if p1 <= p0 && state != BlockState::Free {
            p1 = p0 + 1;
        }
        if p1 > p0 {
            rect(root, (p0, y0), (p1, y1), fill(state_color(state)))?;
        }
        if separators && s > start {
            line(root, (p0, y0 + 1), (p0, y1 - 1), stroke(WHITE, 1))?;
        }
    }
    if x1 - x0 >= 4 {
        rect(root, (x0, y0), (x1, y1), stroke(INK, 1))
    } else {
        // Too narrow for an outline: a white edge keeps neighbours apart.
        line(root, (x0, y0), (x0, y1), stroke(WHITE, 1))
    }
}

/// The legend of a segment map.
fn legend_items() -> [LegendItem; 3] {
    [
        LegendItem::new(Swatch::Box(ALLOCATED), "allocated"),
        LegendItem::new(
            Swatch::Box(PENDING),
            "pending free (in use on another stream)",
        ),
        LegendItem::new(Swatch::Box(FREE), "free (cached, reusable)"),
    ]
}

/// Line pitch of the statistics lines.
const STATS_STEP: i32 = LABEL_SIZE as i32 + 6;

impl SegmentMap<'_> {
    fn shown_title(&self) -> &str {
        if self.title.is_empty() {
            "Segment map"
        } else {
            self.title
        }
    }

    /// The header of a picture `w` pixels wide: the statistics lines, the
    /// first pixel row of the statistics, of the legend and of the bars.
    fn header_layout(&self, w: i32) -> (Vec<String>, i32, i32, i32) {
        let top = header_height(self.shown_title(), &self.subtitle(), w);
        let stats = wrap_lines(&self.stats(), &font(LABEL_SIZE, INK), w - 2 * SIDE);
        let legend_y = top + STATS_STEP * stats.len() as i32;
        let lh = legend_height_for(&legend_items(), w - 2 * SIDE);
        let body_top = (legend_y + lh + 8).max(HEADER_H - 10);
        (stats, top, legend_y, body_top)
    }
}

impl Figure for SegmentMap<'_> {
    fn size(&self) -> (u32, u32) {
        let body_top = self.header_layout(WIDTH as i32).3;
        let h = body_top + 10 + self.row_offsets().1 + FOOTER_H;
        (WIDTH, (h.max(HEIGHT as i32)) as u32)
    }

    // Indexing: the layout was built by `own_rows`/`pack` from `self.segs`
    // (in `SegmentMap::new`), so every piece's `seg` is an index into
    // `self.segs` and its `row` one into `row_starts_segment`; `offsets` has
    // an entry per row (`row_offsets`), and `lefts`/`rights` one per segment
    // when `own_rows`, the only case they are read.
    #[allow(clippy::indexing_slicing)]
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = self.shown_title();
        if self.segs.is_empty() {
            return no_data(root, title, "no segments: nothing was reserved");
        }
        frame(root, title, &self.subtitle())?;
        let (w, _) = root.dim_in_pixel();
        let w = w as i32;
        let ink = font(LABEL_SIZE, INK);
        let muted = font(LABEL_SIZE, MUTED);
        let (stats, top, legend_y, body_top) = self.header_layout(w);
        for (k, l) in stats.iter().enumerate() {
            text(
                root,
                l,
                (SIDE, top + k as i32 * STATS_STEP),
                &ink,
                HPos::Left,
                VPos::Top,
            )?;
        }
        draw_legend(root, &legend_items(), SIDE, legend_y, w - 2 * SIDE)?;
        let (offsets, body_h) = self.row_offsets();
        let l = &self.layout;

        let (lefts, rights, left_w, right_w) = self.label_columns(root, &ink, &muted)?;
        let bar_x0 = if l.own_rows { SIDE + left_w + 14 } else { SIDE };
        let bar_x1 = if l.own_rows {
            w - SIDE - right_w - 14
        } else {
            w - SIDE
        };
        let bar_x1 = bar_x1.max(bar_x0 + 200);
        let scale = (bar_x1 - bar_x0) as f64 / l.row_bytes.max(1) as f64;
        let bold_label = font(LABEL_SIZE, INK);
        for p in &l.pieces {
            let y = body_top + offsets[p.row];
            let x0 = bar_x0 + (p.at as f64 * scale).round() as i32;
            let x1 = bar_x0 + ((p.at + p.len) as f64 * scale).round() as i32;
            let x1 = x1.max(x0 + 1);
            let seg = self.segs[p.seg];
            draw_piece(root, seg, p.start, p.len, (x0, y), (x1, y + BAR))?;
            if l.own_rows {
                if p.start == 0 {
                    text(
                        root,
                        &lefts[p.seg],
                        (bar_x0 - 14, y + BAR / 2),
                        &muted,
                        HPos::Right,
                        VPos::Center,
                    )?;
                    text(
                        root,
                        &rights[p.seg],
                        (bar_x1 + 14, y + BAR / 2),
                        &ink,
                        HPos::Left,
                        VPos::Center,
                    )?;
                }
            } else {
                let label = if p.start == 0 {
                    format_bytes(seg.size)
                } else {
                    format!("{} (cont.)", format_bytes(seg.size))
                };
                if text_size(root, &label, &bold_label)?.0 + 16 <= x1 - x0 {
                    boxed_text(
                        root,
                        &label,
                        (x0 + 8, y + BAR / 2),
                        &bold_label,
                        HPos::Left,
                        VPos::Center,
                    )?;
                }
            }
        }

        draw_scale_bar(root, l.row_bytes, (bar_x0, body_top + body_h + 28), scale)
    }
}

impl SegmentMap<'_> {
    /// The label columns (own rows only; empty otherwise): each segment's
    /// address, for the left of its first row, and its size and free
    /// share, for the right; and the width of each column.
    fn label_columns<DB: DrawingBackend>(
        &self,
        root: &Area<DB>,
        ink: &TextStyle,
        muted: &TextStyle,
    ) -> Result<(Vec<String>, Vec<String>, i32, i32)> {
        let (mut left_w, mut right_w) = (0, 0);
        let mut lefts = Vec::new();
        let mut rights = Vec::new();
        if self.layout.own_rows {
            for s in &self.segs {
                let free = s
                    .blocks
                    .iter()
                    .filter(|b| b.state == BlockState::Free)
                    .fold(0u64, |a, b| a.saturating_add(b.size));
                let len = seg_len(s);
                let pct = if len > 0 {
                    free as f64 * 100.0 / len as f64
                } else {
                    0.0
                };
                let left = format!("0x{:x}", s.ptr);
                let right = format!("{} · {:.0}% free", format_bytes(s.size), pct);
                left_w = left_w.max(text_size(root, &left, muted)?.0);
                right_w = right_w.max(text_size(root, &right, ink)?.0);
                lefts.push(left);
                rights.push(right);
            }
        }
        Ok((lefts, rights, left_w, right_w))
    }
}

/// Draws the scale bar under the rows, starting at `(x, y)`: a quarter of
/// a row (`row_bytes`) rounded to a round size, `scale` pixels per byte,
/// and what a whole row holds. Nothing for rows under 4 bytes.
fn draw_scale_bar<DB: DrawingBackend>(
    root: &Area<DB>,
    row_bytes: u64,
    (x, y): (i32, i32),
    scale: f64,
) -> Result<()> {
    if row_bytes < 4 {
        return Ok(());
    }
    let (bytes, label) = nice_scale(row_bytes / 4);
    let x1 = x + (bytes as f64 * scale).round() as i32;
    line(root, (x, y), (x1, y), stroke(INK, 2))?;
    line(root, (x, y - 6), (x, y + 6), stroke(INK, 2))?;
    line(root, (x1, y - 6), (x1, y + 6), stroke(INK, 2))?;
    text(
        root,
        &format!("{label}   (one row = {})", format_bytes(row_bytes)),
        (x1 + 12, y),
        &font(LABEL_SIZE, MUTED),
        HPos::Left,
        VPos::Center,
    )
}
