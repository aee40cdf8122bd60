//! The format of a file learned a piece at a time, without holding it:
//! for the files whose format needs no second look at their bytes. A
//! whole-file write of a large file needs only its format (SPEC 9), and
//! most files are UTF-8 without a BOM and without a `\r`; for those the
//! format is the file's UTF-8 validity and whether it holds a `\n`, which a
//! scan of each piece as it is read decides. Any other file (a BOM, a
//! `\r`, bytes that are not UTF-8) makes the skim give up, and the caller
//! reads the file whole and calls [`crate::detect`], which decides the
//! rest (legacy encodings, UTF-16, the dominant of mixed endings).

use crate::format::{Encoding, Format};
use crate::lines::Ending;

/// The UTF-8 BOM: a file starting with it is left to [`crate::detect`].
const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// An incremental [`crate::detect`] for UTF-8 text with no BOM and no
/// `\r`: [`FormatSkim::feed`] takes the file's bytes in order, in pieces
/// of any size, and [`FormatSkim::finish`] gives the format `detect` gives
/// for all of them, or `None` when the file is not such text.
#[derive(Debug, Default)]
pub struct FormatSkim {
    /// The file's first bytes until three were seen (a BOM is decided by
    /// them).
    lead: Vec<u8>,
    /// The start of a character cut at the end of the last piece.
    carry: Vec<u8>,
    /// Whether a `\n` was seen.
    lf: bool,
    /// The text is not what a skim decides.
    gave_up: bool,
}

impl FormatSkim {
    /// A skim of no bytes yet.
    pub fn new() -> Self {
        FormatSkim::default()
    }

    /// The next piece of the file. `false` once the file is not UTF-8
    /// without a BOM and without a `\r` (then the rest need not be read).
    pub fn feed(&mut self, piece: &[u8]) -> bool {
        if self.gave_up {
            return false;
        }
        if self.lead.len() < UTF8_BOM.len() {
            let take = (UTF8_BOM.len() - self.lead.len()).min(piece.len());
            self.lead.extend_from_slice(&piece[..take]);
            if self.lead == UTF8_BOM {
                return self.give_up();
            }
        }
        if memchr::memchr(b'\r', piece).is_some() {
            return self.give_up();
        }
        let mut rest = piece;
        if !self.carry.is_empty() {
            // Complete the character the last piece cut (its lead byte
            // says how long it is; an incomplete one was valid so far).
            let need = char_len(self.carry[0]) - self.carry.len();
            let take = need.min(rest.len());
            self.carry.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if take < need {
                return true;
            }
            if std::str::from_utf8(&self.carry).is_err() {
                return self.give_up();
            }
            self.carry.clear();
        }
        match std::str::from_utf8(rest) {
            Ok(_) => {}
            // A character cut at the end: valid so far, completed by the
            // next piece (or not, and then `finish` gives up).
            Err(e) if e.error_len().is_none() => {
                self.carry.extend_from_slice(&rest[e.valid_up_to()..]);
            }
            Err(_) => return self.give_up(),
        }
        self.lf = self.lf || memchr::memchr(b'\n', piece).is_some();
        true
    }

    /// The format of every byte fed: `detect`'s, or `None` when the skim
    /// cannot tell it (see the module doc).
    pub fn finish(self) -> Option<Format> {
        if self.gave_up || !self.carry.is_empty() {
            return None;
        }
        Some(Format {
            encoding: Encoding::Utf8,
            bom: false,
            dominant: self.lf.then_some(Ending::Lf),
        })
    }

    fn give_up(&mut self) -> bool {
        self.gave_up = true;
        false
    }
}

/// The length of the UTF-8 character a lead byte starts; only called on
/// the first byte of a cut character, which `from_utf8` found valid so far
/// (so it is a lead byte of a 2-, 3- or 4-byte character).
fn char_len(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn skim(pieces: &[&[u8]]) -> Option<Format> {
        let mut s = FormatSkim::new();
        for p in pieces {
            if !s.feed(p) {
                return None;
            }
        }
        s.finish()
    }

    #[test]
    fn gives_up_on_what_needs_a_whole_look() {
        for text in [
            &b"a\r\nb\n"[..],
            b"a\rb",
            b"\xEF\xBB\xBFa\n",
            b"\xFF\xFEa\x00",
            b"caf\xE9\n",
            b"cut \xC3",
        ] {
            assert_eq!(skim(&[text]), None, "{text:?}");
        }
        // The BOM's bytes cut across pieces.
        assert_eq!(skim(&[b"\xEF", b"\xBB", b"\xBFa"]), None);
        assert_eq!(skim(&[b"\xEF\xBB", b"\xBF"]), None);
    }

    #[test]
    fn knows_plain_utf8() {
        let lf = Format {
            encoding: Encoding::Utf8,
            bom: false,
            dominant: Some(Ending::Lf),
        };
        assert_eq!(skim(&[b"caf\xC3", b"\xA9\n"]), Some(lf));
        assert_eq!(skim(&[b"x\xF0\x9F", b"", b"\x98", b"\x80\ny"]), Some(lf));
        assert_eq!(skim(&[]), Some(Format::NEW_FILE));
        assert_eq!(skim(&[b"no break"]), Some(Format::NEW_FILE));
    }

    /// Bytes of the kinds the format turns on: ASCII, line breaks, a BOM's
    /// bytes, and pieces of multi-byte characters (whole or cut).
    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        let unit = prop_oneof![
            Just(vec![b'a']),
            Just(vec![b'\n']),
            Just(vec![b'\r']),
            Just(vec![0xEF, 0xBB, 0xBF]),
            Just("é".as_bytes().to_vec()),
            Just("€".as_bytes().to_vec()),
            Just("😀".as_bytes().to_vec()),
            Just(vec![0xE2, 0x82]),
            Just(vec![0xF0]),
            Just(vec![0x80]),
            Just(vec![0xE9]),
            Just(vec![0xFF, 0xFE]),
            Just(vec![0]),
        ];
        proptest::collection::vec(unit, 0..24).prop_map(|u| u.concat())
    }

    proptest! {
        /// Whenever the skim answers, `detect` of the whole bytes gives the
        /// same format; it gives up only on a BOM, a `\r` or bytes that
        /// are not UTF-8; and where it is cut does not matter.
        #[test]
        fn agrees_with_detect_wherever_the_pieces_are_cut(
            text in bytes(),
            cuts in proptest::collection::vec(0usize..64, 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in cuts {
                pieces.push(&text[at..c]);
                at = c;
            }
            pieces.push(&text[at..]);
            let got = skim(&pieces);
            let plain = std::str::from_utf8(&text).is_ok()
                && !text.contains(&b'\r')
                && !text.starts_with(&UTF8_BOM);
            prop_assert_eq!(got.is_some(), plain);
            if let Some(f) = got {
                prop_assert_eq!(Some(f), crate::detect(&text).ok());
            }
            prop_assert_eq!(got, skim(&[&text]));
        }
    }
}
