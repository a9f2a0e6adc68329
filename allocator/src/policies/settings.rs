//! The `key:value,…` settings strings of the policies other than `native`:
//! the grammar, the value parsers (each error names the policy, the key and
//! the value) and canonical size strings for `Display`.

use crate::format::parse_size;

pub(crate) use crate::format::size_string;

/// Splits a settings string `key:value,key:value` into trimmed pairs.
///
/// Empty items are ignored (an empty string gives no pairs). Errors name the
/// policy and the offending item: a missing `:`, a key not in `known`, or a
/// key given twice.
pub(crate) fn split_settings<'a>(
    policy: &str,
    s: &'a str,
    known: &[&str],
) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for item in s.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let Some((key, value)) = item.split_once(':') else {
            return Err(format!(
                "{policy} setting '{item}' has no value (expected key:value)"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if !known.contains(&key) {
            if known.is_empty() {
                return Err(format!(
                    "unknown {policy} setting '{key}': the {policy} policy takes no settings"
                ));
            }
            return Err(format!(
                "unknown {policy} setting '{key}' (known settings: {})",
                known.join(", ")
            ));
        }
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("{policy} setting '{key}' is given twice"));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// `true`/`false` (any case) or `1`/`0`.
pub(crate) fn parse_bool(policy: &str, key: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!(
            "{policy} setting {key}: invalid value '{v}' (expected true or false)"
        )),
    }
}

/// A byte size (`8GiB`, `512MiB`, `1048576`).
pub(crate) fn parse_bytes(policy: &str, key: &str, v: &str) -> Result<u64, String> {
    parse_size(v).map_err(|_| {
        format!(
            "{policy} setting {key}: invalid size '{v}' (expected bytes or a number with a unit such as 512MiB or 8GiB)"
        )
    })
}

/// A finite number in `[lo, hi]` (`lo` excluded when `lo_open`).
pub(crate) fn parse_number(
    policy: &str,
    key: &str,
    v: &str,
    lo: f64,
    lo_open: bool,
    hi: f64,
) -> Result<f64, String> {
    let range = if lo_open {
        format!("({lo}, {hi}]")
    } else {
        format!("[{lo}, {hi}]")
    };
    let x: f64 = v.parse().map_err(|_| {
        format!("{policy} setting {key}: invalid number '{v}' (expected a number in {range})")
    })?;
    let ok = x.is_finite() && (if lo_open { x > lo } else { x >= lo }) && x <= hi;
    if !ok {
        return Err(format!(
            "{policy} setting {key}: {v} is out of range (expected a number in {range})"
        ));
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_grammar() {
        let known = ["a", "b"];
        assert_eq!(split_settings("p", "", &known), Ok(vec![]));
        assert_eq!(
            split_settings("p", " a : 1 , b:x,", &known),
            Ok(vec![("a", "1"), ("b", "x")])
        );
        assert_eq!(
            split_settings("p", "c:1", &known).unwrap_err(),
            "unknown p setting 'c' (known settings: a, b)"
        );
        assert_eq!(
            split_settings("p", "a", &known).unwrap_err(),
            "p setting 'a' has no value (expected key:value)"
        );
        assert_eq!(
            split_settings("p", "a:1,a:2", &known).unwrap_err(),
            "p setting 'a' is given twice"
        );
        assert!(parse_bool("p", "a", "TRUE").unwrap());
        assert!(parse_bool("p", "a", "yes").is_err());
        assert!(parse_number("p", "a", "0", 0.0, true, 1.0).is_err());
        assert_eq!(parse_number("p", "a", "0.5", 0.0, true, 1.0), Ok(0.5));
    }

    #[test]
    fn canonical_sizes_read_back() {
        for n in [
            0,
            1,
            512,
            1 << 10,
            3 << 20,
            8 << 30,
            (1 << 30) + 512,
            5 << 40,
        ] {
            let s = size_string(n);
            assert_eq!(parse_size(&s).unwrap(), n, "{s}");
        }
        assert_eq!(size_string(8 << 30), "8GiB");
        assert_eq!(size_string(1536 << 20), "1536MiB");
        assert_eq!(size_string(1000), "1000");
    }
}
