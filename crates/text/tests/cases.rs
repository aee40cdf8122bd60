//! One test per conformance case of `shared/cases/cases.jsonl` that concerns the text
//! core. The bytes are copied here as literals (the tests never read `shared/`).
//! Refusals are pure: an `Err` means the caller writes nothing, so "unchanged" holds
//! by construction.

use writegate_text::{
    EditMode, EditOutcome, EditRequest, Ending, Format, TextError, WriteOptions, apply_edit,
    detect, encode_whole,
};

fn op<'a>(
    mode: EditMode,
    content: &'a str,
    find: Option<&'a str>,
    line: Option<u64>,
    end_line: Option<u64>,
) -> EditRequest<'a> {
    EditRequest {
        mode,
        content,
        find,
        line,
        end_line,
        display_path: "f.txt",
        want_diff: false,
    }
}

fn run(file: &[u8], req: EditRequest) -> Result<EditOutcome, TextError> {
    apply_edit(Some(file), &req, &WriteOptions::default())
}

fn replace_find(file: &[u8], content: &str, find: &str) -> Result<EditOutcome, TextError> {
    run(file, op(EditMode::Replace, content, Some(find), None, None))
}

fn replace_line(file: &[u8], content: &str, line: u64) -> Result<EditOutcome, TextError> {
    run(file, op(EditMode::Replace, content, None, Some(line), None))
}

/// `fs/write_text_file` as the writers do it: detect the existing format, encode.
fn whole_write(file: &[u8], content: &str) -> Vec<u8> {
    let existing = detect(file).unwrap();
    let (bytes, _) = encode_whole(content, Some(&existing), &WriteOptions::default()).unwrap();
    // Edit mode `write` must give the same bytes.
    let edit = run(file, op(EditMode::Write, content, None, None, None)).unwrap();
    assert_eq!(edit.bytes, bytes);
    bytes
}

#[test]
fn case_e02_whole_write_over_crlf_keeps_crlf() {
    assert_eq!(whole_write(b"x\r\ny\r\n", "a\nb\n"), b"a\r\nb\r\n");
}

#[test]
fn case_e04_multiline_replace_crlf() {
    let out = replace_find(b"a\r\nb\r\nc\r\n", "B\nC", "b").unwrap();
    assert_eq!(out.bytes, b"a\r\nB\r\nC\r\nc\r\n");
    assert_eq!(out.line, Some(2));
    assert_eq!(out.now_reads, vec!["B", "C"]);
    assert_eq!(out.format.dominant, Some(Ending::CrLf));
}

#[test]
fn case_e06_lone_cr_file_numbered_line_by_line() {
    let out = replace_line(b"a\rb\rc\r", "X", 2).unwrap();
    assert_eq!(out.bytes, b"a\rX\rc\r");
    assert_eq!(out.line, Some(2));
}

#[test]
fn case_e08_inserted_lines_take_dominant_ending() {
    let out = run(
        b"a\r\nb\nc\r\n",
        op(EditMode::Insert, "new1\nnew2", None, Some(2), None),
    )
    .unwrap();
    assert_eq!(out.bytes, b"a\r\nnew1\r\nnew2\r\nb\nc\r\n");
    assert_eq!(out.now_reads, vec!["new1", "new2"]);
    assert_eq!(out.line, Some(2));
}

#[test]
fn case_e10_line1_edit_of_crlf_file_changes_only_line1() {
    let out = replace_line(b"first\r\nsecond\r\nthird\r\n", "FIRST", 1).unwrap();
    assert_eq!(out.bytes, b"FIRST\r\nsecond\r\nthird\r\n");
    assert_eq!(
        out.message,
        "replaced line 1 of f.txt; line 1 now: \"FIRST\""
    );
}

#[test]
fn case_e11_line_break_in_find_matches_crlf() {
    let out = replace_find(b"one\r\ntwo\r\nthree\r\n", "1\n2", "one\ntwo").unwrap();
    assert_eq!(out.bytes, b"1\r\n2\r\nthree\r\n");
}

#[test]
fn case_n01_no_final_newline_stays_absent() {
    let out = replace_line(b"line1\nline2\nline3", "LINE1", 1).unwrap();
    assert_eq!(out.bytes, b"LINE1\nline2\nline3");
}

#[test]
fn case_n03_last_line_without_ending_edited_by_line() {
    let out = replace_line(b"a\nb", "B", 2).unwrap();
    assert_eq!(out.bytes, b"a\nB");
}

#[test]
fn case_b01_utf8_bom_crlf_survive_multiline_replace() {
    let out = replace_find(
        b"\xef\xbb\xbfdef f():\r\n    return 1\r\n",
        "x = 1\n    return x",
        "return 1",
    )
    .unwrap();
    assert_eq!(
        out.bytes,
        b"\xef\xbb\xbfdef f():\r\n    x = 1\r\n    return x\r\n"
    );
    assert!(out.format.bom);
    assert_eq!(out.now_reads, vec!["    x = 1", "    return x"]);
}

#[test]
fn case_b02_utf8_bom_kept_on_whole_write() {
    assert_eq!(
        whole_write(b"\xef\xbb\xbfold\n", "sécurisé\n"),
        b"\xef\xbb\xbfs\xc3\xa9curis\xc3\xa9\n"
    );
}

#[test]
fn case_b05_append_to_utf16le_crlf_stays_utf16le_crlf() {
    let out = run(
        b"\xff\xfea\x00\r\x00\n\x00",
        op(EditMode::Append, "b\n", None, None, None),
    )
    .unwrap();
    assert_eq!(out.bytes, b"\xff\xfea\x00\r\x00\n\x00b\x00\r\x00\n\x00");
    assert_eq!(out.line, Some(2));
    assert_eq!(out.now_reads, vec!["b"]);
}

#[test]
fn case_b07_latin1_file_edited_byte_exact() {
    let file = b"const x = 1;\n// caf\xe9 note\n";
    assert_eq!(detect(file).unwrap().encoding.name(), "windows-1252");
    let out = replace_find(file, "const x = 2;", "const x = 1;").unwrap();
    assert_eq!(out.bytes, b"const x = 2;\n// caf\xe9 note\n");
}

#[test]
fn case_b09_whole_write_utf16le_bom_with_feff_content_one_bom() {
    assert_eq!(
        whole_write(b"\xff\xfeo\x00l\x00d\x00", "\u{feff}hello"),
        b"\xff\xfeh\x00e\x00l\x00l\x00o\x00"
    );
}

#[test]
fn case_b11_lone_surrogate_cannot_become_content() {
    // The content "x\u{d800}y\n" is not valid Unicode: it cannot be a Rust `&str`, so
    // it is refused where the request is decoded (serde_json rejects a lone surrogate
    // escape) before this crate is reached; nothing is written.
    assert!(String::from_utf16(&[0x78, 0xD800, 0x79, 0x0A]).is_err());
    // The file itself stays as it was: a valid write to it is unaffected.
    assert_eq!(whole_write(b"keep\n", "keep\n"), b"keep\n");
}

#[test]
fn case_m01_find_twice_is_ambiguous() {
    let err = replace_find(
        b"def dev():\n    debug = True\n\ndef prod():\n    debug = True\n",
        "    debug = False",
        "    debug = True",
    )
    .unwrap_err();
    assert!(
        matches!(err, TextError::AmbiguousTextMatch { .. }),
        "{err:?}"
    );
    assert_eq!(
        err,
        TextError::AmbiguousTextMatch {
            count: 2,
            lines: vec![2, 5]
        }
    );
}

#[test]
fn case_m03_replacement_indentation_written_exactly() {
    let out = replace_find(
        b"class Outer:\n    def method(self):\n        self.kept = 1\n        self.a = 0\n        self.b = 0\n",
        "self.a = 1\n        self.b = 1",
        "self.a = 0\n        self.b = 0",
    )
    .unwrap();
    assert_eq!(
        out.bytes,
        &b"class Outer:\n    def method(self):\n        self.kept = 1\n        self.a = 1\n        self.b = 1\n"[..]
    );
    assert_eq!(out.kept_indentation, None);
}

#[test]
fn case_m05_overlapping_occurrences_are_ambiguous() {
    let err = replace_find(b"aaa\n", "b", "aa").unwrap_err();
    assert_eq!(
        err,
        TextError::AmbiguousTextMatch {
            count: 2,
            lines: vec![1, 1]
        }
    );
}

#[test]
fn case_m07_zero_occurrences_is_text_not_found() {
    let err = replace_find(b"abc\n", "b", "zzz").unwrap_err();
    assert!(matches!(err, TextError::TextNotFound(_)), "{err:?}");
}

#[test]
fn case_l01_keep_indentation_when_content_lost_it() {
    let out = replace_line(b"def f():\n    return 1\n", "return 10", 2).unwrap();
    assert_eq!(out.bytes, b"def f():\n    return 10\n");
    assert_eq!(out.kept_indentation.as_deref(), Some("4 spaces"));
    assert_eq!(
        out.message,
        "replaced line 2 of f.txt, keeping the line's indentation (4 spaces); line 2 now: \"    return 10\""
    );
}

#[test]
fn case_l03_deliberate_dedent_written_exactly() {
    let out = replace_line(b"if x:\n    y = 1\n", "y = 1", 2).unwrap();
    assert_eq!(out.bytes, b"if x:\ny = 1\n");
    assert_eq!(out.kept_indentation, None);
}

#[test]
fn case_l05_tabs_to_spaces_written_exactly() {
    let out = replace_line(b"if x:\n\ty = 1\n", "    y = 1", 2).unwrap();
    assert_eq!(out.bytes, b"if x:\n    y = 1\n");
    assert_eq!(out.kept_indentation, None);
}

#[test]
fn case_l07_stale_number_reconciled() {
    let out = run(
        b"def f():\n    x = 0\n    return 1\n",
        op(
            EditMode::Replace,
            "    return 10",
            Some("return 1"),
            Some(2),
            None,
        ),
    )
    .unwrap();
    assert_eq!(out.bytes, b"def f():\n    x = 0\n    return 10\n");
    assert_eq!(out.line, Some(3));
    assert_eq!(out.moved_from, Some(2));
    assert_eq!(
        out.message,
        "line 2 did not contain \"return 1\"; replaced line 3 of f.txt, the one line that does; line 3 now: \"    return 10\""
    );
}

#[test]
fn case_l09_find_on_no_line_is_line_mismatch() {
    let err = run(
        b"a\nb\nc\n",
        op(EditMode::Replace, "x", Some("zzz"), Some(2), None),
    )
    .unwrap_err();
    assert_eq!(
        err,
        TextError::LineMismatch {
            line: 2,
            holds: "b".into()
        }
    );
    assert!(matches!(err, TextError::LineMismatch { .. }), "{err:?}");
}

#[test]
fn case_l11_line_zero_is_out_of_range() {
    let err = replace_line(b"a\nb\n", "x", 0).unwrap_err();
    assert_eq!(err, TextError::LineOutOfRange { line: 0, total: 2 });
}

#[test]
fn case_l14_binary_file_refused() {
    let err = replace_line(b"a\x00b\n", "x", 1).unwrap_err();
    assert_eq!(err, TextError::BinaryFile);
    assert!(matches!(err, TextError::BinaryFile), "{err:?}");
}

#[test]
fn case_l16_replace_range_with_more_lines() {
    let out = run(
        b"a\nb\nc\nd\n",
        op(EditMode::Replace, "X\nY\nZ", None, Some(2), Some(3)),
    )
    .unwrap();
    assert_eq!(out.bytes, b"a\nX\nY\nZ\nd\n");
    assert_eq!(out.now_reads, vec!["X", "Y", "Z"]);
    assert_eq!(
        out.message,
        "replaced lines 2-3 of f.txt; lines 2-4 now: \"X\", \"Y\", \"Z\""
    );
}

#[test]
fn case_h01_expected_hash_is_checked_by_the_caller() {
    // The engine has no notion of expectedHash: the caller compares the sha256 of
    // these bytes before calling it. Without that check this edit would land, which
    // is why the caller must refuse first.
    let out = replace_find(b"a\n", "b", "a").unwrap();
    assert_eq!(out.bytes, b"b\n");
}

#[test]
fn case_f07_size_cap_is_the_callers_and_the_engine_stays_exact() {
    // bytes_gen: "ANCHOR = 0\n" + "x" * 5_242_870 (over max_edit_bytes; the caller
    // answers file_too_large before loading it into the engine). The engine itself is
    // byte-exact and fast on such input.
    let mut file = b"ANCHOR = 0\n".to_vec();
    file.extend(std::iter::repeat_n(b'x', 5_242_870));
    assert!(file.len() > 5 * 1024 * 1024);
    let out = replace_find(&file, "ANCHOR = 1", "ANCHOR = 0").unwrap();
    assert_eq!(&out.bytes[..11], b"ANCHOR = 1\n");
    assert_eq!(out.bytes[11..], file[11..]);
}

#[test]
fn case_c01_two_edits_to_one_file_both_land() {
    // The path lock serialises the two edits; each is applied to the result of the
    // other, in either order.
    let file = b"a\nb\nc\n";
    let first = replace_find(file, "A", "a").unwrap();
    let second = replace_find(&first.bytes, "C", "c").unwrap();
    assert_eq!(second.bytes, b"A\nb\nC\n");
    let first = replace_find(file, "C", "c").unwrap();
    let second = replace_find(&first.bytes, "A", "a").unwrap();
    assert_eq!(second.bytes, b"A\nb\nC\n");
    assert_eq!(
        second.format,
        Format {
            dominant: Some(Ending::Lf),
            ..Format::NEW_FILE
        }
    );
}
