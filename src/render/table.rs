//! Plain-text tables and number formatting for terminal output.

pub use vramlab_allocator::format::{bytes, count, percent};

/// A table with a header row; the first column is left-aligned, the others
/// right-aligned. A cell may hold several lines (`\n`).
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
    left: Vec<usize>,
}

impl Table {
    /// A table whose first row is `header`.
    pub fn new(header: Vec<String>) -> Self {
        Table {
            rows: vec![header],
            left: vec![0],
        }
    }

    /// Left-aligns column `col` too (text columns).
    pub fn left(mut self, col: usize) -> Self {
        self.left.push(col);
        self
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders with two spaces between columns and a rule under the header,
    /// fitted to the output's width ([`crate::output::width`]).
    pub fn render(&self) -> String {
        self.render_within(crate::output::width())
    }

    /// Renders every line behind `indent`, the whole fitted to the width.
    pub fn render_indented(&self, indent: &str) -> String {
        let inner = crate::output::width().saturating_sub(indent.chars().count());
        self.render_within(inner)
            .lines()
            .map(|l| format!("{indent}{l}\n"))
            .collect()
    }

    /// Renders within `limit` columns: when the table is wider, its
    /// left-aligned (text) columns, the widest first, are narrowed and
    /// their cells wrapped after `,` or at spaces onto further lines of the
    /// row; numbers are never wrapped (their headers may be).
    pub fn render_within(&self, limit: usize) -> String {
        // No rows: a word, never a header over nothing.
        if self.rows.len() < 2 {
            return "  (none)\n".to_string();
        }
        let ncols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; ncols];
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(cell_width(c));
            }
        }
        self.narrow(&mut widths, limit);
        let mut out = String::new();
        for (ri, r) in self.rows.iter().enumerate() {
            let cells: Vec<Vec<String>> = widths
                .iter()
                .enumerate()
                .map(|(i, &w)| {
                    // Continuations of a text cell are indented; a header's
                    // words and numbers are not.
                    let indent = ri > 0 && self.left.contains(&i);
                    wrap_cell(r.get(i).map(String::as_str).unwrap_or(""), w, indent)
                })
                .collect();
            let height = cells.iter().map(Vec::len).max().unwrap_or(1);
            for k in 0..height {
                let mut line = String::new();
                for (i, (w, cell)) in widths.iter().zip(&cells).enumerate() {
                    let c = cell.get(k).map(String::as_str).unwrap_or("");
                    if i > 0 {
                        line.push_str("  ");
                    }
                    let pad = w.saturating_sub(c.chars().count());
                    if self.left.contains(&i) {
                        line.push_str(c);
                        line.push_str(&" ".repeat(pad));
                    } else {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(c);
                    }
                }
                out.push_str(line.trim_end());
                out.push('\n');
            }
            if ri == 0 {
                out.push_str(&"-".repeat(total_width(&widths)));
                out.push('\n');
            }
        }
        out
    }

    /// Narrows the table until it fits `limit` (or nothing can give
    /// more): first each number column whose header is wider than its
    /// numbers, to its longest header word (the header wraps); then the
    /// text columns, the widest first, each to at least
    /// [`MIN_TEXT_COLUMN`] columns.
    fn narrow(&self, widths: &mut [usize], limit: usize) {
        let (header, body) = self.rows.split_first().unwrap_or((&EMPTY_ROW, &[]));
        for i in 0..widths.len() {
            let excess = total_width(widths).saturating_sub(limit);
            if excess == 0 {
                return;
            }
            if self.left.contains(&i) {
                continue;
            }
            let data = body
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| cell_width(c))
                .max()
                .unwrap_or(0);
            let word = header.get(i).map_or(0, |h| {
                h.split(' ').map(|w| w.chars().count()).max().unwrap_or(0)
            });
            if let Some(w) = widths.get_mut(i) {
                *w = w.saturating_sub(excess).max(data.max(word)).min(*w);
            }
        }
        // Water-filling: a column at a time, the widest text column gives
        // one column, so that wide ones meet at the same width.
        while total_width(widths) > limit {
            let widest = widths
                .iter_mut()
                .enumerate()
                .filter(|(i, w)| self.left.contains(i) && **w > MIN_TEXT_COLUMN)
                .max_by_key(|(i, w)| (**w, std::cmp::Reverse(*i)));
            match widest {
                Some((_, w)) => *w -= 1,
                None => return,
            }
        }
    }
}

/// A header-less table's header, for [`Table::narrow`].
static EMPTY_ROW: Vec<String> = Vec::new();

/// The columns a table of these widths takes, two spaces between columns.
fn total_width(widths: &[usize]) -> usize {
    widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1)
}

/// A cell's width: its longest line.
fn cell_width(c: &str) -> usize {
    c.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// The narrowest a text column is wrapped to.
const MIN_TEXT_COLUMN: usize = 12;

/// `cell` as lines of at most `w` columns: broken at a space, else after a
/// `,` or `/`, mid-word only where nothing else fits; a broken line's
/// continuations are indented two columns (with `indent`: text cells), so
/// that they read as part of it. Each `\n` of the cell starts a line of
/// its own.
fn wrap_cell(cell: &str, w: usize, indent: bool) -> Vec<String> {
    if cell.contains('\n') {
        return cell
            .split('\n')
            .flat_map(|l| wrap_cell(l, w, indent))
            .collect();
    }
    if cell.chars().count() <= w || w == 0 {
        return vec![cell.to_string()];
    }
    let indent = if indent && w > 8 { "  " } else { "" };
    let mut lines = Vec::new();
    let mut rest: Vec<char> = cell.chars().collect();
    let mut room = w;
    while rest.len() > room {
        // The last break point within the room, past a short prefix such
        // as "= ": at a space (dropped), or after a comma or a slash.
        let cut = (3.min(room)..=room)
            .rev()
            .find(|&i| {
                rest.get(i) == Some(&' ')
                    || i.checked_sub(1)
                        .and_then(|j| rest.get(j))
                        .is_some_and(|c| matches!(c, ',' | '/'))
            })
            .unwrap_or(room);
        let tail = rest.split_off(cut.min(rest.len()));
        let line: String = rest.into_iter().collect();
        let prefix = if lines.is_empty() { "" } else { indent };
        lines.push(format!("{prefix}{}", line.trim_end()));
        rest = tail;
        while rest.first() == Some(&' ') {
            rest.remove(0);
        }
        room = w - indent.len();
    }
    if !rest.is_empty() {
        let prefix = if lines.is_empty() { "" } else { indent };
        lines.push(format!("{prefix}{}", rest.into_iter().collect::<String>()));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(20 << 20), "20.00 MiB");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(percent(0.8766), "87.7%");
        let mut t = Table::new(vec!["a".into(), "bb".into()]);
        t.row(vec!["long name".into(), "1".into()]);
        assert_eq!(t.render(), "a          bb\n-------------\nlong name   1\n");
    }

    #[test]
    fn a_wide_table_wraps_its_text_columns_to_fit() {
        let mut t = Table::new(vec!["setting".into(), "peak".into(), "why".into()]).left(2);
        t.row(vec![
            "expandable_segments:True,max_split_size_mb:512".into(),
            "1.00 GiB".into(),
            "one growing segment per stream serves any size".into(),
        ]);
        let out = t.render_within(64);
        assert!(out.lines().all(|l| l.chars().count() <= 64), "{out}");
        // Setting names break after a comma; prose at spaces; the number
        // stays whole on the row's first line.
        assert!(out.contains("expandable_segments:True,"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with("max_split_size_mb:512")),
            "{out}"
        );
        assert!(out.lines().nth(2).unwrap().contains("1.00 GiB"), "{out}");
        // Wide enough: one line per row, as before.
        assert_eq!(t.render_within(usize::MAX).lines().count(), 3);
    }
}
