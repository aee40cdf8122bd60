//! A one-line edit and a find-replace of a 5 MB file through the real daemon,
//! against a durable whole-file write of the same 5 MB, measured in the same
//! run; the daemon's peak memory for one such edit; and the in-process cost of
//! `writegate_text::apply_edit` on the same buffer (no disk).
//!
//! Run: `cargo bench -p writegate --bench edit`
//! (optional: `WG_BENCH_SCALE=0.5` or `=2` scales the number of iterations).
//!
//! Daemon part: one daemon, one socket connection, one 5,000,000-byte file of
//! 100,000 ASCII lines (under `max_edit_bytes` = 5 MiB). Each iteration does,
//! in an order that flips every iteration: `fs/write_text_file` of the whole
//! content, `_writegate/edit_text_file` replace by `line` (line 50,010),
//! replace by `find` (a unique marker on line 50,000), a `_writegate/read_lines`
//! of one line (read + hash, no publish), and the bare in-process durable
//! sequence for 5 MB (temp file, write, fsync, rename, fsync directory) on a
//! sibling file. Medians over all iterations.
//!
//! Memory part: a fresh daemon per measurement; `VmHWM` (peak RSS) read after
//! start + initialize, then one request, then `VmHWM` again. A line or find
//! request carries a few bytes, so the delta is the daemon's working memory
//! for the edit.
//!
//! This prints figures; it asserts nothing about time.

#![allow(clippy::print_stdout)] // a benchmark prints its figures to stdout

mod common;

use common::{
    BareWrite, Client, MIB, Tree, bare_write_as, load_average, median, print_preamble, scaled,
    start_daemon, stats, tree, write_params_prefix,
};
use serde_json::{Value, json};
use sha2::Digest;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;
use writegate_testkit::CountingAlloc;
use writegate_text::{EditMode, EditRequest, WriteOptions};

/// The edited file: 100,000 lines of 50 bytes.
const FILE_BYTES: usize = 5_000_000;
const LINE_BYTES: usize = 50;
const LINES: usize = FILE_BYTES / LINE_BYTES;
/// Line length of the short-line variant (memory and in-process parts only).
const SHORT_LINE_BYTES: usize = 20;
/// The line holding the find marker, and the line replaced by number.
const FIND_LINE: usize = 50_000;
const EDIT_LINE: u64 = 50_010;

/// Counts this process's live heap bytes and their peak, so the in-process
/// part can report what `apply_edit` allocates.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

/// Runs `f` and returns its result and the peak of live heap bytes above
/// what was live when it started.
fn heap_peak<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOC.peak_during(f)
}

/// A 5,000,000-byte file of `line_bytes`-byte lines (`\n` endings): the
/// bench's file has 100,000 lines of 50 bytes; the short-line variant
/// 250,000 lines of 20 bytes. Line `FIND_LINE` holds the unique marker
/// `marker`.
fn big_text(marker: &str, line_bytes: usize) -> String {
    const FILL: &str = "lorem ipsum dolor sit amet, consectetur adipiscing elit sed do";
    let mut s = String::with_capacity(FILE_BYTES);
    for i in 1..=FILE_BYTES / line_bytes {
        let start = s.len();
        let _ = write!(s, "{i:06} ");
        if i == FIND_LINE {
            s.push_str(marker);
            s.push(' ');
        }
        let room = line_bytes - 1 - (s.len() - start);
        s.push_str(&FILL[..room]);
        s.push('\n');
    }
    assert_eq!(s.len(), FILE_BYTES);
    assert_eq!(s.matches(marker).count(), 1);
    s
}

/// The `params` of the edit requests, as JSON bytes.
fn line_params(path: &Path, k: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "sessionId": "bench", "path": path, "mode": "replace",
        "line": EDIT_LINE, "content": format!("{EDIT_LINE:06} edited in iteration {k}"),
    }))
    .unwrap()
}

fn find_params(path: &Path) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "sessionId": "bench", "path": path, "mode": "replace",
        "find": "NEEDLE-A", "content": "NEEDLE-B",
    }))
    .unwrap()
}

fn read_params(path: &Path) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "sessionId": "bench", "path": path, "line": FIND_LINE, "limit": 1,
    }))
    .unwrap()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Bare,
    Write,
    Line,
    Find,
    Read,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Bare => "bare sequence, 5 MB (in-process, no daemon)",
            Op::Write => "daemon fs/write_text_file, whole 5 MB",
            Op::Line => "daemon edit replace by line",
            Op::Find => "daemon edit replace by find",
            Op::Read => "daemon read_lines of one line (no publish)",
        }
    }
}

/// Everything one iteration needs, prepared outside the timed part.
struct Prepared {
    big: PathBuf,
    content: String,
    write_prefix: Vec<u8>,
    content_json: Vec<u8>,
    find: Vec<u8>,
    read: Vec<u8>,
}

fn prepare(t: &Tree, line_bytes: usize) -> Prepared {
    let big = t.ws.join("big.txt");
    let content = big_text("NEEDLE-A", line_bytes);
    Prepared {
        write_prefix: write_params_prefix(&big, "bench"),
        content_json: serde_json::to_vec(&content).unwrap(),
        find: find_params(&big),
        read: read_params(&big),
        content,
        big,
    }
}

/// Runs one op and returns its time in milliseconds.
fn run_op(op: Op, t: &Tree, c: &mut Client, p: &Prepared, k: usize, seq: &mut u64) -> f64 {
    let start = Instant::now();
    match op {
        Op::Bare => bare_write_as(
            BareWrite::from_env(),
            &t.ws,
            "bare.txt",
            p.content.as_bytes(),
            "bare",
            seq,
        ),
        Op::Write => {
            c.call(
                "fs/write_text_file",
                &[&p.write_prefix, &p.content_json, b"}"],
            );
        }
        Op::Line => {
            let params = line_params(&p.big, k);
            let r = c.call("_writegate/edit_text_file", &[&params]);
            assert_eq!(r["line"], json!(EDIT_LINE), "{r}");
        }
        Op::Find => {
            let r = c.call("_writegate/edit_text_file", &[&p.find]);
            assert_eq!(r["line"], json!(FIND_LINE), "{r}");
        }
        Op::Read => {
            let r = c.call("_writegate/read_lines", &[&p.read]);
            assert_eq!(r["totalLines"], json!(LINES), "{r}");
        }
    }
    start.elapsed().as_secs_f64() * 1e3
}

/// Part 1: interleaved timings through one daemon. Returns the medians.
fn timings(t: &Tree) -> Vec<(Op, f64)> {
    let p = prepare(t, LINE_BYTES);
    let daemon = start_daemon(t);
    let mut c = Client::connect(&t.sock);
    let mut seq = 0u64;
    // Warm-up: the file exists, the page cache holds it, one of each op ran.
    for op in [Op::Write, Op::Line, Op::Find, Op::Read, Op::Bare] {
        run_op(op, t, &mut c, &p, 0, &mut seq);
    }
    let first = c.call("_writegate/edit_text_file", &[&line_params(&p.big, 0)]);
    println!("a line edit answers: {}", first["message"]);
    let iterations = scaled(24);
    let orders = [
        [Op::Write, Op::Line, Op::Find, Op::Read, Op::Bare],
        [Op::Bare, Op::Read, Op::Write, Op::Find, Op::Line],
    ];
    let all = [Op::Bare, Op::Write, Op::Line, Op::Find, Op::Read];
    let mut ms: Vec<Vec<f64>> = vec![Vec::new(); all.len()];
    for k in 0..iterations {
        for op in orders[k % 2] {
            let v = run_op(op, t, &mut c, &p, k + 1, &mut seq);
            ms[all.iter().position(|o| *o == op).unwrap()].push(v);
        }
    }
    println!();
    println!("{iterations} interleaved iterations, file {FILE_BYTES} bytes, {LINES} lines");
    println!("| operation | median ms | min ms | max ms | MB/s (median) |");
    println!("|---|---|---|---|---|");
    let mut medians = Vec::new();
    for (i, op) in all.iter().enumerate() {
        let (med, min, max) = stats(&ms[i]);
        println!(
            "| {} | {med:.1} | {min:.1} | {max:.1} | {:.0} |",
            op.name(),
            FILE_BYTES as f64 / 1e6 / (med / 1e3)
        );
        medians.push((*op, med));
    }
    // Per-iteration ratios too (each iteration's ops ran back to back).
    let per_iter = |a: usize, b: usize| {
        let r: Vec<f64> = ms[a].iter().zip(&ms[b]).map(|(x, y)| x / y).collect();
        stats(&r)
    };
    let (lr, lmin, lmax) = per_iter(2, 1);
    let (fr, fmin, fmax) = per_iter(3, 1);
    let (wr, wmin, wmax) = per_iter(1, 0);
    println!(
        "per-iteration ratios (median, min–max): line/write {lr:.3} ({lmin:.2}–{lmax:.2}), find/write {fr:.3} ({fmin:.2}–{fmax:.2}), write/bare {wr:.3} ({wmin:.2}–{wmax:.2})"
    );
    drop(c);
    drop(daemon);
    medians
}

/// Part 2: `VmHWM` of a fresh daemon around one request. Returns, per op, the
/// median delta in KiB.
fn memory(t: &Tree) -> Vec<(Op, usize, u64)> {
    let normal = prepare(t, LINE_BYTES);
    let short = prepare(t, SHORT_LINE_BYTES);
    let warm = write_params_prefix(&t.ws.join("warm.txt"), "bench");
    let reps = 3;
    println!();
    println!("peak memory of one request, a fresh daemon each time ({reps} each):");
    println!(
        "| request | VmHWM before KiB | VmHWM after KiB | delta KiB (median) | delta / file size | VmRSS after KiB |"
    );
    println!("|---|---|---|---|---|---|");
    let mut out = Vec::new();
    let cases = [
        (Op::Line, &normal, LINE_BYTES),
        (Op::Find, &normal, LINE_BYTES),
        (Op::Write, &normal, LINE_BYTES),
        (Op::Read, &normal, LINE_BYTES),
        (Op::Line, &short, SHORT_LINE_BYTES),
        (Op::Find, &short, SHORT_LINE_BYTES),
    ];
    for (op, p, line_bytes) in cases {
        let mut deltas = Vec::new();
        let (mut before, mut after, mut rss_after) = (0, 0, 0);
        for rep in 0..reps {
            fs::write(&p.big, p.content.as_bytes()).unwrap();
            let daemon = start_daemon(t);
            let mut c = Client::connect(&t.sock);
            // One small write first: the blocking thread and its allocator
            // arena exist before the baseline is read.
            c.call("fs/write_text_file", &[&warm, b"\"warm\\n\"", b"}"]);
            let hwm0 = daemon.status_kib("VmHWM");
            let mut seq = 0;
            run_op(op, t, &mut c, p, rep + 1, &mut seq);
            let hwm1 = daemon.status_kib("VmHWM");
            rss_after = daemon.status_kib("VmRSS");
            deltas.push((hwm1 - hwm0) as f64);
            before = hwm0;
            after = hwm1;
            drop(c);
            drop(daemon);
        }
        let (med, min, max) = stats(&deltas);
        println!(
            "| {}, {} lines of {line_bytes} B | {before} | {after} | {med:.0} ({min:.0}–{max:.0}) | {:.2}x | {rss_after} |",
            op.name(),
            FILE_BYTES / line_bytes,
            med * 1024.0 / FILE_BYTES as f64
        );
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        // KiB, small and positive
        out.push((op, line_bytes, med as u64));
    }
    out
}

fn time_ms<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut v = Vec::new();
    let mut last = None;
    for _ in 0..reps {
        let s = Instant::now();
        last = Some(std::hint::black_box(f()));
        v.push(s.elapsed().as_secs_f64() * 1e3);
    }
    (median(&mut v), last.unwrap())
}

/// Part 3: in-process CPU costs on the same 5 MB buffer (no disk, no
/// daemon): the edit engine and the other passes a daemon request makes.
fn micro() {
    let text = big_text("NEEDLE-A", LINE_BYTES);
    let short = big_text("NEEDLE-A", SHORT_LINE_BYTES).into_bytes();
    let bytes = text.as_bytes().to_vec();
    let opts = WriteOptions::default();
    let line_req = EditRequest {
        mode: EditMode::Replace,
        content: "050010 edited in process",
        find: None,
        line: Some(EDIT_LINE),
        end_line: None,
        display_path: "big.txt",
        want_diff: false,
    };
    let find_req = EditRequest {
        mode: EditMode::Replace,
        content: "NEEDLE-B",
        find: Some("NEEDLE-A"),
        line: None,
        end_line: None,
        display_path: "big.txt",
        want_diff: false,
    };
    let reps = scaled(15).max(3);
    let request_line = {
        let mut v = br#"{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/x/big.txt","content":"#.to_vec();
        v.extend_from_slice(&serde_json::to_vec(&text).unwrap());
        v.extend_from_slice(b"}}");
        v
    };
    println!();
    println!("in-process, 5 MB buffer, no disk (median of {reps}):");
    println!("| step | ms | peak heap above input | / file size |");
    println!("|---|---|---|---|");
    let row = |name: &str, ms: f64, peak: Option<usize>| {
        let (p, x) = match peak {
            Some(p) => (
                format!("{:.1} MiB", p as f64 / MIB as f64),
                format!("{:.2}x", p as f64 / FILE_BYTES as f64),
            ),
            None => (String::new(), String::new()),
        };
        println!("| {name} | {ms:.2} | {p} | {x} |");
    };
    let (ms, _) = time_ms(reps, || {
        writegate_text::apply_edit(Some(&bytes), &line_req, &opts).unwrap()
    });
    let (_, peak) =
        heap_peak(|| writegate_text::apply_edit(Some(&bytes), &line_req, &opts).unwrap());
    row("apply_edit replace by line", ms, Some(peak));
    let (ms, _) = time_ms(reps, || {
        writegate_text::apply_edit(Some(&bytes), &find_req, &opts).unwrap()
    });
    let (_, peak) =
        heap_peak(|| writegate_text::apply_edit(Some(&bytes), &find_req, &opts).unwrap());
    row("apply_edit replace by find", ms, Some(peak));
    let (ms, _) = time_ms(reps, || {
        writegate_text::apply_edit(Some(&short), &line_req, &opts).unwrap()
    });
    let (_, peak) =
        heap_peak(|| writegate_text::apply_edit(Some(&short), &line_req, &opts).unwrap());
    row(
        &format!(
            "apply_edit replace by line, {} lines of {SHORT_LINE_BYTES} B",
            FILE_BYTES / SHORT_LINE_BYTES
        ),
        ms,
        Some(peak),
    );
    let (ms, _) = time_ms(reps, || writegate_text::detect(&bytes).unwrap());
    let (_, peak) = heap_peak(|| writegate_text::detect(&bytes).unwrap());
    row(
        "detect (UTF-8 check + line split for the dominant ending)",
        ms,
        Some(peak),
    );
    let (ms, lines) = time_ms(reps, || writegate_text::split_bytes(&bytes));
    let lines_heap = lines.capacity() * std::mem::size_of::<writegate_text::Line>();
    row(
        &format!(
            "split_bytes ({} lines, {} B each)",
            lines.len(),
            std::mem::size_of::<writegate_text::Line>()
        ),
        ms,
        Some(lines_heap),
    );
    let (ms, _) = time_ms(reps, || std::str::from_utf8(&bytes).is_ok());
    row("UTF-8 validation", ms, None);
    let (ms, _) = time_ms(reps, || sha2::Sha256::digest(&bytes));
    row("sha256 (the daemon hashes before and after)", ms, None);
    let (ms, _) = time_ms(reps, || bytes.clone());
    row("copy of 5 MB (Vec clone)", ms, Some(FILE_BYTES));
    let (ms, _) = time_ms(reps, || {
        writegate_text::encode_whole(&text, Some(&writegate_text::detect(&bytes).unwrap()), &opts)
            .unwrap()
    });
    row("detect + encode_whole (the write's planning)", ms, None);
    let (ms, _) = time_ms(reps, || {
        serde_json::from_slice::<Value>(&request_line).unwrap()
    });
    let (_, peak) = heap_peak(|| serde_json::from_slice::<Value>(&request_line).unwrap());
    row(
        "serde_json parse of the 5 MB write request line",
        ms,
        Some(peak),
    );
}

fn main() {
    let t = tree("edit");
    print_preamble("edit", &t);
    BareWrite::print_choice();
    let started = Instant::now();
    let medians = timings(&t);
    let get = |op| medians.iter().find(|(o, _)| *o == op).unwrap().1;
    let (write, line, find, bare) = (get(Op::Write), get(Op::Line), get(Op::Find), get(Op::Bare));
    let mem = memory(&t);
    micro();
    println!();
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!("daemon write / bare sequence (5 MB): {:.3}", write / bare);
    println!(
        "target: line edit <= 1.0x the whole-file write (ADR 0019): {:.3} -> {}",
        line / write,
        verdict(line / write <= 1.0)
    );
    println!(
        "target: find-replace <= 2x the whole-file write: {:.3} -> {}",
        find / write,
        verdict(find / write <= 2.0)
    );
    for (op, line_bytes, delta_kib) in &mem {
        if matches!(op, Op::Line | Op::Find) {
            let x = *delta_kib as f64 * 1024.0 / FILE_BYTES as f64;
            println!(
                "target: peak memory of the {} edit ({line_bytes}-byte lines) <= 4x the file size: {:.2}x ({:.1} MiB) -> {}",
                if *op == Op::Line { "line" } else { "find" },
                x,
                *delta_kib as f64 / 1024.0,
                verdict(x <= 4.0)
            );
        }
    }
    println!("measured in {:.1} s", started.elapsed().as_secs_f64());
    println!("load average at end: {}", load_average());
}
