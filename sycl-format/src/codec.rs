//! Little-endian primitives shared by every payload: fixed-width integers and length-prefixed
//! byte strings. The decoder never reads past its slice and never trusts a count it cannot
//! back with remaining bytes.

use std::fmt;

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The payload does not start with the expected magic.
    Magic,
    /// The payload was written by a version this reader does not know (it reads `oldest` to
    /// `supported`).
    Version {
        /// The version the payload declares.
        found: u32,
        /// The oldest version this reader reads.
        oldest: u32,
        /// The newest version this reader reads (the one it writes).
        supported: u32,
    },
    /// The payload ends before a field it announces.
    Truncated {
        /// How many more bytes the field needs than remain.
        needed: usize,
        /// Where the field starts, in bytes from the start of the payload (or note segment).
        offset: usize,
    },
    /// Bytes remain after the last field.
    Trailing(usize),
    /// A field holds a value that has no meaning (an unknown code, text that is not UTF-8).
    Invalid(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Magic => write!(f, "bad magic"),
            DecodeError::Version { found, oldest, supported } if oldest == supported => {
                write!(f, "unknown version {found} (this build reads version {supported})")
            }
            DecodeError::Version { found, oldest, supported } => {
                write!(
                    f,
                    "unknown version {found} (this build reads versions {oldest} to {supported})"
                )
            }
            DecodeError::Truncated { needed, offset } => {
                write!(f, "truncated: {needed} more bytes needed at offset {offset}")
            }
            DecodeError::Trailing(n) => write!(f, "{n} unexpected bytes after the last field"),
            DecodeError::Invalid(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

pub(crate) struct Encoder {
    buf: Vec<u8>,
}

impl Encoder {
    pub(crate) fn new(magic: &[u8; 8], version: u32) -> Encoder {
        let mut e = Encoder { buf: magic.to_vec() };
        e.u32(version);
        e
    }

    /// An encoder of a part of a payload: no magic, no version.
    pub(crate) fn bare() -> Encoder {
        Encoder { buf: Vec::new() }
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u32(super::len_u32(v.len()));
        self.buf.extend_from_slice(v);
    }

    pub(crate) fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }

    pub(crate) fn strs(&mut self, v: &[String]) {
        self.u32(super::len_u32(v.len()));
        for s in v {
            self.str(s);
        }
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        self.buf
    }
}

pub(crate) struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(bytes: &'a [u8], magic: &[u8; 8], version: u32) -> Result<Self, DecodeError> {
        Decoder::with_versions(bytes, magic, version..=version).map(|(d, _)| d)
    }

    /// A decoder of a payload whose version lies in `versions`, and the version found.
    pub(crate) fn with_versions(
        bytes: &'a [u8],
        magic: &[u8; 8],
        versions: std::ops::RangeInclusive<u32>,
    ) -> Result<(Self, u32), DecodeError> {
        let mut d = Decoder { bytes, pos: 0 };
        if d.take(8).map_err(|_| DecodeError::Magic)? != magic {
            return Err(DecodeError::Magic);
        }
        let found = d.u32()?;
        if !versions.contains(&found) {
            return Err(DecodeError::Version {
                found,
                oldest: *versions.start(),
                supported: *versions.end(),
            });
        }
        Ok((d, found))
    }

    /// A decoder of bytes without magic or version (a part of a payload already checked).
    pub(crate) fn raw(bytes: &'a [u8]) -> Self {
        Decoder { bytes, pos: 0 }
    }

    /// A decoder of `bytes` from `position` on (at most their length), whose positions
    /// count from the start of `bytes`.
    pub(crate) fn at(bytes: &'a [u8], position: usize) -> Self {
        Decoder { bytes, pos: position.min(bytes.len()) }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// The bytes read since `start` (a [`Decoder::position`]).
    pub(crate) fn since(&self, start: usize) -> &'a [u8] {
        &self.bytes[start..self.pos]
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let remaining = self.bytes.len() - self.pos;
        if n > remaining {
            return Err(DecodeError::Truncated { needed: n - remaining, offset: self.pos });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    pub(crate) fn str(&mut self) -> Result<String, DecodeError> {
        self.str_ref().map(str::to_string)
    }

    /// A string, borrowed from the payload.
    pub(crate) fn str_ref(&mut self) -> Result<&'a str, DecodeError> {
        let offset = self.pos;
        let bytes = self.bytes()?;
        std::str::from_utf8(bytes)
            .map_err(|_| DecodeError::Invalid(format!("text at offset {offset} is not UTF-8")))
    }

    /// A string's bytes, checked to be UTF-8 as [`Decoder::str_ref`] checks, with ASCII
    /// (nearly every name and record) taken the short way: for a parse that steps over text.
    pub(crate) fn str_bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let offset = self.pos;
        let bytes = self.bytes()?;
        if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
            Ok(bytes)
        } else {
            Err(DecodeError::Invalid(format!("text at offset {offset} is not UTF-8")))
        }
    }

    /// A list of strings (a count, then each string).
    pub(crate) fn strs(&mut self) -> Result<Vec<String>, DecodeError> {
        let count = self.count(4)?;
        (0..count).map(|_| self.str()).collect()
    }

    /// A count of elements that each take at least `min_size` bytes; refused when the
    /// remaining bytes cannot hold that many, so a lying count cannot cause a huge allocation.
    pub(crate) fn count(&mut self, min_size: usize) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let count = self.u32()? as usize;
        let remaining = self.bytes.len() - self.pos;
        if count.saturating_mul(min_size) > remaining {
            return Err(DecodeError::Invalid(format!(
                "count {count} at offset {offset} exceeds the {remaining} bytes that follow"
            )));
        }
        Ok(count)
    }

    pub(crate) fn end(&self) -> Result<(), DecodeError> {
        match self.bytes.len() - self.pos {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}
