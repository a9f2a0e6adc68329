//! A small reader of the SVG files plotters writes, and checks that what
//! it shows can be read: no label cut with "…", no two labels on top of
//! each other, no line running through a label.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};

/// A box: left, top, right, bottom.
pub type Box2 = (f64, f64, f64, f64);

/// A text element.
#[derive(Debug, Clone)]
pub struct Text {
    /// Position in the document (drawing order).
    pub order: usize,
    pub content: String,
    pub fill: String,
    /// Where the glyphs are, as the PNG draws them.
    pub bbox: Box2,
}

/// A straight piece of a line, polyline or rectangle outline.
#[derive(Debug, Clone)]
pub struct Segment {
    pub order: usize,
    pub stroke: String,
    pub a: (f64, f64),
    pub b: (f64, f64),
}

/// A filled rectangle.
#[derive(Debug, Clone)]
pub struct FilledRect {
    pub order: usize,
    pub fill: String,
    pub opaque: bool,
    pub bbox: Box2,
}

/// What an SVG file draws, in order.
#[derive(Debug, Default)]
pub struct Svg {
    /// Picture width and height.
    pub size: (f64, f64),
    pub texts: Vec<Text>,
    pub segments: Vec<Segment>,
    pub rects: Vec<FilledRect>,
    /// `(order, stroke or fill)` of every element, for finding swatches.
    pub colors: Vec<(usize, String)>,
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    Some(&tag[start..start + len])
}

fn num(tag: &str, name: &str) -> f64 {
    attr(tag, name).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Width of `s` in pixels as the report's PNGs draw it: DejaVu Sans at
/// plotters' size, which is 1.24 × the SVG font size.
pub fn text_width(s: &str, svg_size: f64, bold: bool) -> f64 {
    let data = if bold {
        dejavu::sans::bold()
    } else {
        dejavu::sans::regular()
    };
    let font = FontRef::try_from_slice(data).unwrap();
    let scaled = font.as_scaled(PxScale::from((svg_size * 1.24) as f32));
    let mut w = 0.0f32;
    let mut prev = None;
    for c in s.chars() {
        let id = scaled.glyph_id(c);
        w += scaled.h_advance(id);
        if let Some(p) = prev {
            w += scaled.kern(p, id);
        }
        prev = Some(id);
    }
    w as f64
}

/// Parses the elements plotters writes.
pub fn parse(svg: &str) -> Svg {
    let mut out = Svg::default();
    let mut rest = svg;
    let mut order = 0;
    while let Some(at) = rest.find('<') {
        rest = &rest[at..];
        let Some(end) = rest.find('>') else { break };
        let tag = &rest[..=end];
        order += 1;
        if tag.starts_with("<svg") {
            out.size = (num(tag, "width"), num(tag, "height"));
        }
        if tag.starts_with("<text") {
            let close = rest.find("</text>").unwrap();
            let content = unescape(rest[end + 1..close].trim());
            rest = &rest[close + "</text>".len()..];
            let size = num(tag, "font-size");
            let bold = attr(tag, "font-weight") == Some("bold");
            let w = text_width(&content, size, bold);
            let (x, y) = (num(tag, "x"), num(tag, "y"));
            let x0 = match attr(tag, "text-anchor") {
                Some("middle") => x - w / 2.0,
                Some("end") => x - w,
                _ => x,
            };
            // The glyphs' extent: 0.76 em above the baseline, 0.24 below.
            let baseline = match attr(tag, "dy") {
                Some("0.76em") => y + 0.76 * size,
                Some("0.5ex") => y + 0.27 * size,
                Some("-0.5ex") => y - 0.27 * size,
                _ => y,
            };
            let (y0, y1) = (baseline - 0.76 * size, baseline + 0.24 * size);
            let mut bbox = (x0, y0, x0 + w, y1);
            if let Some(t) = attr(tag, "transform") {
                // rotate(270, cx, cy): (dx, dy) → (dy, −dx) around (x, y).
                assert!(t.starts_with("rotate(270"), "unexpected transform {t}");
                bbox = (x + (y0 - y), y - (x0 + w - x), x + (y1 - y), y - (x0 - x));
            }
            if !content.is_empty() {
                out.texts.push(Text {
                    order,
                    content,
                    fill: attr(tag, "fill").unwrap_or_default().to_string(),
                    bbox,
                });
            }
            continue;
        }
        rest = &rest[end + 1..];
        let stroke = attr(tag, "stroke").unwrap_or("none").to_string();
        if tag.starts_with("<polyline") {
            let pts: Vec<(f64, f64)> = attr(tag, "points")
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| {
                    let (a, b) = p.split_once(',')?;
                    Some((a.parse().ok()?, b.parse().ok()?))
                })
                .collect();
            for w in pts.windows(2) {
                out.segments.push(Segment {
                    order,
                    stroke: stroke.clone(),
                    a: w[0],
                    b: w[1],
                });
            }
            out.colors.push((order, stroke));
        } else if tag.starts_with("<line") {
            out.segments.push(Segment {
                order,
                stroke: stroke.clone(),
                a: (num(tag, "x1"), num(tag, "y1")),
                b: (num(tag, "x2"), num(tag, "y2")),
            });
            out.colors.push((order, stroke));
        } else if tag.starts_with("<rect") {
            let (x, y, w, h) = (
                num(tag, "x"),
                num(tag, "y"),
                num(tag, "width"),
                num(tag, "height"),
            );
            let fill = attr(tag, "fill").unwrap_or("none").to_string();
            if fill == "none" {
                let c = [(x, y), (x + w, y), (x + w, y + h), (x, y + h), (x, y)];
                for k in 0..4 {
                    out.segments.push(Segment {
                        order,
                        stroke: stroke.clone(),
                        a: c[k],
                        b: c[k + 1],
                    });
                }
                out.colors.push((order, stroke));
            } else {
                let opaque = attr(tag, "opacity").is_none_or(|o| o == "1");
                out.rects.push(FilledRect {
                    order,
                    fill: fill.clone(),
                    opaque,
                    bbox: (x, y, x + w, y + h),
                });
                out.colors.push((order, fill));
            }
        } else if tag.starts_with("<circle") {
            let fill = attr(tag, "fill").unwrap_or("none");
            let c = if fill == "none" {
                stroke
            } else {
                fill.to_string()
            };
            out.colors.push((order, c));
        }
    }
    out
}

fn overlap(a: Box2, b: Box2) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

fn shrink(b: Box2, by: f64) -> Box2 {
    (b.0 + by, b.1 + by, b.2 - by, b.3 - by)
}

/// Whether the segment `a`–`b` passes through the box `r`.
fn crosses(a: (f64, f64), b: (f64, f64), r: Box2) -> bool {
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    for (p, q) in [
        (-dx, a.0 - r.0),
        (dx, r.2 - a.0),
        (-dy, a.1 - r.1),
        (dy, r.3 - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else if p < 0.0 {
            t0 = t0.max(q / p);
        } else {
            t1 = t1.min(q / p);
        }
    }
    t0 <= t1
}

/// The light grey of grid lines, which may run under labels.
pub const GRID: &str = "#E2E5E9";

/// How strictly lines are kept off labels.
#[derive(Debug, Clone, Copy)]
pub enum Lines<'a> {
    /// A line may pass behind a label that has an opaque white box.
    UnlessBoxed,
    /// Lines of these colours may not touch any label, boxed or not.
    NeverOf(&'a [&'a str]),
    /// No line but the grid may touch any label.
    Never,
}

/// Everything that makes `svg` hard to read, one sentence each.
pub fn problems(svg: &Svg, lines: Lines) -> Vec<String> {
    let mut out = Vec::new();
    for t in &svg.texts {
        if t.content.contains('…') {
            out.push(format!("label cut with an ellipsis: {:?}", t.content));
        }
    }
    for t in &svg.texts {
        let b = shrink(t.bbox, 0.5);
        if b.0 < 0.0 || b.1 < 0.0 || b.2 > svg.size.0 || b.3 > svg.size.1 {
            out.push(format!(
                "label outside the picture: {:?} {:?}",
                t.content, t.bbox
            ));
        }
    }
    for (i, a) in svg.texts.iter().enumerate() {
        for b in &svg.texts[..i] {
            if overlap(shrink(a.bbox, 0.5), shrink(b.bbox, 0.5)) {
                out.push(format!(
                    "labels overlap: {:?} {:?} and {:?} {:?}",
                    a.content, a.bbox, b.content, b.bbox
                ));
            }
        }
    }
    for t in &svg.texts {
        let glyphs = shrink(t.bbox, 1.0);
        // The last opaque white box under the label, if any.
        let backing = svg
            .rects
            .iter()
            .filter(|r| r.order < t.order && r.opaque && r.fill == "#FFFFFF")
            .filter(|r| {
                r.bbox.0 <= glyphs.0
                    && r.bbox.1 <= glyphs.1
                    && r.bbox.2 >= glyphs.2
                    && r.bbox.3 >= glyphs.3
            })
            .map(|r| r.order)
            .max();
        for s in &svg.segments {
            if s.stroke == GRID || s.stroke == "none" || !crosses(s.a, s.b, glyphs) {
                continue;
            }
            let strict = match lines {
                Lines::UnlessBoxed => false,
                Lines::NeverOf(colors) => colors.contains(&s.stroke.as_str()),
                Lines::Never => true,
            };
            let hidden = s.order < t.order && backing.is_some_and(|b| b > s.order);
            if strict || !hidden {
                out.push(format!(
                    "a {} line runs through {:?} ({:?} → {:?})",
                    s.stroke, t.content, s.a, s.b
                ));
            }
        }
        for r in &svg.rects {
            if r.order > t.order && r.fill != "#FFFFFF" && overlap(r.bbox, glyphs) {
                out.push(format!("a {} box covers {:?}", r.fill, t.content));
            }
        }
    }
    out
}

/// The colour of the legend swatch of the entry whose text starts with
/// `label (`: the element drawn just before that text.
pub fn legend_color(svg: &Svg, label: &str) -> Option<String> {
    let prefix = format!("{label} (");
    let t = svg.texts.iter().find(|t| t.content.starts_with(&prefix))?;
    svg.colors
        .iter()
        .filter(|(o, _)| *o < t.order)
        .max_by_key(|(o, _)| *o)
        .map(|(_, c)| c.clone())
}
