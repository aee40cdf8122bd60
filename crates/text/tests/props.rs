//! Property tests: the line model round-trips, line edits are local, dominant-ending
//! ties, a whole-file write's bytes are those of `encode_whole`, and no input makes
//! the engine panic or trip its own guard.

use proptest::prelude::*;
use writegate_text::{
    EditMode, EditRequest, Ending, LineEndingChoice, TextError, WriteOptions, apply_edit, detect,
    dominant, encode_whole, encode_whole_bytes, numbered_lines, split_bytes,
};

/// Bytes rich in line-break material, spaces, tabs, UTF-8 and invalid bytes (no NUL).
fn file_bytes() -> impl Strategy<Value = Vec<u8>> {
    let unit = prop_oneof![
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\t".to_vec()),
        Just(b"a".to_vec()),
        Just(b"bc".to_vec()),
        Just("é".as_bytes().to_vec()),
        Just(vec![0xFF]),
        Just(vec![0xC3]),
    ];
    (any::<bool>(), prop::collection::vec(unit, 0..40)).prop_map(|(bom, parts)| {
        let mut v = if bom {
            vec![0xEF, 0xBB, 0xBF]
        } else {
            Vec::new()
        };
        for p in parts {
            v.extend(p);
        }
        v
    })
}

fn content() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!["x", "y", " ", "\t", "\n", "\r", "\r\n", "é"]),
        0..6,
    )
    .prop_map(|v| v.concat())
}

fn req(mode: EditMode, content: &str, line: Option<u64>, end_line: Option<u64>) -> EditRequest<'_> {
    EditRequest {
        mode,
        content,
        find: None,
        line,
        end_line,
        display_path: "p",
        want_diff: false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn split_then_join_gives_back_the_input(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let lines = split_bytes(&bytes);
        let mut joined = Vec::new();
        let mut pos = 0;
        for l in &lines {
            prop_assert_eq!(l.start, pos);
            prop_assert!(l.start <= l.text_end && l.text_end <= l.end);
            prop_assert!(!bytes[l.text()].contains(&b'\n') && !bytes[l.text()].contains(&b'\r'));
            joined.extend_from_slice(&bytes[l.range()]);
            pos = l.end;
        }
        prop_assert_eq!(joined, bytes.clone());
        // Only the last line may lack an ending.
        for l in lines.iter().rev().skip(1) {
            prop_assert!(l.ending.is_some());
        }
    }

    #[test]
    fn split_on_interesting_bytes_round_trips(bytes in file_bytes()) {
        let lines = split_bytes(&bytes);
        let joined: Vec<u8> = lines.iter().flat_map(|l| bytes[l.range()].to_vec()).collect();
        prop_assert_eq!(joined, bytes);
    }

    #[test]
    fn dominant_ending_ties(lf in 0usize..4, crlf in 0usize..4, cr in 0usize..4, seed in any::<u64>()) {
        let mut endings: Vec<&str> = Vec::new();
        endings.extend(std::iter::repeat_n("\n", lf));
        endings.extend(std::iter::repeat_n("\r\n", crlf));
        endings.extend(std::iter::repeat_n("\r", cr));
        // A deterministic shuffle.
        let mut s = seed;
        for i in (1..endings.len()).rev() {
            s = s.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            endings.swap(i, usize::try_from(s >> 33).unwrap() % (i + 1));
        }
        let text: String = endings.iter().flat_map(|e| ["x", e]).collect();
        let want = if lf + crlf + cr == 0 {
            None
        } else if lf >= crlf && lf >= cr {
            Some(Ending::Lf)
        } else if crlf >= cr {
            Some(Ending::CrLf)
        } else {
            Some(Ending::Cr)
        };
        prop_assert_eq!(dominant(&split_bytes(text.as_bytes())), want);
    }

    #[test]
    fn line_edits_keep_bytes_outside_their_range(
        bytes in file_bytes(),
        c in content(),
        which in 0u8..3,
        l in 0u64..12,
        span in 0u64..3,
    ) {
        let Ok(format) = detect(&bytes) else { return Ok(()); };
        let bom = format.bom_len();
        let lines = split_bytes(&bytes[bom..]);
        let total = lines.len() as u64;
        let end = l + span;
        let (mode, line, end_line) = match which {
            0 => (EditMode::Replace, Some(l), Some(end)),
            1 => (EditMode::Insert, Some(l), None),
            _ => (EditMode::Delete, Some(l), Some(end)),
        };
        let result = apply_edit(Some(&bytes), &req(mode, &c, line, end_line), &WriteOptions::default());
        let out = match result {
            Ok(out) => out,
            Err(TextError::LineOutOfRange { .. }) => {
                let last_ok = if mode == EditMode::Insert { total + 1 } else { total };
                prop_assert!(l == 0 || l > last_ok || (mode != EditMode::Insert && end > total));
                return Ok(());
            }
            Err(TextError::UnmappableCharacter(_)) => return Ok(()),
            // Deleting lines, or emptying a line, between a lone CR and an LF cannot be
            // represented (the two would read as one CRLF): `line_ending_conflict`.
            Err(TextError::LineEndingConflict { .. })
                if mode == EditMode::Delete
                    || writegate_text::lines::strip_one_break(&c).is_empty() => {
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(format!("unexpected error {e:?}"))),
        };
        let new = &out.bytes;
        prop_assert_eq!(&new[..bom], &bytes[..bom]);
        let (o, n) = (&bytes[bom..], &new[bom..]);
        let li = usize::try_from(l - 1).unwrap();
        let (keep_before, keep_after) = match mode {
            EditMode::Replace => (lines[li].start, lines[usize::try_from(end - 1).unwrap()].text_end),
            EditMode::Insert if l <= total => (lines[li].start, lines[li].start),
            EditMode::Insert => (o.len(), o.len()),
            _ => {
                let ei = usize::try_from(end - 1).unwrap();
                if lines[ei].ending.is_none() && li > 0 {
                    (lines[li - 1].text_end, o.len())
                } else {
                    (lines[li].start, lines[ei].end)
                }
            }
        };
        prop_assert_eq!(&n[..keep_before], &o[..keep_before]);
        prop_assert!(n.len() >= o.len() - keep_after);
        prop_assert_eq!(&n[n.len() - (o.len() - keep_after)..], &o[keep_after..]);
        // A file with a final line break keeps one. (A file without one may end with
        // a break afterwards only when its new last line is empty: an empty last line
        // without an ending is the same bytes as no line at all.)
        let is_break = |b: &u8| *b == b'\n' || *b == b'\r';
        if o.last().is_some_and(is_break) && !n.is_empty() {
            prop_assert!(n.last().is_some_and(is_break));
        }
        if !o.is_empty() && !o.last().is_some_and(is_break) && n.last().is_some_and(is_break) {
            let stripped = writegate_text::lines::strip_one_break(&c);
            let last_new_line_empty = stripped.is_empty() || stripped.ends_with(['\n', '\r']);
            let empty_line_added = match mode {
                EditMode::Replace | EditMode::Insert => last_new_line_empty,
                _ => true,
            };
            prop_assert!(empty_line_added || total == 0);
        }
    }

    #[test]
    fn unique_find_replaces_exactly_that_range(
        parts in prop::collection::vec(prop::sample::select(vec!["a", "b", "ab", "\n", "\r\n", " "]), 1..20),
        start in 0usize..40,
        len in 1usize..6,
        c in "[xyz]{0,3}",
    ) {
        let file: String = parts.concat();
        let start = start.min(file.len() - 1);
        let end = (start + len).min(file.len());
        let find = &file[start..end];
        let find = &find[..find.find(['\r', '\n']).unwrap_or(find.len())];
        if find.is_empty() {
            return Ok(());
        }
        let hits: Vec<usize> = (0..=file.len() - find.len())
            .filter(|&i| file[i..].starts_with(find))
            .collect();
        let r = EditRequest {
            mode: EditMode::Replace,
            content: &c,
            find: Some(find),
            line: None,
            end_line: None,
            display_path: "p",
            want_diff: true,
        };
        match apply_edit(Some(file.as_bytes()), &r, &WriteOptions::default()) {
            Ok(out) => {
                prop_assert_eq!(hits.len(), 1);
                let want = format!("{}{}{}", &file[..hits[0]], c, &file[hits[0] + find.len()..]);
                prop_assert_eq!(out.bytes, want.into_bytes());
                prop_assert!(out.diff.is_some());
            }
            Err(TextError::AmbiguousTextMatch { count, .. }) => prop_assert_eq!(count, hits.len()),
            Err(e) => return Err(TestCaseError::fail(format!("unexpected error {e:?}"))),
        }
    }

    #[test]
    fn numbering_of_reads_matches_the_edit_model(bytes in file_bytes()) {
        if let Ok(n) = numbered_lines(&bytes, None, None) {
            let bom = n.format.bom_len();
            prop_assert_eq!(n.total_lines, split_bytes(&bytes[bom..]).len());
        }
    }

    #[test]
    fn no_input_panics_or_trips_the_guard(
        bytes in prop::collection::vec(any::<u8>(), 0..64),
        c in content(),
        find in proptest::option::of("[a\\n\\r ]{0,3}"),
        line in proptest::option::of(0u64..6),
        end_line in proptest::option::of(0u64..6),
        mode in prop::sample::select(vec![EditMode::Write, EditMode::Append, EditMode::Replace, EditMode::Insert, EditMode::Delete]),
        exists in any::<bool>(),
    ) {
        let r = EditRequest {
            mode,
            content: &c,
            find: find.as_deref(),
            line,
            end_line,
            display_path: "p",
            want_diff: true,
        };
        let original = exists.then_some(bytes.as_slice());
        if let Err(e) = apply_edit(original, &r, &WriteOptions::default()) {
            // The guard never trips: the one edit construction cannot build (a
            // lone CR left directly before an LF) is refused before it, as
            // `line_ending_conflict`.
            prop_assert!(!matches!(e, TextError::Guard(_)), "{e:?}");
            prop_assert!(!e.hint().is_empty());
        }
    }

    #[test]
    fn write_bytes_are_encode_whole_bytes(
        bytes in file_bytes(),
        c in content(),
        exists in any::<bool>(),
        bom_first in any::<bool>(),
        encoding in proptest::option::of(prop::sample::select(vec!["utf-8", "utf-16le", "utf-32be", "windows-1252", "shift_jis", "nope"])),
        bom in proptest::option::of(any::<bool>()),
        ending in proptest::option::of(prop::sample::select(vec![LineEndingChoice::Lf, LineEndingChoice::Crlf])),
    ) {
        let content = if bom_first { format!("\u{FEFF}{c}") } else { c };
        let existing = if exists { detect(&bytes).ok() } else { None };
        let opts = WriteOptions { encoding: encoding.map(str::to_string), bom, line_ending: ending };
        let whole = encode_whole(&content, existing.as_ref(), &opts);
        let fast = encode_whole_bytes(&content, existing.as_ref(), &opts);
        match (whole, fast) {
            (Ok((w, _)), Ok(f)) => prop_assert_eq!(w, f.into_owned()),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "encode_whole {:?} but encode_whole_bytes {:?}", a.map(|x| x.0), b),
        }
    }
}
