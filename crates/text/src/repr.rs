//! Internal: how each encoding turns a file body into code units and back.
//!
//! The edit engine and the reader are generic over [`Repr`], so one implementation
//! serves UTF-8 and legacy files (bytes), UTF-16 (16-bit units) and UTF-32 (32-bit
//! units). Bytes outside an edit are kept because the engine copies units, and every
//! `Repr` writes a unit back as exactly the bytes it was read from.

use std::borrow::Cow;

use encoding_rs::{DecoderResult, EncoderResult};

use crate::encoding::Unit;
use crate::error::TextError;
use crate::lines::{EndingCounts, count_endings, count_stream};

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
    /// The complete units of `body` read in place, without a copy.
    fn body_units<'a>(&self, body: &'a [u8]) -> BodyUnits<'a>;
    /// The line breaks of `body` by kind (a trailing partial unit is ignored).
    fn count_endings(&self, body: &[u8]) -> EndingCounts {
        let units = self.body_units(body);
        match units.as_bytes() {
            Some(bytes) => count_endings(bytes),
            None => count_stream(units.iter()),
        }
    }
    /// Decodes `units` for display, replacing what cannot be decoded by U+FFFD.
    fn decode(&self, units: &[Self::U]) -> String;
    /// [`Repr::decode`] of the complete units of `body` (a trailing partial unit is
    /// ignored), without the intermediate units where the encoding allows.
    fn decode_body(&self, body: &[u8]) -> String {
        self.decode(&self.units(body).0)
    }
    /// For encodings where a unit index need not be a character boundary
    /// (multi-byte legacy encodings): `b[i]` tells whether index `i` (0..=len) is one.
    fn boundaries(&self, _units: &[Self::U]) -> Option<Vec<bool>> {
        None
    }
}

/// A file body read as code units in place: unit `i` is the `width` bytes from
/// `i * width`, in the given byte order; a trailing partial unit is not part of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyUnits<'a> {
    bytes: &'a [u8],
    width: usize,
    be: bool,
}

impl<'a> BodyUnits<'a> {
    fn new(bytes: &'a [u8], width: usize, be: bool) -> Self {
        let whole = bytes.len() - bytes.len() % width;
        BodyUnits {
            bytes: &bytes[..whole],
            width,
            be,
        }
    }

    /// Number of complete units.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len() / self.width
    }

    /// The value of unit `i` (`i < len()`).
    pub(crate) fn at(&self, i: usize) -> u32 {
        unit_value(&self.bytes[i * self.width..(i + 1) * self.width], self.be)
    }

    /// Number of bytes the complete units take.
    pub(crate) fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// The units themselves when a unit is a byte.
    pub(crate) fn as_bytes(&self) -> Option<&'a [u8]> {
        (self.width == 1).then_some(self.bytes)
    }

    /// Every unit's value, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        let be = self.be;
        self.bytes
            .chunks_exact(self.width)
            .map(move |c| unit_value(c, be))
    }
}

/// The value of one unit stored as `bytes` (1, 2 or 4 of them).
fn unit_value(bytes: &[u8], be: bool) -> u32 {
    match *bytes {
        [b] => u32::from(b),
        [x, y] => u32::from(if be {
            u16::from_be_bytes([x, y])
        } else {
            u16::from_le_bytes([x, y])
        }),
        [w, x, y, z] => {
            if be {
                u32::from_be_bytes([w, x, y, z])
            } else {
                u32::from_le_bytes([w, x, y, z])
            }
        }
        _ => 0,
    }
}

/// `String::from_utf8_lossy`, checking first with the much faster `str::from_utf8`
/// (the lossy decoder's scan is an order of magnitude slower on valid text).
pub(crate) fn utf8_lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
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
    fn body_units<'a>(&self, body: &'a [u8]) -> BodyUnits<'a> {
        BodyUnits::new(body, 1, false)
    }
    fn decode(&self, units: &[u8]) -> String {
        utf8_lossy(units).into_owned()
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
    fn body_units<'a>(&self, body: &'a [u8]) -> BodyUnits<'a> {
        BodyUnits::new(body, 1, false)
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
                decoder.decode_to_utf8_without_replacement(&units[i..=i], &mut buf, false);
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
        for &u in units {
            u.push_bytes(self.be, out);
        }
    }
    fn encode_into(&self, s: &str, out: &mut Vec<u8>) -> Result<(), TextError> {
        for u in s.encode_utf16() {
            u.push_bytes(self.be, out);
        }
        Ok(())
    }
    fn body_units<'a>(&self, body: &'a [u8]) -> BodyUnits<'a> {
        BodyUnits::new(body, 2, self.be)
    }
    fn decode(&self, units: &[u16]) -> String {
        char::decode_utf16(units.iter().copied())
            .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }
    fn decode_body(&self, body: &[u8]) -> String {
        // The values of 16-bit units always fit in a u16; were one not to, it
        // would decode as U+FFFD rather than panic.
        let units = self
            .body_units(body)
            .iter()
            .map(|u| u16::try_from(u).unwrap_or(0xFFFD));
        char::decode_utf16(units)
            .map(|r| r.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
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
        for &u in units {
            u.push_bytes(self.be, out);
        }
    }
    fn encode_into(&self, s: &str, out: &mut Vec<u8>) -> Result<(), TextError> {
        for c in s.chars() {
            u32::from(c).push_bytes(self.be, out);
        }
        Ok(())
    }
    fn body_units<'a>(&self, body: &'a [u8]) -> BodyUnits<'a> {
        BodyUnits::new(body, 4, self.be)
    }
    fn decode(&self, units: &[u32]) -> String {
        units
            .iter()
            .map(|&u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }
    fn decode_body(&self, body: &[u8]) -> String {
        self.body_units(body)
            .iter()
            .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
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
            crate::encoding::legacy_name(enc)
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
            EncoderResult::OutputFull => {}
            EncoderResult::Unmappable(c) => {
                return Err(TextError::UnmappableCharacter(format!(
                    "U+{:04X} {:?} cannot be written in {}",
                    c as u32,
                    c,
                    crate::encoding::legacy_name(enc)
                )));
            }
        }
    }
}

/// Runs `$body` with `$r` bound to the [`Repr`] of the encoding `$enc`
/// (a [`crate::Encoding`], normalised first).
macro_rules! with_repr {
    ($enc:expr, |$r:ident| $body:expr) => {{
        use $crate::encoding::Encoding as __E;
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
