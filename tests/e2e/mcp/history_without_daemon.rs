//! Taking back an agent's writes through `writegate mcp` from the command
//! line, with no daemon running: `history` lists them from the user's
//! store, `undo` and `rewind` put the old bytes back through the write
//! pipeline (approval gate included: the person who runs the command is
//! asked, or passes --yes) with one audit event each, and `diff` shows
//! them. With a daemon serving the workspace, the undo goes through it.

use super::{Answer, Caps, PLAIN, start, ws_arg};
use crate::common::{BIN, Daemon, Opts, Tree, TreeAudit, run_with_stdin, temps};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};
use std::fs;

/// The default config, pointing the audit log where the test's MCP server
/// writes it (so the command line's undo lands in the same log).
fn same_audit_log(t: &Tree) {
    let dir = t.base.join("config/writegate");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("config.toml"),
        format!("[audit]\npath = \"{}\"\n", t.audit_log.display()),
    )
    .unwrap();
}

/// `writegate <args>` in the tree, stdin empty (not a terminal).
fn wg(t: &Tree, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = t.command();
    // Run in the project, as a person taking back the agent's writes
    // there does (a rewind reaches the current directory's workspace).
    cmd.args(args).current_dir(&t.ws);
    let o = run_with_stdin(cmd, b"");
    (o.code, o.stdout, o.stderr)
}

fn listed(t: &Tree) -> Vec<Value> {
    let (code, out, err) = wg(t, &["history", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn op_of(ops: &[Value], path: &std::path::Path) -> String {
    ops.iter()
        .find(|o| o["path"] == json!(path))
        .and_then(|o| o["opId"].as_str())
        .unwrap_or_else(|| panic!("no operation on {}: {ops:?}", path.display()))
        .to_string()
}

#[test]
fn history_and_undo_take_back_mcp_writes_with_no_daemon_running() {
    let t = Tree::new(BIN);
    same_audit_log(&t);
    let file = t.ws.join("notes.txt");
    fs::write(&file, b"one\r\ntwo\r\n").unwrap();
    let made = t.ws.join("new/made.txt");
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    m.ok("write_file", json!({"path": file, "content": "three\n"}));
    m.ok("write_file", json!({"path": made, "content": "x\n"}));
    m.close();
    assert_eq!(fs::read(&file).unwrap(), b"three\r\n");

    // No daemon: history lists both writes of the MCP session.
    let ops = listed(&t);
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert!(
        ops.iter()
            .all(|o| o["sessionId"].as_str().unwrap().starts_with("mcp-") && o["undoable"] == true),
        "{ops:?}"
    );
    let op = op_of(&ops, &file);
    let (code, out, err) = wg(&t, &["history"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(&op) && !out.contains("no operations"), "{out}");
    let (code, out, err) = wg(&t, &["diff", &op]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("-one") && out.contains("+three"), "{out}");

    // rewind of the MCP session up to the creation (its newest) takes
    // that back alone.
    let session = ops[0]["sessionId"].as_str().unwrap().to_string();
    let created = op_of(&ops, &made);
    let (code, out, err) = wg(&t, &["rewind", "--session", &session, "--to", &created]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("1 operations undone"), "{out}");
    assert!(!made.exists() && !t.ws.join("new").exists(), "{out}");
    assert_eq!(fs::read(&file).unwrap(), b"three\r\n");

    // undo --dry-run changes nothing; undo puts the exact bytes back, with
    // one audit event of intent undo.
    let mut audit = t.audit();
    audit.new_events();
    let (code, out, err) = wg(&t, &["undo", &op, "--dry-run"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("would be restored"), "{out}");
    assert_eq!(fs::read(&file).unwrap(), b"three\r\n");
    audit.new_events();
    let (code, out, err) = wg(&t, &["undo", &op]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("was restored"), "{out}");
    assert_eq!(fs::read(&file).unwrap(), b"one\r\ntwo\r\n");
    let e = audit.one("fs.access");
    assert_eq!(e["intent"], "undo", "{e}");
    assert_eq!(e["undoes"], json!(op), "{e}");
    assert_eq!(e["route"], "cli undo", "{e}");
    assert_eq!(e["sessionId"], "cli", "{e}");
    // A second undo of it is refused: the file no longer holds its result.
    let (code, _, err) = wg(&t, &["undo", &op]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("refused: file_changed"), "{err}");
    let (code, _, err) = wg(&t, &["undo", "0123456789ab-1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with("writegate: refused: not_undoable: no operation"),
        "{err}"
    );
    assert!(temps(&t.base).is_empty());
}

#[test]
fn a_local_undo_of_a_protected_file_asks_the_person_who_runs_it() {
    let t = Tree::new(BIN);
    same_audit_log(&t);
    let env = t.ws.join(".env");
    fs::write(&env, "A=0\n").unwrap();
    let caps = Caps {
        roots: false,
        elicitation: true,
        version: ProtocolVersion::V_2025_06_18,
    };
    let m = start(&t, &["--workspace", &ws_arg(&t)], &caps, &[]);
    m.set_answer(Answer::AllowOnce);
    m.ok("write_file", json!({"path": env, "content": "A=1\n"}));
    m.close();
    let op = op_of(&listed(&t), &env);

    // Stdin is no terminal and there is no --yes: nobody is asked, refused.
    let (code, _, err) = wg(&t, &["undo", &op]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("refused: approval_required"), "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert!(!err.contains("ask the user"), "{err}");
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");

    let mut audit = t.audit();
    audit.new_events();
    let (code, out, err) = wg(&t, &["undo", &op, "--yes"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(fs::read(&env).unwrap(), b"A=0\n");
    let e = audit.one("fs.access");
    assert_eq!(e["intent"], "undo", "{e}");
    assert_eq!(e["approval"], "allowed_once", "{e}");
}

#[test]
fn with_a_daemon_serving_the_workspace_the_undo_goes_through_it() {
    let t = Tree::new(BIN);
    same_audit_log(&t);
    let file = t.ws.join("a.txt");
    fs::write(&file, "old\n").unwrap();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    m.ok("write_file", json!({"path": file, "content": "new\n"}));
    m.close();
    let op = op_of(&listed(&t), &file);
    let _d: Daemon = t.daemon(Opts {
        socket: true,
        ..Opts::default()
    });
    let mut audit = t.audit();
    audit.new_events();
    let sock = t.sock.display().to_string();
    let (code, out, err) = wg(&t, &["undo", &op, "--socket", &sock]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(fs::read(&file).unwrap(), b"old\n");
    let e = audit.one("fs.access");
    assert_eq!(e["route"], "ACP undo", "through the daemon: {e}");
}
