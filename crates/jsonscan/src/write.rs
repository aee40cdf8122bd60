//! Writing one JSON string, byte for byte as `serde_json` writes it, fast
//! for long text: the answer to a 5 MiB read is mostly one string.
//!
//! `serde_json` looks every byte up in a table; this tests 16 bytes at a
//! time with a check the compiler vectorises and looks at single bytes only
//! in a block that holds something to escape. A 5 MiB text of 70-byte
//! lines: 2.8 ms against 8.6 ms for `serde_json::to_vec`
//! (docs/decisions/0022-large-reads-and-writes.md).

/// Bytes tested together for anything to escape.
const BLOCK: usize = 16;

/// Whether `serde_json` escapes the byte: `"`, `\` and the control
/// characters below U+0020 (nothing else: not `/`, not U+007F).
#[inline]
fn escaped(c: u8) -> bool {
    c < 0x20 || c == b'"' || c == b'\\'
}

/// Appends the escape of `c` (one for which [`escaped`] holds) as
/// `serde_json` writes it: the two-character forms for `"`, `\`, `\b`,
/// `\f`, `\n`, `\r`, `\t`, else `\u00XX` in lower-case hex.
fn push_escape(out: &mut Vec<u8>, c: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match c {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        8 => out.extend_from_slice(b"\\b"),
        12 => out.extend_from_slice(b"\\f"),
        c => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(c >> 4)],
            HEX[usize::from(c & 15)],
        ]),
    }
}

/// Appends `s` as a JSON string (quotes included), exactly the bytes
/// `serde_json::to_writer(out, s)` appends.
pub fn push_string(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    push_escaped(out, s);
    out.push(b'"');
}

/// Appends `s` escaped as inside a JSON string, without the quotes: a
/// string written in pieces (`"` + pieces + `"`) reads as their
/// concatenation written with [`push_string`].
pub fn push_escaped(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    out.reserve(b.len());
    // `b[start..]` is not written yet.
    let mut start = 0;
    each_escaped(b, |at| {
        out.extend_from_slice(&b[start..at]);
        push_escape(out, b[at]);
        start = at + 1;
    });
    out.extend_from_slice(&b[start..]);
}

/// Calls `f` with the index of every byte of `b` that [`escaped`] holds
/// for, in order: [`BLOCK`] bytes are tested together, and only a block
/// that holds one is looked at byte by byte.
#[inline]
fn each_escaped(b: &[u8], mut f: impl FnMut(usize)) {
    let mut i = 0;
    while let Some(block) = b.get(i..i + BLOCK) {
        // `|`, not `||`: the fold then vectorises.
        #[allow(clippy::needless_bitwise_bool)]
        if block.iter().fold(false, |any, &c| any | escaped(c)) {
            for (k, &c) in block.iter().enumerate() {
                if escaped(c) {
                    f(i + k);
                }
            }
        }
        i += BLOCK;
    }
    for (k, &c) in b[i..].iter().enumerate() {
        if escaped(c) {
            f(i + k);
        }
    }
}

/// Appends the lines of `text`, numbered from `first`, as inside a JSON
/// string: each line as `<n>\t<line>\n`, its own ending (`\n`, `\r\n` or
/// a lone `\r`, the line model of SPEC 8.1) written as `\n`, and a last
/// line without an ending given one. The bytes escaping each such line
/// with [`push_escaped`] would append, in one pass over `text` (a numbered
/// read of a 1 MiB file has 16,000 lines; a call a line cost more than the
/// escaping, docs/decisions/0034-reads-ahead-of-the-peers.md). Returns
/// the number of lines.
pub fn push_numbered_escaped(out: &mut Vec<u8>, text: &str, first: u64) -> u64 {
    let b = text.as_bytes();
    if b.is_empty() {
        return 0;
    }
    out.reserve(b.len() + b.len() / 8);
    let mut number = itoa::Buffer::new();
    let mut n = first;
    out.extend_from_slice(number.format(n).as_bytes());
    out.extend_from_slice(br"\t");
    let mut lines = 0;
    // `b[start..]` is not written yet; `lf_ends_cr` is the index of a `\n`
    // that completes a `\r\n` already written.
    let mut start = 0;
    let mut lf_ends_cr = usize::MAX;
    each_escaped(b, |at| {
        if at == lf_ends_cr {
            start = at + 1;
            return;
        }
        out.extend_from_slice(&b[start..at]);
        let c = b[at];
        start = at + 1;
        if c != b'\n' && c != b'\r' {
            push_escape(out, c);
            return;
        }
        let end = if c == b'\r' && b.get(at + 1) == Some(&b'\n') {
            lf_ends_cr = at + 1;
            at + 2
        } else {
            at + 1
        };
        out.extend_from_slice(br"\n");
        lines += 1;
        if end < b.len() {
            n += 1;
            out.extend_from_slice(number.format(n).as_bytes());
            out.extend_from_slice(br"\t");
        }
    });
    out.extend_from_slice(&b[start..]);
    if !matches!(b[b.len() - 1], b'\n' | b'\r') {
        out.extend_from_slice(br"\n");
        lines += 1;
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::{push_escaped, push_string};

    fn written(s: &str) -> Vec<u8> {
        let mut out = b"x".to_vec();
        push_string(&mut out, s);
        out
    }

    #[test]
    fn as_serde_json_writes_it() {
        let mut every: String = (0u8..128).map(char::from).collect();
        every.push_str("é😀\u{7f}\u{2028}\u{fffd}/");
        let long = "line 1: the \"quick\" brown\tfox\r\n".repeat(1000);
        for s in [
            "",
            "a",
            "\n",
            "\u{1}",
            "0123456789abcdef\"",
            "0123456789abcde\"x",
            "0123456789abcdef0123456789abcdef\\",
            every.as_str(),
            long.as_str(),
        ] {
            let mut want = b"x".to_vec();
            want.extend_from_slice(&serde_json::to_vec(s).unwrap());
            assert_eq!(written(s), want, "{s:?}");
        }
    }

    #[test]
    fn pieces_read_as_the_whole() {
        let (a, b) = ("line \"one\"\t", "and\ntwo\\");
        let mut out = vec![b'"'];
        push_escaped(&mut out, a);
        push_escaped(&mut out, b);
        out.push(b'"');
        assert_eq!(out, serde_json::to_vec(&format!("{a}{b}")).unwrap());
    }

    proptest::proptest! {
        #[test]
        fn any_text_as_serde_json_writes_it(s in "(\\PC|[\\x00-\\x1f\"\\\\])*") {
            proptest::prop_assert_eq!(written(&s)[1..].to_vec(), serde_json::to_vec(&s).unwrap());
        }
    }

    /// The numbered lines written one at a time: the reference for
    /// [`super::push_numbered_escaped`].
    fn numbered_by_line(text: &str, first: u64) -> (Vec<u8>, u64) {
        let b = text.as_bytes();
        let mut out = Vec::new();
        let (mut n, mut at) = (first, 0);
        while at < b.len() {
            let mut end = at;
            while end < b.len() && b[end] != b'\n' && b[end] != b'\r' {
                end += 1;
            }
            out.extend_from_slice(format!("{n}\\t").as_bytes());
            push_escaped(&mut out, &text[at..end]);
            out.extend_from_slice(b"\\n");
            at = match b.get(end) {
                Some(b'\r') if b.get(end + 1) == Some(&b'\n') => end + 2,
                Some(_) => end + 1,
                None => end,
            };
            n += 1;
        }
        (out, n - first)
    }

    #[test]
    fn numbered_lines_are_each_line_escaped_alone() {
        for text in [
            "",
            "a",
            "a\n",
            "\n\n",
            "a\r\nb\rc\n",
            "\r\n",
            "\r",
            "x\r",
            "tab\there \"q\" back\\slash \u{1}\n",
            &"0123456789abcdef\r\n".repeat(40),
            &"a long line with no end that is longer than one block".repeat(3),
        ] {
            for first in [1, 7, 99_999] {
                let mut out = Vec::new();
                let lines = super::push_numbered_escaped(&mut out, text, first);
                let (want, count) = numbered_by_line(text, first);
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    String::from_utf8(want).unwrap(),
                    "{text:?}"
                );
                assert_eq!(lines, count, "{text:?}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn numbered_lines_match_the_line_by_line_form(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("\r"), proptest::strategy::Just("\n"),
                    proptest::strategy::Just("\r\n"), proptest::strategy::Just("abc"),
                    proptest::strategy::Just("\""), proptest::strategy::Just("\u{1f}"),
                    proptest::strategy::Just("é"), proptest::strategy::Just("0123456789abcdef"),
                ],
                0..60,
            ),
            first in 1u64..1000,
        ) {
            let text: String = pieces.concat();
            let mut out = Vec::new();
            let lines = super::push_numbered_escaped(&mut out, &text, first);
            let (want, count) = numbered_by_line(&text, first);
            proptest::prop_assert_eq!(out, want);
            proptest::prop_assert_eq!(lines, count);
        }
    }
}
