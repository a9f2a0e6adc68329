//! Text and bytes: `SHORT_BINUNICODE`, `BINUNICODE`, `BINUNICODE8` and
//! `UNICODE` (`str`), `SHORT_BINBYTES`, `BINBYTES`, `BINBYTES8` (`bytes`),
//! `BYTEARRAY8` (`bytearray`), and the Python 2 strings `SHORT_BINSTRING`,
//! `BINSTRING`, `STRING` (decoded as Latin-1), stored in the document's
//! string and byte arenas.

use crate::pickle::doc::{Node, PickleDoc, Slot, Span};

use super::escapes::{escape_decode, raw_unicode_escape_decode};
use super::{Machine, Result};

// ---- arenas ----

fn str_span(doc: &mut PickleDoc, s: &str) -> Slot {
    let start = doc.strings.len();
    doc.strings.push_str(s);
    // Arena < 4 GiB: input <= 1 GiB and decoding at most triples it.
    Slot::Str(Span {
        start: start as u32,
        len: s.len() as u32,
    })
}

/// UTF-8 text (Python writes lone surrogates with `surrogatepass`; those
/// and any other invalid sequences become U+FFFD).
#[inline]
fn push_utf8(doc: &mut PickleDoc, b: &[u8]) -> Slot {
    match std::str::from_utf8(b) {
        Ok(s) => str_span(doc, s),
        Err(_) => {
            let s = String::from_utf8_lossy(b);
            str_span(doc, &s)
        }
    }
}

/// Python 2 `str` bytes (`STRING`, `BINSTRING`), decoded as Latin-1
/// (lossless; equal to ASCII for ASCII text).
fn push_latin1(doc: &mut PickleDoc, b: &[u8]) -> Slot {
    if b.is_ascii() {
        // ASCII is valid UTF-8.
        return push_utf8(doc, b);
    }
    let s: String = b.iter().map(|&c| char::from(c)).collect();
    str_span(doc, &s)
}

fn push_bytes(doc: &mut PickleDoc, b: &[u8]) -> Span {
    let start = doc.bytes.len();
    doc.bytes.extend_from_slice(b);
    Span {
        start: start as u32, // arena < 4 GiB, see str_span
        len: b.len() as u32,
    }
}

impl Machine<'_> {
    // ---- str ----

    #[inline(always)]
    pub(super) fn load_short_binunicode(&mut self) -> Result<()> {
        let n = usize::from(self.u8()?);
        let b = self.take(n)?;
        let s = push_utf8(&mut self.doc, self.input.bytes(b));
        self.push(s);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_binunicode(&mut self) -> Result<()> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        let s = push_utf8(&mut self.doc, self.input.bytes(b));
        self.push(s);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_binunicode8(&mut self) -> Result<()> {
        let n = self.u64_len()?;
        let b = self.take(n)?;
        let s = push_utf8(&mut self.doc, self.input.bytes(b));
        self.push(s);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_unicode(&mut self) -> Result<()> {
        let line = self.line()?;
        let text =
            raw_unicode_escape_decode(self.input.bytes(line)).map_err(|e| self.invalid(e))?;
        let s = str_span(&mut self.doc, &text);
        self.push(s);
        Ok(())
    }

    // ---- bytes, bytearray ----

    #[inline(always)]
    pub(super) fn load_short_binbytes(&mut self) -> Result<()> {
        let n = usize::from(self.u8()?);
        let b = self.take(n)?;
        let sp = push_bytes(&mut self.doc, self.input.bytes(b));
        self.push(Slot::Bytes(sp));
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_binbytes(&mut self) -> Result<()> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        let sp = push_bytes(&mut self.doc, self.input.bytes(b));
        self.push(Slot::Bytes(sp));
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_binbytes8(&mut self) -> Result<()> {
        let n = self.u64_len()?;
        let b = self.take(n)?;
        let sp = push_bytes(&mut self.doc, self.input.bytes(b));
        self.push(Slot::Bytes(sp));
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_bytearray8(&mut self) -> Result<()> {
        let n = self.u64_len()?;
        let b = self.take(n)?;
        let sp = push_bytes(&mut self.doc, self.input.bytes(b));
        let s = self.new_node(Node::ByteArray(sp));
        self.push(s);
        Ok(())
    }

    // ---- Python 2 str ----

    #[inline(always)]
    pub(super) fn load_short_binstring(&mut self) -> Result<()> {
        let n = usize::from(self.u8()?);
        let b = self.take(n)?;
        let s = push_latin1(&mut self.doc, self.input.bytes(b));
        self.push(s);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_binstring(&mut self) -> Result<()> {
        let n = self.i32_len()?;
        let b = self.take(n)?;
        let s = push_latin1(&mut self.doc, self.input.bytes(b));
        self.push(s);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn load_string(&mut self) -> Result<()> {
        let line = self.line()?;
        let inner = match self.input.bytes(line) {
            [q @ (b'\'' | b'"'), inner @ .., last] if last == q => inner,
            _ => return Err(self.invalid("the STRING opcode argument must be quoted")),
        };
        let bytes = escape_decode(inner).map_err(|e| self.invalid(e))?;
        let s = push_latin1(&mut self.doc, &bytes);
        self.push(s);
        Ok(())
    }
}
