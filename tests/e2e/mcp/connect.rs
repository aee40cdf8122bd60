//! `writegate mcp --connect` through the real binary: the agent's stdio
//! relayed to the daemon's MCP socket (`writegate serve`), driven by the
//! official client (`rmcp`) in both protocol eras; two relayed agents that
//! share one history and one audit log; a held call of an agent that
//! cannot be asked, waiting for `writegate pending`/`writegate answer`
//! (allow, deny, and the time limit); the relay's error when no daemon
//! listens; the starting directory through the relay.

use super::{Caps, Mcp, PLAIN, TestClient, start_command, text};
use crate::common::{BIN, TIMEOUT, Tree, TreeAudit};
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation, ProtocolVersion};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use writegate_testkit::{Daemon, Opts, run_with_stdin};

/// The daemon's MCP socket: `mcp.sock` beside its ACP socket.
fn mcp_sock(t: &Tree) -> PathBuf {
    t.sock.with_file_name("mcp.sock")
}

/// `writegate mcp --connect <mcp.sock> [extra]`, started in `dir`, with the client.
fn connect_in(t: &Tree, dir: &Path, extra: &[&str], caps: &Caps) -> Mcp {
    let mut cmd = t.command();
    cmd.arg("mcp")
        .arg("--connect")
        .arg(mcp_sock(t))
        .args(extra)
        .current_dir(dir);
    start_command(t, cmd, caps, &[])
}

fn connect(t: &Tree) -> Mcp {
    connect_in(t, &t.base, &[], &PLAIN)
}

/// A CLI subcommand against the tree's daemon: exit status, stdout, stderr.
fn cli(t: &Tree, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = t.command();
    cmd.args(args).arg("--socket").arg(&t.sock);
    let o = run_with_stdin(cmd, b"");
    (o.code, o.stdout, o.stderr)
}

/// `writegate pending --json`, once it lists `n` questions.
fn pending(t: &Tree, n: usize) -> Vec<Value> {
    let until = Instant::now() + TIMEOUT;
    loop {
        let (code, out, err) = cli(t, &["pending", "--json"]);
        assert_eq!(code, Some(0), "{err}");
        let list: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        if list.len() == n {
            return list;
        }
        assert!(Instant::now() < until, "{n} pending questions: {list:?}");
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// A write of `path` on a thread of its own (it waits for the person).
fn write_in_background(
    m: &Arc<Mcp>,
    path: &Path,
) -> std::thread::JoinHandle<rmcp::model::CallToolResult> {
    let m = m.clone();
    let args = json!({"path": path, "content": "K=new\n"});
    std::thread::spawn(move || m.call("write_file", args))
}

#[test]
fn an_agent_through_connect_writes_with_the_official_client_in_both_eras() {
    let t = Tree::new(BIN);
    let _d = t.socket_daemon(&[]);
    // 2025: initialize.
    let m = connect(&t);
    let a = t.ws.join("a.txt");
    m.ok("write_file", json!({"path": a, "content": "one\n"}));
    let (read, _) = m.ok("read_file", json!({"path": a}));
    assert!(read.contains("one"), "{read}");
    m.close();
    // 2026-07-28: server/discover, no initialize.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut cmd = t.command();
    cmd.arg("mcp").arg("--connect").arg(mcp_sock(&t));
    cmd.stderr(std::process::Stdio::null());
    let handler = TestClient {
        info: ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            Implementation::new("wg-e2e-2026", "1"),
        ),
        roots: Arc::default(),
        answer: Arc::new(Mutex::new(super::Answer::Deny)),
        asked: Arc::default(),
    };
    let b = t.ws.join("b.txt");
    rt.block_on(async {
        let transport = TokioChildProcess::new(tokio::process::Command::from(cmd)).unwrap();
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let client =
            tokio::time::timeout(TIMEOUT, handler.serve_with_lifecycle(transport, lifecycle))
                .await
                .expect("started in time")
                .expect("started");
        let params = CallToolRequestParams::new("write_file").with_arguments(
            json!({"path": b, "content": "two\n"})
                .as_object()
                .unwrap()
                .clone(),
        );
        let r = tokio::time::timeout(TIMEOUT, client.call_tool(params))
            .await
            .expect("answered in time")
            .expect("a result");
        assert_eq!(r.is_error, Some(false), "{r:?}");
        let _ = client.cancel().await;
    });
    assert_eq!(fs::read(&b).unwrap(), b"two\n");
}

#[test]
fn two_connected_agents_share_one_history_and_one_audit_log() {
    let t = Tree::new(BIN);
    let _d = t.socket_daemon(&[]);
    let (m1, m2) = (connect(&t), connect(&t));
    let (f1, f2) = (t.ws.join("one.txt"), t.ws.join("two.txt"));
    m1.ok("write_file", json!({"path": f1, "content": "1\n"}));
    m2.ok("write_file", json!({"path": f2, "content": "2\n"}));
    m1.close();
    m2.close();
    let events = t.audit().all();
    let writes: Vec<&Value> = events
        .iter()
        .filter(|e| e["route"] == "mcp write_file")
        .collect();
    assert_eq!(writes.len(), 2, "one audit log, one event each: {events:?}");
    let sessions: Vec<&str> = writes
        .iter()
        .map(|e| e["sessionId"].as_str().unwrap())
        .collect();
    assert_ne!(sessions[0], sessions[1], "each connection is a session");
    assert!(
        sessions.iter().all(|s| s.starts_with("mcp-")),
        "{sessions:?}"
    );
    let (code, out, err) = cli(&t, &["history", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    for f in [&f1, &f2] {
        assert!(out.contains(&f.display().to_string()), "one history: {out}");
    }
    for s in sessions {
        assert!(out.contains(s), "{s} in {out}");
    }
}

#[test]
fn a_held_call_of_an_agent_that_cannot_be_asked_waits_for_the_persons_allow() {
    let t = Tree::new(BIN);
    let _d = t.socket_daemon(&[]);
    let env = t.ws.join(".env");
    fs::write(&env, "K=old\n").unwrap();
    let m = Arc::new(connect(&t));
    let call = write_in_background(&m, &env);
    let list = pending(&t, 1);
    let q = &list[0];
    assert_eq!(
        q["command"],
        format!("edit_file write {}", env.display()),
        "{q}"
    );
    assert_eq!(q["agent"], "wg-e2e", "{q}");
    assert!(q["session"].as_str().unwrap().starts_with("mcp-"), "{q}");
    assert!(!q["reason"].as_str().unwrap().is_empty(), "{q}");
    assert!(q["ageSecs"].is_u64(), "{q}");
    let (code, out, err) = cli(&t, &["answer", q["id"].as_str().unwrap(), "allow"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("allow: "), "{out}");
    let r = call.join().unwrap();
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(fs::read(&env).unwrap(), b"K=new\n");
    assert!(pending(&t, 0).is_empty());
    let approved = t.audit().all();
    assert_eq!(
        approved.last().unwrap()["approval"],
        "allowed_once",
        "{approved:?}"
    );
}

#[test]
fn a_held_call_the_person_denies_leaves_the_file_unchanged() {
    let t = Tree::new(BIN);
    let _d = t.socket_daemon(&[]);
    let env = t.ws.join(".env");
    fs::write(&env, "K=old\n").unwrap();
    let m = Arc::new(connect(&t));
    let call = write_in_background(&m, &env);
    let id = pending(&t, 1)[0]["id"].as_str().unwrap().to_string();
    let (code, _, err) = cli(&t, &["answer", &id, "deny"]);
    assert_eq!(code, Some(0), "{err}");
    let r = call.join().unwrap();
    assert_eq!(r.is_error, Some(true));
    let said = text(&r);
    assert!(
        said.starts_with("approval_required: the user declined"),
        "{said}"
    );
    assert_eq!(fs::read(&env).unwrap(), b"K=old\n");
    // Answered once: a second answer names no waiting question.
    let (code, _, err) = cli(&t, &["answer", &id, "allow"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("not_pending") && err.contains("writegate pending"),
        "{err}"
    );
}

#[test]
fn a_held_call_nobody_answers_is_refused_when_the_time_limit_passes() {
    let t = Tree::new(BIN);
    let _d = t.daemon(Opts {
        socket: true,
        env: &[("WRITEGATE_APPROVAL_TIMEOUT_MS", "300")],
        ..Opts::default()
    });
    let env = t.ws.join(".env");
    fs::write(&env, "K=old\n").unwrap();
    let m = connect(&t);
    let started = Instant::now();
    let said = m.refused(
        "write_file",
        json!({"path": env, "content": "K=new\n"}),
        "approval_required",
    );
    assert!(started.elapsed() >= Duration::from_millis(300), "{said}");
    assert_eq!(fs::read(&env).unwrap(), b"K=old\n");
    assert!(pending(&t, 0).is_empty());
}

#[test]
fn connect_without_a_daemon_says_how_to_start_one() {
    let t = Tree::new(BIN);
    let mut cmd = t.command();
    cmd.arg("mcp").arg("--connect").arg(mcp_sock(&t));
    let o = run_with_stdin(cmd, b"");
    assert_eq!(o.code, Some(3), "{}", o.stderr);
    assert!(o.stderr.contains("no daemon serves MCP"), "{}", o.stderr);
    assert!(o.stderr.contains("writegate serve"), "{}", o.stderr);
    assert!(
        o.stdout.is_empty(),
        "nothing but MCP on stdout: {}",
        o.stdout
    );
}

#[test]
fn the_directory_an_agent_starts_the_relay_in_is_its_workspace_and_home_is_refused() {
    let t = Tree::new(BIN);
    let _d = t.daemon(Opts {
        socket: true,
        env: &[("WRITEGATE_MCP_CLIENT_ROOTS", "trusted")],
        ..Opts::default()
    });
    let m = connect_in(&t, &t.wsb, &["--cwd-workspace"], &PLAIN);
    let (said, _) = m.ok("write_file", json!({"path": "rel.txt", "content": "x\n"}));
    assert!(said.contains(&t.wsb.display().to_string()), "{said}");
    assert_eq!(fs::read(t.wsb.join("rel.txt")).unwrap(), b"x\n");
    m.close();
    // Started in the home directory: no workspace of its own; a relative
    // path goes to the daemon's primary workspace instead.
    let home = t.base.join("home");
    fs::create_dir_all(&home).unwrap();
    let m = connect_in(&t, &home, &["--cwd-workspace"], &PLAIN);
    m.ok("write_file", json!({"path": "rel2.txt", "content": "y\n"}));
    assert!(!home.join("rel2.txt").exists());
    assert_eq!(fs::read(t.ws.join("rel2.txt")).unwrap(), b"y\n");
    m.close();
}

/// The person's powers are not served on the socket agents use.
#[test]
fn the_mcp_socket_serves_no_pending_or_answer() {
    let t = Tree::new(BIN);
    let d: Daemon = t.socket_daemon(&[]);
    drop(d.connect_lines());
    let mut c = writegate_testkit::LineClient::connect(&mcp_sock(&t));
    let mut send = |v: Value| {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        c.send(&line);
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for (i, method) in [
        "_writegate/pending",
        "_writegate/answer",
        "_writegate/approve",
    ]
    .into_iter()
    .enumerate()
    {
        send(json!({"jsonrpc": "2.0", "id": i + 1, "method": method, "params": {}}));
    }
    let mut answered = 0;
    while answered < 4 {
        let line = c.recv_timeout(TIMEOUT).expect("an answer");
        let answer: Value = serde_json::from_slice(&line).unwrap();
        if answer["id"] == 0 {
            assert!(answer.get("result").is_some(), "{answer}");
        } else {
            assert!(answer.get("result").is_none(), "{answer}");
            assert!(answer.get("error").is_some(), "{answer}");
        }
        answered += 1;
    }
}
