//! Encodings, BOMs, detection, decoding and whole-file encoding (SPEC 9).

use std::borrow::Cow;

use chardetng::{EncodingDetector, Iso2022JpDetection, Utf8Detection};

pub use crate::encoding::Encoding;
use crate::error::TextError;
use crate::lines::{Ending, EndingCounts, convert_breaks, count_endings, push_converted};
use crate::repr::{Repr, encode_legacy, with_repr};

/// A file's format (SPEC 9): encoding, whether it starts with a BOM, and its dominant
/// line ending (SPEC 8.2; `None` when the file has no line break at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// The character encoding.
    pub encoding: Encoding,
    /// Whether the file starts with the encoding's BOM.
    pub bom: bool,
    /// The most frequent line ending; ties go to LF, then CRLF.
    pub dominant: Option<Ending>,
}

impl Format {
    /// The format of a new file: UTF-8, no BOM, no line ending (SPEC 9).
    pub const NEW_FILE: Format = Format {
        encoding: Encoding::Utf8,
        bom: false,
        dominant: None,
    };

    /// Length in bytes of the BOM this format starts with (0 when `bom` is false).
    pub fn bom_len(&self) -> usize {
        if self.bom {
            self.encoding.bom_bytes().len()
        } else {
            0
        }
    }

    /// `read_lines`' `lineEnding`: `Some("lf" | "crlf" | "cr")`, `None` for no ending.
    pub fn line_ending_name(&self) -> Option<&'static str> {
        self.dominant.map(Ending::name)
    }
}

/// The encoding and BOM length announced by a BOM at the start of `bytes`, checked in
/// the SPEC 9 order: UTF-32LE `FF FE 00 00` (before UTF-16LE `FF FE`), UTF-32BE
/// `00 00 FE FF`, UTF-8 `EF BB BF`, UTF-16LE `FF FE`, UTF-16BE `FE FF`.
pub fn sniff_bom(bytes: &[u8]) -> Option<(Encoding, usize)> {
    if bytes.starts_with(&[0xFF, 0xFE, 0x00, 0x00]) {
        Some((Encoding::Utf32Le, 4))
    } else if bytes.starts_with(&[0x00, 0x00, 0xFE, 0xFF]) {
        Some((Encoding::Utf32Be, 4))
    } else if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        Some((Encoding::Utf8, 3))
    } else if bytes.starts_with(&[0xFF, 0xFE]) {
        Some((Encoding::Utf16Le, 2))
    } else if bytes.starts_with(&[0xFE, 0xFF]) {
        Some((Encoding::Utf16Be, 2))
    } else {
        None
    }
}

/// Detects an existing file's format (SPEC 9): a BOM decides first (see
/// [`sniff_bom`]); otherwise valid UTF-8 is UTF-8 without BOM; otherwise chardetng
/// guesses a legacy encoding, accepted only if decoding and re-encoding the whole
/// file gives back exactly its bytes. An empty file is UTF-8, no BOM, no ending.
/// The dominant ending is computed with the SPEC 8.1 line model in that encoding.
///
/// Errors: `UnsupportedEncoding` when no encoding reproduces the bytes.
pub fn detect(bytes: &[u8]) -> Result<Format, TextError> {
    detect_counted(bytes).map(|(format, _)| format)
}

/// [`detect`], with the line breaks of the body (the complete code units after any
/// BOM) by kind, counted once for both.
pub(crate) fn detect_counted(bytes: &[u8]) -> Result<(Format, EndingCounts), TextError> {
    if let Some((encoding, len)) = sniff_bom(bytes) {
        let body = &bytes[len..];
        let counts = with_repr!(encoding, |r| r.count_endings(body));
        let format = Format {
            encoding,
            bom: true,
            dominant: counts.dominant(),
        };
        return Ok((format, counts));
    }
    let counts = count_endings(bytes);
    if std::str::from_utf8(bytes).is_ok() {
        let format = Format {
            encoding: Encoding::Utf8,
            bom: false,
            dominant: counts.dominant(),
        };
        return Ok((format, counts));
    }
    let mut detector = EncodingDetector::new(Iso2022JpDetection::Deny);
    detector.feed(bytes, true);
    let guess = detector.guess(None, Utf8Detection::Deny);
    let encoding = Encoding::Legacy(guess).normalized();
    let lossless = match encoding {
        Encoding::Legacy(e) => e
            .decode_without_bom_handling_and_without_replacement(bytes)
            .and_then(|text| encode_legacy(e, &text).ok())
            .is_some_and(|back| back == bytes),
        _ => false,
    };
    if !lossless {
        return Err(TextError::UnsupportedEncoding(format!(
            "the file is not UTF-8 and no legacy encoding reproduces its bytes exactly (best guess {})",
            encoding.name()
        )));
    }
    let format = Format {
        encoding,
        bom: false,
        dominant: counts.dominant(),
    };
    Ok((format, counts))
}

/// `lineEnding` of a write's `_meta` (SPEC 4 and 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineEndingChoice {
    /// `"lf"`: the content is written as given.
    Lf,
    /// `"crlf"`: every line break of the content becomes `\r\n`.
    Crlf,
}

/// The only three `_meta` fields that reach the encoder (SPEC 4): `encoding` (a label
/// for [`Encoding::from_label`]), `bom`, `lineEnding`. `None` means "not given".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `_meta.encoding`, an encoding label.
    pub encoding: Option<String>,
    /// `_meta.bom`.
    pub bom: Option<bool>,
    /// `_meta.lineEnding`.
    pub line_ending: Option<LineEndingChoice>,
}

/// Encodes `s` in `encoding`, without a BOM. Errors: `UnmappableCharacter` for a
/// character the encoding cannot represent (never `?` or `&#NNN;`),
/// `UnsupportedEncoding` for an encoding that cannot be written (`replacement`).
pub fn encode_text(s: &str, encoding: Encoding) -> Result<Vec<u8>, TextError> {
    with_repr!(encoding, |r| {
        let mut out = Vec::with_capacity(s.len());
        r.encode_into(s, &mut out)?;
        Ok(out)
    })
}

/// Encodes a whole-file write (SPEC 9; `fs/write_text_file` and edit mode `write`).
///
/// Returns the complete file bytes and the format they have.
/// - Encoding: `opts.encoding` if given, else the existing file's, else UTF-8.
/// - BOM: `opts.bom` if given; else the existing file's when the encoding is the
///   existing one; else, for an explicitly named encoding, a BOM for UTF-16/32 and
///   none otherwise; else (new file) none. When the output has a BOM, one leading
///   U+FEFF is stripped from `content` and exactly one BOM is written.
/// - Line endings: `Crlf` turns every line break (`\n`, `\r\n`, lone `\r`) into
///   `\r\n`; `Lf` writes the content as given; not given and an existing dominant
///   ending of `\r\n` or `\r` turns every line break into that ending; otherwise as
///   given. A `\r\n` is one break, so `\r\r\n` is never produced from one.
///
/// Errors: `UnsupportedEncoding` (unknown label), `UnmappableCharacter`,
/// `InvalidRequest` (a BOM asked for an encoding that has none).
pub fn encode_whole(
    content: &str,
    existing: Option<&Format>,
    opts: &WriteOptions,
) -> Result<(Vec<u8>, Format), TextError> {
    let plan = plan_whole(content, existing, opts)?;
    let bom_bytes = plan.bom_bytes();
    let (out, dominant) = if plan.encoding == Encoding::Utf8 {
        // The text is the output: convert straight into it, then count its endings.
        let mut out = Vec::new();
        if let Some(e) = plan.ending {
            push_converted(plan.content, e, bom_bytes, &mut out);
        } else {
            out.reserve_exact(bom_bytes.len() + plan.content.len());
            out.extend_from_slice(bom_bytes);
            out.extend_from_slice(plan.content.as_bytes());
        }
        let dominant = count_endings(&out[bom_bytes.len()..]).dominant();
        (out, dominant)
    } else {
        let text: Cow<str> = match plan.ending {
            Some(e) => Cow::Owned(convert_breaks(plan.content, e)),
            None => Cow::Borrowed(plan.content),
        };
        let mut out = Vec::with_capacity(text.len() + 4);
        out.extend_from_slice(bom_bytes);
        with_repr!(plan.encoding, |r| r.encode_into(&text, &mut out))?;
        (out, count_endings(text.as_bytes()).dominant())
    };
    let format = Format {
        encoding: plan.encoding,
        bom: plan.bom,
        dominant,
    };
    Ok((out, format))
}

/// The bytes of [`encode_whole`], without working out their format (what a
/// whole-file write needs), and without a copy when there is nothing to
/// change: UTF-8 output with no BOM to add and no line break to convert
/// borrows `content`'s own bytes. Same rules and errors as
/// [`encode_whole`].
pub fn encode_whole_bytes<'a>(
    content: &'a str,
    existing: Option<&Format>,
    opts: &WriteOptions,
) -> Result<Cow<'a, [u8]>, TextError> {
    let plan = plan_whole(content, existing, opts)?;
    let bom_bytes = plan.bom_bytes();
    if plan.encoding == Encoding::Utf8 {
        return Ok(match plan.ending {
            Some(e) => {
                let mut out = Vec::new();
                push_converted(plan.content, e, bom_bytes, &mut out);
                Cow::Owned(out)
            }
            None if bom_bytes.is_empty() => Cow::Borrowed(plan.content.as_bytes()),
            None => {
                let mut out = Vec::with_capacity(bom_bytes.len() + plan.content.len());
                out.extend_from_slice(bom_bytes);
                out.extend_from_slice(plan.content.as_bytes());
                Cow::Owned(out)
            }
        });
    }
    let text: Cow<str> = match plan.ending {
        Some(e) => Cow::Owned(convert_breaks(plan.content, e)),
        None => Cow::Borrowed(plan.content),
    };
    let mut out = Vec::with_capacity(text.len() + 4);
    out.extend_from_slice(bom_bytes);
    with_repr!(plan.encoding, |r| r.encode_into(&text, &mut out))?;
    Ok(Cow::Owned(out))
}

/// What [`encode_whole`] decides before encoding: the encoding, whether a
/// BOM is written, the ending every break becomes (`None`: as given), and
/// the text to encode (a leading U+FEFF stripped when a BOM is written).
struct WholePlan<'a> {
    encoding: Encoding,
    bom: bool,
    ending: Option<Ending>,
    content: &'a str,
}

impl WholePlan<'_> {
    fn bom_bytes(&self) -> &'static [u8] {
        if self.bom {
            self.encoding.bom_bytes()
        } else {
            &[]
        }
    }
}

fn plan_whole<'a>(
    content: &'a str,
    existing: Option<&Format>,
    opts: &WriteOptions,
) -> Result<WholePlan<'a>, TextError> {
    let explicit = opts
        .encoding
        .as_deref()
        .map(Encoding::from_label)
        .transpose()?;
    let encoding = explicit
        .or(existing.map(|f| f.encoding))
        .unwrap_or(Encoding::Utf8)
        .normalized();
    let bom = match (opts.bom, explicit, existing) {
        (Some(b), _, _) => b,
        (None, Some(e), Some(f)) if e == f.encoding.normalized() => f.bom,
        (None, Some(e), _) => e.is_wide(),
        (None, None, Some(f)) => f.bom,
        (None, None, None) => false,
    };
    if bom && encoding.bom_bytes().is_empty() {
        return Err(TextError::InvalidRequest(format!(
            "{} has no byte order mark; do not ask for bom with it",
            encoding.name()
        )));
    }
    let ending = match opts.line_ending {
        Some(LineEndingChoice::Crlf) => Some(Ending::CrLf),
        Some(LineEndingChoice::Lf) => None,
        None => existing
            .and_then(|f| f.dominant)
            .filter(|e| *e != Ending::Lf),
    };
    // A leading U+FEFF is not a line break, so it can be stripped before the breaks
    // are converted.
    let content = if bom {
        content.strip_prefix('\u{FEFF}').unwrap_or(content)
    } else {
        content
    };
    Ok(WholePlan {
        encoding,
        bom,
        ending,
        content,
    })
}

/// Decodes a file's bytes for reading (SPEC 3): the BOM (when `format.bom` and the
/// bytes start with it) is not included; what cannot be decoded (invalid UTF-8, lone
/// surrogates, a trailing partial code unit) becomes U+FFFD, one per bad sequence, so
/// line breaks and line numbering are the same as on the raw bytes. Never fails.
pub fn decode(bytes: &[u8], format: &Format) -> String {
    let bom = format.encoding.bom_bytes();
    let body = if format.bom && bytes.starts_with(bom) {
        &bytes[bom.len()..]
    } else {
        bytes
    };
    with_repr!(format.encoding, |r| {
        let mut s = r.decode_body(body);
        if r.body_units(body).byte_len() < body.len() {
            // A trailing partial code unit.
            s.push(char::REPLACEMENT_CHARACTER);
        }
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(label: &str) -> Encoding {
        Encoding::from_label(label).unwrap()
    }

    #[test]
    fn detects_each_bom() {
        let cases: &[(&[u8], Encoding)] = &[
            (b"\xFF\xFE\x00\x00a\x00\x00\x00", Encoding::Utf32Le),
            (b"\x00\x00\xFE\xFF\x00\x00\x00a", Encoding::Utf32Be),
            (b"\xEF\xBB\xBFa", Encoding::Utf8),
            (b"\xFF\xFEa\x00", Encoding::Utf16Le),
            (b"\xFE\xFF\x00a", Encoding::Utf16Be),
        ];
        for (bytes, want) in cases {
            let f = detect(bytes).unwrap();
            assert_eq!(f.encoding, *want, "{bytes:?}");
            assert!(f.bom);
            assert_eq!(f.dominant, None);
        }
    }

    #[test]
    fn detects_endings_in_wide_encodings() {
        let f = detect(b"\xFE\xFF\x00a\x00\r\x00\n\x00b\x00\r\x00\n").unwrap();
        assert_eq!(f.encoding, Encoding::Utf16Be);
        assert_eq!(f.dominant, Some(Ending::CrLf));
        let f = detect(b"\xFF\xFE\x00\x00a\x00\x00\x00\r\x00\x00\x00").unwrap();
        assert_eq!(f.dominant, Some(Ending::Cr));
    }

    #[test]
    fn detects_utf8_and_empty() {
        assert_eq!(detect(b"").unwrap(), Format::NEW_FILE);
        let f = detect("é\r\n".as_bytes()).unwrap();
        assert_eq!(f.encoding, Encoding::Utf8);
        assert!(!f.bom);
        assert_eq!(f.dominant, Some(Ending::CrLf));
    }

    #[test]
    fn latin1_round_trip() {
        let bytes = b"caf\xe9 cr\xe8me br\xfbl\xe9e\n".to_vec();
        let f = detect(&bytes).unwrap();
        assert_eq!(f.encoding, Encoding::Legacy(encoding_rs::WINDOWS_1252));
        assert_eq!(f.encoding.name(), "windows-1252");
        let text = decode(&bytes, &f);
        assert_eq!(text, "café crème brûlée\n");
        let (back, f2) = encode_whole(&text, Some(&f), &WriteOptions::default()).unwrap();
        assert_eq!(back, bytes);
        assert_eq!(f2, f);
    }

    #[test]
    fn unmappable_char_into_windows_1252() {
        let opts = WriteOptions {
            encoding: Some("latin1".into()),
            ..Default::default()
        };
        let err = encode_whole("snowman ☃", None, &opts).unwrap_err();
        assert!(matches!(err, TextError::UnmappableCharacter(_)), "{err:?}");
        assert!(matches!(err, TextError::UnmappableCharacter(ref s) if s.contains("U+2603")));
        let (ok, _) = encode_whole("café €", None, &opts).unwrap();
        assert_eq!(ok, b"caf\xe9 \x80");
    }

    #[test]
    fn utf16_and_utf32_encode() {
        let opts = |e: &str| WriteOptions {
            encoding: Some(e.into()),
            ..Default::default()
        };
        let (b, f) = encode_whole("a😀\n", None, &opts("UTF-16LE")).unwrap();
        assert_eq!(b, b"\xFF\xFEa\x00\x3D\xD8\x00\xDE\n\x00");
        assert_eq!(f.encoding, Encoding::Utf16Le);
        assert!(f.bom);
        assert_eq!(f.dominant, Some(Ending::Lf));
        let (b, _) = encode_whole("a😀", None, &opts("utf-16be")).unwrap();
        assert_eq!(b, b"\xFE\xFF\x00a\xD8\x3D\xDE\x00");
        let (b, _) = encode_whole("a😀", None, &opts("utf-32le")).unwrap();
        assert_eq!(b, b"\xFF\xFE\x00\x00a\x00\x00\x00\x00\xF6\x01\x00");
        let (b, _) = encode_whole("a", None, &opts("utf-32be")).unwrap();
        assert_eq!(b, b"\x00\x00\xFE\xFF\x00\x00\x00a");
        let no_bom = WriteOptions {
            encoding: Some("utf-16le".into()),
            bom: Some(false),
            ..Default::default()
        };
        let (b, _) = encode_whole("\u{FEFF}a", None, &no_bom).unwrap();
        assert_eq!(b, b"\xFF\xFEa\x00", "without a BOM the U+FEFF is content");
    }

    #[test]
    fn unknown_label_is_unsupported() {
        for label in ["klingon", "", "replacement", "iso-2022-kr"] {
            let err = Encoding::from_label(label).unwrap_err();
            assert!(
                matches!(err, TextError::UnsupportedEncoding(_)),
                "{label}: {err:?}"
            );
        }
        let opts = WriteOptions {
            encoding: Some("utf-9".into()),
            ..Default::default()
        };
        assert!(matches!(
            encode_whole("x", None, &opts),
            Err(TextError::UnsupportedEncoding(_))
        ));
    }

    #[test]
    fn labels() {
        assert_eq!(enc("UTF8"), Encoding::Utf8);
        assert_eq!(enc(" utf-8 "), Encoding::Utf8);
        assert_eq!(enc("utf-16"), Encoding::Utf16Le);
        assert_eq!(enc("UTF-16BE"), Encoding::Utf16Be);
        assert_eq!(enc("utf-32"), Encoding::Utf32Le);
        assert_eq!(enc("iso-8859-1").name(), "windows-1252");
        assert_eq!(enc("sjis").name(), "shift_jis");
        assert_eq!(enc("GBK").name(), "gbk");
        assert_eq!(
            Encoding::Legacy(encoding_rs::UTF_16BE).normalized(),
            Encoding::Utf16Be
        );
    }

    #[test]
    fn bom_and_line_ending_rules() {
        let crlf = Format {
            encoding: Encoding::Utf8,
            bom: true,
            dominant: Some(Ending::CrLf),
        };
        let (b, f) =
            encode_whole("\u{FEFF}a\nb\r\nc\r", Some(&crlf), &WriteOptions::default()).unwrap();
        assert_eq!(b, b"\xEF\xBB\xBFa\r\nb\r\nc\r\n");
        assert_eq!(f, crlf);
        let lf = WriteOptions {
            line_ending: Some(LineEndingChoice::Lf),
            bom: Some(false),
            ..Default::default()
        };
        let (b, _) = encode_whole("a\r\nb\n", Some(&crlf), &lf).unwrap();
        assert_eq!(b, b"a\r\nb\n");
        let to_crlf = WriteOptions {
            line_ending: Some(LineEndingChoice::Crlf),
            ..Default::default()
        };
        let (b, _) = encode_whole("a\r\r\nb\n", None, &to_crlf).unwrap();
        assert_eq!(b, b"a\r\n\r\nb\r\n");
        let cr = Format {
            dominant: Some(Ending::Cr),
            ..Format::NEW_FILE
        };
        let (b, _) = encode_whole("a\r\nb\n", Some(&cr), &WriteOptions::default()).unwrap();
        assert_eq!(b, b"a\rb\r");
        let (b, f) = encode_whole("a\r\nb", None, &WriteOptions::default()).unwrap();
        assert_eq!(b, b"a\r\nb");
        assert_eq!(f.dominant, Some(Ending::CrLf));
        let bad = WriteOptions {
            encoding: Some("windows-1252".into()),
            bom: Some(true),
            ..Default::default()
        };
        assert!(matches!(
            encode_whole("a", None, &bad),
            Err(TextError::InvalidRequest(_))
        ));
    }

    #[test]
    fn undetectable_bytes_are_unsupported() {
        // Invalid as UTF-8 and as every multi-byte guess; single-byte guesses map all
        // bytes, so craft a Shift_JIS-looking file with an invalid trail byte.
        let mut bytes = Vec::new();
        for _ in 0..50 {
            bytes.extend_from_slice("これは日本語".as_bytes());
        }
        bytes.push(0xE3);
        match detect(&bytes) {
            Ok(f) => {
                // Whatever was accepted must round-trip exactly.
                let text = decode(&bytes, &f);
                assert_eq!(encode_text(&text, f.encoding).unwrap(), bytes);
            }
            Err(e) => assert!(matches!(e, TextError::UnsupportedEncoding(_)), "{e:?}"),
        }
    }

    #[test]
    fn decode_strips_bom_and_replaces_bad_units() {
        let f = detect(b"\xFF\xFEa\x00\x00\xD8b\x00").unwrap();
        assert_eq!(decode(b"\xFF\xFEa\x00\x00\xD8b\x00", &f), "a\u{FFFD}b");
        let f = detect(b"\xEF\xBB\xBFx\xFF").unwrap();
        assert_eq!(decode(b"\xEF\xBB\xBFx\xFF", &f), "x\u{FFFD}");
        let f = detect(b"\xFE\xFF\x00a\x00").unwrap();
        assert_eq!(decode(b"\xFE\xFF\x00a\x00", &f), "a\u{FFFD}");
    }
}
