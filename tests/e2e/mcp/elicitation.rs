//! Held writes of `writegate mcp`: asked through elicitation (accepted,
//! always, declined, dismissed), refused with how to allow them when the
//! client cannot be asked, and a call cancelled while it waits.

use super::{Answer, Caps, PLAIN, mcp_command, one_event, start, ws_arg};
use crate::common::{BIN, Clients, TIMEOUT, Tree, TreeAudit};
use rmcp::model::ProtocolVersion;
use serde_json::json;
use std::fs;

#[test]
fn a_held_write_asks_the_person_through_elicitation() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let caps = Caps {
        elicitation: true,
        version: ProtocolVersion::V_2025_11_25,
        ..PLAIN
    };
    let m = start(&t, &["--workspace", &ws_arg(&t)], &caps, &[]);
    let env = t.ws.join(".env");

    // Declined (the form's "deny"), then dismissed: nothing written.
    for (answer, kind, approval) in [
        (Answer::Deny, "approval_required", "denied"),
        (Answer::Decline, "approval_required", "denied"),
        (Answer::Dismiss, "cancelled", "cancelled"),
    ] {
        m.set_answer(answer);
        let txt = m.refused("write_file", json!({"path": env, "content": "A=1\n"}), kind);
        if kind == "approval_required" {
            assert!(txt.contains("the user declined"), "{txt}");
        }
        assert!(!env.exists());
        let e = one_event(&mut audit, "fs.denied", "write_file");
        assert_eq!(e["approval"], approval, "{answer:?}: {e}");
    }
    assert_eq!(m.asked(), 3);
    let question = m.asked.lock().unwrap()[0].clone();
    assert!(question.contains(&env.display().to_string()), "{question}");

    // Allowed once: written; the next write asks again.
    m.set_answer(Answer::AllowOnce);
    m.ok("write_file", json!({"path": env, "content": "A=1\n"}));
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");
    assert_eq!(
        one_event(&mut audit, "fs.access", "write_file")["approval"],
        "allowed_once"
    );
    m.ok(
        "edit_file",
        json!({"path": env, "mode": "append", "content": "B=2\n"}),
    );
    assert_eq!(m.asked(), 5, "asked again after allow once");
    audit.new_events();

    // Allowed for the session: later writes of the same command are not asked.
    m.set_answer(Answer::AllowAlways);
    m.ok("write_file", json!({"path": env, "content": "C=3\n"}));
    assert_eq!(
        one_event(&mut audit, "fs.access", "write_file")["approval"],
        "allowed_always"
    );
    m.set_answer(Answer::Deny);
    m.ok("write_file", json!({"path": env, "content": "D=4\n"}));
    assert_eq!(m.asked(), 6, "not asked again");
    assert_eq!(fs::read(&env).unwrap(), b"D=4\n");
    assert!(
        one_event(&mut audit, "fs.access", "write_file")
            .get("approval")
            .is_none()
    );
    m.close();
}

#[test]
fn without_elicitation_a_held_write_says_how_to_allow_it() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    fs::create_dir(t.ws.join(".git")).unwrap();
    let cfg = t.ws.join(".git/config");
    fs::write(&cfg, "[core]\n").unwrap();
    let txt = m.refused(
        "edit_file",
        json!({"path": cfg, "mode": "append", "content": "x\n"}),
        "approval_required",
    );
    let command = format!("edit_file append {}", cfg.display());
    assert!(txt.contains(&format!("pattern = '{command}'")), "{txt}");
    assert!(txt.contains("cannot ask"), "{txt}");
    assert!(!txt.contains("_writegate/approve"), "{txt}");
    assert_eq!(fs::read(&cfg).unwrap(), b"[core]\n");
    let e = one_event(&mut audit, "fs.denied", "edit_file");
    assert_eq!(e["errorKind"], "approval_required");
    assert!(e.get("approval").is_none(), "nobody was asked: {e}");
    m.close();

    // The rule the message proposes allows it.
    let config = t.base.join("config/allow.toml");
    fs::write(
        &config,
        format!("[policy]\nrules = [{{ pattern = '{command}', level = \"moderate\" }}]\n"),
    )
    .unwrap();
    let m = start(
        &t,
        &[
            "--workspace",
            &ws_arg(&t),
            "--config",
            &config.display().to_string(),
        ],
        &PLAIN,
        &[],
    );
    m.ok(
        "edit_file",
        json!({"path": cfg, "mode": "append", "content": "x\n"}),
    );
    assert_eq!(fs::read(&cfg).unwrap(), b"[core]\nx\n");
    m.close();
}

/// `notifications/cancelled` for a call waiting on the person's answer
/// drops the question; the write is cancelled, nothing is written, and its
/// one audit event says so. The server answers on.
#[test]
fn a_cancelled_call_waiting_for_approval_writes_nothing() {
    let t = Tree::new(BIN);
    let mut d = t.spawn(mcp_command(&t), true, None);
    let mut c = d.stdio_client();
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let env = t.ws.join(".env");
    c.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": env, "content": "A=1\n"}}}));
    let ask = c.recv();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert!(
        ask["params"]["message"].as_str().unwrap().contains(".env"),
        "{ask}"
    );
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "user pressed Esc"}}));
    // The event is written when the operation ends; the server answers on.
    let deadline = std::time::Instant::now() + TIMEOUT;
    while t.audit_events().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no audit event");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let e = &t.audit_events()[0];
    assert_eq!(e["type"], "fs.denied", "{e}");
    assert_eq!(e["approval"], "cancelled", "{e}");
    assert!(!env.exists());
    c.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let r = c.recv();
    assert_eq!(r["id"], 3, "{r}");
    assert_eq!(t.audit_events().len(), 1);
}
