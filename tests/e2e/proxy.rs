//! `writegate proxy -- AGENT` through real processes: the real binary as the
//! proxy, an agent built on the official ACP Rust SDK as its child (the
//! `acp_test_agent` example of this package, built by `cargo test`), and
//! the test as the editor over JSON lines. Each test checks the bytes on
//! disk, exactly one audit event per fs operation, and that the editor
//! never sees an `fs/*` or `_writegate/*` message.
//!
//! The agent runs a script per prompt (see its doc): `read`, `write`,
//! `roundtrip`, `call`, `ask`, `exit`; it reports each outcome as a
//! `session/update` text chunk holding one JSON object.

use crate::common::{BIN, Clients, Daemon, TIMEOUT, Tree, TreeAudit};
use rustix::process::Signal;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The SDK-built test agent (`cargo build -p writegate --example acp_test_agent`).
fn agent_bin() -> PathBuf {
    example_bin("acp_test_agent")
}

/// An example of this package, built by `cargo test`.
fn example_bin(name: &str) -> PathBuf {
    let p = Path::new(BIN)
        .parent()
        .expect("the binary's directory")
        .join("examples")
        .join(name);
    assert!(
        p.is_file(),
        "{} is missing: `cargo test` builds it; with a target filter run \
         `cargo build -p writegate --example {name}` first",
        p.display()
    );
    p
}

/// The test as the editor: the proxy's stdin/stdout.
struct Editor {
    d: Daemon,
    c: crate::common::Client,
    /// Every line the editor received.
    seen: Vec<Value>,
    sent: u64,
}

/// What the editor does with a request from the proxy: the result to
/// answer with, or `None` to leave it unanswered.
type OnRequest<'a> = &'a mut dyn FnMut(&Value) -> Option<Value>;

fn proxy(t: &Tree, extra: &[&str]) -> Editor {
    proxy_running(t, extra, &[agent_bin().into_os_string()])
}

fn proxy_running(t: &Tree, extra: &[&str], command: &[std::ffi::OsString]) -> Editor {
    let mut cmd = t.command();
    cmd.arg("proxy")
        .arg("--audit-log")
        .arg(&t.audit_log)
        .args(extra)
        .arg("--")
        .args(command);
    // Marked external writes are off by default as root (these tests run as
    // root in CI); the proxy handles them as serve does.
    cmd.env("WRITEGATE_EXTERNAL_TOOL_WRITES", "true");
    let mut d = t.spawn(cmd, true, None);
    let c = d.stdio_client();
    Editor {
        d,
        c,
        seen: Vec::new(),
        sent: 0,
    }
}

impl Editor {
    fn recv(&mut self) -> Value {
        let v = self.c.recv();
        self.seen.push(v.clone());
        v
    }

    /// Sends a request with a fresh numeric id; returns the id.
    fn send(&mut self, method: &str, params: &Value) -> Value {
        self.sent += 1;
        let id = json!(self.sent);
        self.c
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn notify(&mut self, method: &str, params: &Value) {
        self.c
            .send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Reads until the response to `id`: requests from the proxy go to
    /// `on_request`; notifications are returned.
    fn until(&mut self, id: &Value, on_request: OnRequest) -> (Value, Vec<Value>) {
        let mut notes = Vec::new();
        loop {
            let v = self.recv();
            if v.get("method").is_some() && v.get("id").is_some() {
                if let Some(result) = on_request(&v) {
                    self.c
                        .send(&json!({"jsonrpc": "2.0", "id": v["id"], "result": result}));
                }
            } else if v.get("method").is_some() {
                notes.push(v);
            } else if &v["id"] == id {
                return (v, notes);
            } else {
                panic!("a response to a request not sent: {v}");
            }
        }
    }

    fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.send(method, params);
        self.until(&id, &mut |r| panic!("unexpected request {r}")).0
    }

    /// `initialize` offering no fs at all; returns the agent's result.
    fn init(&mut self) -> Value {
        let r = self.call(
            "initialize",
            &json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}}),
        );
        assert!(r.get("error").is_none(), "{r}");
        r["result"].clone()
    }

    fn new_session(&mut self, cwd: &Path) -> String {
        let r = self.call("session/new", &json!({"cwd": cwd, "mcpServers": []}));
        r["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new: {r}"))
            .to_string()
    }

    /// Runs a prompt script; returns the prompt's response and the agent's
    /// reports, one per command.
    fn prompt(
        &mut self,
        session: &str,
        script: &str,
        on_request: OnRequest,
    ) -> (Value, Vec<Value>) {
        let id = self.send(
            "session/prompt",
            &json!({"sessionId": session, "prompt": [{"type": "text", "text": script}]}),
        );
        let (r, notes) = self.until(&id, on_request);
        (r, reports(&notes))
    }

    /// [`Editor::prompt`] expecting no request from the proxy and an
    /// `end_turn`; returns the reports.
    fn run(&mut self, session: &str, script: &str) -> Vec<Value> {
        let (r, reports) = self.prompt(session, script, &mut |r| panic!("unexpected request {r}"));
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
        reports
    }

    /// Closes stdin and reads to the end of stdout; returns the exit status
    /// and the last lines.
    fn finish(mut self) -> (std::process::ExitStatus, Vec<Value>) {
        self.c.close_write();
        let rest = self.c.recv_until_eof();
        self.seen.extend(rest.iter().cloned());
        let st = self.d.wait_exit();
        assert_no_fs(&self.seen);
        (st, rest)
    }
}

/// The agent's reports among `session/update` notifications.
fn reports(notes: &[Value]) -> Vec<Value> {
    notes
        .iter()
        .filter(|n| n["method"] == "session/update")
        .filter_map(|n| n["params"]["update"]["content"]["text"].as_str())
        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
        .filter(|v| v.get("op").is_some())
        .collect()
}

/// The editor never sees writegate's own traffic with the agent.
fn assert_no_fs(seen: &[Value]) {
    for v in seen {
        let m = v["method"].as_str().unwrap_or("");
        assert!(
            !m.starts_with("fs/") && !m.starts_with("_writegate/"),
            "the editor saw {v}"
        );
    }
}

fn ok(r: &Value) -> &Value {
    assert_eq!(r["ok"], true, "{r}");
    &r["result"]
}

fn err(r: &Value) -> &Value {
    assert_eq!(r["ok"], false, "{r}");
    &r["error"]
}

/// A permission answer selecting `option`.
fn select(option: &str) -> Value {
    json!({"outcome": {"outcome": "selected", "optionId": option}})
}

/// Polls until `f` holds (a broken proxy fails the test instead of hanging it).
fn eventually(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < TIMEOUT, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn initialize_offers_fs_and_fs_requests_are_answered_by_writegate() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let mut e = proxy(&t, &[]);
    let init = e.init();
    // The editor offered no fs; the agent was offered both.
    assert_eq!(
        init["_meta"]["testAgent"]["clientFs"],
        json!({"readTextFile": true, "writeTextFile": true}),
        "{init}"
    );
    let s = e.new_session(&t.ws);
    let a = t.ws.join("a.txt");
    let reports = e.run(
        &s,
        &format!(
            "write {p} \"one\\ntwo\\n\"\nread {p}\nread {m}",
            p = a.display(),
            m = t.ws.join("missing.txt").display()
        ),
    );
    assert_eq!(reports.len(), 3, "{reports:?}");
    ok(&reports[0]);
    let read = ok(&reports[1]);
    assert_eq!(read["content"], "one\ntwo\n", "{read}");
    assert_eq!(read["_meta"]["encoding"], "utf-8", "{read}");
    assert_eq!(read["_meta"]["lineEnding"], "lf", "{read}");
    let missing = err(&reports[2]);
    assert_eq!(missing["code"], -32002, "{missing}");
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .starts_with("Resource not found"),
        "{missing}"
    );
    assert_eq!(std::fs::read(&a).unwrap(), b"one\ntwo\n");
    // One event per fs operation, in the session's workspace.
    let events = audit.new_events();
    assert_eq!(events.len(), 3, "{events:#?}");
    assert_eq!(events[0]["type"], "fs.access");
    assert_eq!(events[0]["intent"], "write");
    assert_eq!(events[1]["intent"], "read");
    assert_eq!(events[2]["errorKind"], "path_not_found");
    for ev in &events {
        assert_eq!(ev["sessionId"], json!(s), "{ev}");
    }
    let (st, _) = e.finish();
    assert!(st.success(), "{st:?}");
}

/// Round-trip fidelity through the proxy: the agent reads, edits and writes
/// back declaring UTF-8 without BOM (as qwen-code does); the file keeps its
/// own encoding, BOM and line endings, every byte outside the edit equal.
#[test]
fn a_read_edit_write_round_trip_keeps_the_file_format() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let cp1252 = t.ws.join("legacy.txt");
    std::fs::write(&cp1252, b"caf\xe9 one\r\nna\xefve two\r\n").unwrap();
    let utf16 = t.ws.join("wide.txt");
    let mut bytes = vec![0xff, 0xfe];
    for u in "h\u{e9}llo one\r\nworld\r\n".encode_utf16() {
        bytes.extend_from_slice(&u.to_le_bytes());
    }
    std::fs::write(&utf16, &bytes).unwrap();
    let reports = e.run(
        &s,
        &format!(
            "roundtrip {} one ONE\nroundtrip {} one ONE",
            cp1252.display(),
            utf16.display()
        ),
    );
    ok(&reports[0]);
    ok(&reports[1]);
    assert_eq!(
        std::fs::read(&cp1252).unwrap(),
        b"caf\xe9 ONE\r\nna\xefve two\r\n"
    );
    let mut want = vec![0xff, 0xfe];
    for u in "h\u{e9}llo ONE\r\nworld\r\n".encode_utf16() {
        want.extend_from_slice(&u.to_le_bytes());
    }
    assert_eq!(std::fs::read(&utf16).unwrap(), want);
    // A read and a write each.
    assert_eq!(audit.new_events().len(), 4);
    e.finish();
}

#[test]
fn a_held_write_is_asked_in_the_editor_allowed_or_rejected() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let env = t.ws.join(".env");
    let script = format!("write {} \"KEY=1\\n\"", env.display());

    // Rejected: nothing written, the agent told why.
    let mut asked = Vec::new();
    let (r, reports) = e.prompt(&s, &script, &mut |q| {
        asked.push(q.clone());
        Some(select("reject_once"))
    });
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = &asked[0];
    assert_eq!(q["method"], "session/request_permission", "{q}");
    assert!(
        q["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("writegate-")),
        "the proxy's own id: {q}"
    );
    assert_eq!(q["params"]["sessionId"], json!(s), "{q}");
    assert_eq!(
        q["params"]["toolCall"]["locations"][0]["path"],
        json!(env),
        "{q}"
    );
    let kinds: Vec<&Value> = q["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["kind"])
        .collect();
    assert_eq!(
        kinds,
        [
            &json!("allow_once"),
            &json!("allow_always"),
            &json!("reject_once")
        ]
    );
    let refused = err(&reports[0]);
    assert_eq!(
        refused["data"]["errorKind"], "approval_required",
        "{refused}"
    );
    assert!(!env.exists());
    let ev = audit.one("fs.denied");
    assert_eq!(ev["approval"], "denied", "{ev}");

    // Allowed once: written; asked again next time.
    let mut n = 0;
    let (_, reports) = e.prompt(&s, &script, &mut |_| {
        n += 1;
        Some(select("allow_once"))
    });
    assert_eq!(n, 1);
    ok(&reports[0]);
    assert_eq!(std::fs::read(&env).unwrap(), b"KEY=1\n");
    let ev = audit.one("fs.access");
    assert_eq!(ev["approval"], "allowed_once", "{ev}");

    // Allowed always: not asked again in this session.
    let (_, reports) = e.prompt(&s, &script, &mut |_| Some(select("allow_always")));
    ok(&reports[0]);
    assert_eq!(audit.one("fs.access")["approval"], "allowed_always");
    let reports = e.run(&s, &format!("write {} \"KEY=2\\n\"", env.display()));
    ok(&reports[0]);
    assert_eq!(std::fs::read(&env).unwrap(), b"KEY=2\n");
    assert!(audit.one("fs.access").get("approval").is_none());
    e.finish();
}

#[test]
fn session_cancel_cancels_the_pending_question() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let env = t.ws.join(".env");
    let id = e.send(
        "session/prompt",
        &json!({"sessionId": s, "prompt": [{"type": "text", "text": format!("write {} \"x\"", env.display())}]}),
    );
    // The question arrives; the person cancels the prompt instead of answering.
    let q = loop {
        let v = e.recv();
        if v["method"] == "session/request_permission" {
            break v;
        }
    };
    e.notify("session/cancel", &json!({"sessionId": s}));
    let (r, notes) = e.until(&id, &mut |r| panic!("unexpected request {r}"));
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    let reports = reports(&notes);
    assert_eq!(err(&reports[0])["code"], -32800, "{reports:?}");
    assert!(!env.exists());
    assert_eq!(audit.one("fs.denied")["approval"], "cancelled");
    // ACP's editor answers its cancelled question late: harmless.
    e.c.send(
        &json!({"jsonrpc": "2.0", "id": q["id"], "result": {"outcome": {"outcome": "cancelled"}}}),
    );
    let reports = e.run(&s, &format!("read {}", t.ws.join("none").display()));
    assert_eq!(err(&reports[0])["code"], -32002);
    e.finish();
}

/// A permission request the editor never answers held the agent's write
/// for ever. After `approval_timeout_ms` the proxy withdraws it
/// (`$/cancel_request` naming it) and refuses the write
/// `approval_required`, audited `unanswered`; an answer that comes later
/// is dropped, and the session goes on.
#[test]
fn regression_a_permission_request_nobody_answers_is_withdrawn_and_refused_unanswered() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let config = t.base.join("config/quick.toml");
    std::fs::write(&config, "approval_timeout_ms = 300\n").unwrap();
    let mut e = proxy(&t, &["--config", config.to_str().unwrap()]);
    e.init();
    let s = e.new_session(&t.ws);
    let env = t.ws.join(".env");
    let script = format!("write {} \"KEY=1\\n\"", env.display());
    let id = e.send(
        "session/prompt",
        &json!({"sessionId": s, "prompt": [{"type": "text", "text": script}]}),
    );
    let mut asked = Vec::new();
    let (r, notes) = e.until(&id, &mut |q| {
        asked.push(q.clone());
        None
    });
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["method"], "session/request_permission");
    let withdrawn: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "$/cancel_request")
        .collect();
    assert_eq!(withdrawn.len(), 1, "{notes:?}");
    assert_eq!(withdrawn[0]["params"]["requestId"], asked[0]["id"]);
    let reports = reports(&notes);
    let refused = err(&reports[0]);
    assert_eq!(
        refused["data"]["errorKind"], "approval_required",
        "{refused}"
    );
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("did not answer in time"), "{message}");
    assert!(message.contains("nothing was written"), "{message}");
    assert!(!message.contains("_writegate/approve"), "{message}");
    assert!(!env.exists());
    assert_eq!(audit.one("fs.denied")["approval"], "unanswered");
    // A late "allow" answers nothing; the session goes on and asks again.
    e.c.send(&json!({"jsonrpc": "2.0", "id": asked[0]["id"], "result": select("allow_once")}));
    assert!(!env.exists());
    let (_, reports) = e.prompt(&s, &script, &mut |_| Some(select("allow_once")));
    ok(&reports[0]);
    assert_eq!(std::fs::read(&env).unwrap(), b"KEY=1\n");
    assert_eq!(audit.one("fs.access")["approval"], "allowed_once");
    e.finish();
}

#[test]
fn sessions_have_the_workspaces_of_their_cwds() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let mut e = proxy(&t, &[]);
    e.init();
    let a = e.new_session(&t.ws);
    let b = e.new_session(&t.wsb);
    let in_a = t.ws.join("f.txt");
    let in_b = t.wsb.join("f.txt");
    ok(&e.run(&a, &format!("write {} \"a\"", in_a.display()))[0]);
    ok(&e.run(&b, &format!("write {} \"b\"", in_b.display()))[0]);
    // Session a's workspace is ws only.
    let refused = e.run(
        &a,
        &format!("write {} \"x\"", t.wsb.join("g.txt").display()),
    );
    assert_eq!(
        err(&refused[0])["data"]["errorKind"],
        "path_outside_workspace"
    );
    assert_eq!(std::fs::read(&in_a).unwrap(), b"a");
    assert_eq!(std::fs::read(&in_b).unwrap(), b"b");
    assert!(!t.wsb.join("g.txt").exists());
    let events = audit.new_events();
    assert_eq!(events.len(), 3, "{events:#?}");
    assert_ne!(events[0]["workspace"], events[1]["workspace"]);
    assert_eq!(events[2]["errorKind"], "path_outside_workspace");

    // A session the editor never opened here: a clear error, no event.
    let unknown = e.run(
        &a,
        &format!(
            "call fs/read_text_file {}",
            json!({"sessionId": "nope", "path": in_a})
        ),
    );
    let u = err(&unknown[0]);
    assert_eq!(u["code"], -32602, "{u}");
    assert!(
        u["message"]
            .as_str()
            .unwrap()
            .contains("unknown session nope"),
        "{u}"
    );
    assert!(audit.new_events().is_empty());

    // A cwd nested in another session's workspace is refused before it
    // reaches the agent (the agent would have numbered it sess-3).
    std::fs::create_dir(t.ws.join("sub")).unwrap();
    let r = e.call(
        "session/new",
        &json!({"cwd": t.ws.join("sub"), "mcpServers": []}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not nest"),
        "{r}"
    );
    assert_eq!(e.new_session(&t.out), "sess-3");
    e.finish();
}

#[test]
fn the_agents_own_requests_reach_the_editor_under_ids_of_the_proxys() {
    let t = Tree::new(BIN);
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let mut asked = Vec::new();
    let (_, reports) = e.prompt(&s, "ask", &mut |q| {
        asked.push(q.clone());
        Some(select("yes"))
    });
    assert_eq!(asked.len(), 1);
    // The agent's own question, as it sent it (its tool call), under an id
    // the proxy gave it; the answer reaches the agent under its own id.
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "agent-tool-1");
    assert!(asked[0]["id"].is_i64(), "{}", asked[0]);
    assert_eq!(
        ok(&reports[0])["outcome"],
        json!({"outcome": "selected", "optionId": "yes"})
    );
    e.finish();
}

#[test]
fn writegate_extensions_are_served_but_the_agent_cannot_approve() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let f = t.ws.join("e.py");
    std::fs::write(&f, "def f():\n    return 1\n").unwrap();
    let reports = e.run(
        &s,
        &[
            format!(
                "call _writegate/edit_text_file {}",
                json!({"sessionId": s, "path": f, "mode": "replace", "find": "return 1", "content": "return 2"})
            ),
            format!(
                "call _writegate/approve {}",
                json!({"sessionId": s, "command": format!("edit_file write {}", t.ws.join(".env").display()), "scope": "session"})
            ),
            format!("call _writegate/receipt {}", json!({"sessionId": s})),
        ]
        .join("\n"),
    );
    ok(&reports[0]);
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "def f():\n    return 2\n"
    );
    assert_eq!(err(&reports[1])["code"], -32601, "{:?}", reports[1]);
    assert_eq!(ok(&reports[2])["files"].as_array().unwrap().len(), 1);
    assert_eq!(audit.new_events().len(), 1);
    e.finish();
}

#[test]
fn marked_external_writes_are_handled_as_in_serve() {
    let t = Tree::new(BIN);
    let target = t.out.join("notes.txt");
    let script = format!("external {} \"outside\\n\"", target.display());

    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    ok(&e.run(&s, &script)[0]);
    assert_eq!(std::fs::read(&target).unwrap(), b"outside\n");
    let ev = t.audit_events();
    assert_eq!(ev.last().unwrap()["writer"], "external", "{ev:?}");
    e.finish();

    std::fs::remove_file(&target).unwrap();
    let mut e = proxy(&t, &["--no-external-writes"]);
    e.init();
    let s = e.new_session(&t.ws);
    let r = e.run(&s, &script);
    assert_eq!(err(&r[0])["data"]["errorKind"], "path_outside_workspace");
    assert!(!target.exists());
    e.finish();
}

#[test]
fn editor_eof_closes_the_agents_input_and_the_proxy_exits_with_its_status() {
    let t = Tree::new(BIN);
    let mut e = proxy(&t, &[]);
    let pid = e.init()["_meta"]["testAgent"]["pid"].as_u64().unwrap();
    let (st, rest) = e.finish();
    assert_eq!(st.code(), Some(0), "{st:?}");
    assert!(rest.is_empty(), "{rest:?}");
    eventually("the agent is gone", || gone(u32::try_from(pid).unwrap()));
}

/// The editor may close its input right after a request: the agent gets the
/// request, then end of input, and what it still sends is forwarded.
#[test]
fn after_editor_eof_the_agents_last_output_is_still_forwarded() {
    let t = Tree::new(BIN);
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let id = e.send(
        "session/prompt",
        &json!({"sessionId": s, "prompt": [{"type": "text", "text": "updates 3 10"}]}),
    );
    let (st, rest) = e.finish();
    assert_eq!(st.code(), Some(0), "{st:?}");
    let answer = rest
        .iter()
        .find(|v| v["id"] == id)
        .unwrap_or_else(|| panic!("no answer to the prompt: {rest:?}"));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(
        rest.iter()
            .filter(|v| v["method"] == "session/update")
            .count(),
        4,
        "three updates and the report: {rest:?}"
    );
}

#[test]
fn an_agent_crash_mid_prompt_answers_the_editor_and_ends_the_proxy() {
    let t = Tree::new(BIN);
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let a = t.ws.join("a.txt");
    let (r, reports) = e.prompt(
        &s,
        &format!("write {} \"x\"\nexit 3", a.display()),
        &mut |r| panic!("unexpected request {r}"),
    );
    // The agent exits at once: its last report may not have left it.
    assert!(reports.len() <= 1, "{reports:?}");
    assert_eq!(std::fs::read(&a).unwrap(), b"x");
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the agent exited (exit status 3)"),
        "{r}"
    );
    // The proxy ends by itself, with the agent's status.
    let rest = e.c.recv_until_eof();
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(e.d.wait_exit().code(), Some(3));
    assert_no_fs(&e.seen);
}

#[test]
fn sigterm_is_passed_on_and_a_killed_proxy_leaves_no_agent() {
    let t = Tree::new(BIN);
    let mut e = proxy(&t, &[]);
    e.init();
    e.d.signal(Signal::TERM);
    // The SDK agent does not catch SIGTERM: it dies of it, and the proxy
    // reports that as a shell would.
    assert_eq!(e.d.wait_exit().code(), Some(128 + 15));

    let mut e = proxy(&t, &[]);
    let pid = e.init()["_meta"]["testAgent"]["pid"].as_u64().unwrap();
    e.d.signal(Signal::KILL);
    e.d.wait_exit();
    eventually("the agent died with the proxy", || {
        gone(u32::try_from(pid).unwrap())
    });
}

#[test]
fn an_agent_that_cannot_start_is_a_clear_error() {
    let t = Tree::new(BIN);
    let mut e = proxy_running(&t, &[], &["/nonexistent/agent".into()]);
    let st = e.d.wait_exit();
    assert_eq!(st.code(), Some(127), "{st:?}");
    assert!(
        e.d.stderr_text()
            .contains("cannot start the agent /nonexistent/agent"),
        "{}",
        e.d.stderr_text()
    );
}

/// The agent's notifications are forwarded as read (ADR 0011; several of a
/// burst in one write to the editor). A burst of 3,000 lines of every shape
/// the scan meets (escapes, non-ASCII, surrogate pairs, nesting, numbers
/// it leaves to `serde_json`), with a request to the editor and a request
/// writegate answers itself (for an unknown session) in the middle, reaches the editor whole, in
/// order and byte-identical; the agent's request to writegate never does,
/// and closing the editor's input still ends the agent (its stdin is
/// closed although the proxy writes it directly). The agent writes at once,
/// before the proxy has connected its editor side: those lines wait and go
/// first (they were dropped before; this test caught it under load).
#[test]
fn a_burst_of_agent_lines_reaches_the_editor_in_order_and_unchanged() {
    let t = Tree::new(BIN);
    let mut lines = Vec::new();
    for i in 0..3000 {
        let text = match i % 6 {
            0 => format!("plain {i}"),
            1 => format!("tab\\t quote\\\" backslash\\\\ newline\\n {i}"),
            2 => format!("é ü 中文 {i} \\u00e9\\ud83d\\ude00"),
            3 => "x".repeat(i % 2000),
            4 => format!("{i}"),
            _ => String::new(),
        };
        let params = if i % 6 == 4 {
            format!(
                r#"{{"sessionId":"s","n":[{i},1.5,-2e3,true,null,{{"a":[[[]]]}}],"text":"{text}"}}"#
            )
        } else {
            format!(
                r#"{{"sessionId":"s","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}"#
            )
        };
        lines.push(format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{params}}}"#
        ));
        if i == 1000 {
            lines.push(r#"{"jsonrpc":"2.0","id":"ask-1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t"},"options":[]}}"#.to_string());
        }
        if i == 2000 {
            lines.push(r#"{"jsonrpc":"2.0","id":"own-1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/etc/hostname"}}"#.to_string());
        }
    }
    let script = t.base.join("lines.jsonl");
    std::fs::write(&script, lines.join("\n") + "\n").unwrap();
    // The agent prints its lines, then waits for the end of its input.
    let command = [
        "/bin/sh".into(),
        "-c".into(),
        "cat \"$0\"; exec cat >/dev/null".into(),
        script.clone().into_os_string(),
    ];
    let mut e = proxy_running(&t, &[], &command);
    let expected: Vec<&String> = lines.iter().filter(|l| !l.contains("own-1")).collect();
    for (n, want) in expected.iter().enumerate() {
        let (got, _) = e.c.recv_raw();
        if want.contains("ask-1") {
            // A relayed request keeps everything but its id.
            let mut got: Value = serde_json::from_str(&got).unwrap();
            assert!(got["id"].is_i64(), "{got}");
            got["id"] = json!("ask-1");
            assert_eq!(got, serde_json::from_str::<Value>(want).unwrap());
            continue;
        }
        assert_eq!(&got, *want, "line {n} differs");
    }
    let (st, rest) = e.finish();
    assert_eq!(st.code(), Some(0), "{st:?}");
    assert!(rest.is_empty(), "nothing more: {rest:?}");
}

/// What the editor does with the proxy's real question about `.env` once
/// it has answered the agent's forged one with "Allow".
#[derive(Debug, Clone, Copy)]
enum RealQuestion {
    /// Never answers it; the person cancels the prompt instead.
    NeverAnswered,
    /// Rejects it, late.
    RejectedLate,
    /// Answers it with something that is no permission outcome.
    Garbage,
}

/// A proxied agent approved its own held write: it sent its own harmless
/// `session/request_permission` under the id the proxy's question about
/// `.env` had (`writegate-<pid>-1`, guessable from its parent pid), and
/// the person's "Allow" on the harmless question approved the `.env`
/// write. Relayed requests now get ids of the proxy's and its own
/// questions ids no peer can predict: whatever the editor does, `.env` is
/// untouched and the operation leaves one `fs.denied` event.
#[test]
fn an_agent_cannot_approve_its_own_held_write_with_a_forged_question_id() {
    for behaviour in [
        RealQuestion::NeverAnswered,
        RealQuestion::RejectedLate,
        RealQuestion::Garbage,
    ] {
        let t = Tree::new(BIN);
        let env = t.ws.join(".env");
        std::fs::write(&env, "KEY=orig\n").unwrap();
        let mut audit = t.audit();
        let mut e = proxy_running(&t, &[], &[example_bin("acp_hostile_agent").into()]);
        e.init();
        let s = e.new_session(&t.ws);
        let id = e.send(
            "session/prompt",
            &json!({"sessionId": s, "prompt": [{"type": "text", "text": format!("forge {}", env.display())}]}),
        );
        // The proxy's question about `.env` and the agent's three forged
        // ones all reach the editor.
        let mut real = None;
        let mut forged = Vec::new();
        while real.is_none() || forged.len() < 3 {
            let v = e.recv();
            if v["method"] != "session/request_permission" {
                continue;
            }
            if v["params"]["toolCall"]["title"] == "Read README.md?" {
                forged.push(v);
            } else {
                real = Some(v);
            }
        }
        let real = real.unwrap();
        assert_eq!(
            real["params"]["toolCall"]["locations"][0]["path"],
            json!(env),
            "{real}"
        );
        // The person allows every harmless question.
        for f in &forged {
            assert!(f["id"].is_i64(), "relayed under the proxy's id: {f}");
            assert_ne!(f["id"], real["id"], "{behaviour:?}");
            e.c.send(&json!({"jsonrpc": "2.0", "id": f["id"], "result": select("allow_once")}));
        }
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            std::fs::read(&env).unwrap(),
            b"KEY=orig\n",
            "{behaviour:?}: written on the forged answer"
        );
        match behaviour {
            RealQuestion::NeverAnswered => e.notify("session/cancel", &json!({"sessionId": s})),
            RealQuestion::RejectedLate => {
                std::thread::sleep(Duration::from_millis(500));
                e.c.send(
                    &json!({"jsonrpc": "2.0", "id": real["id"], "result": select("reject_once")}),
                );
            }
            RealQuestion::Garbage => {
                e.c.send(&json!({"jsonrpc": "2.0", "id": real["id"], "result": {"outcome": 42}}));
            }
        }
        let (r, notes) = e.until(&id, &mut |r| panic!("unexpected request {r}"));
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
        let reports = reports(&notes);
        // The agent got the person's answers to its own questions, under
        // its own ids.
        let answered: Vec<&Value> = reports.iter().filter(|r| r["op"] == "forged").collect();
        assert_eq!(answered.len(), 3, "{behaviour:?}: {reports:?}");
        for a in answered {
            assert!(
                a["id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("writegate-")),
                "{a}"
            );
            assert_eq!(a["answer"]["result"], select("allow_once"), "{a}");
        }
        let write = reports.iter().find(|r| r["op"] == "forge").unwrap();
        assert_eq!(write["ok"], false, "{behaviour:?}: {write}");
        assert_eq!(std::fs::read(&env).unwrap(), b"KEY=orig\n", "{behaviour:?}");
        let ev = audit.one("fs.denied");
        let expected = match behaviour {
            RealQuestion::NeverAnswered => "cancelled",
            RealQuestion::RejectedLate => "denied",
            RealQuestion::Garbage => "unanswered",
        };
        assert_eq!(ev["approval"], expected, "{behaviour:?}: {ev}");
        assert!(audit.new_events().is_empty(), "{behaviour:?}: one event");
        e.finish();
    }
}

/// After the person rejected a held write, the proxy told the agent to
/// call `_writegate/approve` and retry, which the proxy refuses to the
/// agent, and which invites asking someone who already said no.
#[test]
fn a_rejection_through_the_proxy_says_not_to_retry_and_never_to_call_approve() {
    let t = Tree::new(BIN);
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let env = t.ws.join(".env");
    let script = format!("write {} \"KEY=1\\n\"", env.display());
    let (_, reports) = e.prompt(&s, &script, &mut |_| Some(select("reject_once")));
    let refused = err(&reports[0]);
    // No ready-made `_writegate/approve` params either.
    assert!(refused["data"].get("approve").is_none(), "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("the user declined"), "{message}");
    assert!(message.contains("Do not retry"), "{message}");
    assert!(!message.contains("_writegate/approve"), "{message}");
    // Nobody could be asked (the answer was no outcome): no advice to call
    // approve either.
    let (_, reports) = e.prompt(&s, &script, &mut |_| Some(json!({"nope": true})));
    let message = err(&reports[0])["message"].as_str().unwrap().to_string();
    assert!(!message.contains("_writegate/approve"), "{message}");
    assert!(message.contains("could not be asked"), "{message}");
    assert!(!env.exists());
    e.finish();
}

/// When the agent died while a child of its own kept its stdout open, the
/// proxy answered the editor's pending prompt only after the 5 s grace
/// (it waited for the end of the output, not for the process), and the
/// child outlived the proxy (Claude's ACP adapter leaves its CLI running).
/// The proxy now watches the process: the prompt is answered at once, and
/// the agent's whole process group ends with it.
#[test]
fn an_agent_whose_child_holds_its_stdout_is_answered_at_exit_and_its_group_ended() {
    let t = Tree::new(BIN);
    let pidfile = t.base.join("child.pid");
    // The agent starts a child that inherits its stdout and outlives it.
    let command = [
        "/bin/sh".into(),
        "-c".into(),
        "sleep 60 & echo $! > \"$0\"; exec \"$1\"".into(),
        pidfile.clone().into_os_string(),
        agent_bin().into_os_string(),
    ];
    let mut e = proxy_running(&t, &[], &command);
    e.init();
    let s = e.new_session(&t.ws);
    let child: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!gone(child));
    let start = Instant::now();
    let (r, _) = e.prompt(&s, "exit 3", &mut |r| panic!("unexpected request {r}"));
    let waited = start.elapsed();
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the agent exited (exit status 3)")),
        "{r}"
    );
    // Far below the 5 s grace it used to take (the target is 100 ms; the
    // bound is loose for a loaded machine).
    assert!(waited < Duration::from_secs(2), "answered after {waited:?}");
    assert_eq!(e.d.wait_exit().code(), Some(3));
    eventually("the agent's child ended with it", || gone(child));
    assert_no_fs(&e.seen);
}

/// A marked external edit of an existing file never happened: an agent
/// reads a file before it edits it (qwen-code does), and reads outside the
/// workspace were refused. Where a marked write would be allowed, the read
/// is served too (one event, writer `external`); a credential path outside
/// the workspace is read only when the person allows it.
#[test]
fn an_outside_file_is_read_then_edited_as_qwen_code_does_but_credentials_are_asked() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let notes = t.out.join("notes.txt");
    std::fs::write(&notes, "one\r\ntwo\r\n").unwrap();
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let reports = e.run(
        &s,
        &format!(
            "read {}\nexternal {} \"one\\r\\nTWO\\r\\n\"",
            notes.display(),
            notes.display()
        ),
    );
    assert_eq!(ok(&reports[0])["content"], "one\r\ntwo\r\n", "{reports:?}");
    ok(&reports[1]);
    assert_eq!(std::fs::read(&notes).unwrap(), b"one\r\nTWO\r\n");
    let ev = audit.new_events();
    assert_eq!(ev.len(), 2, "one event each: {ev:?}");
    for (e, intent) in ev.iter().zip(["read", "write"]) {
        assert_eq!(e["type"], "fs.access", "{e}");
        assert_eq!(e["intent"], intent, "{e}");
        assert_eq!(e["writer"], "external", "{e}");
    }

    // A private key outside the workspace: the person is asked; "Reject"
    // returns nothing of it.
    let ssh = t.out.join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    let key = ssh.join("id_rsa");
    std::fs::write(&key, "SECRET KEY\n").unwrap();
    let script = format!("read {}", key.display());
    let mut asked = Vec::new();
    let (_, reports) = e.prompt(&s, &script, &mut |q| {
        asked.push(q.clone());
        Some(select("reject_once"))
    });
    assert_eq!(asked.len(), 1);
    let title = asked[0]["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.starts_with("Read "), "{title}");
    assert_eq!(asked[0]["params"]["toolCall"]["kind"], "read");
    let refused = err(&reports[0]);
    assert_eq!(
        refused["data"]["errorKind"], "approval_required",
        "{refused}"
    );
    assert!(!refused.to_string().contains("SECRET"), "{refused}");
    assert_eq!(audit.one("fs.denied")["approval"], "denied");
    // Allowed once: read.
    let (_, reports) = e.prompt(&s, &script, &mut |_| Some(select("allow_once")));
    assert_eq!(ok(&reports[0])["content"], "SECRET KEY\n");
    assert_eq!(audit.one("fs.access")["approval"], "allowed_once");
    // What is secret only when read: a shell history, another process's
    // environment.
    let history = t.out.join(".bash_history");
    std::fs::write(&history, "export TOKEN=1\n").unwrap();
    for secret in [history.clone(), PathBuf::from("/proc/self/environ")] {
        let (_, reports) = e.prompt(&s, &format!("read {}", secret.display()), &mut |_| {
            Some(select("reject_once"))
        });
        let refused = err(&reports[0]);
        assert!(!refused.to_string().contains("TOKEN"), "{refused}");
        audit.new_events();
    }
    e.finish();

    // Without external writes, reads outside stay refused.
    let mut e = proxy(&t, &["--no-external-writes"]);
    e.init();
    let s = e.new_session(&t.ws);
    let r = e.run(&s, &format!("read {}", notes.display()));
    assert_eq!(err(&r[0])["data"]["errorKind"], "path_outside_workspace");
    e.finish();
}

/// An agent behind the proxy that writes writegate's own config (a rule
/// that rates every edit `safe`) or approvals file with a marked write,
/// or reads its audit log, is refused `writegate_file`: the gate cannot be
/// turned off through itself.
#[test]
fn an_agent_cannot_rewrite_writegates_config_or_approvals_through_the_proxy() {
    let t = Tree::new(BIN);
    let config = t.base.join("config/writegate/config.toml");
    let approvals = t.base.join("state/writegate/approvals.json");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "# the user's config\n").unwrap();
    let script = format!(
        "external {} \"[policy]\\nrules = [{{pattern = \\\"edit_file *\\\", level = \\\"safe\\\"}}]\\n\"\n\
         external {} \"{{\\\"v\\\":2,\\\"patterns\\\":[\\\"edit_file *\\\"]}}\\n\"\n\
         read {}",
        config.display(),
        approvals.display(),
        t.audit_log.display()
    );
    let mut e = proxy(&t, &[]);
    e.init();
    let s = e.new_session(&t.ws);
    let reports = e.run(&s, &script);
    assert_eq!(reports.len(), 3, "{reports:?}");
    for r in &reports {
        assert_eq!(err(r)["data"]["errorKind"], "writegate_file", "{r}");
    }
    assert_eq!(std::fs::read(&config).unwrap(), b"# the user's config\n");
    assert!(!approvals.exists());
    e.finish();
}

/// `writegate proxy --sandbox -- AGENT` with the proxy in the workspace
/// (its current directory is the sandbox's workspace).
fn sandboxed_proxy(t: &Tree) -> Editor {
    let mut cmd = t.command();
    cmd.current_dir(&t.ws)
        .arg("proxy")
        .arg("--audit-log")
        .arg(&t.audit_log)
        .arg("--sandbox")
        .arg("--")
        .arg(agent_bin());
    let mut d = t.spawn(cmd, true, None);
    let c = d.stdio_client();
    Editor {
        d,
        c,
        seen: Vec::new(),
        sent: 0,
    }
}

/// `--sandbox`: the agent runs inside `writegate run`. Its fs/* requests
/// reach writegate outside and land (CRLF kept, one audit event each), its
/// own direct write to the workspace fails with EACCES, and the session it
/// opens carries the instructions that say so, appended to the editor's own
/// `_meta.systemPrompt.append`.
#[test]
fn a_sandboxed_agent_writes_through_fs_its_direct_write_fails_and_it_is_told() {
    let t = Tree::new(BIN);
    if !crate::sandbox::landlock(&t, "a_sandboxed_agent_writes_through_fs") {
        return;
    }
    let mut audit = t.audit();
    let crlf = t.ws.join("crlf.txt");
    std::fs::write(&crlf, "one\r\ntwo\r\n").unwrap();
    let mut e = sandboxed_proxy(&t);
    e.init();
    let r = e.call(
        "session/new",
        &json!({"cwd": t.ws, "mcpServers": [], "_meta": {"systemPrompt": {"append": "Be brief."}}}),
    );
    let s = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new: {r}"))
        .to_string();
    let meta = &r["result"]["_meta"]["testAgent"]["sessionMeta"];
    let told = meta["systemPrompt"]["append"].as_str().unwrap_or("");
    assert!(
        told.starts_with("Be brief.\n\n") && told.contains("writegate sandbox"),
        "{meta}"
    );
    assert_eq!(
        meta["writegate/instructions"],
        json!(writegate_proxy::SANDBOX_INSTRUCTIONS),
        "{meta}"
    );
    assert!(
        writegate_proxy::SANDBOX_INSTRUCTIONS.contains("Permission denied"),
        "the model is told what a refused write looks like"
    );
    let via = t.ws.join("via.txt");
    let direct = t.ws.join("direct.txt");
    let reports = e.run(
        &s,
        &format!(
            "write {v} \"through writegate\\n\"\nroundtrip {c} two TWO\ndirect {d} \"direct\\n\"\ndirect {c} \"clobbered\\n\"",
            v = via.display(),
            c = crlf.display(),
            d = direct.display()
        ),
    );
    assert_eq!(reports.len(), 4, "{reports:?}");
    ok(&reports[0]);
    ok(&reports[1]);
    for r in &reports[2..] {
        let e = err(r);
        assert_eq!(e["errno"], 13, "EACCES: {r}");
        assert!(
            e["message"].as_str().unwrap().contains("Permission denied"),
            "{r}"
        );
    }
    assert_eq!(std::fs::read(&via).unwrap(), b"through writegate\n");
    assert_eq!(std::fs::read(&crlf).unwrap(), b"one\r\nTWO\r\n");
    assert!(!direct.exists());
    // The write, the round trip's read and write: one event each; the
    // direct writes never reached writegate.
    let events = audit.new_events();
    let intents: Vec<&Value> = events.iter().map(|e| &e["intent"]).collect();
    assert_eq!(
        intents,
        [&json!("write"), &json!("read"), &json!("write")],
        "{events:#?}"
    );
    for ev in &events {
        assert_eq!(ev["type"], "fs.access", "{ev}");
        assert_eq!(ev["sessionId"], json!(s), "{ev}");
    }
    let (st, _) = e.finish();
    assert!(st.success(), "{st:?}");
}

/// Without `--sandbox` the proxy adds nothing: the agent gets the editor's
/// `session/new` as it was sent.
#[test]
fn without_sandbox_session_new_reaches_the_agent_unchanged() {
    let t = Tree::new(BIN);
    let mut e = proxy(&t, &[]);
    e.init();
    let r = e.call(
        "session/new",
        &json!({"cwd": t.ws, "mcpServers": [], "_meta": {"systemPrompt": {"append": "Be brief."}}}),
    );
    assert_eq!(
        r["result"]["_meta"]["testAgent"]["sessionMeta"],
        json!({"systemPrompt": {"append": "Be brief."}}),
        "{r}"
    );
    let (st, _) = e.finish();
    assert!(st.success(), "{st:?}");
}
