//! Placing labels where they cover no line, box or other label.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::Area;
use super::labels::{PxRect, block_box, boxed_lines};
use crate::Result;

/// Whether the segment `a`–`b` touches the box `r` (Liang–Barsky).
pub(crate) fn segment_hits(a: (i32, i32), b: (i32, i32), r: PxRect) -> bool {
    let (x0, y0) = (a.0 as f64, a.1 as f64);
    let (dx, dy) = ((b.0 - a.0) as f64, (b.1 - a.1) as f64);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [
        (-dx, x0 - r.0 as f64),
        (dx, r.2 as f64 - x0),
        (-dy, y0 - r.1 as f64),
        (dy, r.3 as f64 - y0),
    ] {
        if p.abs() < f64::EPSILON {
            if q < 0.0 {
                return false;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                if t > t1 {
                    return false;
                }
                t0 = t0.max(t);
            } else {
                if t < t0 {
                    return false;
                }
                t1 = t1.min(t);
            }
        }
    }
    t0 <= t1
}

/// Whether two boxes overlap.
pub(crate) fn overlaps(a: PxRect, b: PxRect) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Places boxed labels so that they cover neither each other nor the
/// lines and boxes they are told to avoid: each label takes the first of
/// its candidate anchors whose box is free.
#[derive(Debug, Default)]
pub(crate) struct Placer {
    taken: Vec<PxRect>,
    labels: Vec<PxRect>,
    segments: Vec<((i32, i32), (i32, i32))>,
    bounds: Option<PxRect>,
}

impl Placer {
    /// A placer that keeps labels inside `x0..x1` × `y0..y1` where it can.
    pub(crate) fn within(x: std::ops::Range<i32>, y: std::ops::Range<i32>) -> Self {
        Placer {
            taken: Vec::new(),
            labels: Vec::new(),
            segments: Vec::new(),
            bounds: Some((x.start, y.start, x.end, y.end)),
        }
    }

    /// Keeps labels off the box `r`.
    pub(crate) fn avoid(&mut self, r: PxRect) {
        self.taken.push(r);
    }

    /// Keeps labels off the polyline through `points`.
    pub(crate) fn avoid_path(&mut self, points: &[(i32, i32)]) {
        for w in points.windows(2) {
            if let [a, b] = w {
                self.segments.push((*a, *b));
            }
        }
    }

    /// Whether `b` is inside the bounds and clear of every label, box and
    /// line taken so far.
    pub(crate) fn is_free(&self, b: PxRect) -> bool {
        let inside = self
            .bounds
            .is_none_or(|r| b.0 >= r.0 && b.1 >= r.1 && b.2 <= r.2 && b.3 <= r.3);
        inside
            && !self.taken.iter().any(|&t| overlaps(b, t))
            && !self.segments.iter().any(|&(p, q)| segment_hits(p, q, b))
    }

    /// Whether the segment `a`–`b` stays clear of every label placed so
    /// far.
    pub(crate) fn segment_is_free(&self, a: (i32, i32), b: (i32, i32)) -> bool {
        !self.labels.iter().any(|&t| segment_hits(a, b, t))
    }

    /// Draws `lines` boxed at the first free candidate `(pos, h, v)` (the
    /// first candidate when none is free); returns the box.
    pub(crate) fn place_lines<DB: DrawingBackend>(
        &mut self,
        area: &Area<DB>,
        lines: &[String],
        style: &TextStyle,
        candidates: &[((i32, i32), HPos, VPos)],
    ) -> Result<Option<PxRect>> {
        let Some(&first) = candidates.first() else {
            return Ok(None);
        };
        let chosen = candidates
            .iter()
            .copied()
            .find(|c| self.is_free(block_box(lines, style, c.0, c.1, c.2)))
            .unwrap_or(first);
        let b = boxed_lines(area, lines, style, chosen.0, chosen.1, chosen.2)?;
        self.taken.push(b);
        self.labels.push(b);
        Ok(Some(b))
    }

    /// Draws `s` boxed at the first free candidate `(pos, h, v)` (the first
    /// candidate when none is free).
    pub(crate) fn place<DB: DrawingBackend>(
        &mut self,
        area: &Area<DB>,
        s: &str,
        style: &TextStyle,
        candidates: &[((i32, i32), HPos, VPos)],
    ) -> Result<()> {
        self.place_lines(area, &[s.to_string()], style, candidates)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_boxes() {
        assert!(segment_hits((0, 5), (20, 5), (5, 0, 10, 10)));
        assert!(!segment_hits((0, 15), (20, 15), (5, 0, 10, 10)));
        assert!(segment_hits((0, 0), (20, 20), (5, 0, 10, 10)));
        assert!(!segment_hits((0, 10), (4, 20), (5, 0, 10, 10)));
    }
}
