//! Peak heap of the edit engine on a 5 MB file, measured with a counting global
//! allocator (deterministic: it counts bytes asked of the allocator, not RSS).
//!
//! The daemon holds the original bytes and the new bytes of an edit (2x the file
//! size) and must stay within 4x the file size in all, so the engine's own working
//! memory must stay well under 2x. `apply_edit` returns the new bytes, so its peak
//! above the input includes them (1x): the assertion below allows 2x for both.
//!
//! `measure` (ignored by default) prints times and peaks for the usual edits; run
//! it optimised:
//! `cargo test --release -p writegate-text --test alloc_peak -- --ignored --nocapture`.
//! It asserts nothing about time.

use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use writegate_testkit::CountingAlloc;
use writegate_text::{
    EditMode, EditRequest, WriteOptions, apply_edit, detect, encode_whole, numbered_lines,
    split_bytes,
};

/// Serialises the tests of this binary: the counters are process-wide.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// Runs `f`; returns its result and the peak of live heap bytes above what was
/// live when it started.
fn heap_peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOC.peak_during(f)
}

const FILE_BYTES: usize = 5_000_000;
const FIND_LINE: usize = 50_000;
const EDIT_LINE: u64 = 50_010;

/// The benchmark's file: 5,000,000 bytes of `line_bytes`-byte lines ending in
/// `ending`, line `FIND_LINE` holding the unique marker `NEEDLE-A`.
fn big_text(line_bytes: usize, ending: &str) -> Vec<u8> {
    const FILL: &str = "lorem ipsum dolor sit amet, consectetur adipiscing elit sed do";
    let mut s = String::with_capacity(FILE_BYTES);
    for i in 1..=FILE_BYTES / line_bytes {
        let start = s.len();
        write!(s, "{i:06} ").unwrap();
        if i == FIND_LINE {
            s.push_str("NEEDLE-A ");
        }
        let room = line_bytes - ending.len() - (s.len() - start);
        s.push_str(&FILL[..room]);
        s.push_str(ending);
    }
    assert_eq!(s.len(), FILE_BYTES);
    s.into_bytes()
}

fn line_req() -> EditRequest<'static> {
    EditRequest {
        mode: EditMode::Replace,
        content: "050010 edited in process",
        find: None,
        line: Some(EDIT_LINE),
        end_line: None,
        display_path: "big.txt",
        want_diff: false,
    }
}

fn find_req() -> EditRequest<'static> {
    EditRequest {
        mode: EditMode::Replace,
        content: "NEEDLE-B",
        find: Some("NEEDLE-A"),
        line: None,
        end_line: None,
        display_path: "big.txt",
        want_diff: false,
    }
}

#[test]
fn engine_peak_for_an_edit_of_a_5mb_file_of_short_lines_is_below_twice_its_size() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let bytes = big_text(20, "\n");
    let opts = WriteOptions::default();
    for (name, req) in [("line", line_req()), ("find", find_req())] {
        let (out, peak) = heap_peak(|| apply_edit(Some(&bytes), &req, &opts).unwrap());
        assert_eq!(
            out.line,
            Some(if name == "line" { EDIT_LINE } else { 50_000 })
        );
        assert!(
            peak < 2 * FILE_BYTES,
            "{name} edit: peak heap {peak} B above the input, {:.2}x the file size",
            peak as f64 / FILE_BYTES as f64
        );
    }
}

fn median_ms<T>(reps: usize, mut f: impl FnMut() -> T) -> f64 {
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            std::hint::black_box(f());
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "prints timings; run with --release -- --ignored --nocapture"]
// Its output is a table for a person to read (docs/performance.md has the
// command).
#[allow(clippy::print_stdout)]
fn measure() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let opts = WriteOptions::default();
    let reps = 15;
    println!("| file | step | median ms | peak heap above input | / file size |");
    println!("|---|---|---|---|---|");
    for (line_bytes, ending) in [(50, "\n"), (20, "\n"), (50, "\r\n")] {
        let bytes = big_text(line_bytes, ending);
        let file = format!(
            "{} lines of {line_bytes} B, {}",
            FILE_BYTES / line_bytes,
            if ending == "\n" { "LF" } else { "CRLF" }
        );
        let text = std::str::from_utf8(&bytes).unwrap();
        let row = |step: &str, ms: f64, peak: usize| {
            println!(
                "| {file} | {step} | {ms:.2} | {:.2} MiB | {:.2}x |",
                peak as f64 / f64::from(1 << 20),
                peak as f64 / FILE_BYTES as f64
            );
        };
        let run = |r: &EditRequest| apply_edit(Some(&bytes), r, &opts).unwrap();
        let (l, f) = (line_req(), find_req());
        row(
            "apply_edit replace by line",
            median_ms(reps, || run(&l)),
            heap_peak(|| run(&l)).1,
        );
        row(
            "apply_edit replace by find",
            median_ms(reps, || run(&f)),
            heap_peak(|| run(&f)).1,
        );
        row(
            "detect",
            median_ms(reps, || detect(&bytes).unwrap()),
            heap_peak(|| detect(&bytes).unwrap()).1,
        );
        let write = || encode_whole(text, Some(&detect(&bytes).unwrap()), &opts).unwrap();
        row(
            "detect + encode_whole",
            median_ms(reps, write),
            heap_peak(write).1,
        );
        let read = || numbered_lines(&bytes, Some(EDIT_LINE), Some(1)).unwrap();
        row(
            "numbered_lines of one line",
            median_ms(reps, read),
            heap_peak(read).1,
        );
        row(
            "split_bytes",
            median_ms(reps, || split_bytes(&bytes)),
            heap_peak(|| split_bytes(&bytes)).1,
        );
    }
}
