//! The long strings of a line, checked while the line still arrives: a
//! 5 MiB write's content crosses a pipe in a millisecond or two, a piece
//! at a time, and the reader waits between pieces. [`StringsAhead`] looks
//! at each piece as it comes and records every long string it finds valid,
//! by the scan's own rules (the same stops, the same escape checks, UTF-8);
//! [`crate::object_members_checked`] then steps over those strings instead
//! of reading them again. Outside strings JSON holds no `"` and no `\`, so
//! following the quotes from the line's first byte finds exactly the
//! strings a scan of the whole line finds; a string the scan reaches is
//! skipped only when it starts where a checked one does, so a line that is
//! not JSON at all is refused as before.

use crate::{blocks, escape_len, one_byte_escape};

/// Strings at least this long (quotes included) are recorded: a shorter
/// one costs the scan less than a lookup saves.
pub const CHECKED_MIN: usize = 16 * 1024;

/// A string found valid: its quotes' offsets in the line and whether it
/// holds an escape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CheckedString {
    /// The opening quote.
    pub(crate) start: usize,
    /// The closing quote.
    pub(crate) end: usize,
    /// Whether it holds an escape (what the scan reports of a string).
    pub(crate) escaped: bool,
}

/// The long strings of one line found valid, in order
/// ([`StringsAhead::finish`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked(pub(crate) Vec<CheckedString>);

impl Checked {
    /// No string checked ahead.
    pub const NONE: Checked = Checked(Vec::new());

    /// The number of strings checked ahead.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no string was checked ahead.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The string being read.
#[derive(Debug)]
struct Open {
    /// Its opening quote.
    start: usize,
    escaped: bool,
    /// Whether a byte that is not ASCII was seen (then its UTF-8 is
    /// checked at its end, as the scan does).
    wide: bool,
}

/// Follows one line's strings as its bytes arrive. [`StringsAhead::feed`]
/// is given the line so far each time more of it arrived (the same bytes
/// and more: a line only grows); it stops at the line's end (`\n`) and for
/// good at anything that makes the rest not worth following (a string the
/// scan would refuse: the scan refuses it again, without help).
#[derive(Debug, Default)]
pub struct StringsAhead {
    /// Bytes of the line looked at.
    pos: usize,
    open: Option<Open>,
    /// The line ended, or following it is given up.
    done: bool,
    checked: Vec<CheckedString>,
}

impl StringsAhead {
    /// Nothing of a line seen yet.
    pub fn new() -> Self {
        StringsAhead::default()
    }

    /// Looks at what arrived of the line since the last call: `line` is
    /// all of it so far.
    pub fn feed(&mut self, line: &[u8]) {
        while !self.done && self.pos < line.len() {
            match &mut self.open {
                None => match memchr::memchr2(b'"', b'\n', &line[self.pos..]) {
                    None => self.pos = line.len(),
                    Some(k) if line[self.pos + k] == b'\n' => self.done = true,
                    Some(k) => {
                        self.open = Some(Open {
                            start: self.pos + k,
                            escaped: false,
                            wide: false,
                        });
                        self.pos += k + 1;
                    }
                },
                Some(open) => {
                    let Some(stop) =
                        blocks::skip_string(line, self.pos, &mut open.wide, &mut open.escaped)
                    else {
                        self.pos = line.len();
                        break;
                    };
                    match line[stop] {
                        b'"' => {
                            let ok = !open.wide
                                || std::str::from_utf8(&line[open.start + 1..stop]).is_ok();
                            if ok && stop + 1 - open.start >= CHECKED_MIN {
                                self.checked.push(CheckedString {
                                    start: open.start,
                                    end: stop,
                                    escaped: open.escaped,
                                });
                            }
                            self.done = !ok;
                            self.open = None;
                            self.pos = stop + 1;
                        }
                        b'\\' => {
                            open.escaped = true;
                            let len = match line.get(stop + 1) {
                                Some(&e) if one_byte_escape(e).is_some() => Some(2),
                                _ => escape_len(&line[stop..]),
                            };
                            match len {
                                Some(len) => self.pos = stop + len,
                                // Perhaps only cut: the longest escape is 12
                                // bytes, and a `\n` ends the line.
                                None if line.len() - stop < 12
                                    && memchr::memchr(b'\n', &line[stop..]).is_none() =>
                                {
                                    self.pos = stop;
                                    break;
                                }
                                None => self.done = true,
                            }
                        }
                        // A raw control character (a `\n` ends the line).
                        _ => self.done = true,
                    }
                }
            }
        }
    }

    /// The long strings found valid.
    pub fn finish(self) -> Checked {
        Checked(self.checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{object_members_at, object_members_checked};
    use proptest::prelude::*;

    fn ahead(line: &[u8], cuts: &[usize]) -> Checked {
        let mut a = StringsAhead::new();
        let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(line.len())).collect();
        cuts.sort_unstable();
        for c in cuts {
            a.feed(&line[..c]);
        }
        a.feed(line);
        a.finish()
    }

    #[test]
    fn long_strings_are_found_wherever_the_line_is_cut() {
        let long = "é\\n\\\"x\\ud83d\\ude00".repeat(CHECKED_MIN / 8);
        let line = format!(r#"{{"a":"short","b":{{"c":"{long}"}},"d":["{long}"]}}"#);
        let whole = ahead(line.as_bytes(), &[]);
        assert_eq!(whole.len(), 2);
        for cut in (0..line.len()).step_by(97) {
            assert_eq!(
                ahead(line.as_bytes(), &[cut, cut + 5, cut + 11]),
                whole,
                "{cut}"
            );
        }
        assert_eq!(
            object_members_checked(line.as_bytes(), &["b"], &whole),
            object_members_at(line.as_bytes(), &["b"])
        );
    }

    #[test]
    fn an_invalid_long_string_is_not_recorded() {
        let long = "x".repeat(CHECKED_MIN);
        for bad in [&b"\\q"[..], b"\\ud800x", b"\x01", b"\xff"] {
            let line = [br#"{"a":""#.as_slice(), long.as_bytes(), bad, br#""}"#].concat();
            assert!(ahead(&line, &[CHECKED_MIN / 2]).is_empty(), "{bad:?}");
            assert_eq!(object_members_checked(&line, &[], &ahead(&line, &[])), None);
        }
    }

    /// A line of JSON-ish pieces: strings long and short (with escapes and
    /// characters of every width, valid or not), structure, and the bytes
    /// that end or break a line.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let long = "x".repeat(CHECKED_MIN);
        let piece = prop_oneof![
            Just(b"{".to_vec()),
            Just(b"}".to_vec()),
            Just(b"[".to_vec()),
            Just(b"]".to_vec()),
            Just(b",".to_vec()),
            Just(b":".to_vec()),
            Just(b"1".to_vec()),
            Just(b"\"".to_vec()),
            Just(b"\\".to_vec()),
            Just(b"\\n".to_vec()),
            Just(b"\\u00e9".to_vec()),
            Just(b"\\ud83d\\ude00".to_vec()),
            Just(b"\\ud83d".to_vec()),
            Just("é".as_bytes().to_vec()),
            Just(vec![0xC3]),
            Just(vec![0x01]),
            Just(b"\n".to_vec()),
            Just(b"\"k\":".to_vec()),
            Just(long.clone().into_bytes()),
            Just(format!("\"{long}\"").into_bytes()),
            Just(format!("{{\"k\":\"{long}é\\n\"}}").into_bytes()),
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|p| p.concat())
    }

    proptest! {
        /// With the strings checked ahead, the scan of a line (up to its
        /// first `\n`, where the reader cuts it) finds exactly what it finds
        /// alone, however the line arrived.
        #[test]
        fn the_scan_with_checked_strings_is_the_scan(
            text in line(),
            cuts in proptest::collection::vec(0usize..3 * CHECKED_MIN, 0..5),
        ) {
            let checked = ahead(&text, &cuts);
            let line = &text[..memchr::memchr(b'\n', &text).unwrap_or(text.len())];
            let objects = [line.to_vec(), [b"{\"w\":".as_slice(), line, b"}"].concat()];
            for l in &objects {
                let checked = if l.len() == line.len() { checked.clone() } else { ahead(l, &cuts) };
                prop_assert_eq!(
                    object_members_checked(l, &["k"], &checked),
                    object_members_at(l, &["k"])
                );
            }
        }
    }
}
