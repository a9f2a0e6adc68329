//! Byte-size formatting and parsing shared by every crate and the CLI: one
//! formatter per use, so that every table, sentence, plot and message
//! writes a size the same way.
//!
//! | function | for | example |
//! |---|---|---|
//! | [`format_size`] | PyTorch's own messages (OOM text) | `700.00 MiB`, `1024 bytes` |
//! | [`bytes`] | tables | `7.31 GiB`, `512 B` |
//! | [`bytes_short`] | plots (three significant digits) | `753.6 MiB`, `1.50 KiB` |
//! | [`bytes_words`] | sentences (as tables write it, so that prose and table agree) | `4.46 GiB`, `75.22 GiB` |
//! | `size_string` | settings strings ([`parse_size`] reads it back) | `8GiB`, `1048577` |
//! | [`count`], [`percent`] | counts and shares | `1,234,567`, `95.6%` |

/// PyTorch's `format_size`: `N bytes` up to 1 KiB, then KiB up to 1 MiB, MiB
/// up to 1 GiB, GiB above, with two decimals.
pub fn format_size(n: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if n <= KIB {
        format!("{n} bytes")
    } else if n <= MIB {
        format!("{:.2} KiB", n as f64 / KIB as f64)
    } else if n <= GIB {
        format!("{:.2} MiB", n as f64 / MIB as f64)
    } else {
        format!("{:.2} GiB", n as f64 / GIB as f64)
    }
}

/// Bytes for tables: `512 B`, `1.50 KiB`, `20.00 MiB`, `7.31 GiB` (two
/// decimals in the largest binary unit that keeps the value at least 1).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut unit = "B";
    for u in UNITS.iter().skip(1) {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.2} {unit}")
}

/// Bytes for plots, three significant digits: `0 B`, `512 B`, `1.50 KiB`,
/// `753.6 MiB`, `80.0 GiB`.
pub fn bytes_short(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut unit = "B";
    for u in UNITS.iter().skip(1) {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if v >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

/// Bytes for sentences: the same spelling as [`bytes`] (`4.46 GiB`,
/// `650.00 MiB`), so that a sentence and the table beside it name a size
/// alike.
pub fn bytes_words(n: u64) -> String {
    bytes(n)
}

/// The canonical spelling of a byte size in a settings string: the largest
/// binary unit that divides it exactly (`8GiB`, `2MiB`), else plain bytes.
/// [`parse_size`] reads it back exactly.
pub(crate) fn size_string(n: u64) -> String {
    if n == 0 {
        return "0".into();
    }
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n % (1u64 << shift) == 0 {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// A count with thousands separators: `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A fraction as a percentage with one decimal: `95.6%`.
pub fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// Error of [`parse_size`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid size '{0}': expected bytes or a number with a unit such as 512MiB, 24GiB, 80GB, 1.5GiB"
)]
pub struct SizeParseError(pub String);

/// Parses `512MiB`, `24GiB`, `80GB`, `1.5 GiB`, `1024` (bytes), `4k`.
/// Binary units (KiB, MiB, GiB, TiB, and the single letters K, M, G, T) are
/// powers of 1024; decimal units (KB, MB, GB, TB) powers of 1000.
pub fn parse_size(s: &str) -> Result<u64, SizeParseError> {
    let err = || SizeParseError(s.to_string());
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() {
        return Err(err());
    }
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(err()),
    };
    if !num.contains('.') {
        let n: u64 = num.parse().map_err(|_| err())?;
        let m = mult as u64;
        return n.checked_mul(m).ok_or_else(err);
    }
    let x: f64 = num.parse().map_err(|_| err())?;
    let v = (x * mult).round();
    if !v.is_finite() || v < 0.0 || v >= u64::MAX as f64 {
        return Err(err());
    }
    Ok(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_pytorch() {
        assert_eq!(format_size(1024), "1024 bytes");
        assert_eq!(format_size(1025), "1.00 KiB");
        assert_eq!(format_size(1 << 20), "1024.00 KiB");
        assert_eq!(format_size(734_003_200), "700.00 MiB");
        assert_eq!(format_size(80 << 30), "80.00 GiB");
    }

    #[test]
    fn every_formatter() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(7_849_000_000), "7.31 GiB");
        assert_eq!(bytes_short(790_200_000), "753.6 MiB");
        assert_eq!(bytes_short(1536), "1.50 KiB");
        assert_eq!(bytes_short(u64::MAX), "16.0 EiB");
        assert_eq!(bytes(u64::MAX), "16.00 EiB");
        assert_eq!(bytes_words(4565 << 20), "4.46 GiB");
        assert_eq!(bytes_words(650 << 20), bytes(650 << 20));
        assert_eq!(bytes_words(80 << 30), "80.00 GiB");
        assert_eq!(size_string(8 << 30), "8GiB");
        assert_eq!(size_string((1 << 20) + 1), "1048577");
        assert_eq!(parse_size(&size_string(3 << 20)), Ok(3 << 20));
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(percent(0.956), "95.6%");
    }

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("24GiB"), Ok(24 << 30));
        assert_eq!(parse_size("80GB"), Ok(80_000_000_000));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1_000"), Ok(1000));
        assert_eq!(parse_size(" 2 g "), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("GiB").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999TiB").is_err());
    }
}
