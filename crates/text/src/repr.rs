//! Internal: how each encoding turns a file body into code units and back.
//!
//! The edit engine and the reader are generic over [`Repr`], so one implementation
//! serves UTF-8 and legacy files (bytes), UTF-16 (16-bit units) and UTF-32 (32-bit
//! units). Bytes outside an edit are kept because the engine copies units, and every
//! `Repr` writes a unit back as exactly the bytes it was read from.

use std::borrow::Cow;

use encoding_rs::{DecoderResult, EncoderResult};

use crate::error::TextError;
use crate::lines::{EndingCounts, count_stream, count_units};

/// A code unit: a byte, a UTF-16 unit or a UTF-32 unit.
pub(crate) trait Unit: Copy + Eq + Into<u32> + std::fmt::Debug + 'static {
    /// `units` as bytes when a unit is a byte, so scans can take the vectorised
    /// `memchr` paths; `None` for 16/32-bit units (scanned unit by unit).
    fn as_bytes(_units: &[Self]) -> Option<&[u8]> {
        None
    }
}
impl Unit for u8 {
    fn as_bytes(units: &[u8]) -> Option<&[u8]> {
        Some(units)
    }
}
impl Unit for u16 {}
impl Unit for u32 {}

/// True for the units of `' '` and `'\t'` (indentation).
pub(crate) fn is_indent<U: Unit>(u: U) -> bool {
    let v: u32 = u.into();
    v == 0x20 || v == 0x09
}

/// One encoding's unit view of a file body (the bytes after any BOM).
pub(crate) trait Repr {
    type U: Unit;
    /// The complete units of `body`, and how many trailing bytes do not form a
    /// complete unit (always 0 for byte encodings).
    fn units<'a>(&self, body: &'a [u8]) -> (Cow<'a, [Self::U]>, usize);
    /// Encodes `s` (no BOM). Errors: `UnmappableCharacter`, `UnsupportedEncoding`.
    fn encode(&self, s: &str) -> Result<Vec<Self::U>, TextError>;
    /// Appends the bytes of `units` to `out`.
    fn write(&self, units: &[Self::U], out: &mut Vec<u8>);
    /// Appends the bytes of `s` encoded (no BOM) to `out`: the bytes of
    /// [`Repr::encode`] then [`Repr::write`], without the intermediate units where the
    /// encoding allows. Errors as `encode`; `out` may then hold a partial prefix.
    fn encode_into(&self, s: &str, out: &mut Vec<u8>) -> Result<(), TextError> {
        let units = self.encode(s)?;
        self.write(&units, out);
        Ok(())
    }
    /// The line breaks of `body` by kind (a trailing partial unit is ignored).
    fn count_endings(&self, body: &[u8]) -> EndingCounts {
        count_units(&self.units(body).0)
    }
    /// Decodes `units` for display, replacing what cannot be decoded by U+FFFD.
    fn decode(&self, units: &[Self::U]) -> String;
    /// For encodings where a unit index need not be a character boundary
    /// (multi-byte legacy encodings): `b[i]` tells whether index `i` (0..=len) is one.
    fn boundaries(&self, _units: &[Self::U]) -> Option<Vec<bool>> {
        None
    }
}

/// UTF-8: bytes, decoded lossily for display.
pub(crate) struct Utf8Repr;

impl Repr for Utf8Repr {
    type U = u8;
    fn units<'a>(&self, body: &'a [u8]) -> (Cow<'a, [u8]>, usize) {
        (Cow::Borrowed(body), 0)
    }
    fn encode(&self, s: &str) -> Result<Vec<u8>, TextError> {
        Ok(s.as_bytes().to_vec())
    }
    fn write(&self, units: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(units);
    }
    fn encode_into(&self, s: &str, out: &mut Vec<u8>) -> Result<(), TextError> {
        out.extend_from_slice(s.as_bytes());
        Ok(())
    }
    fn decode(&self, units: &[u8]) -> String {
        String::from_utf8_lossy(units).into_owned()
    }
}

/// A legacy (WHATWG) encoding other than UTF-8 / UTF-16: bytes.
pub(crate) struct LegacyRepr(pub &'static encoding_rs::Encoding);

impl Repr for LegacyRepr {
    type U = u8;
    fn units<'a>(&self, body: &'a [u8]) -> (Cow<'a, [u8]>, usize) {
        (Cow::Borrowed(body), 0)
    }
    fn encode(&self, s: &str) -> Result<Vec<u8>, TextError> {
        encode_legacy(self.0, s)
    }
    fn write(&self, units: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(units);
    }
    fn decode(&self, units: &[u8]) -> String {
        self.0.decode_without_bom_handling(units).0.into_owned()
    }
    fn boundaries(&self, units: &[u8]) -> Option<Vec<bool>> {
        if self.0.is_single_byte() {
            return None;
        }
        let mut b = vec![false; units.len() + 1];
        b[0] = true;
        let mut decoder = self.0.new_decoder_without_bom_handling();
        let mut buf = [0u8; 64];
        for i in 0..units.len() {
            let (res, _read, written) =
                decoder.decode_to_utf8_without_replacement(&units[i..i + 1], &mut buf, false);
            if written > 0 || matches!(res, DecoderResult::Malformed(..)) {
                b[i + 1] = true;
            }
        }
        Some(b)
    }
}

/// UTF-16, little or big endian: 16-bit units; lone surrogates are kept as units.
pub(crate) struct Utf16Repr {
    pub be: bool,
}

impl Repr for Utf16Repr {
    type U = u16;
    fn units<'a>(&self, body: &'a [u8]) -> (Cow<'a, [u16]>, usize) {
        let chunks = body.chunks_exact(2);
        let tail = chunks.remainder().len();
        let units = chunks
            .map(|c| {
                let b = [c[0], c[1]];
                if self.be {
                    u16::from_be_bytes(b)
                } else {
                    u16::from_le_bytes(b)
                }
            })
            .collect();
        (Cow::Owned(units), tail)
    }
    fn encode(&self, s: &str) -> Result<Vec<u16>, TextError> {
        Ok(s.encode_utf16().collect())
    }
    fn write(&self, units: &[u16], out: &mut Vec<u8>) {
        out.reserve(units.len() * 2);
        for u in units {
            out.extend_from_slice(&if self.be {
                u.to_be_bytes()
            } else {
                u.to_le_bytes()
            });
        }
    }
    fn decode(&self, units: &[u16]) -> String {
        char::decode_utf16(units.iter().copied())
            .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }
    fn count_endings(&self, body: &[u8]) -> EndingCounts {
        count_stream(body.chunks_exact(2).map(|c| {
            let b = [c[0], c[1]];
            u32::from(if self.be {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            })
        }))
    }
}

/// UTF-32, little or big endian: 32-bit units; invalid values are kept as units.
pub(crate) struct Utf32Repr {
    pub be: bool,
}

impl Repr for Utf32Repr {
    type U = u32;
    fn units<'a>(&self, body: &'a [u8]) -> (Cow<'a, [u32]>, usize) {
        let chunks = body.chunks_exact(4);
        let tail = chunks.remainder().len();
        let units = chunks
            .map(|c| {
                let b = [c[0], c[1], c[2], c[3]];
                if self.be {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                }
            })
            .collect();
        (Cow::Owned(units), tail)
    }
    fn encode(&self, s: &str) -> Result<Vec<u32>, TextError> {
        Ok(s.chars().map(|c| c as u32).collect())
    }
    fn write(&self, units: &[u32], out: &mut Vec<u8>) {
        out.reserve(units.len() * 4);
        for u in units {
            out.extend_from_slice(&if self.be {
                u.to_be_bytes()
            } else {
                u.to_le_bytes()
            });
        }
    }
    fn decode(&self, units: &[u32]) -> String {
        units
            .iter()
            .map(|&u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }
    fn count_endings(&self, body: &[u8]) -> EndingCounts {
        count_stream(body.chunks_exact(4).map(|c| {
            let b = [c[0], c[1], c[2], c[3]];
            if self.be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        }))
    }
}

/// Encodes `s` into a legacy encoding without any replacement: the first character
/// the encoding cannot represent is `UnmappableCharacter`. Encodings whose encoder
/// would silently produce UTF-8 instead (UTF-16 labels, `replacement`) are refused.
pub(crate) fn encode_legacy(
    enc: &'static encoding_rs::Encoding,
    s: &str,
) -> Result<Vec<u8>, TextError> {
    if enc == encoding_rs::UTF_8 {
        return Ok(s.as_bytes().to_vec());
    }
    if enc.output_encoding() != enc {
        return Err(TextError::UnsupportedEncoding(format!(
            "{} cannot be written",
            crate::format::legacy_name(enc)
        )));
    }
    let mut encoder = enc.new_encoder();
    let mut out = Vec::with_capacity(s.len() + 8);
    let mut buf = [0u8; 4096];
    let mut src = s;
    loop {
        let (res, read, written) =
            encoder.encode_from_utf8_without_replacement(src, &mut buf, true);
        out.extend_from_slice(&buf[..written]);
        src = &src[read..];
        match res {
            EncoderResult::InputEmpty => return Ok(out),
            EncoderResult::OutputFull => continue,
            EncoderResult::Unmappable(c) => {
                return Err(TextError::UnmappableCharacter(format!(
                    "U+{:04X} {:?} cannot be written in {}",
                    c as u32,
                    c,
                    crate::format::legacy_name(enc)
                )));
            }
        }
    }
}

/// Runs `$body` with `$r` bound to the [`Repr`] of the encoding `$enc`
/// (a [`crate::Encoding`], normalised first).
macro_rules! with_repr {
    ($enc:expr, |$r:ident| $body:expr) => {{
        use $crate::format::Encoding as __E;
        match __E::normalized($enc) {
            __E::Utf8 => {
                let $r = &$crate::repr::Utf8Repr;
                $body
            }
            __E::Utf16Le => {
                let $r = &$crate::repr::Utf16Repr { be: false };
                $body
            }
            __E::Utf16Be => {
                let $r = &$crate::repr::Utf16Repr { be: true };
                $body
            }
            __E::Utf32Le => {
                let $r = &$crate::repr::Utf32Repr { be: false };
                $body
            }
            __E::Utf32Be => {
                let $r = &$crate::repr::Utf32Repr { be: true };
                $body
            }
            __E::Legacy(e) => {
                let $r = &$crate::repr::LegacyRepr(e);
                $body
            }
        }
    }};
}
pub(crate) use with_repr;
