//! [`ConfError`]: a rejected allocator settings string, worded as PyTorch
//! words it.
//!
//! The message texts were read from PyTorch's own sources (public repository
//! `pytorch/pytorch`):
//!
//! * ≤ 2.9 — the hand-written parser in `c10/cuda/CUDAAllocatorConfig.cpp`
//!   (revisions read: the ≈2.2 one with keys up to
//!   `release_lock_on_cudamalloc`, and the last pre-refactor one from
//!   October 2025, which adds `graph_capture_record_stream_reuse`), raising
//!   `RuntimeError` through `TORCH_CHECK`: "Unrecognized CachingAllocator
//!   option: K", "Error parsing CachingAllocator settings, expected :",
//!   "garbage_collect_threshold too small, set it 0.0~1.0", …
//! * ≥ 2.10 — `c10/core/AllocatorConfig.{h,cpp}` (`ConfigTokenizer`,
//!   `AcceleratorAllocatorConfig`, commit `0ac71663…` and later) plus the
//!   hook parser in `c10/cuda/CUDAAllocatorConfig.cpp` (commits `01f9ef32…`,
//!   `b944315b…`), raising mostly `ValueError` through `TORCH_CHECK_VALUE`:
//!   "Unrecognized key 'K' in CUDA allocator config.", "Expected 'True' or
//!   'False' at index 3 in ConfigTokenizer but got 'true'", …
//! * Numeric conversions fail with the C++ exception text, which is just the
//!   function name (`stoi`, `stoul`, `stoull`, `stod`).
//!
//! `TORCH_INTERNAL_ASSERT` failures are reproduced without the source line
//! number (it differs between builds).

use std::fmt;

use super::version::TorchVersion;

/// What went wrong, independent of the wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfErrorKind {
    /// A key the target version does not know.
    UnknownKey,
    /// A `:` or `,` separator was expected (≤ 2.9 parser only; 2.10+ does not
    /// check separators).
    ExpectedToken,
    /// The string ended where a value was expected (≤ 2.9 wording).
    MissingValue,
    /// A boolean that is not exactly `True` or `False`.
    InvalidBool,
    /// No number could be read (`std::invalid_argument`).
    InvalidNumber,
    /// The number does not fit the C++ type (`std::out_of_range`).
    NumberOutOfRange,
    /// A number or list entry that the key's validation rejects.
    InvalidValue,
    /// `backend` is neither `native` nor `cudaMallocAsync`.
    UnknownBackend,
    /// A re-parse names a different backend than the one chosen at load time
    /// (`TORCH_INTERNAL_ASSERT` in PyTorch).
    BackendMismatch,
    /// 2.10+ tokenizer ran past the end of the string (`TORCH_INTERNAL_ASSERT`
    /// "Index out of bounds in ConfigTokenizer").
    TokenizerIndexOutOfBounds,
    /// A `[` list without its closing `]`.
    UnclosedList,
}

/// A settings string PyTorch would reject.
///
/// [`message`](Self::message) is PyTorch's own text for the target version;
/// `Display` prints it first and then the context: the key, the offending
/// value, the target version and (from [`AllocConf::from_env`]) the
/// environment variable.
///
/// [`AllocConf::from_env`]: super::AllocConf::from_env
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfError {
    /// Category of the failure.
    pub kind: ConfErrorKind,
    /// The exception message PyTorch raises for this input (exact text,
    /// including trailing spaces some messages have).
    pub message: String,
    /// The option being parsed when the error occurred (the offending token
    /// itself for an unknown key).
    pub key: Option<String>,
    /// The offending value token, if any.
    pub value: Option<String>,
    /// PyTorch release whose rules were applied.
    pub version: TorchVersion,
    /// Environment variable the string came from, if it came from one.
    pub variable: Option<&'static str>,
}

impl ConfError {
    pub(crate) fn new(
        kind: ConfErrorKind,
        message: impl Into<String>,
        key: Option<&str>,
        value: Option<&str>,
        version: TorchVersion,
    ) -> Self {
        ConfError {
            kind,
            message: message.into(),
            key: key.map(str::to_string),
            value: value.map(str::to_string),
            version,
            variable: None,
        }
    }

    /// The same error, noting the environment variable it came from.
    pub(crate) fn with_variable(mut self, variable: &'static str) -> Self {
        self.variable = Some(variable);
        self
    }

    fn render(&self) -> String {
        let mut out = self.message.trim_end().to_string();
        let mut ctx: Vec<String> = Vec::new();
        if let Some(k) = &self.key {
            ctx.push(format!("key `{}`", printable(k)));
        }
        if let Some(v) = &self.value {
            ctx.push(format!("value `{}`", printable(v)));
        }
        ctx.push(format!("PyTorch {} rules", self.version));
        if let Some(var) = self.variable {
            ctx.push(format!("from {var}"));
        }
        out.push_str(" (");
        out.push_str(&ctx.join(", "));
        out.push(')');
        out
    }
}

/// Control characters shown escaped so a stray tab or newline is visible.
fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `TORCH_INTERNAL_ASSERT` wording (line number omitted).
pub(crate) fn internal_assert(condition: &str, file: &str, message: &str) -> String {
    format!(
        "{condition} INTERNAL ASSERT FAILED at \"{file}\", please report a bug to PyTorch. {message}"
    )
}

impl fmt::Display for ConfErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            ConfErrorKind::UnknownKey => "unknown key",
            ConfErrorKind::ExpectedToken => "expected separator",
            ConfErrorKind::MissingValue => "missing value",
            ConfErrorKind::InvalidBool => "invalid boolean",
            ConfErrorKind::InvalidNumber => "invalid number",
            ConfErrorKind::NumberOutOfRange => "number out of range",
            ConfErrorKind::InvalidValue => "invalid value",
            ConfErrorKind::UnknownBackend => "unknown backend",
            ConfErrorKind::BackendMismatch => "backend differs from load time",
            ConfErrorKind::TokenizerIndexOutOfBounds => "unexpected end of settings",
            ConfErrorKind::UnclosedList => "unclosed list",
        };
        f.write_str(s)
    }
}
