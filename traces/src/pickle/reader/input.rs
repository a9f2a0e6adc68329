//! The bytes the machine reads: a slice held whole, or a stream read
//! through a window that keeps only what the opcode being read needs
//! (files PyTorch writes come in frames of about 64 KiB, so the window
//! stays a few hundred KiB whatever the file's size). Opcode arguments
//! are handed out as ranges into the window ([`Input::bytes`]), valid until
//! the next read; the `Machine` methods at the end read fixed-width
//! integers, length prefixes, byte runs and `\n`-terminated text lines
//! (protocol 0).

use std::io::{self, Read};
use std::ops::Range;

use super::{Machine, Result};
use crate::pickle::error::PickleError;

/// Bytes read from a stream at a time (more when one argument is longer).
const CHUNK: usize = 256 * 1024;

/// Where a pickle's bytes come from.
pub(crate) enum PickleInput<'i> {
    /// All of them, in memory.
    Slice(&'i [u8]),
    /// A reader, consumed up to the `STOP` opcode (and a chunk beyond it at
    /// most).
    Reader(Box<dyn Read + 'i>),
}

/// The machine's view of its input.
pub(super) struct Input<'i> {
    src: Source<'i>,
    /// Offset in the input of the window's first byte.
    base: usize,
    /// Offset in the input of the next byte to read.
    pub(super) pos: usize,
    /// The most bytes accepted.
    max_len: usize,
}

enum Source<'i> {
    Slice(&'i [u8]),
    Stream(Stream<'i>),
}

struct Stream<'i> {
    reader: Box<dyn Read + 'i>,
    /// The input from `base` on, as far as it was read: `buf[..end]`. The
    /// rest of `buf` is room for the next reads (zeroed once, reused).
    buf: Vec<u8>,
    end: usize,
    /// The reader has nothing more (end of input, or an error).
    ended: bool,
    /// More than `max_len` bytes were offered.
    over_limit: bool,
}

impl<'i> Input<'i> {
    /// `None`: a slice longer than `max_len`.
    pub(super) fn new(input: PickleInput<'i>, max_len: usize) -> Option<Input<'i>> {
        let src = match input {
            PickleInput::Slice(s) if s.len() > max_len => return None,
            PickleInput::Slice(s) => Source::Slice(s),
            PickleInput::Reader(reader) => Source::Stream(Stream {
                reader,
                buf: Vec::new(),
                end: 0,
                ended: false,
                over_limit: false,
            }),
        };
        Some(Input {
            src,
            base: 0,
            pos: 0,
            max_len,
        })
    }

    /// The bytes read and not yet dropped, from `base` on.
    #[inline]
    fn window(&self) -> &[u8] {
        match &self.src {
            Source::Slice(s) => s,
            Source::Stream(s) => s.buf.get(..s.end).unwrap_or_default(),
        }
    }

    /// The bytes of a range [`Input::take`] or [`Input::line`] returned
    /// (before any later read).
    #[inline]
    pub(super) fn bytes(&self, r: Range<usize>) -> &[u8] {
        self.window().get(r).unwrap_or_default()
    }

    /// Whether `n` bytes from `pos` on are in the window, reading them
    /// from the stream if need be.
    #[inline]
    pub(super) fn ensure(&mut self, n: usize) -> bool {
        let have = self.window().len() - (self.pos - self.base);
        n <= have || self.fill(n)
    }

    /// Reads from the stream until `n` bytes from `pos` on are in the
    /// window (or the input ends); drops what was read before `pos`.
    #[cold]
    fn fill(&mut self, n: usize) -> bool {
        let Source::Stream(s) = &mut self.src else {
            return false;
        };
        let consumed = self.pos - self.base;
        s.buf.copy_within(consumed..s.end, 0);
        s.end -= consumed;
        self.base = self.pos;
        while s.end < n && !s.ended {
            // Room for the bytes still needed, grown by at most what was
            // read so far (a length prefix can lie), and never past the
            // limit plus the one byte that shows it was passed.
            let room = (self.max_len + 1).saturating_sub(self.base + s.end);
            let want = (n - s.end).max(CHUNK).min(s.end.max(CHUNK)).min(room);
            if want == 0 {
                s.over_limit = true;
                s.ended = true;
                break;
            }
            if s.buf.len() < s.end + want {
                s.buf.resize(s.end + want, 0);
            }
            let space = s.buf.get_mut(s.end..).unwrap_or_default();
            let got = loop {
                match s.reader.read(space) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Ok(k) => break k.min(space.len()),
                    // The input ends here; a caller that needs the reason
                    // reads the file again (see `snapshot_streamed_from`).
                    Err(_) => break 0,
                }
            };
            s.end += got;
            if got == 0 {
                s.ended = true;
            }
            if self.base + s.end > self.max_len {
                s.over_limit = true;
                s.ended = true;
            }
        }
        !s.over_limit && s.end >= n
    }

    /// The next `n` bytes, as a range for [`Input::bytes`]; `None` when the
    /// input ends first.
    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Option<Range<usize>> {
        if !self.ensure(n) {
            return None;
        }
        let start = self.pos - self.base;
        self.pos += n;
        Some(start..start + n)
    }

    /// The next byte.
    #[inline]
    pub(super) fn u8(&mut self) -> Option<u8> {
        if !self.ensure(1) {
            return None;
        }
        let b = *self.window().get(self.pos - self.base)?;
        self.pos += 1;
        Some(b)
    }

    /// The bytes up to the next `\n`, which is consumed; `None` when the
    /// input ends first.
    pub(super) fn line(&mut self) -> Option<Range<usize>> {
        let mut searched = 0;
        loop {
            let start = self.pos - self.base;
            let rest = self.window().get(start..).unwrap_or_default();
            if let Some(i) = rest.get(searched..)?.iter().position(|&b| b == b'\n') {
                let n = searched + i;
                self.pos += n + 1;
                return Some(start..start + n);
            }
            searched = rest.len();
            if !self.ensure(searched + 1) {
                return None;
            }
        }
    }

    /// The input's length, once it ended between opcodes.
    pub(super) fn len_at_end(&self) -> usize {
        self.base + self.window().len()
    }

    /// The error to report when a stream passed the size limit (it is
    /// read as far as the limit only); `None` otherwise.
    pub(super) fn limit_error(&self) -> Option<PickleError> {
        match &self.src {
            Source::Stream(s) if s.over_limit => Some(PickleError::LimitExceeded {
                what: "input size",
                limit: self.max_len,
                offset: None,
            }),
            _ => None,
        }
    }
}

impl Machine<'_> {
    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<Range<usize>> {
        self.input.take(n).ok_or_else(|| self.truncated())
    }

    #[inline]
    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let r = self.take(N)?;
        <[u8; N]>::try_from(self.input.bytes(r)).map_err(|_| self.truncated())
    }

    #[inline]
    pub(super) fn u8(&mut self) -> Result<u8> {
        self.input.u8().ok_or_else(|| self.truncated())
    }

    pub(super) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A length prefix that must be non-negative (Python reads these
    /// `BINSTRING`/`LONG4` lengths as signed).
    pub(super) fn i32_len(&mut self) -> Result<usize> {
        let n = i32::from_le_bytes(self.array()?);
        usize::try_from(n).map_err(|_| self.invalid(format!("negative byte count {n}")))
    }

    pub(super) fn u64_len(&mut self) -> Result<usize> {
        let n = u64::from_le_bytes(self.array()?);
        // A length beyond usize cannot be satisfied by the input anyway.
        usize::try_from(n).map_err(|_| self.truncated())
    }

    /// Text up to (not including) the next `\n`, which is consumed.
    pub(super) fn line(&mut self) -> Result<Range<usize>> {
        self.input.line().ok_or_else(|| self.truncated())
    }

    /// [`Machine::line`] as text, which must be UTF-8.
    pub(super) fn line_str(&mut self) -> Result<Range<usize>> {
        let r = self.line()?;
        match std::str::from_utf8(self.input.bytes(r.clone())) {
            Ok(_) => Ok(r),
            Err(_) => Err(self.invalid("text line is not ASCII")),
        }
    }

    /// The text of a range [`Machine::line_str`] checked.
    pub(super) fn text(&self, r: Range<usize>) -> &str {
        std::str::from_utf8(self.input.bytes(r)).unwrap_or_default()
    }

    /// A memo key written as decimal text (`PUT`, `GET`).
    pub(super) fn line_key(&mut self) -> Result<u64> {
        let r = self.line_str()?;
        let text = self.text(r);
        text.trim()
            .parse::<u64>()
            .map_err(|_| self.invalid(format!("memo key {text:?} is not a non-negative integer")))
    }
}
