//! Edit-engine behaviour beyond the conformance cases: every encoding, every mode,
//! the forgiving rules' edges, results, and refusals.

use writegate_text::{
    EditMode, EditOutcome, EditRequest, Encoding, Ending, LineEndingChoice, TextError,
    WriteOptions, apply_edit, detect, encode_text, numbered_lines,
};

#[derive(Default, Clone, Copy)]
struct Op<'a> {
    content: &'a str,
    find: Option<&'a str>,
    line: Option<u64>,
    end_line: Option<u64>,
    diff: bool,
}

fn edit(file: Option<&[u8]>, mode: EditMode, op: Op) -> Result<EditOutcome, TextError> {
    edit_with(file, mode, op, &WriteOptions::default())
}

fn edit_with(
    file: Option<&[u8]>,
    mode: EditMode,
    op: Op,
    opts: &WriteOptions,
) -> Result<EditOutcome, TextError> {
    let req = EditRequest {
        mode,
        content: op.content,
        find: op.find,
        line: op.line,
        end_line: op.end_line,
        display_path: "src/a.py",
        want_diff: op.diff,
    };
    apply_edit(file, &req, opts)
}

fn line(content: &str, n: u64) -> Op<'_> {
    Op {
        content,
        line: Some(n),
        ..Op::default()
    }
}

fn find<'a>(content: &'a str, f: &'a str) -> Op<'a> {
    Op {
        content,
        find: Some(f),
        ..Op::default()
    }
}

fn utf16le(s: &str) -> Vec<u8> {
    let mut v = vec![0xFF, 0xFE];
    for u in s.encode_utf16() {
        v.extend(u.to_le_bytes());
    }
    v
}

// ---- encodings ------------------------------------------------------------

#[test]
fn utf16le_line_edit_keeps_lone_surrogate_elsewhere() {
    let mut file = utf16le("a\r\n");
    file.extend([0x00, 0xD8]); // a lone high surrogate on line 2
    file.extend(utf16le("x\r\nc\r\n")[2..].iter());
    let out = edit(Some(&file), EditMode::Replace, line("C", 3)).unwrap();
    let mut want = utf16le("a\r\n");
    want.extend([0x00, 0xD8]);
    want.extend(utf16le("x\r\nC\r\n")[2..].iter());
    assert_eq!(out.bytes, want);
    assert_eq!(out.format.encoding, Encoding::Utf16Le);
}

#[test]
fn utf16le_find_with_line_break_and_insert_at_end() {
    let file = utf16le("one\r\ntwo");
    let out = edit(Some(&file), EditMode::Replace, find("1\n2", "one\ntwo")).unwrap();
    assert_eq!(out.bytes, utf16le("1\r\n2"));
    let out = edit(Some(&file), EditMode::Insert, line("three", 3)).unwrap();
    assert_eq!(out.bytes, utf16le("one\r\ntwo\r\nthree"));
}

#[test]
fn utf32be_line_edit() {
    let file = b"\x00\x00\xFE\xFF\x00\x00\x00a\x00\x00\x00\n\x00\x00\x00b\x00\x00\x00\n";
    let out = edit(Some(file), EditMode::Replace, line("é", 2)).unwrap();
    assert_eq!(
        out.bytes,
        b"\x00\x00\xFE\xFF\x00\x00\x00a\x00\x00\x00\n\x00\x00\x00\xE9\x00\x00\x00\n"
    );
}

#[test]
fn invalid_utf8_bytes_outside_the_edit_survive() {
    let file = b"\xEF\xBB\xBFbad \xFF\xFE here\nfix me\n\xC3 tail";
    let out = edit(Some(file), EditMode::Replace, line("fixed", 2)).unwrap();
    assert_eq!(
        out.bytes,
        b"\xEF\xBB\xBFbad \xFF\xFE here\nfixed\n\xC3 tail"
    );
    let out = edit(Some(file), EditMode::Replace, find("FIX", "fix")).unwrap();
    assert_eq!(
        out.bytes,
        b"\xEF\xBB\xBFbad \xFF\xFE here\nFIX me\n\xC3 tail"
    );
}

#[test]
fn legacy_find_with_unmappable_char_is_not_found_and_content_is_unmappable() {
    let file = b"const x = 1;\n// caf\xe9 note\n";
    let err = edit(Some(file), EditMode::Replace, find("y", "☃")).unwrap_err();
    assert!(matches!(err, TextError::TextNotFound(_)), "{err:?}");
    let err = edit(Some(file), EditMode::Replace, find("☃", "note")).unwrap_err();
    assert!(matches!(err, TextError::UnmappableCharacter(_)), "{err:?}");
    let out = edit(Some(file), EditMode::Replace, find("thé", "note")).unwrap();
    assert_eq!(out.bytes, b"const x = 1;\n// caf\xe9 th\xe9\n");
}

#[test]
fn shift_jis_find_never_matches_inside_a_character() {
    // 表 is 0x95 0x5C in Shift_JIS: its trail byte is a backslash.
    let text = "表示する文字列の例です。これは日本語のテキストファイルです。\\n を探す\n".repeat(8);
    let file = encode_text(&text, Encoding::from_label("shift_jis").unwrap()).unwrap();
    let format = detect(&file).unwrap();
    if format.encoding.name() != "shift_jis" {
        // The detector's guess is its own business; only a Shift_JIS guess tests this.
        return;
    }
    let err = edit(Some(&file), EditMode::Replace, find("/", "\\")).unwrap_err();
    // Eight real backslashes, none of the eight trail bytes of 表.
    assert_eq!(
        err,
        TextError::AmbiguousTextMatch {
            count: 8,
            lines: (1..=8).collect()
        }
    );
}

#[test]
fn utf16_file_ending_inside_a_unit_is_not_edited_but_readable() {
    let file = b"\xFF\xFEa\x00\n\x00b";
    let err = edit(Some(file), EditMode::Replace, line("x", 1)).unwrap_err();
    assert!(matches!(err, TextError::UnsupportedEncoding(_)), "{err:?}");
    let n = numbered_lines(file, None, None).unwrap();
    assert_eq!(n.lines[0], (1, "a".to_string()));
}

#[test]
fn whole_write_keeps_a_legacy_format_unless_told_otherwise() {
    let file = b"caf\xe9\r\n";
    let op = |content| Op {
        content,
        ..Op::default()
    };
    let out = edit(Some(file), EditMode::Write, op("thé\n")).unwrap();
    assert_eq!(out.bytes, b"th\xe9\r\n");
    assert_eq!(out.format.encoding.name(), "windows-1252");
    let err = edit(Some(file), EditMode::Write, op("日本\n")).unwrap_err();
    assert!(matches!(err, TextError::UnmappableCharacter(_)), "{err:?}");
    let opts = WriteOptions {
        encoding: Some("utf-8".into()),
        ..Default::default()
    };
    let out = edit_with(Some(file), EditMode::Write, op("日本\n"), &opts).unwrap();
    assert_eq!(
        out.bytes,
        "日本\r\n".as_bytes(),
        "encoding from _meta, endings kept"
    );
}

// ---- modes ----------------------------------------------------------------

#[test]
fn insert_positions() {
    let with_final = b"a\nb\n";
    let out = edit(Some(with_final), EditMode::Insert, line("x\n", 3)).unwrap();
    assert_eq!(
        out.bytes, b"a\nb\nx\n",
        "one trailing break of content dropped"
    );
    assert_eq!(
        out.message,
        "inserted 1 line at the end of src/a.py; line 3 now: \"x\""
    );
    let out = edit(Some(with_final), EditMode::Insert, line("x", 1)).unwrap();
    assert_eq!(out.bytes, b"x\na\nb\n");
    let out = edit(Some(b"a\nb"), EditMode::Insert, line("x\ny", 3)).unwrap();
    assert_eq!(out.bytes, b"a\nb\nx\ny");
    let out = edit(Some(b"a\r\nb"), EditMode::Insert, line("x", 3)).unwrap();
    assert_eq!(out.bytes, b"a\r\nb\r\nx");
    let out = edit(Some(b"abc"), EditMode::Insert, line("x", 2)).unwrap();
    assert_eq!(out.bytes, b"abc\nx", "no endings at all: \\n");
    let out = edit(Some(b""), EditMode::Insert, line("x\ny", 1)).unwrap();
    assert_eq!(out.bytes, b"x\ny");
    let out = edit(Some(b"\xEF\xBB\xBF"), EditMode::Insert, line("x", 1)).unwrap();
    assert_eq!(out.bytes, b"\xEF\xBB\xBFx");
    let err = edit(Some(with_final), EditMode::Insert, line("x", 4)).unwrap_err();
    assert_eq!(err, TextError::LineOutOfRange { line: 4, total: 2 });
    let err = edit(Some(with_final), EditMode::Insert, line("x", 0)).unwrap_err();
    assert!(matches!(err, TextError::LineOutOfRange { .. }), "{err:?}");
}

#[test]
fn delete_ranges() {
    let del = |file: &[u8], l: u64, e: Option<u64>| {
        edit(
            Some(file),
            EditMode::Delete,
            Op {
                line: Some(l),
                end_line: e,
                ..Op::default()
            },
        )
    };
    let out = del(b"a\r\nb\r\nc\r\n", 2, None).unwrap();
    assert_eq!(out.bytes, b"a\r\nc\r\n");
    assert_eq!(out.message, "deleted line 2 of src/a.py; line 2 now: \"c\"");
    assert!(out.now_reads.is_empty());
    assert_eq!(del(b"a\nb\nc\nd\n", 2, Some(3)).unwrap().bytes, b"a\nd\n");
    assert_eq!(
        del(b"a\nb\nc", 3, None).unwrap().bytes,
        b"a\nb",
        "no final break kept"
    );
    assert_eq!(del(b"a\nb\nc", 2, Some(3)).unwrap().bytes, b"a");
    assert_eq!(del(b"a\nb\nc", 1, Some(3)).unwrap().bytes, b"");
    assert_eq!(del(b"a\nb\n", 1, Some(2)).unwrap().bytes, b"");
    let out = del(b"a\nb\n", 2, None).unwrap();
    assert_eq!(
        out.message,
        "deleted line 2 of src/a.py; the file now has 1 line"
    );
    assert_eq!(
        del(b"a\nb\n", 2, Some(3)).unwrap_err(),
        TextError::LineOutOfRange { line: 3, total: 2 }
    );
}

#[test]
fn delete_that_would_join_cr_and_lf_is_refused_by_the_guard() {
    // Line 1 ends with a lone CR, line 3 is empty with LF: removing line 2 would make
    // them one CRLF, changing line 1 and losing line 3. Refused before the guard,
    // with its own kind, not `internal_error` ("a bug, retry once"): the edit
    // can never succeed.
    let err = edit(
        Some(b"a\rb\n\n"),
        EditMode::Delete,
        Op {
            line: Some(2),
            ..Op::default()
        },
    )
    .unwrap_err();
    assert_eq!(err, TextError::LineEndingConflict { line: 1 });
}

/// Regression: every edit that removes the text between a lone `\r` and a
/// `\n` and inserts nothing was refused as `internal_error` by the guard. It
/// is `line_ending_conflict`, naming the line that ends in the `\r`, in
/// every mode and encoding; an edit that inserts something keeps both endings
/// (the `\r\n` rule of `avoid_joins`) and is not refused.
#[test]
fn regression_edits_joining_a_lone_cr_and_a_lf_name_the_line() {
    let conflict = |file: &[u8], mode, op| edit(Some(file), mode, op).unwrap_err();
    let want = |line| TextError::LineEndingConflict { line };
    assert_eq!(
        conflict(b"one\rtwo\n\nthree\n", EditMode::Replace, line("", 2)),
        want(1)
    );
    assert_eq!(
        conflict(b"x\rab\nc\n", EditMode::Replace, find("", "ab")),
        want(1)
    );
    assert_eq!(
        conflict(
            b"a\nb\rc\n\nd\n",
            EditMode::Delete,
            Op {
                line: Some(3),
                ..Op::default()
            }
        ),
        want(2)
    );
    assert_eq!(
        conflict(&utf16le("a\nb\rc\n\nd\n"), EditMode::Replace, find("", "c")),
        want(2)
    );
    // Inserting text there is fine: nothing joins.
    let out = edit(Some(b"x\rab\nc\n"), EditMode::Replace, find("z", "ab")).unwrap();
    assert_eq!(out.bytes, b"x\rz\nc\n");
    assert!(!want(7).hint().is_empty() && want(7).hint().contains("line 7"));
}

/// Regression: replacing line 1 of a UTF-8 BOM file with content that
/// starts with U+FEFF (the BOM a client or model echoed) wrote a second BOM. SPEC
/// 9: exactly one is written, as a whole-file write already did.
#[test]
fn regression_edit_at_the_start_of_a_bom_file_writes_one_bom() {
    const BOM8: &[u8] = b"\xEF\xBB\xBF";
    let file = [BOM8, b"a\nb\n"].concat();
    let out = edit(Some(&file), EditMode::Replace, line("\u{FEFF}x", 1)).unwrap();
    assert_eq!(out.bytes, [BOM8, b"x\nb\n"].concat());
    let out = edit(Some(&file), EditMode::Insert, line("\u{FEFF}new", 1)).unwrap();
    assert_eq!(out.bytes, [BOM8, b"new\na\nb\n"].concat());
    let out = edit(Some(&file), EditMode::Replace, find("\u{FEFF}y", "a")).unwrap();
    assert_eq!(out.bytes, [BOM8, b"y\nb\n"].concat());
    // UTF-16 (`utf16le` writes the BOM): one BOM too.
    let out = edit(
        Some(&utf16le("a\nb\n")),
        EditMode::Replace,
        line("\u{FEFF}x", 1),
    )
    .unwrap();
    assert_eq!(out.bytes, utf16le("x\nb\n"));
    // Only one is dropped, and only at the start of the body: further ones, a
    // U+FEFF inside the file, and one in a file without a BOM are content.
    let out = edit(Some(&file), EditMode::Replace, line("\u{FEFF}\u{FEFF}x", 1)).unwrap();
    assert_eq!(out.bytes, [BOM8, BOM8, b"x\nb\n"].concat());
    let out = edit(Some(&file), EditMode::Replace, line("\u{FEFF}z", 2)).unwrap();
    assert_eq!(out.bytes, [BOM8, b"a\n", BOM8, b"z\n"].concat());
    let out = edit(Some(b"a\nb\n"), EditMode::Replace, line("\u{FEFF}x", 1)).unwrap();
    assert_eq!(out.bytes, [BOM8, b"x\nb\n"].concat());
    // A file that already holds a second BOM keeps it when the edit replaces it
    // with one of its own.
    let twice = [BOM8, BOM8, b"x\n"].concat();
    let out = edit(
        Some(&twice),
        EditMode::Replace,
        find("\u{FEFF}y", "\u{FEFF}x"),
    )
    .unwrap();
    assert_eq!(out.bytes, [BOM8, BOM8, b"y\n"].concat());
    let out = edit(Some(&twice), EditMode::Replace, line("\u{FEFF}y", 1)).unwrap();
    assert_eq!(out.bytes, [BOM8, BOM8, b"y\n"].concat());
}

#[test]
fn new_break_after_lone_cr_takes_crlf_instead_of_joining() {
    // LF-dominant file whose line 1 ends with a stray lone CR; an empty line inserted
    // before line 2 would be "\n" right after that CR.
    let out = edit(Some(b"a\rb\nc\n"), EditMode::Insert, line("", 2)).unwrap();
    assert_eq!(out.bytes, b"a\r\r\nb\nc\n");
    assert_eq!(
        numbered_lines(&out.bytes, None, None).unwrap().total_lines,
        4
    );
    let out = edit(
        Some(b"a\nb\nc\r"),
        EditMode::Append,
        Op {
            content: "\nd",
            ..Op::default()
        },
    )
    .unwrap();
    assert_eq!(out.bytes, b"a\nb\nc\r\r\nd");
}

#[test]
fn append_modes() {
    let app = |file: Option<&[u8]>, c: &str| {
        edit(
            file,
            EditMode::Append,
            Op {
                content: c,
                ..Op::default()
            },
        )
    };
    let out = app(Some(b"a\r\nb"), "c\nd\n").unwrap();
    assert_eq!(
        out.bytes, b"a\r\nbc\r\nd\r\n",
        "after the bytes as they are"
    );
    assert_eq!(out.line, Some(2));
    assert_eq!(out.now_reads, vec!["bc", "d"]);
    assert_eq!(app(Some(b""), "x\r\ny\n").unwrap().bytes, b"x\r\ny\n");
    let out = app(None, "new\n").unwrap();
    assert_eq!(out.bytes, b"new\n");
    assert!(out.message.starts_with("created src/a.py"));
    let opts = WriteOptions {
        encoding: Some("utf-16le".into()),
        line_ending: Some(LineEndingChoice::Crlf),
        ..Default::default()
    };
    let out = edit_with(
        None,
        EditMode::Append,
        Op {
            content: "a\n",
            ..Op::default()
        },
        &opts,
    )
    .unwrap();
    assert_eq!(out.bytes, b"\xFF\xFEa\x00\r\x00\n\x00");
    assert_eq!(app(Some(b"a\n"), "").unwrap().bytes, b"a\n");
}

#[test]
fn write_mode_result() {
    let out = edit(
        Some(b"x\r\n"),
        EditMode::Write,
        Op {
            content: "a\nb\n",
            diff: true,
            ..Op::default()
        },
    )
    .unwrap();
    assert_eq!(out.bytes, b"a\r\nb\r\n");
    assert_eq!(out.format.dominant, Some(Ending::CrLf));
    assert_eq!(out.line, None);
    assert_eq!(
        out.message,
        "wrote src/a.py (2 lines, 6 bytes, utf-8, crlf line endings)"
    );
    let diff = out.diff.unwrap();
    assert!(
        diff.contains("-x") && diff.contains("+a") && diff.contains("+b"),
        "{diff}"
    );
    let out = edit(
        None,
        EditMode::Write,
        Op {
            content: "hi",
            ..Op::default()
        },
    )
    .unwrap();
    assert_eq!(out.message, "created src/a.py (1 line, 2 bytes, utf-8)");
}

// ---- find replacement -----------------------------------------------------

#[test]
fn find_replacement_is_literal_and_shows_three_lines() {
    let out = edit(Some(b"v = 1\n"), EditMode::Replace, find("$& \\1 $0", "1")).unwrap();
    assert_eq!(out.bytes, b"v = $& \\1 $0\n");
    let out = edit(Some(b"x\ny\n"), EditMode::Replace, find("1\n2\n3\n4", "x")).unwrap();
    assert_eq!(out.bytes, b"1\n2\n3\n4\ny\n");
    assert_eq!(out.now_reads, vec!["1", "2", "3"]);
    assert!(
        out.message
            .ends_with("lines 1-4 now: \"1\", \"2\", \"3\", …"),
        "{}",
        out.message
    );
}

#[test]
fn empty_find_is_text_not_found_with_or_without_line() {
    let err = edit(Some(b"a\n"), EditMode::Replace, find("b", "")).unwrap_err();
    assert_eq!(err, TextError::TextNotFound(String::new()));
    assert!(err.hint().contains("find is empty"));
    let op = Op {
        content: "b",
        find: Some(""),
        line: Some(1),
        ..Op::default()
    };
    assert!(matches!(
        edit(Some(b"a\n"), EditMode::Replace, op),
        Err(TextError::TextNotFound(_))
    ));
}

#[test]
fn find_with_leading_break_never_splits_crlf() {
    let out = edit(Some(b"a\r\nb\r\n"), EditMode::Replace, find("\nB", "\nb")).unwrap();
    assert_eq!(out.bytes, b"a\r\nB\r\n");
    let err = edit(Some(b"a\r\nb\r\n"), EditMode::Replace, find("x", "\n")).unwrap_err();
    assert_eq!(
        err,
        TextError::AmbiguousTextMatch {
            count: 2,
            lines: vec![1, 2]
        }
    );
}

// ---- line replacement and the forgiving rules -----------------------------

#[test]
fn line_replace_drops_one_trailing_break_only() {
    let out = edit(Some(b"a\nb\nc\n"), EditMode::Replace, line("B\n", 2)).unwrap();
    assert_eq!(out.bytes, b"a\nB\nc\n");
    let out = edit(Some(b"a\nb\nc\n"), EditMode::Replace, line("B\n\n", 2)).unwrap();
    assert_eq!(out.bytes, b"a\nB\n\nc\n");
    let err = edit(Some(b"a\nb\n"), EditMode::Replace, line("x", 3)).unwrap_err();
    assert_eq!(err, TextError::LineOutOfRange { line: 3, total: 2 });
}

#[test]
fn keep_indentation_edges() {
    let file = b"\t  if x:\n\t  \tpass\n";
    let out = edit(Some(file), EditMode::Replace, line("if y:", 1)).unwrap();
    assert_eq!(out.bytes, b"\t  if y:\n\t  \tpass\n");
    assert_eq!(out.kept_indentation.as_deref(), Some("1 tab and 2 spaces"));
    // Same text, only whitespace differs at the ends: written exactly (a dedent).
    let out = edit(Some(file), EditMode::Replace, line("if x:  ", 1)).unwrap();
    assert_eq!(out.bytes, b"if x:  \n\t  \tpass\n");
    assert_eq!(out.kept_indentation, None);
    // Empty content: written exactly.
    let out = edit(Some(file), EditMode::Replace, line("", 1)).unwrap();
    assert_eq!(out.bytes, b"\n\t  \tpass\n");
    // Old line not indented: written exactly.
    let out = edit(Some(b"a\n"), EditMode::Replace, line("b", 1)).unwrap();
    assert_eq!(out.kept_indentation, None);
    // Ranges are written exactly.
    let op = Op {
        content: "x",
        line: Some(1),
        end_line: Some(2),
        ..Op::default()
    };
    assert_eq!(
        edit(Some(file), EditMode::Replace, op).unwrap().bytes,
        b"x\n"
    );
    // Multi-line content keeps the indentation at its start.
    let out = edit(
        Some(b"    return 1\n"),
        EditMode::Replace,
        line("x = 1\n    return x", 1),
    )
    .unwrap();
    assert_eq!(out.bytes, b"    x = 1\n    return x\n");
}

#[test]
fn reconcile_edges() {
    let file = b"def f():\n    return 1\n    return 1\n";
    let op = |f: &'static str, l: u64| Op {
        content: "    return 2",
        find: Some(f),
        line: Some(l),
        ..Op::default()
    };
    // Two other lines hold find: nothing guessed.
    let err = edit(Some(file), EditMode::Replace, op("return 1", 1)).unwrap_err();
    assert_eq!(
        err,
        TextError::LineMismatch {
            line: 1,
            holds: "def f():".into()
        }
    );
    // The asked line holds it: no move.
    let out = edit(Some(file), EditMode::Replace, op("return 1", 3)).unwrap();
    assert_eq!(out.bytes, b"def f():\n    return 1\n    return 2\n");
    assert_eq!(out.moved_from, None);
    // Past the end stays an error even when find names a line.
    let err = edit(Some(file), EditMode::Replace, op("def", 9)).unwrap_err();
    assert!(matches!(err, TextError::LineOutOfRange { .. }), "{err:?}");
    // A range must contain find; it is not moved.
    let range = Op {
        content: "x",
        find: Some("1\n    return"),
        line: Some(2),
        end_line: Some(3),
        ..Op::default()
    };
    assert_eq!(
        edit(Some(file), EditMode::Replace, range).unwrap().bytes,
        b"def f():\nx\n"
    );
    let range = Op {
        find: Some("def"),
        ..range
    };
    assert!(matches!(
        edit(Some(file), EditMode::Replace, range),
        Err(TextError::LineMismatch { .. })
    ));
}

#[test]
fn now_reads_escape_and_cut() {
    let out = edit(Some(b"a\n"), EditMode::Replace, line("\t\"q\" \\", 1)).unwrap();
    assert_eq!(out.now_reads, vec!["\\t\\\"q\\\" \\\\"]);
    let long = "y".repeat(300);
    let out = edit(Some(b"a\n"), EditMode::Replace, line(&long, 1)).unwrap();
    assert_eq!(out.now_reads[0], format!("{}…", "y".repeat(200)));
    let err = edit(
        Some(format!("{long}\n").as_bytes()),
        EditMode::Replace,
        Op {
            content: "x",
            find: Some("zzz"),
            line: Some(1),
            ..Op::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(err, TextError::LineMismatch { ref holds, .. } if holds.chars().count() == 200)
    );
}

#[test]
fn diff_for_dry_run() {
    let op = Op {
        content: "B",
        line: Some(2),
        diff: true,
        ..Op::default()
    };
    let out = edit(Some(b"a\nb\nc\n"), EditMode::Replace, op).unwrap();
    let diff = out.diff.unwrap();
    assert!(
        diff.starts_with("--- a/src/a.py\n+++ b/src/a.py\n"),
        "{diff}"
    );
    assert!(diff.contains("\n-b\n+B\n"), "{diff}");
    assert!(
        edit(Some(b"a\n"), EditMode::Replace, line("b", 1))
            .unwrap()
            .diff
            .is_none()
    );
}

// ---- invalid parameter combinations ----------------------------------------

#[test]
fn invalid_requests() {
    let bad = |mode, op: Op, file: Option<&[u8]>| {
        let err = edit(file, mode, op).unwrap_err();
        assert!(matches!(err, TextError::InvalidRequest(_)), "{err:?}");
    };
    let f: Option<&[u8]> = Some(b"a\nb\n");
    bad(EditMode::Replace, Op::default(), f);
    bad(EditMode::Insert, Op::default(), f);
    bad(EditMode::Delete, Op::default(), f);
    bad(EditMode::Write, find("x", "a"), f);
    bad(EditMode::Append, line("x", 1), f);
    bad(
        EditMode::Insert,
        Op {
            find: Some("a"),
            line: Some(1),
            ..Op::default()
        },
        f,
    );
    bad(
        EditMode::Delete,
        Op {
            find: Some("a"),
            line: Some(1),
            ..Op::default()
        },
        f,
    );
    bad(
        EditMode::Replace,
        Op {
            line: Some(2),
            end_line: Some(1),
            ..Op::default()
        },
        f,
    );
    bad(
        EditMode::Replace,
        Op {
            find: Some("a"),
            end_line: Some(1),
            ..Op::default()
        },
        f,
    );
    bad(EditMode::Replace, find("x", "a"), None);
}

/// Every variant has a hint ending in a full stop and a message. (Which
/// `errorKind` each variant stands for is tested where it is mapped, in
/// `writegate-core`.)
#[test]
fn error_hints() {
    let all = [
        TextError::UnsupportedEncoding("x".into()),
        TextError::UnmappableCharacter("x".into()),
        TextError::BinaryFile,
        TextError::TextNotFound("x".into()),
        TextError::AmbiguousTextMatch {
            count: 2,
            lines: vec![1, 3],
        },
        TextError::LineOutOfRange { line: 9, total: 2 },
        TextError::LineMismatch {
            line: 2,
            holds: "b".into(),
        },
        TextError::InvalidRequest("x".into()),
        TextError::Guard("x".into()),
    ];
    for e in &all {
        assert!(e.hint().ends_with('.'), "{e:?}");
        assert!(!e.to_string().is_empty());
    }
    assert!(all[4].hint().contains("lines 1, 3"));
}
