//! Conformance cases, end to end: every case of `tests/fixtures/cases.jsonl` (the project's own
//! copy of the shared case file) run against the real `writegate` binary over ACP/JSON-RPC on
//! stdio, one `#[test]` per case.
//!
//! This file mirrors `../shared/cases/run_cases.py` (the shared runner, described in
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
//! them (see [`dumps`]; `_meta` keeps the fixture's key order), and lone UTF-16 surrogates
//! in the JSON (case B11 sends `"x\ud800y\n"`) survive the round trip although a Rust `String`
//! cannot hold them (see [`parse_ordered`]).
//! When a case fails, its test panics with the runner's list of problems (then the tail of the
//! daemon's stderr).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::net::UnixListener;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;

/// The cases, one JSON object a line (a byte-for-byte copy of `../shared/cases/cases.jsonl`).
const FIXTURE: &str = include_str!("fixtures/cases.jsonl");
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
    let with_test: BTreeSet<String> = CASE_IDS.iter().map(|id| id.to_string()).collect();
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
    if !problems.is_empty() {
        panic!(
            "FAIL {id} ({kind}): {}\n--- daemon stderr (last {STDERR_TAIL} bytes at most) ---\n{stderr}",
            problems.join("; ")
        );
    }
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

fn check_case_in(
    c: &Value,
    ordered: &Json,
    binary: &Path,
    wp: &Path,
    adir: &Path,
    socks: &mut Vec<UnixListener>,
) -> R<Vec<String>> {
    let w = path_str(wp)?;
    let setup = list(get(c, "setup")?)?;

    // The workspace: W/root, or W/<name> of the last `root` step.
    let mut root_name = "root".to_owned();
    for step in setup {
        if has(step, "root") {
            root_name = string(get(step, "root")?)?.to_owned();
        }
    }
    let root_path = wp.join(&root_name);
    let root = path_str(&root_path)?;
    if fs::symlink_metadata(&root_path).is_ok() {
        // os.makedirs(root) without exist_ok
        return Err(format!("FileExistsError: [Errno 17] File exists: '{root}'"));
    }
    fs::create_dir_all(&root_path).map_err(|e| exc(&e, &root_path))?;

    // Setup steps, in order. Only `file` steps map a leading `root/` to the workspace's name.
    for step in setup {
        if has(step, "file") {
            let rel = string(get(step, "file")?)?;
            let rel = match rel.strip_prefix("root/") {
                Some(rest) => format!("{root_name}/{rest}"),
                None => rel.to_owned(),
            };
            let p = wp.join(rel);
            make_parent(&p)?;
            let data = if has(step, "bytes_b64") {
                b64(get(step, "bytes_b64")?)?
            } else {
                generated(get(step, "bytes_gen")?)?.into_bytes()
            };
            fs::write(&p, data).map_err(|e| exc(&e, &p))?;
        } else if has(step, "dir") {
            let p = wp.join(string(get(step, "dir")?)?);
            fs::create_dir_all(&p).map_err(|e| exc(&e, &p))?;
        } else if has(step, "symlink") {
            let p = wp.join(string(get(step, "symlink")?)?);
            make_parent(&p)?;
            let target = subst(string(get(step, "target")?)?, &w, &root);
            symlink(&target, &p).map_err(|e| exc(&e, &p))?;
        } else if has(step, "mode") {
            let p = wp.join(string(get(step, "mode")?)?);
            let mode = octal(get(step, "octal")?)?;
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).map_err(|e| exc(&e, &p))?;
        } else if has(step, "unix_socket") {
            let p = wp.join(string(get(step, "unix_socket")?)?);
            // Kept (bound and open) until the case ends.
            socks.push(UnixListener::bind(&p).map_err(|e| exc(&e, &p))?);
        }
    }

    let before = snapshot(wp)?;
    let audit = adir.join("audit.jsonl");
    let errlog_path = adir.join("stderr.log");
    let errlog = fs::File::create(&errlog_path).map_err(|e| exc(&e, &errlog_path))?;
    let mut serve = Vec::new();
    if let Some(extra) = opt(c, "serve") {
        for flag in list(extra)? {
            serve.push(string(flag)?.to_owned());
        }
    }
    let mut daemon = Daemon::spawn(binary, &root, &audit, &serve, errlog)?;
    let talk = (|| -> R<Vec<i64>> {
        daemon.send(&initialize_request())?;
        daemon.wait_for(&[0])?;
        let concurrent = opt(c, "concurrent").is_some_and(truthy);
        let mut ids = Vec::new();
        list(get(c, "ops")?)?;
        let Some(Json::Arr(ops)) = ordered.field("ops") else {
            unreachable!("ops is a list")
        };
        for (n, op) in ops.iter().enumerate() {
            let i = n as i64 + 1;
            daemon.send(&request_for(op, &w, &root, i)?)?;
            ids.push(i);
            if !concurrent {
                daemon.wait_for(&[i])?;
            }
        }
        daemon.wait_for(&ids)?;
        Ok(ids)
    })();
    daemon.close();
    let ids = talk?;

    // Each response as a Value for the checks and as read (key order kept) for the messages.
    let (resp, resp_ordered): (Vec<&Value>, Vec<&Json>) = ids
        .iter()
        .map(|i| {
            daemon
                .response(&Value::from(*i))
                .expect("every id was answered")
        })
        .unzip();
    let first_resp = resp
        .first()
        .copied()
        .ok_or("IndexError: list index out of range");
    let first_error_ordered = resp_ordered.iter().find_map(|r| r.field("error"));
    let exp_ordered = ordered.field("expect").expect("expect was read");
    let exp = get(c, "expect")?;
    let mut problems = Vec::new();
    // Responses are JSON objects (wait_for refuses anything else); `error` may be any value.
    let errors: Vec<&Value> = resp.iter().filter_map(|r| r.get("error")).collect();

    if has(exp, "file_b64") || has(exp, "file_gen") {
        if let Some(e) = first_error_ordered {
            problems.push(format!(
                "expected success, got error {}",
                prefix(&dumps(e), 300)
            ));
        }
        let want = if has(exp, "file_b64") {
            b64(get(exp, "file_b64")?)?
        } else {
            generated(get(exp, "file_gen")?)?.into_bytes()
        };
        let ops = list(get(c, "ops")?)?;
        let op0 = ops.first().ok_or("IndexError: list index out of range")?;
        let target = subst(string(get(op0, "path")?)?, &w, &root);
        match fs::read(&target) {
            Ok(got) => {
                if got != want {
                    problems.push(format!(
                        "bytes {} != expected {}",
                        py_bytes_repr(&got[..got.len().min(120)]),
                        py_bytes_repr(&want[..want.len().min(120)])
                    ));
                }
            }
            Err(e) => problems.push(format!("cannot read target: {}", os_error(&e, &target))),
        }
    }

    if has(exp, "error") {
        let want = get(exp, "error")?;
        let mut kinds = Vec::new();
        for e in &errors {
            let e = e.as_object().ok_or_else(|| no_get(e))?;
            kinds.push(match e.get("data") {
                Some(Value::Object(data)) => data.get("errorKind").cloned().unwrap_or(Value::Null),
                _ => Value::Null,
            });
        }
        if !kinds.iter().any(|k| py_eq(want, k)) {
            let got = match first_error_ordered {
                Some(e) => prefix(&dumps(e), 300),
                None => {
                    first_resp?;
                    prefix(
                        &dumps(resp_ordered[0].field("result").unwrap_or(&Json::Null)),
                        300,
                    )
                }
            };
            problems.push(format!("expected errorKind {}, got {got}", py_str(want)));
        }
    }

    if opt(exp, "error_any").is_some_and(truthy) && errors.is_empty() {
        problems.push("expected an error, got success".to_owned());
    }

    if has(exp, "error_code") {
        let want = get(exp, "error_code")?;
        let mut codes = Vec::new();
        for e in &errors {
            let e = e.as_object().ok_or_else(|| no_get(e))?;
            codes.push(e.get("code").cloned().unwrap_or(Value::Null));
        }
        if !codes.iter().any(|code| py_eq(want, code)) {
            let got = if codes.is_empty() {
                "success".to_owned()
            } else {
                py_repr(&Value::Array(codes))
            };
            problems.push(format!("expected error code {}, got {got}", py_str(want)));
        }
    }

    if opt(exp, "unchanged").is_some_and(truthy) {
        let after = snapshot(wp)?;
        if after != before {
            // The names present on one side only, then the names whose entry changed.
            let mut changed: Vec<&Vec<u8>> = after
                .keys()
                .filter(|k| !before.contains_key(*k))
                .chain(before.keys().filter(|k| !after.contains_key(*k)))
                .collect();
            changed.sort();
            changed.extend(
                after
                    .iter()
                    .filter(|(k, v)| before.get(*k).is_some_and(|b| b != *v))
                    .map(|(k, _)| k),
            );
            let names: Vec<String> = changed
                .iter()
                .take(6)
                .map(|k| py_str_repr(&String::from_utf8_lossy(k)))
                .collect();
            problems.push(format!("tree changed: [{}]", names.join(", ")));
        }
    }

    let no_checks = Value::Array(Vec::new());
    for chk in list(opt(exp, "checks").unwrap_or(&no_checks))? {
        if has(chk, "dir_only") {
            let dir_only = string(get(chk, "dir_only")?)?;
            let dir = wp.join(dir_only.replacen("root", &root_name, 1));
            let mut names = Vec::new();
            for entry in fs::read_dir(&dir).map_err(|e| exc(&e, &dir))? {
                let entry = entry.map_err(|e| exc(&e, &dir))?;
                names.push(String::from_utf8_lossy(entry.file_name().as_bytes()).into_owned());
            }
            names.sort();
            let mut want = Vec::new();
            for name in list(get(chk, "names")?)? {
                want.push(string(name)?.to_owned());
            }
            want.sort();
            if names != want {
                let shown: Vec<String> = names.iter().map(|n| py_str_repr(n)).collect();
                problems.push(format!("{dir_only} holds [{}]", shown.join(", ")));
            }
            continue;
        }
        let rel = string(get(chk, "path")?)?;
        let p = wp.join(rel);
        let lstat = fs::symlink_metadata(&p).ok();
        if opt(chk, "absent").is_some_and(truthy) {
            if lstat.is_some() {
                problems.push(format!("{rel} exists"));
            }
            continue;
        }
        let Some(lstat) = lstat else {
            problems.push(format!("{rel} missing"));
            continue;
        };
        let is_link = lstat.file_type().is_symlink();
        if opt(chk, "is_symlink").is_some_and(truthy) && !is_link {
            problems.push(format!("{rel} is no longer a symlink"));
        }
        if has(chk, "target") && is_link {
            let link = fs::read_link(&p).map_err(|e| exc(&e, &p))?;
            let link = String::from_utf8_lossy(link.as_os_str().as_bytes()).into_owned();
            if !py_eq(&Value::String(link.clone()), get(chk, "target")?) {
                problems.push(format!("{rel} points to {link}"));
            }
        }
        if has(chk, "mode") {
            let m = fs::metadata(&p)
                .map_err(|e| exc(&e, &p))?
                .permissions()
                .mode()
                & 0o7777;
            let want = get(chk, "mode")?;
            if m != octal(want)? {
                problems.push(format!("{rel} mode {:#o} != {}", m, py_str(want)));
            }
        }
        if has(chk, "bytes_b64") {
            let got = fs::read(&p).map_err(|e| exc(&e, &p))?;
            if got != b64(get(chk, "bytes_b64")?)? {
                problems.push(format!(
                    "{rel} bytes {}",
                    py_bytes_repr(&got[..got.len().min(80)])
                ));
            }
        }
    }

    if has(exp, "result") {
        let empty = Value::Object(serde_json::Map::new());
        let res = first_resp?.get("result").unwrap_or(&Value::Null);
        // `resp[0].get("result") or {}`
        let res = if truthy(res) { res } else { &empty };
        let res = res.as_object().ok_or_else(|| no_get(res))?;
        let want = get(exp, "result")?;
        let want = want.as_object().ok_or_else(|| no_get(want))?;
        // The same values as read, for the message.
        let res_ordered = match resp_ordered[0].field("result") {
            Some(r) if !res.is_empty() => r,
            _ => &Json::Null,
        };
        let want_ordered = exp_ordered.field("result").expect("result was read");
        for (k, v) in want {
            let got = res.get(k).unwrap_or(&Value::Null);
            if !py_eq(got, v) {
                problems.push(format!(
                    "result.{k} = {} != {}",
                    dumps(res_ordered.field(k).unwrap_or(&Json::Null)),
                    dumps(want_ordered.field(k).expect("a key of result"))
                ));
            }
        }
    }

    if has(exp, "audit") {
        let want = get(exp, "audit")?;
        let mut lines = Vec::new();
        if fs::metadata(&audit).is_ok() {
            let text = fs::read(&audit).map_err(|e| exc(&e, &audit))?;
            let text = String::from_utf8(text)
                .map_err(|e| format!("UnicodeDecodeError: audit log is not UTF-8: {e}"))?;
            for line in universal_lines(&text) {
                if !py_str_is_blank(&line) {
                    lines.push(parse_json(&line)?);
                }
            }
        }
        let count = get(want, "count")?;
        if !py_eq(&Value::from(lines.len()), count) {
            problems.push(format!(
                "{} audit events, expected {}",
                lines.len(),
                py_str(count)
            ));
        }
        if let Some(t) = opt(want, "type").filter(|t| truthy(t)) {
            let mut differs = false;
            for e in &lines {
                let e = e.as_object().ok_or_else(|| no_get(e))?;
                if !py_eq(e.get("type").unwrap_or(&Value::Null), t) {
                    differs = true;
                    break;
                }
            }
            if differs {
                let mut types = Vec::new();
                for e in &lines {
                    let e = e.as_object().ok_or_else(|| no_get(e))?;
                    types.push(e.get("type").cloned().unwrap_or(Value::Null));
                }
                problems.push(format!(
                    "audit types {} != {}",
                    py_repr(&Value::Array(types)),
                    py_str(t)
                ));
            }
        }
    }

    Ok(problems)
}

/// The daemon, driven over its stdin and stdout.
struct Daemon {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Chunks read from stdout by a reader thread (the Python runner's select + os.read); an
    /// empty chunk is end of file.
    chunks: Receiver<Vec<u8>>,
    eof: bool,
    buf: Vec<u8>,
    /// Responses by id, as a Python dict keyed by the JSON id (`None` for a missing id); each
    /// response as a Value and as read.
    responses: Vec<(Value, Value, Json)>,
}

impl Daemon {
    fn spawn(
        binary: &Path,
        root: &str,
        audit: &Path,
        extra: &[String],
        errlog: fs::File,
    ) -> R<Daemon> {
        let mut child = Command::new(binary)
            .args(["serve", "--stdio", "--workspace", root, "--audit-log"])
            .arg(audit)
            .args(extra)
            // The cases expect the non-root default of external tool writes
            // (on); as root the daemon's own default is off (issue 13), so
            // say it explicitly (run_cases.py needs the same variable as root).
            .env("WRITEGATE_EXTERNAL_TOOL_WRITES", "true")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(errlog)
            .spawn()
            .map_err(|e| exc(&e, binary))?;
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut chunk = vec![0u8; 1 << 20];
            loop {
                match stdout.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        if tx.send(chunk[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = tx.send(Vec::new());
        });
        Ok(Daemon {
            child,
            stdin,
            chunks: rx,
            eof: false,
            buf: Vec::new(),
            responses: Vec::new(),
        })
    }

    /// Writes one request line and flushes it.
    fn send(&mut self, line: &str) -> R<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or("ValueError: write to closed file")?;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("{}: {}", io_error_name(&e), os_error_no_path(&e)))
    }

    /// Reads responses until every id of `ids` has one; at most [`TIMEOUT`].
    fn wait_for(&mut self, ids: &[i64]) -> R<()> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let missing = self.missing(ids);
            if missing.is_empty() {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let shown: Vec<String> = missing.iter().map(i64::to_string).collect();
                return Err(format!(
                    "TimeoutError: no response for ids [{}]",
                    shown.join(", ")
                ));
            }
            let chunk = if self.eof {
                Vec::new()
            } else {
                match self.chunks.recv_timeout(left) {
                    Ok(chunk) => chunk,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => Vec::new(),
                }
            };
            if chunk.is_empty() {
                self.eof = true;
                // The status only makes the message clearer: give the exit a moment to land.
                let grace = Instant::now() + Duration::from_millis(200);
                while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < grace {
                    thread::sleep(Duration::from_millis(5));
                }
                return Err(format!(
                    "EOFError: daemon closed stdout (exit {})",
                    self.poll()
                ));
            }
            self.buf.extend_from_slice(&chunk);
            while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=nl).take(nl).collect();
                if py_bytes_strip(&line).is_empty() {
                    continue;
                }
                let text = std::str::from_utf8(&line)
                    .map_err(|e| format!("UnicodeDecodeError: response line is not UTF-8: {e}"))?;
                let ordered = parse_ordered(text)?;
                let msg = ordered.to_value()?;
                let obj = msg.as_object().ok_or_else(|| no_get(&msg))?;
                let rid = obj.get("id").cloned().unwrap_or(Value::Null);
                if matches!(rid, Value::Array(_) | Value::Object(_)) {
                    return Err(format!("TypeError: unhashable type: '{}'", py_type(&rid)));
                }
                if rid.is_null() && obj.contains_key("error") {
                    // A line the daemon could not parse: give it to the oldest unanswered id.
                    if let Some(&oldest) = self.missing(ids).first() {
                        self.insert(Value::from(oldest), msg, ordered);
                    }
                    continue;
                }
                self.insert(rid, msg, ordered);
            }
        }
    }

    /// The ids of `ids` without a response, sorted as strings (`sorted(..., key=str)`).
    fn missing(&self, ids: &[i64]) -> Vec<i64> {
        let mut missing: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|i| self.response(&Value::from(*i)).is_none())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        missing.sort_by_key(|i| i.to_string());
        missing
    }

    fn response(&self, id: &Value) -> Option<(&Value, &Json)> {
        self.responses
            .iter()
            .find(|(k, _, _)| py_eq(k, id))
            .map(|(_, v, j)| (v, j))
    }

    fn insert(&mut self, id: Value, msg: Value, ordered: Json) {
        match self.responses.iter_mut().find(|(k, _, _)| py_eq(k, &id)) {
            Some(slot) => (slot.1, slot.2) = (msg, ordered),
            None => self.responses.push((id, msg, ordered)),
        }
    }

    /// The exit status as `Popen.poll()` gives it: `None` while running, `-N` after signal N.
    fn poll(&mut self) -> String {
        match self.child.try_wait() {
            Ok(Some(status)) => match (status.code(), status.signal()) {
                (Some(code), _) => code.to_string(),
                (None, Some(sig)) => format!("-{sig}"),
                (None, None) => "None".to_owned(),
            },
            _ => "None".to_owned(),
        }
    }

    /// Closes stdin and waits for the exit; kills the daemon after [`CLOSE_TIMEOUT`].
    fn close(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + CLOSE_TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `initialize` request (id 0).
fn initialize_request() -> String {
    let info = object(&[("name", quote("cases")), ("version", quote("1"))]);
    let params = object(&[
        ("protocolVersion", "1".to_owned()),
        ("clientCapabilities", "{}".to_owned()),
        ("clientInfo", info),
    ]);
    object(&[
        ("jsonrpc", quote("2.0")),
        ("id", "0".to_owned()),
        ("method", quote("initialize")),
        ("params", params),
    ])
}

/// The request line of one op, with the keys in the Python runner's order (and `_meta`'s keys in
/// the fixture's order).
fn request_for(op: &Json, w: &str, root: &str, rid: i64) -> R<String> {
    let field = |key: &str| op.field(key).ok_or_else(|| format!("KeyError: '{key}'"));
    let text = |v: &Json| match v {
        Json::Str(s) => Ok(s.clone()),
        other => Err(format!(
            "TypeError: expected str, got {}",
            py_type(&other.to_value()?)
        )),
    };
    let kind = text(field("kind")?)?;
    let kind = kind.as_str();
    let path = Json::Str(subst(&text(field("path")?)?, w, root));
    // `None` (no content, or JSON null) is Json::Null.
    let content = if op.field("content_gen").is_some() {
        Json::Str(generated(&field("content_gen")?.to_value()?)?)
    } else {
        op.field("content").cloned().unwrap_or(Json::Null)
    };
    let mut params: Vec<(&str, Json)> =
        vec![("sessionId", Json::Str("cases".into())), ("path", path)];
    let method = if kind == "write" {
        params.push(("content", content));
        "fs/write_text_file"
    } else {
        params.push(("mode", Json::Str(kind.into())));
        if !matches!(content, Json::Null) && kind != "delete" {
            params.push(("content", content));
        }
        for key in ["find", "line", "endLine", "expectedHash", "dryRun"] {
            if let Some(v) = op.field(key) {
                params.push((key, v.clone()));
            }
        }
        "_writegate/edit_text_file"
    };
    if let Some(meta) = op.field("meta") {
        params.push(("_meta", meta.clone()));
    }
    let params: Vec<(&str, String)> = params.iter().map(|(k, v)| (*k, dumps(v))).collect();
    Ok(object(&[
        ("jsonrpc", quote("2.0")),
        ("id", rid.to_string()),
        ("method", quote(method)),
        ("params", object(&params)),
    ]))
}

/// Every path under `w` (not following links) with its kind and contents: a link's target, a
/// file's bytes and permission bits, or just "dir" / "other" (os.walk + os.lstat).
#[derive(Debug, PartialEq)]
enum Entry {
    Link(Vec<u8>),
    File(Vec<u8>, u32),
    Dir,
    Other,
}

/// Relative path (bytes) -> entry.
type Snapshot = BTreeMap<Vec<u8>, Entry>;

fn snapshot(w: &Path) -> R<Snapshot> {
    let mut out = Snapshot::new();
    walk(w, w, &mut out)?;
    Ok(out)
}

fn walk(w: &Path, dir: &Path, out: &mut Snapshot) -> R<()> {
    // os.walk skips a directory it cannot list.
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    let mut subdirs = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else { break };
        let p = entry.path();
        let rel = p
            .strip_prefix(w)
            .expect("under W")
            .as_os_str()
            .as_bytes()
            .to_vec();
        let meta = fs::symlink_metadata(&p).map_err(|e| exc(&e, &p))?;
        let ft = meta.file_type();
        let item = if ft.is_symlink() {
            let target = fs::read_link(&p).map_err(|e| exc(&e, &p))?;
            Entry::Link(target.as_os_str().as_bytes().to_vec())
        } else if ft.is_file() {
            Entry::File(
                fs::read(&p).map_err(|e| exc(&e, &p))?,
                meta.permissions().mode() & 0o7777,
            )
        } else if ft.is_dir() {
            subdirs.push(p.clone());
            Entry::Dir
        } else {
            Entry::Other
        };
        out.insert(rel, item);
    }
    for d in subdirs {
        walk(w, &d, out)?;
    }
    Ok(())
}

// ---- Fixture values, read the way the Python runner reads them. ----

fn get<'a>(v: &'a Value, key: &str) -> R<&'a Value> {
    v.as_object()
        .ok_or_else(|| no_get(v))?
        .get(key)
        .ok_or_else(|| format!("KeyError: '{key}'"))
}

/// `key in v`.
fn has(v: &Value, key: &str) -> bool {
    v.as_object().is_some_and(|m| m.contains_key(key))
}

/// `v.get(key)` (None for a missing key; a JSON null is `Some(Null)`).
fn opt<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|m| m.get(key))
}

fn string(v: &Value) -> R<&str> {
    v.as_str()
        .ok_or_else(|| format!("TypeError: expected str, got {}", py_type(v)))
}

fn list(v: &Value) -> R<&Vec<Value>> {
    v.as_array().ok_or_else(|| {
        format!(
            "TypeError: '{}' object is not iterable as a list",
            py_type(v)
        )
    })
}

fn no_get(v: &Value) -> String {
    format!(
        "AttributeError: '{}' object has no attribute 'get'",
        py_type(v)
    )
}

fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python truthiness.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// Python `==` on decoded JSON: numbers by value (`1 == 1.0`, `True == 1`), containers deeply.
fn py_eq(a: &Value, b: &Value) -> bool {
    fn num(v: &Value) -> Option<(Option<i128>, f64)> {
        match v {
            Value::Bool(b) => Some((Some(*b as i128), *b as u8 as f64)),
            Value::Number(n) => {
                let int = n
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from));
                Some((int, n.as_f64().unwrap_or(f64::NAN)))
            }
            _ => None,
        }
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| py_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (num(a), num(b)) {
            (Some((Some(x), _)), Some((Some(y), _))) => x == y,
            (Some((_, x)), Some((_, y))) => x == y,
            _ => false,
        },
    }
}

/// `gen(spec)`: `prefix + unit * count`.
fn generated(spec: &Value) -> R<String> {
    let prefix = match opt(spec, "prefix") {
        Some(p) => string(p)?,
        None => "",
    };
    let unit = string(get(spec, "unit")?)?;
    let count = get(spec, "count")?
        .as_i64()
        .ok_or("TypeError: can't multiply sequence by non-int")?;
    Ok(format!("{prefix}{}", unit.repeat(count.max(0) as usize)))
}

/// `{ROOT}` and `{W}` replaced, in that order.
fn subst(s: &str, w: &str, root: &str) -> String {
    s.replace("{ROOT}", root).replace("{W}", w)
}

fn b64(v: &Value) -> R<Vec<u8>> {
    B64.decode(string(v)?)
        .map_err(|e| format!("binascii.Error: {e}"))
}

/// `int(s, 8)`.
fn octal(v: &Value) -> R<u32> {
    let s = string(v)?;
    let t = s.trim();
    let t = t
        .strip_prefix("0o")
        .or_else(|| t.strip_prefix("0O"))
        .unwrap_or(t);
    u32::from_str_radix(&t.replace('_', ""), 8)
        .map_err(|_| format!("ValueError: invalid literal for int() with base 8: '{s}'"))
}

// ---- JSON text like Python's json module. ----

/// A JSON value as Python's json.loads keeps it: objects in text order (a later duplicate key
/// replaces the value in place, as in a dict), numbers as their text, and strings that may hold
/// lone UTF-16 surrogates (as placeholders, see [`parse_ordered`]). Requests are built from these,
/// so `_meta` goes over the wire in the fixture's key order, as from the Python runner; the checks
/// read the same data as a `serde_json::Value` ([`Json::to_value`]).
#[derive(Clone, Debug)]
enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// `self[key]` of an object.
    fn field(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn to_value(&self) -> R<Value> {
        Ok(match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Num(text) => serde_json::from_str(text)
                .map_err(|e| format!("ValueError: number {text} out of range: {e}"))?,
            Json::Str(s) => Value::String(s.clone()),
            Json::Arr(items) => Value::Array(items.iter().map(Json::to_value).collect::<R<_>>()?),
            Json::Obj(members) => {
                let mut map = serde_json::Map::new();
                for (k, v) in members {
                    map.insert(k.clone(), v.to_value()?);
                }
                Value::Object(map)
            }
        })
    }
}

/// `json.loads(raw)` as a `serde_json::Value` (responses, audit events, fixture lines).
fn parse_json(raw: &str) -> R<Value> {
    parse_ordered(raw)?.to_value()
}

/// `json.loads(raw)`, strict JSON (`NaN` and `Infinity`, which Python also takes, are refused).
///
/// Lone UTF-16 surrogates: JSON allows escapes like `\ud800` that stand for no character. Python's
/// json.loads keeps them in its str and json.dumps(ensure_ascii=True) writes them back as the same
/// escape, but serde_json refuses them and a Rust `String` cannot hold them. So this reader (used
/// instead of serde_json's for that reason, and for the key order) decodes a lone surrogate escape
/// `\uD800`..`\uDFFF` to a placeholder at the top of plane 16 (private use),
/// U+10F800 + (surrogate - 0xD800), and [`write_str`] writes each placeholder back as the
/// surrogate's escape: case B11's content `"x\ud800y\n"` goes over the wire as `"x\ud800y\n"`,
/// exactly as the Python runner sends it. A valid pair is one character as usual; a text that
/// already holds a placeholder code point is refused rather than misread.
fn parse_ordered(raw: &str) -> R<Json> {
    if raw.chars().any(is_placeholder) {
        return Err(
            "ValueError: JSON text holds a code point reserved for lone surrogates".to_owned(),
        );
    }
    let mut p = JsonReader { s: raw, i: 0 };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i != raw.len() {
        return Err(p.err("Extra data"));
    }
    Ok(v)
}

const PLACEHOLDER_BASE: u32 = 0x10F800;

fn is_placeholder(c: char) -> bool {
    (PLACEHOLDER_BASE..=PLACEHOLDER_BASE + 0x7FF).contains(&(c as u32))
}

struct JsonReader<'a> {
    s: &'a str,
    i: usize,
}

impl JsonReader<'_> {
    fn err(&self, what: &str) -> String {
        format!("JSONDecodeError: {what}: char {}", self.i)
    }

    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, word: &str) -> bool {
        let found = self.s[self.i..].starts_with(word);
        if found {
            self.i += word.len();
        }
        found
    }

    fn value(&mut self) -> R<Json> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ if self.eat("null") => Ok(Json::Null),
            _ if self.eat("true") => Ok(Json::Bool(true)),
            _ if self.eat("false") => Ok(Json::Bool(false)),
            _ => Err(self.err("Expecting value")),
        }
    }

    fn object(&mut self) -> R<Json> {
        self.i += 1;
        let mut members: Vec<(String, Json)> = Vec::new();
        self.ws();
        if self.eat("}") {
            return Ok(Json::Obj(members));
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("Expecting property name enclosed in double quotes"));
            }
            let key = self.string()?;
            self.ws();
            if !self.eat(":") {
                return Err(self.err("Expecting ':' delimiter"));
            }
            self.ws();
            let v = self.value()?;
            match members.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = v,
                None => members.push((key, v)),
            }
            self.ws();
            if self.eat("}") {
                return Ok(Json::Obj(members));
            }
            if !self.eat(",") {
                return Err(self.err("Expecting ',' delimiter"));
            }
        }
    }

    fn array(&mut self) -> R<Json> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Json::Arr(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            if self.eat("]") {
                return Ok(Json::Arr(items));
            }
            if !self.eat(",") {
                return Err(self.err("Expecting ',' delimiter"));
            }
        }
    }

    fn number(&mut self) -> R<Json> {
        let b = self.s.as_bytes();
        let start = self.i;
        let digits = |i: &mut usize| {
            let from = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > from
        };
        let mut i = self.i;
        if b[i] == b'-' {
            i += 1;
        }
        if b.get(i) == Some(&b'0') {
            i += 1;
        } else if !digits(&mut i) {
            return Err(self.err("Expecting value"));
        }
        // A fraction or exponent without digits is not part of the number (Python stops there too).
        if b.get(i) == Some(&b'.') {
            let mut j = i + 1;
            if digits(&mut j) {
                i = j;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if digits(&mut j) {
                i = j;
            }
        }
        self.i = i;
        Ok(Json::Num(self.s[start..i].to_owned()))
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.s.get(at..at + 4)?;
        if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    }

    fn string(&mut self) -> R<String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let rest = &self.s[self.i..];
            let Some(stop) = rest.find(|c: char| c == '"' || c == '\\' || c < ' ') else {
                return Err(self.err("Unterminated string starting at"));
            };
            out.push_str(&rest[..stop]);
            self.i += stop;
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {}
                _ => return Err(self.err("Invalid control character at")),
            }
            let escape = self.s.as_bytes().get(self.i + 1).copied();
            let simple = match escape {
                Some(b'"') => Some('"'),
                Some(b'\\') => Some('\\'),
                Some(b'/') => Some('/'),
                Some(b'b') => Some('\u{8}'),
                Some(b'f') => Some('\u{c}'),
                Some(b'n') => Some('\n'),
                Some(b'r') => Some('\r'),
                Some(b't') => Some('\t'),
                Some(b'u') => None,
                _ => return Err(self.err("Invalid \\escape")),
            };
            if let Some(c) = simple {
                out.push(c);
                self.i += 2;
                continue;
            }
            let Some(unit) = self.hex4(self.i + 2) else {
                return Err(self.err("Invalid \\uXXXX escape"));
            };
            self.i += 6;
            // A high surrogate right before a low one: the pair is one character.
            let low = if (0xD800..0xDC00).contains(&unit) && self.s[self.i..].starts_with("\\u") {
                self.hex4(self.i + 2)
                    .filter(|low| (0xDC00..0xE000).contains(low))
            } else {
                None
            };
            if let Some(low) = low {
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                out.push(char::from_u32(c).expect("a surrogate pair is a character"));
                self.i += 6;
                continue;
            }
            out.push(match char::from_u32(unit) {
                Some(c) => c,
                // A lone surrogate: its placeholder.
                None => char::from_u32(PLACEHOLDER_BASE + unit - 0xD800).expect("plane 16"),
            });
        }
    }
}

/// `json.dumps(v, ensure_ascii=True)`: `", "` and `": "` separators, keys in the order read, strings
/// ASCII-escaped ([`write_str`]), numbers as Python writes back what it read.
fn dumps(v: &Json) -> String {
    let mut out = String::new();
    write_ordered(&mut out, v);
    out
}

fn write_ordered(out: &mut String, v: &Json) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Num(text) => out.push_str(&py_number(text)),
        Json::Str(s) => write_str(out, s),
        Json::Arr(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_ordered(out, item);
            }
            out.push(']');
        }
        Json::Obj(members) => {
            out.push('{');
            for (n, (k, item)) in members.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_ordered(out, item);
            }
            out.push('}');
        }
    }
}

/// A JSON number as Python writes back what json.loads made of it: an int keeps its digits (`-0`
/// is `0`), a float is `repr(float)` (`1.5`, `100.0`, `1e+16`, `1e-05`, `Infinity`).
fn py_number(text: &str) -> String {
    if !text.contains(['.', 'e', 'E']) {
        return if text.trim_start_matches('-').bytes().all(|c| c == b'0') {
            "0".to_owned()
        } else {
            text.to_owned()
        };
    }
    let x: f64 = text.parse().unwrap_or(f64::NAN);
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let sci = format!("{x:e}"); // shortest round-trip digits, e.g. "1.5e-5"
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if (-4..16).contains(&exp) {
        let fixed = format!("{x}");
        if fixed.contains('.') {
            fixed
        } else {
            format!("{fixed}.0")
        }
    } else {
        format!(
            "{mantissa}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}

/// Writes a JSON string as `json.dumps(s, ensure_ascii=True)` does: every character outside
/// printable ASCII escaped (`\n`-style where JSON has one, else `\u00xx`, astral characters as
/// surrogate pairs, placeholders as their lone surrogate).
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c if is_placeholder(c) => {
                out.push_str(&format!("\\u{:04x}", c as u32 - PLACEHOLDER_BASE + 0xD800));
            }
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// A JSON string.
fn quote(s: &str) -> String {
    let mut out = String::new();
    write_str(&mut out, s);
    out
}

/// A JSON object from keys and already serialized values, keys in the given order.
fn object(pairs: &[(&str, String)]) -> String {
    let mut out = String::from("{");
    for (n, (k, v)) in pairs.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        write_str(&mut out, k);
        out.push_str(": ");
        out.push_str(v);
    }
    out.push('}');
    out
}

// ---- Small Python look-alikes for text, bytes and messages. ----

/// `not line.strip()` for a str (Python's whitespace includes U+001C..U+001F).
fn py_str_is_blank(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// `line.strip()` for bytes (ASCII whitespace, vertical tab included).
fn py_bytes_strip(b: &[u8]) -> &[u8] {
    let ws = |c: &u8| b" \t\n\r\x0b\x0c".contains(c);
    let start = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ws(c)).map_or(start, |i| i + 1);
    &b[start..end]
}

/// The lines of a text file opened in text mode (universal newlines: `\n`, `\r\n`, `\r`).
fn universal_lines(s: &str) -> Vec<String> {
    s.replace("\r\n", "\n")
        .replace('\r', "\n")
        .split('\n')
        .map(str::to_owned)
        .collect()
}

/// `str(v)` of a decoded JSON value, as an f-string shows it.
fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// `repr(v)` of a decoded JSON value.
fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str_repr(s),
        Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(py_repr).collect::<Vec<_>>().join(", ")
            )
        }
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", py_str_repr(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn py_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_placeholder(c) => {
                out.push_str(&format!("\\u{:04x}", c as u32 - PLACEHOLDER_BASE + 0xD800));
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// `repr(b)` of bytes: `b'...'`.
fn py_bytes_repr(b: &[u8]) -> String {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::from("b");
    out.push(quote as char);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push(quote as char);
    out
}

/// The first `n` characters of `s` (`s[:n]`).
fn prefix(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// The exception an OS error raises in Python, `"FileNotFoundError: [Errno 2] ...: 'path'"`.
fn exc(e: &io::Error, path: impl AsRef<Path>) -> String {
    format!("{}: {}", io_error_name(e), os_error(e, path))
}

/// `str(e)` of an OSError about `path`: `"[Errno 2] No such file or directory: 'path'"`.
fn os_error(e: &io::Error, path: impl AsRef<Path>) -> String {
    format!("{}: '{}'", os_error_no_path(e), path.as_ref().display())
}

fn os_error_no_path(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    match e.raw_os_error() {
        Some(errno) => format!("[Errno {errno}] {text}"),
        None => text.to_owned(),
    }
}

fn io_error_name(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound => "FileNotFoundError",
        io::ErrorKind::AlreadyExists => "FileExistsError",
        io::ErrorKind::PermissionDenied => "PermissionError",
        io::ErrorKind::BrokenPipe => "BrokenPipeError",
        io::ErrorKind::IsADirectory => "IsADirectoryError",
        io::ErrorKind::NotADirectory => "NotADirectoryError",
        _ => "OSError",
    }
}

fn path_str(p: &Path) -> R<String> {
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("UnicodeError: path {} is not UTF-8", p.display()))
}

/// `os.makedirs(os.path.dirname(p), exist_ok=True)`.
fn make_parent(p: &Path) -> R<()> {
    match p.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            fs::create_dir_all(parent).map_err(|e| exc(&e, parent))
        }
        _ => Ok(()),
    }
}

/// The last [`STDERR_TAIL`] bytes of a file, as text.
fn tail(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}
