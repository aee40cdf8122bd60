//! Fuzz target `line_model`: the SPEC 8.1 line model on arbitrary input.
//!
//! For arbitrary bytes, and for the same bytes reinterpreted as UTF-16 (both byte
//! orders) and UTF-32 code units, `split_units` must:
//! - give lines whose ranges are contiguous and join back to the input exactly;
//! - give texts holding no `\n` / `\r` unit;
//! - give endings of exactly `\n`, `\r\n` or a lone `\r` (a `\r` followed by `\n` is
//!   always one `\r\n` ending, never split);
//! - leave only the last line without an ending, and never end on an empty last
//!   line without an ending;
//!
//! `dominant` must never panic and must agree with a plain count.
//! `convert_breaks` over the lossily decoded text keeps every line's text and gives
//! every line break the asked ending.
#![no_main]

use libfuzzer_sys::fuzz_target;
use writegate_text::{Ending, Line, convert_breaks, dominant, split_bytes, split_units};

const CR: u32 = 0x0D;
const LF: u32 = 0x0A;

fn check<U: Copy + Into<u32>>(units: &[U], lines: &[Line]) {
    let v = |i: usize| -> u32 { units[i].into() };
    let mut pos = 0;
    let mut joined: Vec<u32> = Vec::with_capacity(units.len());
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(
            l.start, pos,
            "line {i} does not start where the previous ended"
        );
        assert!(l.start <= l.text_end && l.text_end <= l.end && l.end <= units.len());
        for j in l.text() {
            assert!(
                v(j) != CR && v(j) != LF,
                "line {i} text holds a line break unit"
            );
        }
        let ending: Vec<u32> = (l.text_end..l.end).map(v).collect();
        match l.ending {
            Some(Ending::Lf) => assert_eq!(ending, [LF]),
            Some(Ending::CrLf) => assert_eq!(ending, [CR, LF]),
            Some(Ending::Cr) => {
                assert_eq!(ending, [CR]);
                // A lone CR is never followed by LF (that would be one CRLF).
                assert!(l.end == units.len() || v(l.end) != LF, "CRLF split in two");
            }
            None => {
                assert!(ending.is_empty());
                assert_eq!(i + 1, lines.len(), "only the last line may lack an ending");
                assert!(l.text_end > l.start, "an empty last line without ending");
            }
        }
        assert_eq!(l.ending.map_or(0, Ending::len), l.end - l.text_end);
        joined.extend((l.start..l.end).map(v));
        pos = l.end;
    }
    assert_eq!(pos, units.len());
    let want: Vec<u32> = units.iter().map(|&u| u.into()).collect();
    assert_eq!(joined, want, "lines do not join back to the input");
    assert_eq!(lines.is_empty(), units.is_empty());

    // dominant agrees with a plain count (ties: LF, then CRLF, then CR).
    let count = |e: Ending| lines.iter().filter(|l| l.ending == Some(e)).count();
    let (lf, crlf, cr) = (count(Ending::Lf), count(Ending::CrLf), count(Ending::Cr));
    let want = if lf + crlf + cr == 0 {
        None
    } else if lf >= crlf && lf >= cr {
        Some(Ending::Lf)
    } else if crlf >= cr {
        Some(Ending::CrLf)
    } else {
        Some(Ending::Cr)
    };
    assert_eq!(dominant(lines), want);
}

fuzz_target!(|data: &[u8]| {
    check(data, &split_bytes(data));

    let le: Vec<u16> = data
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    check(&le, &split_units(&le));
    let be: Vec<u16> = data
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    check(&be, &split_units(&be));
    let wide: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    check(&wide, &split_units(&wide));

    // convert_breaks keeps texts and gives every break the asked ending.
    let text = String::from_utf8_lossy(data);
    let before = split_bytes(text.as_bytes());
    for e in [Ending::Lf, Ending::CrLf, Ending::Cr] {
        let out = convert_breaks(&text, e);
        let after = split_bytes(out.as_bytes());
        assert_eq!(
            before.len(),
            after.len(),
            "convert_breaks changed the line count"
        );
        for (o, n) in before.iter().zip(&after) {
            assert_eq!(text[o.text()], out[n.text()]);
            assert_eq!(o.ending.map(|_| e), n.ending);
        }
    }
});
