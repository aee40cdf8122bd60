//! The MCP `undo` tool (ADR 0020) through the real binary and the official
//! MCP client: offered only with `[mcp] undo_tool = true`; a write taken
//! back restores the exact bytes and mode with one audit event of intent
//! `undo`; only the connection's own operations can be named (an unknown,
//! forged or other session's `opId` is `not_undoable`, in the same words);
//! a file changed since is `file_changed` and nothing is written; no
//! `force`; a held path asks the person like a write.

use super::{Answer, Caps, Mcp, PLAIN, error_meta, one_event, start, text, ws_arg};
use crate::common::{BIN, Tree, TreeAudit, temps};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use serde_json::{Map, Value, json};
use std::fs;
use std::os::unix::fs::PermissionsExt;

/// A config with the tool on.
fn undo_config(t: &Tree) -> String {
    let config = t.base.join("config/undo.toml");
    fs::write(&config, "[mcp]\nundo_tool = true\n").unwrap();
    config.display().to_string()
}

fn with_undo(t: &Tree, caps: &Caps) -> Mcp {
    start(
        t,
        &["--workspace", &ws_arg(t), "--config", &undo_config(t)],
        caps,
        &[],
    )
}

fn names(m: &Mcp) -> Vec<String> {
    m.rt.block_on(m.client().list_all_tools())
        .expect("tools/list")
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

fn op_id(out: &Value) -> String {
    out["opId"]
        .as_str()
        .unwrap_or_else(|| panic!("no opId: {out}"))
        .to_string()
}

#[test]
fn undo_is_neither_listed_nor_callable_unless_the_config_enables_it() {
    let t = Tree::new(BIN);
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    assert_eq!(names(&m), ["read_file", "write_file", "edit_file"]);
    // A call to it is answered as a call to an unknown tool.
    let mut args = Map::new();
    args.insert("opId".into(), json!("0123456789ab-1"));
    let params = CallToolRequestParams::new("undo").with_arguments(args);
    let err = m.rt.block_on(m.client().call_tool(params)).unwrap_err();
    let err = err.to_string();
    assert!(err.contains("unknown tool \"undo\""), "{err}");
    assert!(err.contains("read_file, write_file and edit_file"), "{err}");
    m.close();

    let m = with_undo(&t, &PLAIN);
    assert_eq!(names(&m), ["read_file", "write_file", "edit_file", "undo"]);
    let tools = m.rt.block_on(m.client().list_all_tools()).unwrap();
    let undo = tools.iter().find(|t| t.name == "undo").unwrap();
    assert_eq!(undo.input_schema["required"], json!(["opId"]));
    assert!(undo.input_schema["properties"].get("force").is_none());
    let d = undo.description.as_deref().unwrap();
    assert!(d.contains("only when the user asks"), "{d}");
    assert!(undo.output_schema.is_some());
    m.close();
}

#[test]
fn a_write_undone_through_mcp_gets_back_its_exact_bytes_and_mode() {
    let t = Tree::new(BIN);
    let file = t.ws.join("notes.txt");
    let old: &[u8] = b"caf\xc3\xa9 one\r\ntwo\r\n";
    fs::write(&file, old).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
    let m = with_undo(&t, &PLAIN);
    let mut audit = t.audit();

    let (txt, out) = m.ok("write_file", json!({"path": file, "content": "new\n"}));
    let op = op_id(&out);
    assert!(txt.contains(&op), "the text names the opId: {txt}");
    assert_eq!(
        one_event(&mut audit, "fs.access", "write_file")["opId"],
        json!(op)
    );
    assert_eq!(fs::read(&file).unwrap(), b"new\r\n");
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();

    // A dry run says what would be done and writes nothing.
    let (_, dry) = m.ok("undo", json!({"opId": op, "dryRun": true}));
    assert_eq!(dry["dryRun"], true, "{dry}");
    assert_eq!(dry["action"], "restored", "{dry}");
    assert_eq!(fs::read(&file).unwrap(), b"new\r\n");
    audit.new_events();

    let (txt, out) = m.ok("undo", json!({"opId": op}));
    assert_eq!(out["undone"], json!(op), "{out}");
    assert_eq!(out["action"], "restored", "{out}");
    assert_eq!(out["bytes"], old.len(), "{out}");
    assert_eq!(out["forced"], false, "{out}");
    assert_eq!(fs::read(&file).unwrap(), old, "the exact bytes");
    let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640, "the old mode");
    let e = one_event(&mut audit, "fs.access", "undo");
    assert_eq!(e["intent"], "undo", "{e}");
    assert_eq!(e["undoes"], json!(op), "{e}");
    assert_eq!(e["opId"], out["opId"], "{e}");
    let redo = op_id(&out);
    assert!(txt.contains(&redo), "{txt}");

    // The undo is this session's too: undoing it redoes the write.
    m.ok("undo", json!({"opId": redo}));
    assert_eq!(fs::read(&file).unwrap(), b"new\r\n");

    // An edit's opId works the same; a file the session created is removed.
    let fresh = t.ws.join("made/here.txt");
    let (_, out) = m.ok("write_file", json!({"path": fresh, "content": "x\n"}));
    let (_, out) = m.ok("undo", json!({"opId": op_id(&out)}));
    assert_eq!(out["action"], "removed", "{out}");
    assert!(!fresh.exists());
    assert!(!t.ws.join("made").exists(), "the directory it created");
    assert!(temps(&t.base).is_empty());
    m.close();
}

#[test]
fn undo_refuses_unknown_and_foreign_operations_and_changed_files() {
    let t = Tree::new(BIN);
    let file = t.ws.join("a.txt");
    fs::write(&file, "one\n").unwrap();
    let m = with_undo(&t, &PLAIN);
    let (_, out) = m.ok("write_file", json!({"path": file, "content": "two\n"}));
    let op = op_id(&out);

    // Another MCP connection (another session, the same store) cannot
    // name this session's operation: answered as an unknown one.
    let other = with_undo(&t, &PLAIN);
    let foreign = other.refused("undo", json!({"opId": op}), "not_undoable");
    let unknown = other.refused("undo", json!({"opId": "0123456789ab-7"}), "not_undoable");
    assert_eq!(
        foreign.replace(&op, "OP"),
        unknown.replace("0123456789ab-7", "OP"),
        "another session's opId reads as an unknown one"
    );
    assert!(
        !unknown.contains("writegate history"),
        "tool words: {unknown}"
    );
    assert!(unknown.contains("this session"), "{unknown}");
    for forged in ["../../etc/passwd", "x"] {
        other.refused("undo", json!({"opId": forged}), "not_undoable");
    }
    assert_eq!(fs::read(&file).unwrap(), b"two\n");
    // No force over MCP.
    let txt = m.refused(
        "undo",
        json!({"opId": op, "force": true}),
        "invalid_arguments",
    );
    assert!(txt.contains("force"), "{txt}");

    // Changed since (outside writegate): refused, nothing written.
    fs::write(&file, "three\n").unwrap();
    let mut audit = t.audit();
    audit.new_events();
    let r = m.call("undo", json!({"opId": op}));
    assert_eq!(r.is_error, Some(true));
    let txt = text(&r);
    assert!(txt.starts_with("file_changed: "), "{txt}");
    assert_eq!(error_meta(&r)["errorKind"], "file_changed");
    assert!(!txt.contains("pass --force"), "{txt}");
    assert!(
        txt.contains(&format!("writegate undo {op} --force")),
        "{txt}"
    );
    assert_eq!(fs::read(&file).unwrap(), b"three\n");
    let e = one_event(&mut audit, "fs.denied", "undo");
    assert_eq!(e["errorKind"], "file_changed", "{e}");
    assert!(temps(&t.base).is_empty());
    other.close();
    m.close();
}

#[test]
fn an_undo_on_a_held_path_asks_the_person_like_a_write() {
    let t = Tree::new(BIN);
    let caps = Caps {
        elicitation: true,
        version: ProtocolVersion::V_2025_11_25,
        ..PLAIN
    };
    let env = t.ws.join(".env");
    fs::write(&env, "KEY=old\n").unwrap();
    let m = with_undo(&t, &caps);
    m.set_answer(Answer::AllowOnce);
    let (_, out) = m.ok("write_file", json!({"path": env, "content": "KEY=new\n"}));
    assert_eq!(m.asked(), 1);
    m.set_answer(Answer::Deny);
    let txt = m.refused("undo", json!({"opId": op_id(&out)}), "approval_required");
    assert!(txt.contains("the user declined"), "{txt}");
    assert_eq!(m.asked(), 2, "asked about the undo");
    assert_eq!(fs::read(&env).unwrap(), b"KEY=new\n");
    m.set_answer(Answer::AllowOnce);
    m.ok("undo", json!({"opId": op_id(&out)}));
    assert_eq!(fs::read(&env).unwrap(), b"KEY=old\n");
    m.close();
}
