//! Plain-text tables and number formatting for terminal output.

pub use vramlab_allocator::format::{bytes, count, percent};

/// A table with a header row; the first column is left-aligned, the others
/// right-aligned.
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

    /// Renders with two spaces between columns and a rule under the header.
    pub fn render(&self) -> String {
        let ncols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; ncols];
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        for (ri, r) in self.rows.iter().enumerate() {
            let mut line = String::new();
            for (i, w) in widths.iter().enumerate() {
                let c = r.get(i).map(String::as_str).unwrap_or("");
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = w - c.chars().count();
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
            if ri == 0 {
                let total: usize = widths.iter().sum::<usize>() + 2 * ncols.saturating_sub(1);
                out.push_str(&"-".repeat(total));
                out.push('\n');
            }
        }
        out
    }
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
}
