//! Text made safe for the page and for file names: HTML escaping (with
//! Markdown-style code spans), slugs of setting labels, JSON inside a
//! `<script>` element.

use crate::Result;

/// Escapes text for HTML element content and attribute values.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes text like [`esc`], and shows Markdown-style `` `code` `` spans
/// as `<code>` (a backtick without a partner stays a backtick).
/// A setting's name escaped, with line-break opportunities after each `,`
/// and `:` only: a long `PYTORCH_ALLOC_CONF` string wraps between its keys
/// and values, never inside a word.
pub(super) fn esc_breakable(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        out.push_str(&esc(c.encode_utf8(&mut [0u8; 4])));
        if c == ',' || c == ':' {
            out.push_str("<wbr>");
        }
    }
    out
}

pub(super) fn esc_inline(s: &str) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    let mut out = String::with_capacity(s.len() + 16);
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 0 {
            out.push_str(&esc(part));
        } else if i + 1 < parts.len() {
            out.push_str("<code>");
            out.push_str(&esc(part));
            out.push_str("</code>");
        } else {
            out.push('`');
            out.push_str(&esc(part));
        }
    }
    out
}

/// Longest slug [`slug`] returns (file names stay well below the 255
/// bytes file systems allow).
const SLUG_MAX: usize = 150;

/// FNV-1a, 64 bits: a hash that is the same in every run and build.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A file-name-safe form of a label: lower-case letters, digits and
/// dashes, all of the label (punctuation becomes a dash). A slug longer
/// than [`SLUG_MAX`] keeps its start and its end around a hash of the
/// whole label, so two labels never share a shortened slug by chance.
pub(super) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.is_empty() {
        return "setting".to_string();
    }
    if out.len() <= SLUG_MAX {
        return out;
    }
    let hash = format!("{:08x}", fnv1a(s) >> 32);
    let keep = (SLUG_MAX - hash.len() - 2) / 2;
    // The slug is ASCII: byte offsets are character offsets.
    let head = out.get(..keep).unwrap_or_default().trim_end_matches('-');
    let tail = out
        .get(out.len() - keep..)
        .unwrap_or_default()
        .trim_start_matches('-');
    format!("{head}-{hash}-{tail}")
}

/// JSON that can sit inside a `<script>` element: `<`, `>` and `&` are
/// written as `\u003c`, `\u003e`, `\u0026` (they can only occur in strings).
pub(super) fn script_json(value: &impl serde::Serialize) -> Result<String> {
    let raw = serde_json::to_string(value)?;
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(
            slug("roundup_power2_divisions:[256:1,>:8]"),
            "roundup-power2-divisions-256-1-8"
        );
        assert_eq!(slug(""), "setting");
        assert_eq!(
            slug("roundup_power2_divisions:4,expandable_segments:True"),
            "roundup-power2-divisions-4-expandable-segments-true"
        );
        // Long labels: start and end kept around a hash of the whole.
        let a = format!(
            "max_split_size_mb:128,{},x:1",
            "garbage_collection_threshold:0.5,".repeat(8)
        );
        let b = a.replace("x:1", "x:2");
        let (sa, sb) = (slug(&a), slug(&b));
        assert!(sa.len() <= SLUG_MAX && sb.len() <= SLUG_MAX, "{sa}");
        assert_ne!(sa, sb);
        assert!(sa.starts_with("max-split-size-mb-128-garbage"), "{sa}");
        assert!(sa.ends_with("x-1") && sb.ends_with("x-2"), "{sa} {sb}");
        assert_eq!(sa, slug(&a), "stable");
        assert_eq!(
            esc_inline("run `vramlab sweep x --csv <rows>` & see"),
            "run <code>vramlab sweep x --csv &lt;rows&gt;</code> &amp; see"
        );
        assert_eq!(esc_inline("a `b"), "a `b");
        assert_eq!(
            esc_inline("`a` and `b`"),
            "<code>a</code> and <code>b</code>"
        );
        assert_eq!(
            script_json(&"</script><!--&").unwrap(),
            "\"\\u003c/script\\u003e\\u003c!--\\u0026\""
        );
    }
}
