//! A strict scan of JSON text that finds an object's members without
//! building anything, and decoders for one JSON string (copied, or in the
//! text's own memory): how the front ends read a request line without a
//! `serde_json::Value` and without a second pass over a whole file in it
//! (ADR 0004). The ACP front end reads every request and
//! notification with it, the MCP front end its `tools/call` lines. Both
//! read the id of a request `serde_json` refuses for a lone surrogate
//! escape through [`surrogate_escapes_replaced`].
//!
//! It must never accept text that `serde_json` would parse differently or
//! refuse, never allocate per byte, and never know any protocol: it finds
//! members and decodes strings, and the front ends decide what they mean.
//!
//! The scan accepts only a subset of JSON that `serde_json` certainly
//! parses the same way: valid UTF-8; integers of at most 18 digits (a
//! fraction, an exponent or a longer number is left to `serde_json`, which
//! refuses some of them as out of range); at most [`MAX_DEPTH`] levels of
//! nesting; string escapes whose `\u` surrogates come in pairs; no raw
//! control characters in strings. Whatever falls outside (`None`) goes
//! through `serde_json`'s own parse, so every answer stays exactly what it
//! was.

use std::ops::Range;

mod ahead;
mod blocks;
mod write;

pub use ahead::{CHECKED_MIN, Checked, StringsAhead};
pub use write::{push_escaped, push_numbered_escaped, push_string};

/// Deepest nesting the scan follows (`serde_json` allows 128).
pub const MAX_DEPTH: usize = 64;

/// One member of an object: the key's text (between its quotes, with no
/// escape in it) and the value's span, both as byte ranges of the scanned
/// text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The key's text, between its quotes.
    pub key: Range<usize>,
    /// The value's JSON text.
    pub value: Range<usize>,
}

/// The members of the JSON object that is all of `text` (whitespace around
/// it allowed), in order, after checking that `text` is valid UTF-8 and
/// every value in it is in the scan's subset (see the module doc). `None`
/// for anything else, a key with an escape in it included.
pub fn object_members(text: &[u8]) -> Option<Vec<Member>> {
    object_members_at(text, &[]).map(|(members, _)| members)
}

/// The members [`object_members_at`] found down its path, one entry per
/// name.
pub type Found = Vec<Option<Vec<Member>>>;

/// [`object_members`], plus the members of the objects down a path of
/// member names, found in the same pass: `path[0]` names a member of the
/// top-level object, `path[1]` a member of that member's object, and so on.
/// The result has one entry per name: the members of the object held by
/// the first member of that name whose value is an object, or `None` where
/// no member of that name holds an object (and then for the rest of the
/// path). A request's `params` hold a whole file, which is then scanned
/// once, not twice.
pub fn object_members_at(text: &[u8], path: &[&str]) -> Option<(Vec<Member>, Found)> {
    object_members_checked(text, path, &Checked::NONE)
}

/// [`object_members_at`] of a line whose long strings were checked while
/// it arrived ([`StringsAhead`]): the scan steps over each string that
/// starts where a checked one starts. The result is
/// [`object_members_at`]'s.
pub fn object_members_checked(
    text: &[u8],
    path: &[&str],
    checked: &Checked,
) -> Option<(Vec<Member>, Found)> {
    // UTF-8 is checked string by string (see `Scanner::string`).
    let mut s = Scanner {
        b: text,
        i: 0,
        path,
        found: vec![None; path.len()],
        checked: &checked.0,
    };
    let mut members = Vec::new();
    s.ws();
    s.object(1, Some(&mut members))?;
    s.ws();
    if s.i != text.len() {
        return None;
    }
    Some((members, s.found))
}

/// The first member named `key` and whether another one has that name.
pub fn find<'m>(text: &[u8], members: &'m [Member], key: &str) -> Lookup<'m> {
    let mut hits = members
        .iter()
        .filter(|m| &text[m.key.clone()] == key.as_bytes());
    match (hits.next(), hits.next()) {
        (None, _) => Lookup::Absent,
        (Some(m), None) => Lookup::One(m),
        (Some(_), Some(_)) => Lookup::Repeated,
    }
}

/// What [`find`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<'m> {
    /// No member has the name.
    Absent,
    /// Exactly one.
    One(&'m Member),
    /// Several (`serde_json` keeps the last in a map but refuses a
    /// duplicate struct field: left to it).
    Repeated,
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    /// Member names whose objects' members are kept too, one per level
    /// below the top, and those members once found (see
    /// [`object_members_at`]).
    path: &'a [&'a str],
    found: Vec<Option<Vec<Member>>>,
    /// The long strings checked ahead not yet passed, in order.
    checked: &'a [ahead::CheckedString],
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(depth + 1, None),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.integer(),
            _ => None,
        }
    }

    /// An object; its members go to `out` when given (keys without
    /// escapes only).
    fn object(&mut self, depth: usize, mut out: Option<&mut Vec<Member>>) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            let start = self.i;
            let escaped = self.string()?;
            let key = start + 1..self.i - 1;
            self.ws();
            self.eat(b':')?;
            self.ws();
            let vstart = self.i;
            // A member on the path whose object's members are wanted too:
            // only inside an object whose own members are kept (the path
            // so far), at its level, and the first member of that name.
            let level = depth - 1;
            if out.is_some()
                && self
                    .path
                    .get(level)
                    .is_some_and(|name| self.b[key.clone()] == *name.as_bytes())
                && self.found[level].is_none()
                && self.peek() == Some(b'{')
            {
                let mut inner = Vec::new();
                self.object(depth + 1, Some(&mut inner))?;
                self.found[level] = Some(inner);
            } else {
                self.value(depth)?;
            }
            if let Some(out) = out.as_deref_mut() {
                if escaped {
                    return None;
                }
                out.push(Member {
                    key,
                    value: vstart..self.i,
                });
            }
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'[')?;
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            self.value(depth)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string; returns whether it holds an escape. The position ends
    /// after its closing quote.
    fn string(&mut self) -> Option<bool> {
        // A string checked while the line arrived: the same checks were
        // made of the same bytes.
        while let Some((c, rest)) = self.checked.split_first() {
            if c.start > self.i {
                break;
            }
            self.checked = rest;
            if c.start == self.i && c.end < self.b.len() {
                self.i = c.end + 1;
                return Some(c.escaped);
            }
        }
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        // Whether a byte that is not ASCII was seen (perhaps past the end).
        let mut wide = false;
        loop {
            self.i = blocks::skip_string(self.b, self.i, &mut wide, &mut escaped)?;
            match self.b[self.i] {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    // The escapes of text (`\n` above all) first, without a call.
                    self.i += match self.b.get(self.i + 1) {
                        Some(&e) if one_byte_escape(e).is_some() => 2,
                        _ => escape_len(&self.b[self.i..])?,
                    };
                }
                // A raw control character (escapes hold none).
                _ => return None,
            }
        }
        // Outside strings the scan accepts ASCII only, so the text is valid
        // UTF-8 exactly when every string is: only a string holding other
        // bytes is checked.
        if wide && std::str::from_utf8(&self.b[start..self.i]).is_err() {
            return None;
        }
        self.i += 1;
        Some(escaped)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// `-?(0|[1-9][0-9]*)` with at most 18 digits, not followed by a
    /// fraction or an exponent.
    fn integer(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let digits = self.i - start;
        if digits == 0 || digits > 18 || (digits > 1 && self.b[start] == b'0') {
            return None;
        }
        match self.peek() {
            Some(b'.' | b'e' | b'E') => None,
            _ => Some(()),
        }
    }
}

/// The length of the escape at the start of `b` (which starts with `\`):
/// 2, 6, or 12 for a surrogate pair. `None` for an invalid escape or a
/// lone surrogate.
fn escape_len(b: &[u8]) -> Option<usize> {
    match *b.get(1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(2),
        b'u' => match hex4(b.get(2..6)?)? {
            0xD800..=0xDBFF => {
                if b.get(6..8)? != b"\\u" {
                    return None;
                }
                (0xDC00..=0xDFFF)
                    .contains(&hex4(b.get(8..12)?)?)
                    .then_some(12)
            }
            0xDC00..=0xDFFF => None,
            _ => Some(6),
        },
        _ => None,
    }
}

fn hex4(b: &[u8]) -> Option<u32> {
    b.iter().try_fold(0u32, |acc, &c| {
        let d = char::from(c).to_digit(16)?;
        Some(acc * 16 + d)
    })
}

/// `text` with every `\uD800`-`\uDFFF` escape (a surrogate, paired or
/// lone) replaced by `\uFFFD`; `None` when `text` is not UTF-8 or holds no
/// such escape. `serde_json` refuses a line with a lone surrogate escape
/// although it is JSON by RFC 8259; the front ends parse the replaced text
/// only to read the request's id, and refuse the request itself (SPEC 9: the
/// content is not valid Unicode).
pub fn surrogate_escapes_replaced(text: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(text).ok()?;
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut replaced = false;
    let mut i = 0;
    while let Some(run) = memchr::memchr(b'\\', &bytes[i..]) {
        out.push_str(&text[i..i + run]);
        i += run;
        let hex = text
            .get(i + 2..i + 6)
            .filter(|_| bytes.get(i + 1) == Some(&b'u'));
        let code = hex.and_then(|h| u32::from_str_radix(h, 16).ok());
        if code.is_some_and(|c| (0xD800..=0xDFFF).contains(&c)) {
            out.push_str("\\uFFFD");
            replaced = true;
            i += 6;
        } else {
            // Any other escape (or a stray `\` at the end) is copied as
            // it is, with the character after the backslash.
            let next = text[i + 1..].chars().next().map_or(0, char::len_utf8);
            out.push_str(&text[i..=i + next]);
            i += 1 + next;
        }
    }
    out.push_str(&text[i..]);
    replaced.then_some(out)
}

/// Decodes the JSON string `raw` (with its quotes), which the scan
/// accepted: its escapes are valid and its surrogates paired. `None` if it
/// is not such a string after all.
pub fn unescape(raw: &str) -> Option<String> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let bytes = inner.as_bytes();
    let mut out = String::with_capacity(inner.len());
    let mut i = 0;
    while let Some(run) = memchr::memchr(b'\\', &bytes[i..]) {
        out.push_str(inner.get(i..i + run)?);
        i += run;
        let len = escape_len(&bytes[i..])?;
        out.push(escaped_char(&bytes[i..i + len])?);
        i += len;
    }
    out.push_str(inner.get(i..)?);
    Some(out)
}

/// [`unescape`] of the JSON string at `v[span]` (with its quotes, accepted
/// by the scan) done in place: the decoded text moves to the start of `v`
/// and `v` is cut to it (decoding never lengthens a string: each escape is
/// at least as long as its character's UTF-8). `None` if an escape is not
/// valid after all (then `v` holds part of the text).
pub fn unescape_in_place(v: &mut Vec<u8>, span: Range<usize>) -> Option<()> {
    unescape_moving(v, span).map(|_| ())
}

/// [`unescape_in_place`] of the JSON string at `v[span]`, and `v` made the
/// decoded string. `None` if an escape is not valid or the text is not
/// UTF-8. Text that stayed ASCII (source code, mostly) is known to be
/// UTF-8 from the decoding itself, without a second pass over it.
pub fn unescape_to_string(mut v: Vec<u8>, span: Range<usize>) -> Option<String> {
    if unescape_moving(&mut v, span)? {
        // SAFETY: every byte of `v` is ASCII (`unescape_moving` saw each
        // byte it kept, and every escape it decoded to ASCII), and ASCII
        // is UTF-8.
        Some(unsafe { String::from_utf8_unchecked(v) })
    } else {
        String::from_utf8(v).ok()
    }
}

/// [`unescape_in_place`]; `Some(true)` when every byte of the decoded
/// text is ASCII (`false` may also mean only that a byte past an escape,
/// since overwritten, was not).
fn unescape_moving(v: &mut Vec<u8>, span: Range<usize>) -> Option<bool> {
    if span.len() < 2 || v.get(span.start) != Some(&b'"') || v.get(span.end - 1) != Some(&b'"') {
        return None;
    }
    let end = span.end - 1;
    let (mut r, mut w) = (span.start + 1, 0);
    let mut ascii = true;
    loop {
        // Once the text before `r` has room for a block, runs move a block
        // at a time (see `blocks::move_runs`).
        if r - w >= 16 {
            let moved;
            (r, w, moved) = blocks::move_runs(v, r, w, end);
            ascii &= moved;
        }
        let Some(run) = memchr::memchr(b'\\', &v[r..end]) else {
            break;
        };
        ascii &= v[r..r + run].is_ascii();
        v.copy_within(r..r + run, w);
        w += run;
        r += run;
        // A one-byte character (`\n` above all) is written as it is.
        if let Some(b) = v.get(r + 1).and_then(|&e| one_byte_escape(e)) {
            v[w] = b;
            w += 1;
            r += 2;
            continue;
        }
        let len = escape_len(&v[r..end])?;
        let c = escaped_char(&v[r..r + len])?;
        ascii &= c.is_ascii();
        let mut utf8 = [0; 4];
        let bytes = c.encode_utf8(&mut utf8).as_bytes();
        v[w..w + bytes.len()].copy_from_slice(bytes);
        w += bytes.len();
        r += len;
    }
    ascii &= v[r..end].is_ascii();
    v.copy_within(r..end, w);
    v.truncate(w + end - r);
    Some(ascii)
}

/// The byte a two-character escape `\e` stands for (`n` is a line break);
/// `None` for `u` and anything that is no escape.
#[inline]
pub(crate) fn one_byte_escape(e: u8) -> Option<u8> {
    match e {
        b'n' => Some(b'\n'),
        b'"' => Some(b'"'),
        b'\\' => Some(b'\\'),
        b'/' => Some(b'/'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'b' => Some(8),
        b'f' => Some(12),
        _ => None,
    }
}

/// The character of one escape (`escape_len` long).
fn escaped_char(e: &[u8]) -> Option<char> {
    Some(match *e.get(1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => {
            let hi = hex4(e.get(2..6)?)?;
            let cp = if e.len() == 12 {
                let lo = hex4(e.get(8..12)?)?;
                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
            } else {
                hi
            };
            char::from_u32(cp)?
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::Value;

    /// Bytes that are not UTF-8 are refused whether they sit in a block
    /// moved whole, in a short run or at the end, and text that is not
    /// ASCII but UTF-8 decodes.
    #[test]
    fn unescape_to_string_checks_utf8_it_has_not_seen_to_be_ascii() {
        let long = "x".repeat(40);
        for (inner, want) in [
            (b"\xff".to_vec(), None),
            (
                [long.as_bytes(), b"\\n\xff", long.as_bytes()].concat(),
                None,
            ),
            (
                [b"\\n".repeat(20).as_slice(), b"\xc3", long.as_bytes()].concat(),
                None,
            ),
            (
                [long.as_bytes(), b"\\n", long.as_bytes(), b"\xe9"].concat(),
                None,
            ),
            (
                [long.as_bytes(), b"\\n\xc3\xa9\\u00e9", long.as_bytes()].concat(),
                Some(format!("{long}\néé{long}")),
            ),
            (b"a\\u00e9\\n".to_vec(), Some("aé\n".to_string())),
            (
                [long.as_bytes(), b"\\t"].concat(),
                Some(format!("{long}\t")),
            ),
        ] {
            let v = [b"\"".as_slice(), &inner, b"\""].concat();
            let span = 0..v.len();
            assert_eq!(unescape_to_string(v, span), want, "{inner:?}");
        }
    }

    #[test]
    fn surrogate_escapes_are_replaced_and_nothing_else() {
        let r = |t: &str| surrogate_escapes_replaced(t.as_bytes());
        assert_eq!(
            r(r#"{"a":"x\ud83d y"}"#).as_deref(),
            Some(r#"{"a":"x\uFFFD y"}"#)
        );
        assert_eq!(
            r(r#"["\ud83d\ude00","\uDC00é\n"]"#).as_deref(),
            Some(r#"["\uFFFD\uFFFD","\uFFFDé\n"]"#)
        );
        // An escaped backslash before `u` is not an escape of a code unit.
        assert_eq!(r(r#"["\\ud800"]"#), None);
        assert_eq!(r(r#"["\\\ud800"]"#).as_deref(), Some(r#"["\\\uFFFD"]"#));
        assert_eq!(r(r#"["\u00e9","\/"]"#), None);
        assert_eq!(r("[\"\\"), None);
        assert_eq!(surrogate_escapes_replaced(b"\"\\ud800\xff\""), None);
    }

    fn keys(text: &str) -> Option<Vec<(String, String)>> {
        let m = object_members(text.as_bytes())?;
        Some(
            m.into_iter()
                .map(|m| (text[m.key].to_string(), text[m.value].to_string()))
                .collect(),
        )
    }

    #[test]
    fn members_and_spans() {
        assert_eq!(
            keys(r#" {"a": 1, "b" :{"c":[true,false,null,"x\"y"]},"e":-0} "#).unwrap(),
            vec![
                ("a".into(), "1".into()),
                ("b".into(), r#"{"c":[true,false,null,"x\"y"]}"#.into()),
                ("e".into(), "-0".into()),
            ]
        );
        assert_eq!(keys("{}").unwrap(), vec![]);
    }

    #[test]
    fn outside_the_subset_is_none() {
        for bad in [
            "",
            "[]",
            "{",
            r#"{"a":1,}"#,
            r#"{"a":1}x"#,
            r#"{"a":01}"#,
            r#"{"a":1.5}"#,
            r#"{"a":1e5}"#,
            r#"{"a":1234567890123456789}"#,
            r#"{"a":-}"#,
            r#"{"a":tru}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00\ud800"}"#,
            r#"{"a":"\ud800\u0041"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a\u0062":1}"#,
            r#"{"a" 1}"#,
        ] {
            assert_eq!(keys(bad), None, "{bad}");
        }
        let deep = format!(
            "{{\"a\":{}{}}}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert_eq!(keys(&deep), None);
        let ok = format!(
            "{{\"a\":{}{}}}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(keys(&ok).is_some());
        assert_eq!(object_members(b"{\"a\":\"\xff\"}"), None);
    }

    /// Whatever the scan accepts, `serde_json` parses too, and every string
    /// decodes to what `serde_json` makes of it.
    #[test]
    fn accepted_text_parses_the_same_with_serde() {
        let strings = [
            r#""""#,
            r#""plain""#,
            r#""a\nb\r\n\tc\\d\"e\/f\b\f""#,
            r#""\u00e9\u20AC\ud83d\ude00 é €""#,
            r#""\u0000x""#,
        ];
        for s in strings {
            let doc = format!(r#"{{"k":{s},"n":[1,-2,0,{{}},[]],"z":null}}"#);
            let m = object_members(doc.as_bytes()).expect("accepted");
            let v: Value = serde_json::from_str(&doc).unwrap();
            let raw = &doc[m[0].value.clone()];
            assert_eq!(unescape(raw).as_deref(), v["k"].as_str(), "{s}");
        }
    }

    #[test]
    fn find_reports_repeats() {
        let text = br#"{"a":1,"b":2,"a":3}"#;
        let m = object_members(text).unwrap();
        assert_eq!(find(text, &m, "a"), Lookup::Repeated);
        assert!(matches!(find(text, &m, "b"), Lookup::One(_)));
        assert_eq!(find(text, &m, "c"), Lookup::Absent);
    }

    fn token() -> impl proptest::strategy::Strategy<Value = &'static str> {
        proptest::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            " ",
            "\"",
            "\"k\"",
            "\"a\\nb\"",
            "\\",
            "\\u00e9",
            "\\ud83d\\ude00",
            "\\ud800",
            "\\x",
            "0",
            "-1",
            "12",
            "01",
            "1.5",
            "2e3",
            "true",
            "null",
            "fals",
            "é",
            "\t",
            "\u{1}",
            "x",
        ])
    }

    fn object() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-1_000_000_000_000i64..1_000_000_000_000).prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
            "[\"\\\\/\n\r\t\u{8}\u{c}\u{0}\u{1f}é😀a]{0,8}".prop_map(Value::from),
        ];
        let value = leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-z_]{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        proptest::collection::btree_map("[a-zA-Z_]{0,6}", value, 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4000, ..Default::default() })]

        /// Text the scan accepts is an object serde_json parses, with the
        /// same members in order and every string member decoded alike.
        #[test]
        fn the_scan_accepts_only_what_serde_parses_alike(
            parts in proptest::collection::vec(token(), 0..24),
        ) {
            let text = format!("{{{}}}", parts.concat());
            if let Some(members) = object_members(text.as_bytes()) {
                let v: Value = serde_json::from_str(&text).expect("serde refuses what the scan accepted");
                let obj = v.as_object().unwrap();
                // No repeated keys in what we compare (serde keeps the last).
                let mut names: Vec<&str> = members.iter().map(|m| &text[m.key.clone()]).collect();
                names.sort_unstable();
                names.dedup();
                if names.len() == members.len() {
                    proptest::prop_assert_eq!(obj.len(), members.len());
                    for m in &members {
                        let raw = &text[m.value.clone()];
                        let theirs = &obj[&text[m.key.clone()]];
                        let ours: Value = serde_json::from_str(raw).unwrap();
                        proptest::prop_assert_eq!(&ours, theirs);
                        if let Some(s) = theirs.as_str() {
                            let decoded = unescape(raw);
                            proptest::prop_assert_eq!(decoded.as_deref(), Some(s));
                        }
                    }
                }
            }
        }

        /// Objects serde_json writes (compact or pretty) are accepted when
        /// their numbers are small integers, with the members serde sees.
        #[test]
        fn serde_written_objects_are_accepted(v in object(), pretty in proptest::bool::ANY) {
            let text = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            let members = object_members(text.as_bytes()).expect("accepted");
            let obj = v.as_object().unwrap();
            proptest::prop_assert_eq!(members.len(), obj.len());
            for m in &members {
                let ours: Value = serde_json::from_str(&text[m.value.clone()]).unwrap();
                proptest::prop_assert_eq!(&ours, &obj[&text[m.key.clone()]]);
            }
        }

        /// The members of `params` found in the line's one pass are the
        /// members a scan of the params object alone finds (shifted to
        /// line offsets), and the line's own members are unchanged.
        #[test]
        fn nested_members_match_a_scan_of_the_nested_object(
            v in object(),
            lead in "[a-z]{0,3}",
            pretty in proptest::bool::ANY,
        ) {
            let inner = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            let prefix = format!("{{\"{lead}\":1, \"params\" : ");
            let doc = format!("{prefix}{inner} }}");
            let (top, mut found) = object_members_at(doc.as_bytes(), &["params"]).expect("accepted");
            let nested = found.pop().unwrap();
            proptest::prop_assert_eq!(&top, &object_members(doc.as_bytes()).unwrap());
            let alone = object_members(inner.as_bytes()).unwrap();
            let shift = prefix.len();
            let shifted: Vec<Member> = alone
                .into_iter()
                .map(|m| Member {
                    key: m.key.start + shift..m.key.end + shift,
                    value: m.value.start + shift..m.value.end + shift,
                })
                .collect();
            proptest::prop_assert_eq!(nested, Some(shifted));
            // Not an object, or no name asked for: no nested members.
            let (_, none) = object_members_at(br#"{"params":[1]}"#, &["params"]).unwrap();
            proptest::prop_assert_eq!(none, vec![None]);
            let (_, none) = object_members_at(doc.as_bytes(), &[]).unwrap();
            proptest::prop_assert!(none.is_empty());
        }

        /// UTF-8 is checked string by string: a text with a byte of a
        /// multi-byte sequence put anywhere is accepted only when it is
        /// still valid UTF-8 and serde parses it.
        #[test]
        fn utf8_is_checked_in_every_string(
            v in object(),
            at in proptest::num::usize::ANY,
            byte in 0x80u8..=0xff,
        ) {
            let mut text = serde_json::to_vec(&v).unwrap();
            let at = at % text.len();
            text[at] = byte;
            if object_members(&text).is_some() {
                proptest::prop_assert!(std::str::from_utf8(&text).is_ok());
                proptest::prop_assert!(serde_json::from_slice::<Value>(&text).is_ok());
            }
        }

        /// Two levels down a path: the members of `params` and of
        /// `params.arguments` are those of scanning each object alone.
        #[test]
        fn a_path_of_two_names_finds_both_levels(v in object(), pretty in proptest::bool::ANY) {
            let args = if pretty {
                serde_json::to_string_pretty(&v).unwrap()
            } else {
                serde_json::to_string(&v).unwrap()
            };
            let params = format!("{{\"name\":\"t\",\"arguments\":{args}}}");
            let doc = format!("{{\"id\":1,\"params\":{params}}}");
            let (_, found) = object_members_at(doc.as_bytes(), &["params", "arguments"]).expect("accepted");
            let shift = |m: Member, by: usize| Member {
                key: m.key.start + by..m.key.end + by,
                value: m.value.start + by..m.value.end + by,
            };
            let at_params = doc.find("{\"name\"").unwrap();
            let want_params: Vec<Member> = object_members(params.as_bytes())
                .unwrap()
                .into_iter()
                .map(|m| shift(m, at_params))
                .collect();
            let at_args = at_params + params.find("\"arguments\":").unwrap() + "\"arguments\":".len();
            let want_args: Vec<Member> = object_members(args.as_bytes())
                .unwrap()
                .into_iter()
                .map(|m| shift(m, at_args))
                .collect();
            proptest::prop_assert_eq!(found, vec![Some(want_params), Some(want_args)]);
        }

        /// Any JSON string serde_json writes is accepted and decoded back,
        /// copied or in place.
        #[test]
        fn strings_round_trip(s in "\\PC*", lead in "[a-z]{0,3}") {
            let doc = format!("{{\"{lead}\":{}}}", serde_json::to_string(&s).unwrap());
            let m = object_members(doc.as_bytes()).expect("accepted");
            let span = m[0].value.clone();
            proptest::prop_assert_eq!(unescape(&doc[span.clone()]), Some(s.clone()));
            let mut v = doc.into_bytes();
            proptest::prop_assert_eq!(unescape_to_string(v.clone(), span.clone()), Some(s.clone()));
            proptest::prop_assert_eq!(unescape_in_place(&mut v, span), Some(()));
            proptest::prop_assert_eq!(String::from_utf8(v).ok(), Some(s));
        }
    }
}
