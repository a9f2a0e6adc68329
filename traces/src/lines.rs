//! Line reading with a bound: the text readers stream their input line by
//! line, and a file without line breaks (a binary file named `.csv`, a
//! corrupted log) must not be read into memory whole as one line.

use std::io::{self, BufRead};

/// Longest line the text readers accept (1 MiB): a trace row is a few
/// dozen bytes, a header comment a few hundred.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Why a line could not be read.
#[derive(Debug)]
pub(crate) enum LineError {
    /// The input failed.
    Io(io::Error),
    /// The line is longer than [`MAX_LINE`].
    TooLong,
    /// The line is not UTF-8.
    NotUtf8,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Io(e) => write!(f, "cannot read: {e}"),
            LineError::TooLong => write!(
                f,
                "line longer than {MAX_LINE} bytes (is this a text trace?)"
            ),
            LineError::NotUtf8 => write!(f, "line is not UTF-8 text (is this a text trace?)"),
        }
    }
}

/// Lines of `input` without their `\n` / `\r\n`, like
/// [`BufRead::lines`], but never longer than [`MAX_LINE`].
pub(crate) struct Lines<R> {
    input: R,
    buf: Vec<u8>,
    done: bool,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(input: R) -> Self {
        Lines {
            input,
            buf: Vec::new(),
            done: false,
        }
    }

    /// The next line, `None` at the end of the input.
    pub(crate) fn next_line(&mut self) -> Option<Result<&str, LineError>> {
        if self.done {
            return None;
        }
        self.buf.clear();
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.done = true;
                    return Some(Err(LineError::Io(e)));
                }
            };
            if chunk.is_empty() {
                self.done = true;
                if self.buf.is_empty() {
                    return None;
                }
                break;
            }
            // Up to and including the first line break, else the whole chunk.
            let part = chunk
                .split_inclusive(|&b| b == b'\n')
                .next()
                .unwrap_or(chunk);
            let (take, end) = (part.len(), part.last() == Some(&b'\n'));
            if self.buf.len() + take > MAX_LINE + 2 {
                self.done = true;
                return Some(Err(LineError::TooLong));
            }
            self.buf.extend_from_slice(part);
            self.input.consume(take);
            if end {
                break;
            }
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        if self.buf.len() > MAX_LINE {
            self.done = true;
            return Some(Err(LineError::TooLong));
        }
        match std::str::from_utf8(&self.buf) {
            Ok(s) => Some(Ok(s)),
            Err(_) => {
                self.done = true;
                Some(Err(LineError::NotUtf8))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> Vec<Result<String, String>> {
        let mut l = Lines::new(input);
        let mut out = Vec::new();
        while let Some(r) = l.next_line() {
            out.push(r.map(str::to_string).map_err(|e| e.to_string()));
        }
        out
    }

    #[test]
    fn splits_like_bufread_lines() {
        for input in [&b"a\nb\r\nc"[..], b"", b"\n", b"x\n\n", b"\r\n", b"a\rb\n"] {
            let want: Vec<Result<String, String>> = input
                .lines()
                .map(|l| l.map_err(|e| e.to_string()))
                .collect();
            assert_eq!(all(input), want, "{input:?}");
        }
    }

    #[test]
    fn refuses_endless_lines_and_binary() {
        let long = vec![b'x'; MAX_LINE + 1];
        assert_eq!(
            all(&long),
            vec![Err(format!(
                "line longer than {MAX_LINE} bytes (is this a text trace?)"
            ))]
        );
        let ok = vec![b'x'; MAX_LINE];
        assert_eq!(all(&ok).len(), 1);
        assert!(all(&ok)[0].is_ok());
        assert_eq!(
            all(b"ok\n\xff\xfe\nmore\n"),
            vec![
                Ok("ok".into()),
                Err("line is not UTF-8 text (is this a text trace?)".into())
            ]
        );
    }
}
