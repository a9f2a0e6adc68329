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

/// Splits an optional leading `+` or `-` off `s`: `(negative, rest)`.
fn split_sign(s: &str) -> (bool, &str) {
    if let Some(rest) = s.strip_prefix('-') {
        (true, rest)
    } else {
        (false, s.strip_prefix('+').unwrap_or(s))
    }
}

/// Splits `s` after its leading run of ASCII decimal digits.
fn split_digits(s: &str) -> (&str, &str) {
    // `find` returns a character boundary, so the split cannot fail.
    s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()))
}

/// Leading-whitespace, sign and decimal digits as `strtol`/`strtoul` read them
/// with base 10. Returns `(negative, magnitude)`; the magnitude is `None` when
/// it does not fit in a `u64`.
fn scan_integer(s: &str) -> Result<(bool, Option<u64>), NumError> {
    let (negative, digits) = split_sign(s.trim_start_matches(c_isspace));
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

/// `true` if `s` starts with `word`, ignoring ASCII case.
fn starts_with_ci(s: &str, word: &str) -> bool {
    s.as_bytes()
        .get(..word.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(word.as_bytes()))
}

/// `std::stod`: `strtod` prefix parsing (decimal, hexadecimal, `inf`,
/// `infinity`, `nan`, `nan(...)`), `out_of_range` on overflow and on
/// underflow to zero or a subnormal (glibc sets `ERANGE` there).
///
/// Decimal input is converted with correct rounding (Rust's parser, like
/// glibc's). Hexadecimal floats keep the first 15 significant hex digits,
/// which is exact for every value a `double` can represent.
pub(crate) fn stod(s: &str) -> Result<f64, NumError> {
    let (negative, body) = split_sign(s.trim_start_matches(c_isspace));
    let sign = if negative { -1.0 } else { 1.0 };
    if starts_with_ci(body, "inf") {
        return Ok(sign * f64::INFINITY);
    }
    if starts_with_ci(body, "nan") {
        return Ok(f64::NAN);
    }
    // `0x` counts only when a hex digit follows, possibly after the point.
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let digits = hex.strip_prefix('.').unwrap_or(hex);
        if digits.starts_with(|c: char| c.is_ascii_hexdigit()) {
            return hex_float(hex).map(|v| sign * v);
        }
    }
    decimal_float(body).map(|v| sign * v)
}

/// An optional exponent `<marker>[+-]digits` at the start of `s`, read only
/// when digits follow (0 otherwise); saturates at ±1e9, far beyond every
/// exponent that does not overflow or underflow anyway.
fn scan_exponent(s: &str, marker: char) -> i64 {
    let Some(rest) = s.strip_prefix(|c: char| c.eq_ignore_ascii_case(&marker)) else {
        return 0;
    };
    let (negative, rest) = split_sign(rest);
    let magnitude = split_digits(rest).0.bytes().fold(0i64, |e, b| {
        (e * 10 + i64::from(b - b'0')).min(1_000_000_000)
    });
    if negative { -magnitude } else { magnitude }
}

/// Decimal `strtod` body (after the sign).
fn decimal_float(body: &str) -> Result<f64, NumError> {
    let (int_digits, mut rest) = split_digits(body);
    let mut frac_digits = "";
    if let Some(after_point) = rest.strip_prefix('.') {
        (frac_digits, rest) = split_digits(after_point);
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(NumError::Invalid);
    }
    let exponent = scan_exponent(rest, 'e');
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
    let mut mantissa: u64 = 0;
    let mut significant = 0u32;
    let mut binary_exponent: i64 = 0;
    let mut nonzero = false;
    let mut seen_point = false;
    // Byte offset of the first byte that is not part of the mantissa.
    let mut end = body.len();
    for (pos, b) in body.bytes().enumerate() {
        if b == b'.' && !seen_point {
            seen_point = true;
            continue;
        }
        let Some(d) = (b as char).to_digit(16) else {
            end = pos;
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
    }
    // Everything before `end` is ASCII, so `end` is a character boundary.
    binary_exponent += scan_exponent(body.get(end..).unwrap_or(""), 'p');
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
