//! C++ `std::stoi` / `std::stoul` / `std::stoull` / `std::stod` as PyTorch's
//! configuration parsers use them (libstdc++ on LP64 Linux).
//!
//! The conversions accept the longest valid numeric *prefix* of a token and
//! ignore the rest (`"512abc"` is 512), skip leading C-locale whitespace, and
//! report failure the way libstdc++ does: `std::invalid_argument` when no
//! digits could be read, `std::out_of_range` when `errno == ERANGE` (or, for
//! `stoi`, when the `long` result does not fit in an `int`). Both exceptions
//! carry the function name as `what()`, so PyTorch's error message for
//! `max_split_size_mb:abc` is literally `stoi`.
//!
//! Unsigned conversions follow `strtoul`: a leading `-` is accepted and the
//! magnitude is negated modulo 2^64 (`stoul("-1") == u64::MAX`).

/// Why a C numeric conversion failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumError {
    /// `std::invalid_argument`: no conversion could be performed.
    Invalid,
    /// `std::out_of_range`: `errno == ERANGE` or (for `stoi`) outside `int`.
    OutOfRange,
}

/// `isspace` in the "C" locale.
pub(crate) fn c_isspace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// Leading-whitespace, sign and decimal digits as `strtol`/`strtoul` read them
/// with base 10. Returns `(negative, magnitude)`; the magnitude is `None` when
/// it does not fit in a `u64`.
fn scan_integer(s: &str) -> Result<(bool, Option<u64>), NumError> {
    let t = s.trim_start_matches(c_isspace);
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut magnitude: Option<u64> = Some(0);
    let mut any = false;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            break;
        }
        any = true;
        magnitude = magnitude
            .and_then(|m| m.checked_mul(10))
            .and_then(|m| m.checked_add(u64::from(b - b'0')));
    }
    if !any {
        return Err(NumError::Invalid);
    }
    Ok((negative, magnitude))
}

/// `std::stoi`: `strtol` (64-bit `long`) followed by an `int` range check.
pub(crate) fn stoi(s: &str) -> Result<i32, NumError> {
    let (negative, magnitude) = scan_integer(s)?;
    let magnitude = magnitude.ok_or(NumError::OutOfRange)?;
    // strtol: ERANGE outside [LONG_MIN, LONG_MAX].
    let value: i64 = if negative {
        if magnitude > 1u64 << 63 {
            return Err(NumError::OutOfRange);
        }
        0i64.wrapping_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).map_err(|_| NumError::OutOfRange)?
    };
    i32::try_from(value).map_err(|_| NumError::OutOfRange)
}

/// `std::stoul` / `std::stoull` (both 64-bit on LP64): `strtoul` semantics,
/// including the modular negation of a leading `-`.
pub(crate) fn stoull(s: &str) -> Result<u64, NumError> {
    let (negative, magnitude) = scan_integer(s)?;
    let magnitude = magnitude.ok_or(NumError::OutOfRange)?;
    Ok(if negative {
        0u64.wrapping_sub(magnitude)
    } else {
        magnitude
    })
}

/// `std::stoul`; identical to [`stoull`] on LP64 targets.
pub(crate) fn stoul(s: &str) -> Result<u64, NumError> {
    stoull(s)
}

/// Length of the ASCII-case-insensitive match of `word` at the start of `s`.
fn starts_with_ci(s: &str, word: &str) -> bool {
    s.len() >= word.len() && s.as_bytes()[..word.len()].eq_ignore_ascii_case(word.as_bytes())
}

/// `std::stod`: `strtod` prefix parsing (decimal, hexadecimal, `inf`,
/// `infinity`, `nan`, `nan(...)`), `out_of_range` on overflow and on
/// underflow to zero or a subnormal (glibc sets `ERANGE` there).
///
/// Decimal input is converted with correct rounding (Rust's parser, like
/// glibc's). Hexadecimal floats keep the first 15 significant hex digits,
/// which is exact for every value a `double` can represent.
pub(crate) fn stod(s: &str) -> Result<f64, NumError> {
    let t = s.trim_start_matches(c_isspace);
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    if starts_with_ci(body, "inf") {
        return Ok(sign * f64::INFINITY);
    }
    if starts_with_ci(body, "nan") {
        return Ok(f64::NAN);
    }
    let bytes = body.as_bytes();
    if bytes.len() >= 3
        && bytes[0] == b'0'
        && (bytes[1] == b'x' || bytes[1] == b'X')
        && (bytes[2].is_ascii_hexdigit()
            || (bytes[2] == b'.' && bytes.get(3).is_some_and(|b| b.is_ascii_hexdigit())))
    {
        return hex_float(&body[2..]).map(|v| sign * v);
    }
    decimal_float(body).map(|v| sign * v)
}

/// Decimal `strtod` body (after the sign).
fn decimal_float(body: &str) -> Result<f64, NumError> {
    let bytes = body.as_bytes();
    let mut pos = 0;
    let int_start = pos;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let int_digits = &body[int_start..pos];
    let mut frac_digits = "";
    if pos < bytes.len() && bytes[pos] == b'.' {
        let frac_start = pos + 1;
        let mut end = frac_start;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        frac_digits = &body[frac_start..end];
        if !int_digits.is_empty() || !frac_digits.is_empty() {
            pos = end;
        }
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(NumError::Invalid);
    }
    // Optional exponent, consumed only when digits follow.
    let mut exponent: i64 = 0;
    if pos < bytes.len() && (bytes[pos] == b'e' || bytes[pos] == b'E') {
        let mut p = pos + 1;
        let mut exp_negative = false;
        if p < bytes.len() && (bytes[p] == b'+' || bytes[p] == b'-') {
            exp_negative = bytes[p] == b'-';
            p += 1;
        }
        if p < bytes.len() && bytes[p].is_ascii_digit() {
            while p < bytes.len() && bytes[p].is_ascii_digit() {
                // Saturate: anything beyond a few thousand is inf or zero anyway.
                exponent = (exponent * 10 + i64::from(bytes[p] - b'0')).min(1_000_000_000);
                p += 1;
            }
            if exp_negative {
                exponent = -exponent;
            }
        }
    }
    let nonzero = int_digits
        .bytes()
        .chain(frac_digits.bytes())
        .any(|b| b != b'0');
    let int_part = if int_digits.is_empty() {
        "0"
    } else {
        int_digits
    };
    let frac_part = if frac_digits.is_empty() {
        "0"
    } else {
        frac_digits
    };
    let normalized = format!("{int_part}.{frac_part}e{exponent}");
    let value: f64 = normalized.parse().map_err(|_| NumError::Invalid)?;
    range_check(value, nonzero)
}

/// Hexadecimal `strtod` body after `0x`.
fn hex_float(body: &str) -> Result<f64, NumError> {
    let bytes = body.as_bytes();
    let mut pos = 0;
    let mut mantissa: u64 = 0;
    let mut significant = 0u32;
    let mut binary_exponent: i64 = 0;
    let mut nonzero = false;
    let mut seen_point = false;
    while pos < bytes.len() {
        let b = bytes[pos];
        if b == b'.' && !seen_point {
            seen_point = true;
            pos += 1;
            continue;
        }
        let Some(d) = (b as char).to_digit(16) else {
            break;
        };
        if d != 0 {
            nonzero = true;
        }
        if mantissa != 0 || d != 0 {
            if significant < 15 {
                mantissa = mantissa * 16 + u64::from(d);
                significant += 1;
                if seen_point {
                    binary_exponent -= 4;
                }
            } else if !seen_point {
                binary_exponent += 4;
            }
        } else if seen_point {
            binary_exponent -= 4;
        }
        pos += 1;
    }
    if pos < bytes.len() && (bytes[pos] == b'p' || bytes[pos] == b'P') {
        let mut p = pos + 1;
        let mut exp_negative = false;
        if p < bytes.len() && (bytes[p] == b'+' || bytes[p] == b'-') {
            exp_negative = bytes[p] == b'-';
            p += 1;
        }
        if p < bytes.len() && bytes[p].is_ascii_digit() {
            let mut e: i64 = 0;
            while p < bytes.len() && bytes[p].is_ascii_digit() {
                e = (e * 10 + i64::from(bytes[p] - b'0')).min(1_000_000_000);
                p += 1;
            }
            binary_exponent += if exp_negative { -e } else { e };
        }
    }
    // mantissa < 2^60, so the conversion to f64 is exact up to 53 bits; the
    // scaling below is exact unless the result leaves the normal range.
    let mut value = mantissa as f64;
    let mut e = binary_exponent.clamp(-4000, 4000);
    while e > 0 {
        let step = e.min(1000);
        value *= 2f64.powi(step as i32);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        value /= 2f64.powi(step as i32);
        e += step;
    }
    range_check(value, nonzero)
}

/// glibc `ERANGE` rules: overflow to infinity, or a non-zero input that
/// underflows to zero or a subnormal.
fn range_check(value: f64, nonzero_input: bool) -> Result<f64, NumError> {
    if value.is_infinite() {
        return Err(NumError::OutOfRange);
    }
    if nonzero_input && (value == 0.0 || value.is_subnormal()) {
        return Err(NumError::OutOfRange);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stoi_prefix_and_errors() {
        assert_eq!(stoi("512"), Ok(512));
        assert_eq!(stoi("512abc"), Ok(512));
        assert_eq!(stoi("  \t+7x"), Ok(7));
        assert_eq!(stoi("-3"), Ok(-3));
        assert_eq!(stoi("0x10"), Ok(0));
        assert_eq!(stoi("abc"), Err(NumError::Invalid));
        assert_eq!(stoi(""), Err(NumError::Invalid));
        assert_eq!(stoi("-"), Err(NumError::Invalid));
        assert_eq!(stoi("2147483647"), Ok(i32::MAX));
        assert_eq!(stoi("2147483648"), Err(NumError::OutOfRange));
        assert_eq!(stoi("-2147483648"), Ok(i32::MIN));
        assert_eq!(stoi("99999999999999999999"), Err(NumError::OutOfRange));
        assert_eq!(stoi("-9223372036854775808"), Err(NumError::OutOfRange));
    }

    #[test]
    fn stoull_wraps_negatives_and_detects_overflow() {
        assert_eq!(stoull("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(stoull("18446744073709551616"), Err(NumError::OutOfRange));
        assert_eq!(stoull("99999999999999999999"), Err(NumError::OutOfRange));
        assert_eq!(stoull("-1"), Ok(u64::MAX));
        assert_eq!(stoull("-0"), Ok(0));
        assert_eq!(stoull("-9223372036854775808"), Ok(1 << 63));
        assert_eq!(stoul("256:"), Ok(256));
        assert_eq!(stoull(">"), Err(NumError::Invalid));
    }

    #[test]
    fn stod_prefixes() {
        assert_eq!(stod("0.6"), Ok(0.6));
        assert_eq!(stod("0.6abc"), Ok(0.6));
        assert_eq!(stod(".5"), Ok(0.5));
        assert_eq!(stod("5."), Ok(5.0));
        assert_eq!(stod("1e-1"), Ok(0.1));
        assert_eq!(stod("1e"), Ok(1.0));
        assert_eq!(stod("1e+"), Ok(1.0));
        assert_eq!(stod("-2"), Ok(-2.0));
        assert_eq!(stod("0x0.8"), Ok(0.5));
        assert_eq!(stod("0x1p-2"), Ok(0.25));
        assert_eq!(stod("0x"), Ok(0.0));
        assert_eq!(stod("INF"), Ok(f64::INFINITY));
        assert!(stod("nan(123)").is_ok_and(f64::is_nan));
        assert_eq!(stod("."), Err(NumError::Invalid));
        assert_eq!(stod("abc"), Err(NumError::Invalid));
        assert_eq!(stod("1e999"), Err(NumError::OutOfRange));
        assert_eq!(stod("1e-400"), Err(NumError::OutOfRange));
        assert_eq!(stod("0e-400"), Ok(0.0));
        assert_eq!(stod("1e99999999999999999999"), Err(NumError::OutOfRange));
    }
}
