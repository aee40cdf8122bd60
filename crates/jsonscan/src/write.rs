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
    let escape_from = |out: &mut Vec<u8>, at: usize, start: &mut usize| {
        out.extend_from_slice(&b[*start..at]);
        push_escape(out, b[at]);
        *start = at + 1;
    };
    let mut i = 0;
    while let Some(block) = b.get(i..i + BLOCK) {
        // `|`, not `||`: the fold then vectorises.
        #[allow(clippy::needless_bitwise_bool)]
        if block.iter().fold(false, |any, &c| any | escaped(c)) {
            for (k, &c) in block.iter().enumerate() {
                if escaped(c) {
                    escape_from(out, i + k, &mut start);
                }
            }
        }
        i += BLOCK;
    }
    for (k, &c) in b[i..].iter().enumerate() {
        if escaped(c) {
            escape_from(out, i + k, &mut start);
        }
    }
    out.extend_from_slice(&b[start..]);
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
}
