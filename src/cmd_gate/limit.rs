//! `--max-increase`: a share of the baseline's peak (`2%`) or a size
//! (`256MiB`).

use std::fmt;

/// The largest growth that passes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// A share of the baseline's peak reserved bytes (0.02 for `2%`).
    Share(f64),
    /// Bytes.
    Bytes(u64),
}

impl Limit {
    /// The limit in bytes for a baseline peak of `base` bytes.
    pub fn bytes_of(self, base: u64) -> u64 {
        match self {
            Limit::Share(s) => (base as f64 * s) as u64,
            Limit::Bytes(b) => b,
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Share(s) => {
                // At most four decimals, trailing zeros dropped: 3.3%, not
                // 3.3000000000000003%.
                let t = format!("{:.4}", s * 100.0);
                let t = t.trim_end_matches('0').trim_end_matches('.');
                write!(f, "{t}%")
            }
            Limit::Bytes(b) => f.write_str(&crate::render::table::bytes(*b)),
        }
    }
}

/// Reads `2%`, `0.5%` or a size.
pub fn parse(s: &str) -> Result<Limit, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a percentage (2%) or a size (256MiB)"))?;
        if !(v >= 0.0 && v.is_finite()) {
            return Err(format!("'{s}': a percentage is 0 or more"));
        }
        return Ok(Limit::Share(v / 100.0));
    }
    crate::args::parse_size_arg(t)
        .map(Limit::Bytes)
        .map_err(|e| format!("'{s}' is not a percentage (2%) or a size (256MiB): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_sizes() {
        assert_eq!(parse("2%"), Ok(Limit::Share(0.02)));
        assert_eq!(parse("256MiB"), Ok(Limit::Bytes(256 << 20)));
        assert_eq!(Limit::Share(0.02).bytes_of(1000), 20);
        assert!(parse("two").is_err());
        assert!(parse("-1%").is_err());
        assert_eq!(parse("3.3%").unwrap().to_string(), "3.3%");
        assert_eq!(parse("2%").unwrap().to_string(), "2%");
    }
}
