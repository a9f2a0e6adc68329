//! Byte units and number formatting for axes and labels.

/// A binary byte unit an axis is drawn in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Unit {
    /// `B`, `KiB`, `MiB`, …
    pub name: &'static str,
    /// Bytes per unit.
    pub div: f64,
}

const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// The largest binary unit in which `max_bytes` is at least 1 (bytes for 0).
pub(crate) fn unit_for(max_bytes: u64) -> Unit {
    let mut unit = Unit {
        name: "B",
        div: 1.0,
    };
    for (i, &name) in UNITS.iter().enumerate().skip(1) {
        let div = 1u64 << (10 * i);
        if max_bytes < div {
            break;
        }
        unit = Unit {
            name,
            div: div as f64,
        };
    }
    unit
}

impl Unit {
    /// `bytes` in this unit.
    pub(crate) fn of(self, bytes: u64) -> f64 {
        bytes as f64 / self.div
    }
}

/// A byte count for plots (the workspace's one formatter for plots):
/// `512 B`, `1.50 KiB`, `753.6 MiB`, `80.0 GiB`.
pub use vramlab_allocator::format::bytes_short as format_bytes;

/// A tick value: at most two decimals, trailing zeros dropped.
pub(crate) fn fmt_tick(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".to_string() } else { s }
}

/// An integer with thousands separators: `12,345`.
pub(crate) fn fmt_int(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A tick on an axis of counts (event indices, sizes): integers below ten
/// million get separators (`12,345`), larger values a decimal suffix
/// (`25M`, `1.5G`), fractions two decimals.
pub(crate) fn fmt_count_tick(v: f64) -> String {
    if v.abs() >= 1e7 {
        let mut x = v;
        let mut suffix = "";
        for s in ["k", "M", "G", "T", "P", "E"] {
            if x.abs() < 1000.0 {
                break;
            }
            x /= 1000.0;
            suffix = s;
        }
        return format!("{}{suffix}", fmt_tick(x));
    }
    if v >= 0.0 && v.fract().abs() < 1e-9 {
        fmt_int(v as u64)
    } else {
        fmt_tick(v)
    }
}

/// A fraction as a percentage with one decimal: `12.4%`.
pub(crate) fn fmt_pct(f: f64) -> String {
    if f.is_finite() {
        format!("{:.1}%", f * 100.0)
    } else {
        "n/a".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(unit_for(0).name, "B");
        assert_eq!(unit_for(1023).name, "B");
        assert_eq!(unit_for(1024).name, "KiB");
        assert_eq!(unit_for(864 << 20).name, "MiB");
        assert_eq!(unit_for(80 << 30).name, "GiB");
        assert_eq!(unit_for(u64::MAX).name, "EiB");
    }

    #[test]
    fn bytes() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(864 << 20), "864.0 MiB");
        assert_eq!(format_bytes(80 << 30), "80.0 GiB");
        assert_eq!(format_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn ticks() {
        assert_eq!(fmt_tick(0.0), "0");
        assert_eq!(fmt_tick(200.0), "200");
        assert_eq!(fmt_tick(12.5), "12.5");
        assert_eq!(fmt_tick(0.25), "0.25");
        assert_eq!(fmt_tick(1.0), "1");
        assert_eq!(fmt_int(0), "0");
        assert_eq!(fmt_int(1234567), "1,234,567");
        assert_eq!(fmt_count_tick(1500.0), "1,500");
        assert_eq!(fmt_count_tick(2.5), "2.5");
        assert_eq!(fmt_count_tick(9_999_999.0), "9,999,999");
        assert_eq!(fmt_count_tick(25_000_000.0), "25M");
        assert_eq!(fmt_count_tick(1.5e9), "1.5G");
        assert_eq!(fmt_count_tick(1.8e19), "18E");
    }
}
