//! Regression tests for round-trip fidelity: an agent reads a
//! file, changes one word, and writes the whole text back with the `_meta`
//! qwen-code sends when it assumes UTF-8 (`{"encoding": "utf-8", "bom":
//! false}`). Every byte outside the change must be identical: the file's
//! own encoding, BOM and each line's ending win over the echoed hints.

use crate::{World, world};
use std::path::Path;
use writegate_core::{
    EditMode, EditParams, ErrorKind, Failure, ReadParams, WriteOptions, WriteParams,
};

/// `(name, bytes, encoded "two", encoded "TWO")`: each file holds "two" once.
type Fixture = (&'static str, &'static [u8], &'static [u8], &'static [u8]);

const FIXTURES: &[Fixture] = &[
    (
        "windows-1252 CRLF",
        b"Caf\xe9 au lait, na\xefve fa\xe7ade, d\xe9j\xe0 vu.\r\nThe two cr\xe8me br\xfbl\xe9e orders.\r\nFin.\r\n",
        b"two",
        b"TWO",
    ),
    (
        "Shift_JIS CRLF",
        b"\x93\xfa\x96{\x8c\xea\x82\xcc\x83e\x83L\x83X\x83g\x82\xc5\x82\xb7\x81B\r\n\x82\xb1\x82\xea\x82\xcd two \x8ds\x96\xda\x82\xc5\x82\xb7\x81B\r\n\x8fI\x82\xed\x82\xe8\r\n",
        b"two",
        b"TWO",
    ),
    (
        "UTF-16LE with BOM, CRLF",
        b"\xff\xfef\x00i\x00r\x00s\x00t\x00 \x00l\x00i\x00n\x00e\x00\r\x00\n\x00s\x00e\x00c\x00o\x00n\x00d\x00 \x00t\x00w\x00o\x00 \x00l\x00i\x00n\x00e\x00\r\x00\n\x00t\x00h\x00i\x00r\x00d\x00\r\x00\n\x00",
        b"t\x00w\x00o\x00",
        b"T\x00W\x00O\x00",
    ),
    (
        "UTF-16BE with BOM",
        b"\xfe\xff\x00f\x00i\x00r\x00s\x00t\x00 \x00l\x00i\x00n\x00e\x00\n\x00s\x00e\x00c\x00o\x00n\x00d\x00 \x00t\x00w\x00o\x00 \x00l\x00i\x00n\x00e\x00\n\x00t\x00h\x00i\x00r\x00d\x00\n",
        b"\x00t\x00w\x00o",
        b"\x00T\x00W\x00O",
    ),
    (
        "UTF-8 with BOM, CRLF",
        b"\xef\xbb\xbfh\xc3\xa9llo\r\nline two\r\nend\r\n",
        b"two",
        b"TWO",
    ),
    (
        "mixed endings, CRLF dominant",
        b"a\r\nb\nc two\r\nd\re\r\n",
        b"two",
        b"TWO",
    ),
    (
        "mixed endings, LF dominant",
        b"a\nb\r\nc two\nd\re\n",
        b"two",
        b"TWO",
    ),
];

fn replace_once(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = hay
        .windows(from.len())
        .position(|w| w == from)
        .expect("fixture holds the word");
    let mut out = hay[..at].to_vec();
    out.extend_from_slice(to);
    out.extend_from_slice(&hay[at + from.len()..]);
    out
}

/// What qwen-code echoes when a read gave it no format.
fn assumed_utf8() -> WriteOptions {
    WriteOptions {
        encoding: Some("utf-8".into()),
        bom: Some(false),
        line_ending: None,
    }
}

fn read_all(w: &World, path: &Path) -> String {
    w.svc
        .read_text_file(
            &w.ctx(),
            &ReadParams {
                path: path.to_path_buf(),
                line: None,
                limit: None,
            },
        )
        .unwrap()
        .content
}

#[test]
fn read_then_write_back_keeps_every_other_byte() {
    let w = world();
    for (i, (name, bytes, from, to)) in FIXTURES.iter().enumerate() {
        let f = w.root.join(format!("f{i}.txt"));
        std::fs::write(&f, bytes).unwrap();
        let text = read_all(&w, &f);
        assert!(text.contains("two"), "{name}: read gave {text:?}");
        let p = WriteParams {
            path: f.clone(),
            content: text.replacen("two", "TWO", 1),
            options: assumed_utf8(),
            marker: None,
            convert_encoding: false,
        };
        w.svc.write_text_file(&w.ctx(), &p).unwrap();
        assert_eq!(
            std::fs::read(&f).unwrap(),
            replace_once(bytes, from, to),
            "{name}: a byte outside the change differs"
        );
    }
}

/// The same through the edit tool's whole-file `write` mode, with every
/// ending flattened to `\n` by the client: unchanged lines get their own
/// endings back.
#[test]
fn flattened_write_mode_restores_each_lines_ending() {
    let w = world();
    for (i, (name, bytes, from, to)) in FIXTURES.iter().enumerate() {
        let f = w.root.join(format!("e{i}.txt"));
        std::fs::write(&f, bytes).unwrap();
        let text = read_all(&w, &f)
            .replace("\r\n", "\n")
            .replace('\r', "\n")
            .replacen("two", "TWO", 1);
        let mut p = EditParams::new(&f, EditMode::Write, text);
        p.options = assumed_utf8();
        w.svc.edit_text_file(&w.ctx(), &p).unwrap();
        let want = replace_once(bytes, from, to);
        if name.contains("LF dominant") {
            // An LF-dominant file takes the content as given (SPEC 9): the
            // client's flattening of the minority endings is its change.
            continue;
        }
        assert_eq!(std::fs::read(&f).unwrap(), want, "{name}");
    }
}

/// Converting an existing file takes an explicit request.
#[test]
fn converting_an_existing_file_needs_convert_encoding() {
    let w = world();
    let f = w.root.join("w.txt");
    std::fs::write(&f, b"caf\xe9\r\n").unwrap();
    let mut p = WriteParams {
        path: f.clone(),
        content: "café\n".into(),
        options: assumed_utf8(),
        marker: None,
        convert_encoding: false,
    };
    w.svc.write_text_file(&w.ctx(), &p).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"caf\xe9\r\n");
    p.convert_encoding = true;
    w.svc.write_text_file(&w.ctx(), &p).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), "café\r\n".as_bytes());
}

/// A character the file's encoding cannot hold is refused, naming the
/// encoding and the character; the file is unchanged.
#[test]
fn an_unmappable_character_names_encoding_and_character() {
    let w = world();
    let f = w.root.join("u.txt");
    std::fs::write(&f, b"caf\xe9 na\xefve d\xe9j\xe0 vu\r\n").unwrap();
    let p = WriteParams {
        path: f.clone(),
        content: "snow ☃\n".into(),
        options: assumed_utf8(),
        marker: None,
        convert_encoding: false,
    };
    let Err(Failure::Refused(r)) = w.svc.write_text_file(&w.ctx(), &p) else {
        panic!("expected unmappable_character")
    };
    assert_eq!(r.kind, ErrorKind::UnmappableCharacter);
    assert!(r.hint.contains("U+2603"), "{}", r.hint);
    assert!(r.hint.contains("windows-1252"), "{}", r.hint);
    assert_eq!(
        std::fs::read(&f).unwrap(),
        b"caf\xe9 na\xefve d\xe9j\xe0 vu\r\n"
    );
}
