//! The segment map: every segment a bar, its blocks coloured by state.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use vramlab_allocator::{BlockState, PoolKind, SegmentView};

use super::{Figure, HEIGHT, WIDTH};
use crate::Result;
use crate::style::*;
use crate::units::{fmt_int, format_bytes};

/// Up to this many segments get one labelled row each.
const ROWS_MODE_MAX: usize = 40;
/// Height of the title, subtitle and statistics line.
const HEADER_H: i32 = 118;
/// Height kept under the bars for the legend.
const FOOTER_H: i32 = 64;
/// Bar height and row pitch, one row per segment.
const ROW_BAR: i32 = 22;
const ROW_PITCH: i32 = 32;
/// Bar height and row pitch, packed.
const PACK_BAR: i32 = 24;
const PACK_PITCH: i32 = 30;

/// A part of a segment drawn in one packed row.
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

enum Layout {
    /// One row per segment.
    Rows,
    /// Segments packed into rows of `row_bytes`, largest first; a segment
    /// longer than a row continues on the next.
    Packed {
        row_bytes: u64,
        rows: usize,
        pieces: Vec<Piece>,
    },
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

/// First-fit-decreasing packing of `segs` (sorted largest first) into rows.
fn pack(segs: &[&SegmentView]) -> Layout {
    let total: u128 = segs.iter().map(|s| seg_len(s) as u128).sum();
    let target_rows = segs.len().div_ceil(6).clamp(10, 44) as u128;
    let row_bytes = total.div_ceil(target_rows).clamp(1, u64::MAX as u128) as u64;
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
    Layout::Packed {
        row_bytes,
        rows: free.len(),
        pieces,
    }
}

impl<'a> SegmentMap<'a> {
    /// Sorts the segments (largest first, then by address) and lays them
    /// out.
    pub(crate) fn new(title: &'a str, segments: &'a [SegmentView]) -> Self {
        let mut segs: Vec<&SegmentView> = segments.iter().collect();
        segs.sort_by(|a, b| seg_len(b).cmp(&seg_len(a)).then(a.ptr.cmp(&b.ptr)));
        let layout = if segs.len() <= ROWS_MODE_MAX {
            Layout::Rows
        } else {
            pack(&segs)
        };
        SegmentMap {
            title,
            segs,
            layout,
        }
    }

    fn rows_height(&self) -> i32 {
        match &self.layout {
            Layout::Rows => self.segs.len() as i32 * ROW_PITCH,
            Layout::Packed { rows, .. } => *rows as i32 * PACK_PITCH,
        }
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
        match &self.layout {
            Layout::Rows => s.push_str(", largest first; bar length ∝ segment size"),
            Layout::Packed { row_bytes, .. } => s.push_str(&format!(
                ", packed largest first; one row = {}",
                format_bytes(*row_bytes)
            )),
        }
        s
    }
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
    rect(root, (x0, y0), (x1, y1), stroke(INK, 1))
}

impl Figure for SegmentMap<'_> {
    fn size(&self) -> (u32, u32) {
        let h = HEADER_H + self.rows_height() + FOOTER_H + 24;
        (WIDTH, (h.max(HEIGHT as i32)) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()> {
        let title = if self.title.is_empty() {
            "Segment map"
        } else {
            self.title
        };
        if self.segs.is_empty() {
            return no_data(root, title, "no segments: nothing was reserved");
        }
        let top = frame(root, title, &self.subtitle())?;
        let (w, h) = root.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let stats_style = font(LABEL_SIZE, INK);
        let stats = ellipsize(root, &self.stats(), &stats_style, w - 48)?;
        text(root, &stats, (24, top), &stats_style, HPos::Left, VPos::Top)?;
        let body_top = top.max(HEADER_H - 30) + 34;
        let label_style = font(LABEL_SIZE, INK);
        let muted = font(LABEL_SIZE, MUTED);

        match &self.layout {
            Layout::Rows => {
                let lefts: Vec<String> = self
                    .segs
                    .iter()
                    .map(|s| {
                        format!(
                            "{}0x{:x}",
                            if s.is_expandable {
                                "expandable "
                            } else if s.pool == PoolKind::Small {
                                "small "
                            } else {
                                ""
                            },
                            s.ptr
                        )
                    })
                    .collect();
                let mut left_w = 0;
                for l in &lefts {
                    left_w = left_w.max(text_size(root, l, &label_style)?.0);
                }
                let left_w = left_w.min(320);
                let rights: Vec<String> = self
                    .segs
                    .iter()
                    .map(|s| {
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
                        format!(
                            "{} · {} block{} · {:.0}% free",
                            format_bytes(s.size),
                            s.blocks.len(),
                            if s.blocks.len() == 1 { "" } else { "s" },
                            pct
                        )
                    })
                    .collect();
                let mut right_w = 0;
                for r in &rights {
                    right_w = right_w.max(text_size(root, r, &label_style)?.0);
                }
                let right_w = right_w.min(360);
                let bar_x0 = 24 + left_w + 14;
                let bar_x1 = (w - 24 - right_w - 14).max(bar_x0 + 100);
                let max_len = self.segs.iter().map(|s| seg_len(s)).max().unwrap_or(0);
                for (k, s) in self.segs.iter().enumerate() {
                    let y = body_top + k as i32 * ROW_PITCH;
                    let len = seg_len(s);
                    let frac = if max_len > 0 {
                        len as f64 / max_len as f64
                    } else {
                        0.0
                    };
                    let px = ((bar_x1 - bar_x0) as f64 * frac).round() as i32;
                    let px = if len > 0 { px.max(3) } else { 0 };
                    draw_piece(root, s, 0, len, (bar_x0, y), (bar_x0 + px, y + ROW_BAR))?;
                    let left = ellipsize(root, &lefts[k], &muted, left_w)?;
                    text(
                        root,
                        &left,
                        (bar_x0 - 14, y + ROW_BAR / 2),
                        &muted,
                        HPos::Right,
                        VPos::Center,
                    )?;
                    text(
                        root,
                        &rights[k],
                        (bar_x0 + px + 10, y + ROW_BAR / 2),
                        &label_style,
                        HPos::Left,
                        VPos::Center,
                    )?;
                }
            }
            Layout::Packed {
                row_bytes,
                rows,
                pieces,
            } => {
                let mut left_w = 0;
                let offsets: Vec<String> = (0..*rows)
                    .map(|r| format_bytes((r as u64).saturating_mul(*row_bytes)))
                    .collect();
                for o in &offsets {
                    left_w = left_w.max(text_size(root, o, &muted)?.0);
                }
                let bar_x0 = 24 + left_w + 14;
                let bar_x1 = w - 32;
                let scale = (bar_x1 - bar_x0) as f64 / *row_bytes as f64;
                for (r, o) in offsets.iter().enumerate() {
                    let y = body_top + r as i32 * PACK_PITCH;
                    text(
                        root,
                        o,
                        (bar_x0 - 14, y + PACK_BAR / 2),
                        &muted,
                        HPos::Right,
                        VPos::Center,
                    )?;
                }
                for p in pieces {
                    let y = body_top + p.row as i32 * PACK_PITCH;
                    let x0 = bar_x0 + (p.at as f64 * scale).round() as i32;
                    let x1 = bar_x0 + ((p.at + p.len) as f64 * scale).round() as i32;
                    let x1 = x1.max(x0 + 1);
                    let seg = self.segs[p.seg];
                    draw_piece(root, seg, p.start, p.len, (x0, y), (x1, y + PACK_BAR))?;
                    let label = if p.start == 0 {
                        format_bytes(seg.size)
                    } else {
                        format!("{} (cont.)", format_bytes(seg.size))
                    };
                    let small = bold(LABEL_SIZE, INK);
                    if text_size(root, &label, &small)?.0 + 16 <= x1 - x0 {
                        boxed_text(
                            root,
                            &label,
                            (x0 + 8, y + PACK_BAR / 2),
                            &small,
                            HPos::Left,
                            VPos::Center,
                        )?;
                    }
                }
            }
        }

        let items = [
            LegendItem::new(Swatch::Box(ALLOCATED), "allocated"),
            LegendItem::new(
                Swatch::Box(PENDING),
                "pending free (in use on another stream)",
            ),
            LegendItem::new(Swatch::Box(FREE), "free (cached, reusable)"),
        ];
        let lh = legend_height(root, &items, w - 48)?;
        draw_legend(root, &items, 24, h - lh - 8, w - 48)
    }
}
