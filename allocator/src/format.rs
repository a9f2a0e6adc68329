//! Byte-size formatting and parsing shared by every crate and the CLI.

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
