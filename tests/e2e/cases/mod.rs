//! Conformance cases, end to end: every case of `tests/fixtures/cases.jsonl` (the project's own
//! copy of the shared case file) run against the real `writegate` binary over ACP/JSON-RPC on
//! stdio, one `#[test]` per case.
//!
//! This module mirrors `../shared/cases/run_cases.py` (the shared runner, described in
//! `../shared/cases/README.md`) step for step and must keep doing so: a case passes here exactly
//! when it passes there. Per case: a scratch directory `W` with the workspace `W/root` (or the name
//! a `root` setup step gives); the setup steps (files from `bytes_b64` / `bytes_gen`, directories,
//! symlinks with `{ROOT}` / `{W}` substituted in the target, modes, bound Unix sockets kept open for
//! the whole case); a snapshot of `W` (not following links); then
//! `writegate serve --stdio --workspace ROOT --audit-log A/audit.jsonl` plus the case's `serve`
//! flags (stderr to `A/stderr.log`), `initialize` (id 0), the ops (`kind: write` as
//! `fs/write_text_file`, any other kind as `_writegate/edit_text_file` with `mode` = kind), each one
//! awaited unless the case is `concurrent`; stdin closed and the daemon awaited (killed after 10 s);
//! then every `expect` check on the responses, the files and the audit log.
//!
//! Requests go over the wire byte for byte as Python's `json.dumps(msg, ensure_ascii=True)` writes
//! them (see [`json::dumps`]; `_meta` keeps the fixture's key order), and lone UTF-16 surrogates
//! in the JSON (case B11 sends `"x\ud800y\n"`) survive the round trip although a Rust `String`
//! cannot hold them (see [`json::parse_ordered`]).
//! When a case fails, its test panics with the runner's list of problems (then the tail of the
//! daemon's stderr).
//!
//! The runner is split in four: [`check`] (one case: setup, the daemon, every `expect` check),
//! [`daemon`] (the daemon over stdin and stdout, and the request lines), [`json`] (JSON text as
//! Python's json module reads and writes it) and [`python`] (fixture values and messages the way
//! the Python runner reads and shows them).

mod check;
mod daemon;
mod json;
mod python;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use check::check_case_in;
use json::{Json, parse_ordered};
use python::{py_str_is_blank, tail};

/// The cases, one JSON object a line (a byte-for-byte copy of `../shared/cases/cases.jsonl`):
/// `tests/fixtures/cases.jsonl`, named from the package directory (`bin/writegate`) like every
/// other repository path of the tests.
const FIXTURE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/cases.jsonl"
));
/// How long one wait for responses may take (`TIMEOUT_S` of the Python runner).
const TIMEOUT: Duration = Duration::from_secs(20);
/// How long the daemon may take to exit after its stdin is closed before it is killed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of the daemon's stderr a failing test shows.
const STDERR_TAIL: usize = 4000;

/// One `#[test]` per case id, plus [`CASE_IDS`], the list of the ids that have a test.
macro_rules! case_tests {
    ($($name:ident => $id:literal,)*) => {
        $(
            #[test]
            fn $name() {
                run_case($id);
            }
        )*

        /// Every case id that has a test above, in the order of the groups.
        const CASE_IDS: &[&str] = &[$($id),*];
    };
}

case_tests! {
    // ---- Write-only cases: `fs/write_text_file` inside the workspace. ----
    case_e02 => "E02", // line endings: whole write over a CRLF file keeps CRLF
    case_b02 => "B02", // encoding: UTF-8 BOM kept on whole write
    case_b09 => "B09", // encoding: whole write over UTF-16LE BOM file with U+FEFF content, one BOM
    case_b11 => "B11", // encoding: lone surrogate in content refused, file intact
    case_f03 => "F03", // mode: a new file is created 0600
    case_f04 => "F04", // truncation: shorter write leaves no old tail
    case_p01 => "P01", // path: look-alike sibling is outside
    case_p02 => "P02", // path: symlink in the root to an outside file
    case_p04 => "P04", // path: dangling symlink whose target would be outside
    case_p07 => "P07", // path: in-root symlink to in-root file is written through, link kept
    case_p09 => "P09", // path: relative path is invalid params
    case_p12 => "P12", // path: component of three dots is suspicious
    case_p14 => "P14", // path: concat.txt is not a device name

    // ---- Edit cases: `_writegate/edit_text_file` (replace, insert, append, ...). ----
    case_e04 => "E04", // line endings: multi-line replacement in a CRLF file takes CRLF
    case_e06 => "E06", // line endings: lone CR file is numbered line by line
    case_e08 => "E08", // line endings: inserted lines take the dominant ending
    case_e10 => "E10", // line endings: line 1 edit of a CRLF file changes only line 1
    case_e11 => "E11", // line endings: a line break in find matches a CRLF ending
    case_n01 => "N01", // final newline: no final newline stays absent after a line edit
    case_n03 => "N03", // final newline: last line without ending edited by line
    case_b01 => "B01", // encoding: UTF-8 BOM + CRLF survives a multi-line replacement
    case_b05 => "B05", // encoding: append to a UTF-16LE CRLF file stays UTF-16LE CRLF
    case_b07 => "B07", // encoding: Latin-1 file edited byte-exact
    case_m01 => "M01", // match: find text twice is refused, never the first silently
    case_m03 => "M03", // match: replacement indentation written exactly
    case_m05 => "M05", // match: overlapping occurrences count as ambiguous
    case_m07 => "M07", // match: zero occurrences is text_not_found
    case_l01 => "L01", // line edit: keep indentation when content lost it
    case_l03 => "L03", // line edit: deliberate dedent written exactly
    case_l05 => "L05", // line edit: tabs to spaces written exactly
    case_l07 => "L07", // line edit: stale number reconciled to the one line holding find
    case_l09 => "L09", // line edit: find on no line refuses with line_mismatch
    case_l11 => "L11", // line edit: line 0 is out of range
    case_l14 => "L14", // line edit: a binary file is refused
    case_l16 => "L16", // line edit: replace a range with more lines
    case_h01 => "H01", // precondition: expectedHash mismatch writes nothing
    case_f01 => "F01", // mode: executable bit kept across an edit
    case_f07 => "F07", // size: edit of a file over the cap is refused, file intact
    case_f09 => "F09", // temp files: none left after a refused write
    case_c01 => "C01", // concurrency: two edits to one file both land

    // ---- External and approval cases: writes outside the workspace (`_meta` marker), ----
    // ---- credential files that need approval.                                          ----
    case_x01 => "X01", // external: marked write outside the workspace lands, 0600, one fs.access
    case_x02 => "X02", // external: unmarked outside write refused, one fs.denied
    case_x04 => "X04", // external: marker version 2 is no marker
    case_x07 => "X07", // external: leaf symlink outside refused, real file untouched
    case_x10 => "X10", // external: UTF-16LE + bom + crlf meta, single BOM
    case_x12 => "X12", // external: encoded size over the cap refused
    case_x14 => "X14", // external: relative escape is not external
    case_x16 => "X16", // external: new file through a symlinked parent alias lands in the real dir
    case_x18 => "X18", // external: unknown encoding refused, no silent UTF-8
    case_x20 => "X20", // external: socket leaf is parse_error
    case_p10 => "P10", // path: credential file needs approval
}

#[test]
fn every_fixture_case_has_a_test() {
    let cases = fixture_cases();
    let mut in_fixture = BTreeSet::new();
    for (c, _) in &cases {
        let id = c
            .get("id")
            .and_then(Value::as_str)
            .expect("every case has a string id");
        assert!(
            in_fixture.insert(id.to_owned()),
            "case {id} appears twice in the fixture"
        );
    }
    let with_test: BTreeSet<String> = CASE_IDS.iter().map(ToString::to_string).collect();
    assert_eq!(with_test.len(), CASE_IDS.len(), "an id has two tests");
    assert_eq!(
        in_fixture,
        with_test,
        "cases without a test: {:?}; tests without a case: {:?}",
        in_fixture.difference(&with_test).collect::<Vec<_>>(),
        with_test.difference(&in_fixture).collect::<Vec<_>>()
    );
}

// ------------------------------------------------------------------------------------------------
// The runner (a port of ../shared/cases/run_cases.py).
// ------------------------------------------------------------------------------------------------

/// A problem of the case or a failure of the harness or the daemon; the latter (an exception in
/// the Python runner) is the case's only problem, formatted like Python's `f"{type}: {e}"`.
type R<T> = Result<T, String>;

/// Runs the case `id` of the fixture and panics with its problems, if any.
fn run_case(id: &str) {
    let cases = fixture_cases();
    let (case, ordered) = cases
        .iter()
        .find(|(c, _)| c.get("id").and_then(Value::as_str) == Some(id))
        .unwrap_or_else(|| panic!("case {id} is not in tests/fixtures/cases.jsonl"));
    let kind = case.get("kind").and_then(Value::as_str).unwrap_or("");
    let binary = Path::new(env!("CARGO_BIN_EXE_writegate"));
    let (problems, stderr) = check_case(case, ordered, binary);
    assert!(
        problems.is_empty(),
        "FAIL {id} ({kind}): {}\n--- daemon stderr (last {STDERR_TAIL} bytes at most) ---\n{stderr}",
        problems.join("; ")
    );
}

/// The fixture's cases, blank lines skipped: each as a `serde_json::Value` for the checks and as
/// read in text order for the requests.
fn fixture_cases() -> Vec<(Value, Json)> {
    FIXTURE
        .lines()
        .enumerate()
        .filter(|(_, line)| !py_str_is_blank(line))
        .map(|(n, line)| {
            parse_ordered(line)
                .and_then(|json| Ok((json.to_value()?, json)))
                .unwrap_or_else(|e| panic!("tests/fixtures/cases.jsonl line {}: {e}", n + 1))
        })
        .collect()
}

/// Runs one case in fresh scratch directories, removed afterwards; returns its problems and the
/// tail of the daemon's stderr.
fn check_case(c: &Value, ordered: &Json, binary: &Path) -> (Vec<String>, String) {
    let w = tempfile::Builder::new()
        .prefix("wgcase-")
        .tempdir()
        .expect("scratch directory W");
    let adir = tempfile::Builder::new()
        .prefix("wgaudit-")
        .tempdir()
        .expect("audit directory A");
    let mut socks = Vec::new();
    let outcome = check_case_in(c, ordered, binary, w.path(), adir.path(), &mut socks);
    let stderr = tail(&adir.path().join("stderr.log"));
    drop(socks); // the sockets are closed before the directories go, as in the Python runner
    let _ = w.close(); // errors ignored, like shutil.rmtree(ignore_errors=True)
    let _ = adir.close();
    (outcome.unwrap_or_else(|e| vec![e]), stderr)
}
