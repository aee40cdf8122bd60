//! Questions to the person that end, through the real binary over real
//! stdio: an `elicitation/create` nobody answers is withdrawn after
//! `approval_timeout_ms` and its call refused `approval_required`
//! (`unanswered`), for a raw client and for the official one (a client
//! that declares elicitation and never answers, as codex-acp 0.16 does);
//! and a client that closes stdin while a question is open gets its call
//! answered as cancelled and the server exits at once, not after
//! `shutdown_grace_ms`.

use super::{Answer, Caps, PLAIN, error_meta, one_event, start, text, ws_arg};
use crate::common::{BIN, Client, Clients, Daemon, TIMEOUT, Tree, TreeAudit};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};
use std::fs;
use std::time::{Duration, Instant};

/// A config file of `toml` in the tree; its path.
fn config(t: &Tree, name: &str, toml: &str) -> String {
    let path = t.base.join("config").join(name);
    fs::write(&path, toml).unwrap();
    path.display().to_string()
}

/// `writegate mcp --workspace <ws> --config <config>` on pipes, initialized
/// on 2025-06-18 by a raw client that declares form elicitation.
fn raw_with_elicitation(t: &Tree, config: &str) -> (Daemon, Client) {
    let mut cmd = t.command();
    cmd.args(["mcp", "--workspace"])
        .arg(&t.ws)
        .arg("--audit-log")
        .arg(&t.audit_log)
        .args(["--config", config]);
    let mut d = t.spawn(cmd, true, None);
    let mut c = d.stdio_client();
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    (d, c)
}

/// Sends a `write_file` of `.env` as call 2 and reads the question it asks.
fn held_write(t: &Tree, c: &mut Client) -> Value {
    let env = t.ws.join(".env");
    c.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": env, "content": "A=1\n"}}}));
    let ask = c.recv();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert!(
        ask["params"]["message"].as_str().unwrap().contains(".env"),
        "{ask}"
    );
    ask
}

/// The audit log's events once there are `n` of them.
fn events(t: &Tree, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let events = t.audit_events();
        if events.len() >= n {
            return events;
        }
        assert!(Instant::now() < deadline, "{n} audit events: {events:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `writegate mcp` waited the whole `shutdown_grace_ms` (and more) after
/// the client closed stdin while an elicitation was open: the question can
/// get no answer once the input has ended, so the call is answered as
/// cancelled at once and the server exits. With a grace of 60 s the
/// server used to outlive the bound below by far.
#[test]
fn regression_stdin_closed_while_an_elicitation_is_open_ends_the_server_at_once() {
    let t = Tree::new(BIN);
    let config = config(&t, "grace.toml", "shutdown_grace_ms = 60000\n");
    let (mut d, mut c) = raw_with_elicitation(&t, &config);
    held_write(&t, &mut c);
    let closed = Instant::now();
    c.close_write();
    let rest = c.recv_until_eof();
    let status = d.wait_exit();
    let took = closed.elapsed();
    assert_eq!(status.code(), Some(0), "{}", d.stderr_text());
    assert!(
        took < Duration::from_secs(5),
        "the server took {took:?} to exit after stdin closed"
    );
    // The call is answered, as cancelled.
    let answer = rest
        .iter()
        .find(|v| v["id"] == 2)
        .unwrap_or_else(|| panic!("call 2 unanswered: {rest:?}"));
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    assert_eq!(
        result["_meta"]["writegate/error"]["errorKind"], "cancelled",
        "{answer}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("cancelled: "), "{text}");
    assert!(text.contains("nothing was written"), "{text}");
    assert!(!t.ws.join(".env").exists());
    let events = t.audit_events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "fs.denied", "{}", events[0]);
    assert_eq!(events[0]["approval"], "cancelled", "{}", events[0]);
}

/// An elicitation the client never answered held the agent's call for
/// ever. After `approval_timeout_ms` the question is withdrawn
/// (`notifications/cancelled` naming it) and the call refused
/// `approval_required`, audited `unanswered`; the server answers on, and
/// asks again the next time.
#[test]
fn regression_an_elicitation_nobody_answers_is_withdrawn_and_refused_unanswered() {
    let t = Tree::new(BIN);
    let config = config(&t, "quick.toml", "approval_timeout_ms = 300\n");
    let (mut d, mut c) = raw_with_elicitation(&t, &config);
    let ask = held_write(&t, &mut c);
    // Not answered: the withdrawal and the call's answer come by themselves.
    let mut withdrawn = None;
    let mut answer = None;
    while withdrawn.is_none() || answer.is_none() {
        let v = c.recv();
        if v["method"] == "notifications/cancelled" {
            withdrawn = Some(v);
        } else if v["id"] == 2 {
            answer = Some(v);
        } else {
            panic!("unexpected {v}");
        }
    }
    let withdrawn = withdrawn.unwrap();
    assert_eq!(withdrawn["params"]["requestId"], ask["id"], "{withdrawn}");
    let result = &answer.unwrap()["result"];
    assert_eq!(result["isError"], true, "{result}");
    let meta = &result["_meta"]["writegate/error"];
    assert_eq!(meta["errorKind"], "approval_required", "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("approval_required: "), "{text}");
    assert!(text.contains("got no answer"), "{text}");
    assert!(text.contains("Nothing was written"), "{text}");
    assert!(text.contains("[policy] rules"), "{text}");
    assert!(!t.ws.join(".env").exists());
    let e = &events(&t, 1)[0];
    assert_eq!(e["type"], "fs.denied", "{e}");
    assert_eq!(e["errorKind"], "approval_required", "{e}");
    assert_eq!(e["approval"], "unanswered", "{e}");
    assert!(
        d.stderr_text().contains("approval_timeout_ms"),
        "the log says why: {}",
        d.stderr_text()
    );
    // An answer that comes after the withdrawal is dropped; the server
    // answers on and the next held call asks again.
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"decision": "allow_once"}}}));
    assert!(!t.ws.join(".env").exists());
    c.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert_eq!(c.recv()["id"], 3);
    c.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": t.ws.join(".env"), "content": "B=2\n"}}}));
    let again = c.recv();
    assert_eq!(again["method"], "elicitation/create", "{again}");
    c.send(&json!({"jsonrpc": "2.0", "id": again["id"], "result": {"action": "accept", "content": {"decision": "allow_once"}}}));
    let r = c.recv();
    assert_eq!(r["id"], 4, "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(fs::read(t.ws.join(".env")).unwrap(), b"B=2\n");
    c.close_write();
    assert_eq!(d.wait_exit().code(), Some(0));
}

/// The official client, declaring elicitation and never answering (as
/// codex-acp 0.16 does): the call comes back refused `unanswered` after
/// `approval_timeout_ms` instead of never.
#[test]
fn regression_a_client_that_declares_elicitation_and_never_answers_gets_its_call_back() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let config = config(&t, "quick.toml", "approval_timeout_ms = 300\n");
    let caps = Caps {
        elicitation: true,
        version: ProtocolVersion::V_2025_11_25,
        ..PLAIN
    };
    let m = start(
        &t,
        &["--workspace", &ws_arg(&t), "--config", &config],
        &caps,
        &[],
    );
    m.set_answer(Answer::Never);
    let env = t.ws.join(".env");
    let txt = m.refused(
        "write_file",
        json!({"path": env, "content": "A=1\n"}),
        "approval_required",
    );
    assert!(txt.contains("got no answer"), "{txt}");
    assert_eq!(m.asked(), 1);
    assert!(!env.exists());
    let e = one_event(&mut audit, "fs.denied", "write_file");
    assert_eq!(e["approval"], "unanswered", "{e}");
    // The connection goes on: the next question is answered.
    m.set_answer(Answer::AllowOnce);
    let r = m.call("write_file", json!({"path": env, "content": "A=1\n"}));
    assert_eq!(r.is_error, Some(false), "{}: {}", text(&r), error_meta(&r));
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");
    m.close();
}

/// `writegate mcp` watched for SIGINT only once the `initialize` handshake
/// was done: a Ctrl-C before it killed the process by the signal's default
/// (status 130 in a shell), with no clean shutdown. Now a SIGINT before the
/// handshake and one after it both end the server with status 0 and the
/// log's shutdown lines.
#[test]
fn a_sigint_before_or_after_the_handshake_ends_writegate_mcp_cleanly() {
    let t = Tree::new(BIN);
    for handshake in [false, true] {
        let mut cmd = t.command();
        cmd.args(["mcp", "--workspace"])
            .arg(&t.ws)
            .arg("--audit-log")
            .arg(&t.audit_log);
        let mut d = t.spawn(cmd, true, None);
        let mut c = d.stdio_client();
        if handshake {
            c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
            assert_eq!(c.recv()["id"], 1);
            c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        }
        // Until the server logs that it serves (its signal watch starts
        // right after).
        let start = Instant::now();
        while !d.stderr_text().contains("serving workspace") {
            assert!(start.elapsed() < TIMEOUT, "{}", d.stderr_text());
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        d.signal(rustix::process::Signal::INT);
        let status = d.wait_exit();
        assert_eq!(
            status.code(),
            Some(0),
            "handshake {handshake}: {status:?}\n{}",
            d.stderr_text()
        );
        assert!(
            d.stderr_text().contains("SIGINT: stopping"),
            "{}",
            d.stderr_text()
        );
    }
}
