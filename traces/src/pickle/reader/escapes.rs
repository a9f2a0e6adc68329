//! The escape decodings of the protocol-0 text opcodes: `STRING`
//! (`codecs.escape_decode`) and `UNICODE` (`raw-unicode-escape`).

/// `codecs.escape_decode`: Python 2 string-literal escapes.
pub(super) fn escape_decode(s: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        i += 1;
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let Some(&e) = s.get(i) else {
            return Err("trailing \\ in string".into());
        };
        i += 1;
        match e {
            b'\n' => {}
            b'\\' => out.push(b'\\'),
            b'\'' => out.push(b'\''),
            b'"' => out.push(b'"'),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    match s.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push((v & 0xff) as u8); // Python keeps the low byte
            }
            b'x' => {
                let hex = s
                    .get(i..i + 2)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("invalid \\x escape at position {}", i - 2))?;
                out.push(hex);
                i += 2;
            }
            other => {
                out.push(b'\\');
                out.push(other);
            }
        }
    }
    Ok(out)
}

/// `raw-unicode-escape` decoding: Latin-1 bytes, except `\uXXXX` and
/// `\UXXXXXXXX` after an odd number of backslashes. Surrogate code points
/// become U+FFFD.
pub(super) fn raw_unicode_escape_decode(s: &[u8]) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        if c != b'\\' {
            out.push(char::from(c));
            i += 1;
            continue;
        }
        // Count the run of backslashes.
        let run_start = i;
        while s.get(i) == Some(&b'\\') {
            i += 1;
        }
        let run = i - run_start;
        let digits = match s.get(i) {
            Some(b'u') if run % 2 == 1 => 4,
            Some(b'U') if run % 2 == 1 => 8,
            _ => {
                out.extend(std::iter::repeat_n('\\', run));
                continue;
            }
        };
        out.extend(std::iter::repeat_n('\\', run - 1));
        i += 1;
        let hex = s
            .get(i..i + digits)
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                format!(
                    "truncated \\{} escape",
                    if digits == 4 { "uXXXX" } else { "UXXXXXXXX" }
                )
            })?;
        if hex > 0x10ffff {
            return Err("\\Uxxxxxxxx out of range".into());
        }
        out.push(char::from_u32(hex).unwrap_or('\u{fffd}'));
        i += digits;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape_decode(br"a\n\x41\101\\\'").unwrap(), b"a\nAA\\'");
        assert_eq!(escape_decode(br"\q").unwrap(), b"\\q");
        assert!(escape_decode(b"\\").is_err());
        assert!(escape_decode(br"\x4").is_err());
        assert_eq!(
            raw_unicode_escape_decode(br"a\u00e9\U0001F600").unwrap(),
            "a\u{e9}\u{1F600}"
        );
        assert_eq!(raw_unicode_escape_decode(br"\\u0041").unwrap(), r"\\u0041");
        assert_eq!(raw_unicode_escape_decode(br"\\\u0041").unwrap(), r"\\A");
        assert_eq!(raw_unicode_escape_decode(b"\xe9").unwrap(), "\u{e9}");
        assert_eq!(raw_unicode_escape_decode(br"\ud800").unwrap(), "\u{fffd}");
        assert!(raw_unicode_escape_decode(br"\u12").is_err());
        assert!(raw_unicode_escape_decode(br"\U00110000").is_err());
    }
}
