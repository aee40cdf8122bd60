//! Helpers the test modules share on top of `writegate-testkit` (the temp
//! tree, its daemons, the raw line client): the JSON-RPC client, an
//! audit-log reader, and the checks and requests several modules use (the
//! `initialize` answer, refusals and their audit event, external-write
//! markers, the workspace an `initialize` asks for, the kill -9 loop).
//!
//! Every spawned process gets `HOME`, `XDG_RUNTIME_DIR`, `XDG_STATE_HOME` and
//! `XDG_CONFIG_HOME` inside its test's temp dir, so no test touches the real
//! home. Timeouts exist only so that a broken daemon fails a test instead of
//! hanging it; nothing asserts on speed.

use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::ops::Range;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;
use writegate_testkit::LineClient;

pub(crate) use writegate_testkit::{
    Daemon, Finished, Opts, TIMEOUT, Tmpfs, Tree, audit_lines, find_program, mode_of,
    run_with_stdin, snapshot, temps,
};

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_writegate");

/// The audit log of a [`Tree`] as JSON events.
pub(crate) trait TreeAudit {
    /// A reader of the audit log that starts at its beginning.
    fn audit(&self) -> Audit;
    /// The audit log's events, one per line (none if the file is missing).
    fn audit_events(&self) -> Vec<Value>;
}

impl TreeAudit for Tree {
    fn audit(&self) -> Audit {
        Audit {
            path: self.audit_log.clone(),
            seen: 0,
            raw: format!("/{}", self.prefix()),
        }
    }

    fn audit_events(&self) -> Vec<Value> {
        self.audit().all()
    }
}

/// JSON-RPC clients of a [`Daemon`].
pub(crate) trait Clients {
    /// A client over the daemon's stdin and stdout (a `--stdio` daemon).
    fn stdio_client(&mut self) -> Client;
    /// A client connected to the tree's socket.
    fn connect(&self) -> Client;
}

impl Clients for Daemon {
    fn stdio_client(&mut self) -> Client {
        Client::new(self.stdio_lines())
    }

    fn connect(&self) -> Client {
        Client::new(self.connect_lines())
    }
}

/// Reads the audit log; remembers how many events were already seen.
pub(crate) struct Audit {
    path: PathBuf,
    seen: usize,
    /// `/<temp dir prefix>`: no event may contain it (no raw path).
    raw: String,
}

impl Audit {
    /// Every event of the log, one per line (none if the file is missing).
    pub(crate) fn all(&self) -> Vec<Value> {
        audit_lines(&self.path)
            .iter()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {l}"))
            })
            .collect()
    }

    /// Events written since the last call.
    pub(crate) fn new_events(&mut self) -> Vec<Value> {
        let all = self.all();
        let fresh = all[self.seen.min(all.len())..].to_vec();
        self.seen = all.len();
        fresh
    }

    /// Exactly one new event, of type `kind`; checks the fields every event
    /// carries and that no raw path leaks (`raw_paths` is off).
    pub(crate) fn one(&mut self, kind: &str) -> Value {
        let fresh = self.new_events();
        assert_eq!(fresh.len(), 1, "exactly one audit event: {fresh:?}");
        let e = fresh.into_iter().next().unwrap();
        assert_eq!(e["type"], kind, "{e}");
        assert_eq!(e["v"], 1, "{e}");
        let hash = e["pathHash"].as_str().unwrap_or("");
        assert!(
            hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()),
            "{e}"
        );
        assert!(e.get("path").is_none(), "no raw path by default: {e}");
        assert!(
            !e.to_string().contains(&self.raw),
            "no raw path anywhere: {e}"
        );
        e
    }
}

/// A JSON-RPC line client over a [`LineClient`]: sends requests, reads
/// response lines and checks each is one compact JSON-RPC line.
pub(crate) struct Client {
    lines: LineClient,
    /// Requests sent by [`Client::call`] and [`Client::sync`], for their ids.
    sent: u64,
}

impl Client {
    pub(crate) fn new(lines: LineClient) -> Client {
        Client { lines, sent: 0 }
    }

    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        self.lines.send(bytes);
    }

    pub(crate) fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// Ends our side of the stream (stdin EOF / socket shutdown).
    pub(crate) fn close_write(&mut self) {
        self.lines.close_write();
    }

    /// The next response line, raw and parsed. Panics on EOF or timeout.
    pub(crate) fn recv_raw(&mut self) -> (String, Value) {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(line) => {
                let text = String::from_utf8(line).expect("responses are UTF-8");
                assert!(
                    text.ends_with('\n'),
                    "a response is one \\n-terminated line: {text:?}"
                );
                let body = text.trim_end_matches('\n');
                assert!(
                    !body.contains('\n') && !body.ends_with('\r'),
                    "one compact line: {body:?}"
                );
                let v: Value = serde_json::from_str(body)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {}", truncate(body)));
                assert_eq!(v["jsonrpc"], "2.0", "{}", truncate(body));
                (body.to_string(), v)
            }
            Err(RecvTimeoutError::Timeout) => panic!("no response within {TIMEOUT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the daemon closed the connection"),
        }
    }

    pub(crate) fn recv(&mut self) -> Value {
        self.recv_raw().1
    }

    /// Every response until the daemon closes the stream.
    pub(crate) fn recv_until_eof(&mut self) -> Vec<Value> {
        self.lines
            .lines_until_eof()
            .iter()
            .map(|line| serde_json::from_slice(line).expect("a JSON line"))
            .collect()
    }

    /// Sends one request with the id `r<n>` and returns its response.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        self.sent += 1;
        self.call_id(format!("r{}", self.sent), method, params)
    }

    /// Sends one request and returns its response (which must be the next
    /// line and carry the same id).
    pub(crate) fn call_id(&mut self, id: impl Into<Value>, method: &str, params: Value) -> Value {
        let id = id.into();
        self.send(&req(id.clone(), method, params));
        let r = self.recv();
        assert_eq!(
            r["id"],
            id,
            "response to another request: {}",
            truncate(&r.to_string())
        );
        r
    }

    /// Sends a harmless request and reads up to its response; returns every
    /// other response that arrived first (which the caller usually expects
    /// to be none).
    pub(crate) fn sync(&mut self) -> Vec<Value> {
        self.sent += 1;
        let id = json!(format!("sync-{}", self.sent));
        self.send(&req(
            id.clone(),
            "_writegate/receipt",
            json!({"sessionId": "sync"}),
        ));
        let mut extra = Vec::new();
        loop {
            let r = self.recv();
            if r["id"] == id {
                assert!(r["result"].is_object(), "{r}");
                return extra;
            }
            extra.push(r);
        }
    }
}

/// `sha256:<64 hex>` of `bytes`, as writegate writes a file's hash.
pub(crate) fn tagged(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    Sha256::digest(bytes)
        .iter()
        .fold("sha256:".to_string(), |mut s, b| {
            write!(s, "{b:02x}").unwrap();
            s
        })
}

pub(crate) fn req(id: impl Into<Value>, method: &str, params: Value) -> Value {
    let mut r = json!({"jsonrpc": "2.0", "id": id.into(), "method": method});
    r["params"] = params;
    r
}

/// The params of an `fs/write_text_file` of session `s`.
pub(crate) fn write_params(path: &Path, content: &str) -> Value {
    json!({"sessionId": "s", "path": path, "content": content})
}

/// `s`, cut to its first 400 bytes (for messages).
pub(crate) fn truncate(s: &str) -> String {
    if s.len() <= 400 {
        s.to_string()
    } else {
        let mut end = 400;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes)", &s[..end], s.len())
    }
}

/// Responses keyed by id (compact JSON text of the id).
pub(crate) struct Ids(HashMap<String, Value>);

impl Ids {
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn get(&self, id: impl Into<Value>) -> &Value {
        let id = id.into();
        self.0
            .get(&id.to_string())
            .unwrap_or_else(|| panic!("no response for id {id}"))
    }
}

/// Responses keyed by id; panics if an id repeats.
pub(crate) fn by_id(responses: Vec<Value>) -> Ids {
    let mut out = HashMap::new();
    for r in responses {
        let id = r["id"].to_string();
        assert!(
            out.insert(id.clone(), r).is_none(),
            "id {id} answered twice"
        );
    }
    Ids(out)
}

/// Checks an `initialize` response; returns the workspace id.
pub(crate) fn check_initialize(r: &Value, ws: &Path, read: bool) -> String {
    assert!(r.get("error").is_none(), "{r}");
    let res = &r["result"];
    assert_eq!(res["protocolVersion"], 1, "{r}");
    let wg = &res["_meta"]["writegate"];
    assert_eq!(wg["version"], env!("CARGO_PKG_VERSION"), "{r}");
    assert_eq!(wg["fs"]["writeTextFile"], true, "{r}");
    assert_eq!(wg["fs"]["readTextFile"], read, "{r}");
    let ext: Vec<&str> = wg["extensionMethods"]
        .as_array()
        .unwrap_or_else(|| panic!("extensionMethods: {r}"))
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    for m in ["_writegate/edit_text_file", "_writegate/receipt"] {
        assert!(ext.contains(&m), "{m} missing from {ext:?}");
    }
    // Advertised exactly when it is served (ADR 0015).
    assert_eq!(ext.contains(&"_writegate/read_lines"), read, "{ext:?}");
    let w = &wg["workspace"];
    assert_eq!(w["root"], json!(ws), "{r}");
    assert_eq!(w["trusted"], true, "{r}");
    let id = w["id"]
        .as_str()
        .unwrap_or_else(|| panic!("workspace id: {r}"));
    assert!(
        !id.is_empty() && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{id}"
    );
    id.to_string()
}

pub(crate) fn small_content(conn: i64, i: i64) -> String {
    format!(
        "connection {conn}, write {i}\n{}\n",
        "x".repeat(usize::try_from(i * 7 % 50).expect("i >= 0"))
    )
}

/// 64 KiB, different for every (conn, i).
pub(crate) fn big_content(conn: i64, i: i64) -> String {
    let unit = format!("<{conn}:{i}>");
    let mut s = unit.repeat(65536 / unit.len() + 1);
    s.truncate(65535);
    s.push('\n');
    s
}

pub(crate) fn running_as_root(test: &str) -> bool {
    let root = writegate_testkit::is_root();
    if !root {
        eprintln!("note: {test} needs root (to act as `nobody`); skipped");
    }
    root
}

/// The daemon binary at a path `nobody` can execute: the build output if
/// every ancestor is world-searchable, else a copy under `base`.
pub(crate) fn nobody_reachable_binary(base: &Path) -> PathBuf {
    let bin = Path::new(BIN);
    let reachable = bin
        .ancestors()
        .skip(1)
        .all(|a| fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
        && fs::metadata(bin).is_ok_and(|m| m.permissions().mode() & 0o001 != 0);
    if reachable {
        return bin.to_path_buf();
    }
    let copy = base.join("writegate");
    fs::copy(bin, &copy).unwrap();
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
    copy
}

/// Sends one request that must be refused with `kind`; checks the tree did
/// not change and exactly one audit event (`fs.denied` with that
/// `errorKind`) was written. Returns the event.
pub(crate) fn refused_unchanged(
    t: &Tree,
    c: &mut Client,
    audit: &mut Audit,
    method: &str,
    params: Value,
    kind: &str,
) -> Value {
    let before = t.snapshot();
    let what = format!("{method} {params}");
    let r = c.call(method, params);
    assert_refused(&r, kind);
    assert_eq!(
        t.snapshot(),
        before,
        "{what}: a refusal must not change the tree"
    );
    let ev = audit.one("fs.denied");
    assert_eq!(ev["errorKind"], kind, "{ev}");
    ev
}

/// [`refused_unchanged`] for an `fs/write_text_file` with `params`.
pub(crate) fn refused_write(
    t: &Tree,
    c: &mut Client,
    audit: &mut Audit,
    params: Value,
    kind: &str,
) -> Value {
    refused_unchanged(t, c, audit, "fs/write_text_file", params, kind)
}

/// A refusal with `kind` and its documented wire shape (SPEC 11).
pub(crate) fn assert_refused(r: &Value, kind: &str) {
    let e = &r["error"];
    assert_eq!(e["data"]["errorKind"], kind, "{r}");
    if kind == "path_not_found" {
        assert_eq!(e["code"], -32002, "{r}");
        assert!(e["data"]["uri"].is_string(), "{r}");
    } else {
        assert_eq!(e["code"], code_of(kind), "{r}");
        assert_eq!(e["data"]["status"], status_of(kind), "{r}");
    }
}

/// The JSON-RPC code of a refusal (docs/errors.md): the server
/// range, one per kind; `internal_error` keeps -32603.
pub(crate) fn code_of(kind: &str) -> i64 {
    match kind {
        "path_not_found" => -32002,
        "path_outside_workspace" => -32010,
        "symlink_escape" => -32011,
        "parse_error" => -32012,
        "not_a_file" => -32013,
        "reserved_name" => -32014,
        "untrusted_workspace" => -32020,
        "permission_denied" => -32021,
        "approval_required" => -32022,
        "writegate_file" => -32023,
        "hash_mismatch" => -32030,
        "file_already_exists" => -32031,
        "generation_closed" => -32032,
        "file_too_large" => -32040,
        "binary_file" => -32041,
        "unsupported_encoding" => -32042,
        "unmappable_character" => -32043,
        "text_not_found" => -32050,
        "ambiguous_text_match" => -32051,
        "line_out_of_range" => -32052,
        "line_mismatch" => -32053,
        "line_ending_conflict" => -32054,
        "io_error" => -32060,
        "internal_error" => -32603,
        other => panic!("unknown errorKind {other}"),
    }
}

fn status_of(kind: &str) -> u16 {
    match kind {
        "path_outside_workspace"
        | "symlink_escape"
        | "parse_error"
        | "not_a_file"
        | "reserved_name" => 400,
        "untrusted_workspace" | "permission_denied" | "approval_required" | "writegate_file" => 403,
        "path_not_found" => 404,
        "hash_mismatch" | "file_already_exists" | "file_changed" => 409,
        "file_too_large" => 413,
        "generation_closed" | "io_error" => 503,
        "internal_error" => 500,
        _ => 422,
    }
}

/// The `_meta` key of the external-write marker (SPEC 4).
pub(crate) const MARKER_KEY: &str = "qwen-code/tool-write-origin";

/// A valid marker naming `source`, as a whole `_meta` object.
pub(crate) fn marker(source: &str) -> Value {
    json!({ MARKER_KEY: {"version": 1, "source": source} })
}

/// [`write_params`] with `meta` (a marker) as `_meta`.
pub(crate) fn marked_write(path: &Path, content: &str, meta: Value) -> Value {
    let mut p = write_params(path, content);
    p["_meta"] = meta;
    p
}

/// A `--stdio` daemon of `t` (with `extra` arguments), its client, and a
/// reader of the audit log.
pub(crate) fn stdio_session(t: &Tree, extra: &[&str]) -> (Daemon, Client, Audit) {
    let mut d = t.stdio_daemon(extra);
    let c = d.stdio_client();
    (d, c, t.audit())
}

/// `initialize` asking for `workspace` (a root or a runtime id).
pub(crate) fn initialize_in(c: &mut Client, workspace: &Value) -> Value {
    c.call(
        "initialize",
        json!({"protocolVersion": 1, "_meta": {"writegate/workspace": workspace}}),
    )
}

/// The workspace an `initialize` response names.
pub(crate) fn workspace_of(r: &Value) -> &Value {
    &r["result"]["_meta"]["writegate"]["workspace"]
}

/// The descriptors a process has registered with its epoll instances, with
/// their event masks (`tfd:` lines of `/proc/<pid>/fdinfo/<epoll fd>`), and
/// what each descriptor is (`socket:[…]`, `pipe:[…]`).
pub(crate) fn epoll_registrations(pid: u32) -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    for e in fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .flatten()
    {
        let Ok(info) = fs::read_to_string(e.path()) else {
            continue;
        };
        for line in info.lines().filter(|l| l.starts_with("tfd:")) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let fd: u32 = words[1].parse().unwrap();
            let events = u32::from_str_radix(words[3], 16).unwrap();
            let target = fs::read_link(format!("/proc/{pid}/fd/{fd}"))
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push((fd, events, target));
        }
    }
    out
}

/// `EPOLLIN` and `EPOLLOUT` in an [`epoll_registrations`] event mask.
pub(crate) const EPOLLIN: u32 = 0x1;
pub(crate) const EPOLLOUT: u32 = 0x4;

/// Whether the open file description behind `fd` is non-blocking.
pub(crate) fn nonblocking(fd: &impl std::os::fd::AsFd) -> bool {
    rustix::fs::fcntl_getfl(fd)
        .unwrap()
        .contains(rustix::fs::OFlags::NONBLOCK)
}

/// The seed of a kill -9 loop: `WG_CRASH_SEED`, else one from the clock
/// (printed by the loops, so a failing run can be repeated).
pub(crate) fn crash_seed() -> u64 {
    std::env::var("WG_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            u64::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos(),
            ) | 1
        })
}

/// The writes of a kill -9 loop: `WG_CRASH_WRITES`, else `default`.
pub(crate) fn crash_writes(default: usize) -> usize {
    std::env::var("WG_CRASH_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small deterministic generator (a kill -9 loop is reproducible from
/// its seed).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What a [`kill_during`] loop did.
pub(crate) struct Killed {
    /// Writes sent, numbered `0..sent`.
    pub(crate) sent: usize,
    /// Daemons killed.
    pub(crate) kills: usize,
    /// Writes answered with success before or while their daemon died.
    pub(crate) acked: HashSet<usize>,
}

/// The kill -9 loop: until `total` writes were sent, starts a daemon with
/// `start` (initialized, with its client), pipelines a round of
/// `fs/write_text_file` requests at it (a size drawn from `round`; write
/// `k` has the id `k` and the params `write(k)`, which may first prepare
/// its file), reads a random number of answers, sometimes sleeps up to
/// 3 ms, then kills the daemon with SIGKILL, so that the rest of the
/// round is anywhere in its pipeline. Answers already on their way when
/// it died count as acknowledged too. `after_kill` runs after every kill,
/// to check what the daemon left on disk; the caller then checks the
/// outcome against the files, after one more start.
pub(crate) fn kill_during(
    seed: u64,
    total: usize,
    round: Range<u64>,
    mut start: impl FnMut() -> (Daemon, Client),
    mut write: impl FnMut(usize) -> Value,
    mut after_kill: impl FnMut(),
) -> Killed {
    let mut rng = Rng(seed);
    let mut done = Killed {
        sent: 0,
        kills: 0,
        acked: HashSet::new(),
    };
    let id_of = |r: &Value| usize::try_from(r["id"].as_u64().unwrap()).unwrap();
    while done.sent < total {
        let (mut d, mut c) = start();
        let n = usize::try_from(round.start + rng.below(round.end - round.start))
            .unwrap()
            .min(total - done.sent);
        for k in done.sent..done.sent + n {
            c.send(&req(json!(k), "fs/write_text_file", write(k)));
        }
        let wait_for = rng.below(u64::try_from(n).unwrap() + 1);
        for _ in 0..wait_for {
            let r = c.recv();
            assert_eq!(r["result"], json!({}), "seed {seed}: {r}");
            done.acked.insert(id_of(&r));
        }
        if rng.below(2) == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(3000)));
        }
        d.child.kill().unwrap();
        let _ = d.child.wait();
        for r in c.recv_until_eof() {
            if r["result"] == json!({}) {
                done.acked.insert(id_of(&r));
            }
        }
        done.sent += n;
        done.kills += 1;
        after_kill();
    }
    done
}
