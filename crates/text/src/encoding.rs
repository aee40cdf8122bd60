//! A file's character encoding (SPEC 9) and the code units it is read in:
//! the names every other text module uses, importing none of them.

use crate::error::TextError;

/// A file's character encoding (SPEC 9).
///
/// UTF-8, UTF-16 and UTF-32 are handled by this crate itself (`encoding_rs` cannot
/// encode UTF-16 and does not know UTF-32); every other WHATWG encoding is a
/// `Legacy` one handled by `encoding_rs`. Construct through [`Encoding::from_label`]
/// or [`detect`](crate::detect); a hand-made `Legacy(UTF_8)` / `Legacy(UTF_16LE)` is treated as the
/// native variant (see [`Encoding::normalized`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 (BOM `EF BB BF` optional).
    Utf8,
    /// UTF-16 little endian (BOM `FF FE`).
    Utf16Le,
    /// UTF-16 big endian (BOM `FE FF`).
    Utf16Be,
    /// UTF-32 little endian (BOM `FF FE 00 00`).
    Utf32Le,
    /// UTF-32 big endian (BOM `00 00 FE FF`).
    Utf32Be,
    /// Any other WHATWG encoding (windows-1252, `shift_jis`, gbk, ...). Never has a BOM.
    Legacy(&'static encoding_rs::Encoding),
}

/// Lower-case names of every `encoding_rs` encoding, so [`Encoding::name`] can return
/// a `&'static str`.
const LEGACY_NAMES: &[&str] = &[
    "big5",
    "euc-jp",
    "euc-kr",
    "gb18030",
    "gbk",
    "ibm866",
    "iso-2022-jp",
    "iso-8859-10",
    "iso-8859-13",
    "iso-8859-14",
    "iso-8859-15",
    "iso-8859-16",
    "iso-8859-2",
    "iso-8859-3",
    "iso-8859-4",
    "iso-8859-5",
    "iso-8859-6",
    "iso-8859-7",
    "iso-8859-8",
    "iso-8859-8-i",
    "koi8-r",
    "koi8-u",
    "macintosh",
    "replacement",
    "shift_jis",
    "utf-16be",
    "utf-16le",
    "utf-8",
    "windows-1250",
    "windows-1251",
    "windows-1252",
    "windows-1253",
    "windows-1254",
    "windows-1255",
    "windows-1256",
    "windows-1257",
    "windows-1258",
    "windows-874",
    "x-mac-cyrillic",
    "x-user-defined",
];

/// The lower-case WHATWG name of an `encoding_rs` encoding.
pub(crate) fn legacy_name(enc: &'static encoding_rs::Encoding) -> &'static str {
    let name = enc.name();
    LEGACY_NAMES
        .iter()
        .find(|n| n.eq_ignore_ascii_case(name))
        .copied()
        .unwrap_or(name)
}

impl Encoding {
    /// The encoding's name as reported on the wire (`read_lines`' `encoding`):
    /// `"utf-8"`, `"utf-16le"`, `"utf-16be"`, `"utf-32le"`, `"utf-32be"`, or the
    /// lower-cased WHATWG name (`"windows-1252"`, `"shift_jis"`, ...).
    pub fn name(&self) -> &'static str {
        match self.normalized() {
            Encoding::Utf8 => "utf-8",
            Encoding::Utf16Le => "utf-16le",
            Encoding::Utf16Be => "utf-16be",
            Encoding::Utf32Le => "utf-32le",
            Encoding::Utf32Be => "utf-32be",
            Encoding::Legacy(e) => legacy_name(e),
        }
    }

    /// Parses a `_meta.encoding` label (SPEC 9), case-insensitively, surrounding
    /// whitespace ignored: `utf-8`/`utf8`, `utf-16le`/`utf-16` (little endian),
    /// `utf-16be`, `utf-32le`/`utf-32` (little endian), `utf-32be` (also without the
    /// dash), and every WHATWG label known to `encoding_rs::Encoding::for_label`
    /// (`latin1` and `iso-8859-1` mean windows-1252, as in WHATWG).
    ///
    /// Errors: `UnsupportedEncoding` for an unknown label and for the WHATWG
    /// `replacement` encoding (never a silent fallback to UTF-8).
    pub fn from_label(label: &str) -> Result<Encoding, TextError> {
        let l = label.trim().to_ascii_lowercase();
        let native = match l.as_str() {
            "utf-8" | "utf8" => Some(Encoding::Utf8),
            "utf-16le" | "utf16le" | "utf-16" | "utf16" => Some(Encoding::Utf16Le),
            "utf-16be" | "utf16be" => Some(Encoding::Utf16Be),
            "utf-32le" | "utf32le" | "utf-32" | "utf32" => Some(Encoding::Utf32Le),
            "utf-32be" | "utf32be" => Some(Encoding::Utf32Be),
            _ => None,
        };
        if let Some(e) = native {
            return Ok(e);
        }
        match encoding_rs::Encoding::for_label_no_replacement(l.as_bytes()) {
            Some(e) => Ok(Encoding::Legacy(e).normalized()),
            None => Err(TextError::UnsupportedEncoding(format!(
                "unknown encoding label \"{}\"",
                crate::escape::show(label)
            ))),
        }
    }

    /// Maps `Legacy(UTF_8)`, `Legacy(UTF_16LE)` and `Legacy(UTF_16BE)` to the native
    /// variants; every other value is returned unchanged.
    #[must_use]
    pub fn normalized(self) -> Encoding {
        match self {
            Encoding::Legacy(e) if e == encoding_rs::UTF_8 => Encoding::Utf8,
            Encoding::Legacy(e) if e == encoding_rs::UTF_16LE => Encoding::Utf16Le,
            Encoding::Legacy(e) if e == encoding_rs::UTF_16BE => Encoding::Utf16Be,
            other => other,
        }
    }

    /// The byte order mark of this encoding (SPEC 9), empty for legacy encodings.
    pub fn bom_bytes(&self) -> &'static [u8] {
        match self.normalized() {
            Encoding::Utf8 => &[0xEF, 0xBB, 0xBF],
            Encoding::Utf16Le => &[0xFF, 0xFE],
            Encoding::Utf16Be => &[0xFE, 0xFF],
            Encoding::Utf32Le => &[0xFF, 0xFE, 0x00, 0x00],
            Encoding::Utf32Be => &[0x00, 0x00, 0xFE, 0xFF],
            Encoding::Legacy(_) => &[],
        }
    }

    /// True for UTF-16 and UTF-32 (the encodings in which NUL bytes are normal and
    /// lines are split on 16/32-bit code units, SPEC 8.1 and 8.3).
    pub fn is_wide(&self) -> bool {
        matches!(
            self.normalized(),
            Encoding::Utf16Le | Encoding::Utf16Be | Encoding::Utf32Le | Encoding::Utf32Be
        )
    }
}

/// A code unit: a byte, a UTF-16 unit or a UTF-32 unit.
pub(crate) trait Unit: Copy + Eq + Into<u32> + std::fmt::Debug + 'static {
    /// `units` as bytes when a unit is a byte, so scans can take the vectorised
    /// `memchr` paths; `None` for 16/32-bit units (scanned unit by unit).
    fn as_bytes(_units: &[Self]) -> Option<&[u8]> {
        None
    }
    /// Appends this unit's bytes to `out`, big-endian when `be`.
    fn push_bytes(self, be: bool, out: &mut Vec<u8>);
}
impl Unit for u8 {
    fn as_bytes(units: &[u8]) -> Option<&[u8]> {
        Some(units)
    }
    fn push_bytes(self, _be: bool, out: &mut Vec<u8>) {
        out.push(self);
    }
}
impl Unit for u16 {
    fn push_bytes(self, be: bool, out: &mut Vec<u8>) {
        out.extend_from_slice(&if be {
            self.to_be_bytes()
        } else {
            self.to_le_bytes()
        });
    }
}
impl Unit for u32 {
    fn push_bytes(self, be: bool, out: &mut Vec<u8>) {
        out.extend_from_slice(&if be {
            self.to_be_bytes()
        } else {
            self.to_le_bytes()
        });
    }
}

/// True for the units of `' '` and `'\t'` (indentation).
pub(crate) fn is_indent<U: Unit>(u: U) -> bool {
    let v: u32 = u.into();
    v == 0x20 || v == 0x09
}
