//! The handshake: `initialize` over stdio and over the socket, the
//! capabilities it announces (reading only with `--allow-read`), and a
//! socket connection choosing another registered workspace.

use crate::common::{BIN, Clients, Tree, TreeAudit, check_initialize, write_params};
use serde_json::json;
use std::fs;

#[test]
fn handshake_over_stdio() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let r = c.call_id(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}}}),
    );
    check_initialize(&r, &s.ws, false);
    // Reading is off by default: the method does not exist.
    fs::write(s.ws.join("r.txt"), "x\n").unwrap();
    let r = c.call_id(
        2,
        "fs/read_text_file",
        json!({"sessionId": "s", "path": s.ws.join("r.txt")}),
    );
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(r["error"]["data"], "fs/read_text_file", "{r}");
}

#[test]
fn handshake_over_socket_with_allow_read() {
    let s = Tree::new(BIN);
    let d = s.socket_daemon(&["--allow-read"]);
    let mut c = d.connect();
    let r = c.call_id("init", "initialize", json!({"protocolVersion": 1}));
    check_initialize(&r, &s.ws, true);
    fs::write(s.ws.join("r.txt"), "one\r\ntwo\n").unwrap();
    let r = c.call_id(
        2,
        "fs/read_text_file",
        json!({"sessionId": "s", "path": s.ws.join("r.txt")}),
    );
    // The read reports the file's format and hash in `_meta`.
    assert_eq!(
        r["result"],
        json!({"content": "one\r\ntwo\n", "_meta": {
            "encoding": "utf-8", "bom": false, "lineEnding": "lf",
            "hash": "sha256:611912c05d6113dd9932610cf2d5876c6f05324e05f326a40620dd4f3fd4ac0d"
        }}),
        "{r}"
    );
}

#[test]
fn handshake_socket_initialize_can_choose_another_registered_workspace() {
    let s = Tree::new(BIN);
    let ws2 = s.base.join("ws2");
    fs::create_dir(&ws2).unwrap();
    let ws2_arg = ws2.to_str().unwrap().to_string();
    let d = s.socket_daemon(&["--workspace", &ws2_arg]);

    let mut c = d.connect();
    let r = c.call_id(
        1,
        "initialize",
        json!({"protocolVersion": 1, "_meta": {"writegate/workspace": ws2}}),
    );
    assert_eq!(
        r["result"]["_meta"]["writegate"]["workspace"]["root"],
        json!(ws2),
        "{r}"
    );
    let r = c.call_id(
        2,
        "fs/write_text_file",
        write_params(&ws2.join("in2.txt"), "two\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(ws2.join("in2.txt")).unwrap(), b"two\n");
    // The primary is "outside" for a connection owned by ws2.
    let r = c.call_id(
        3,
        "fs/write_text_file",
        write_params(&s.ws.join("in1.txt"), "one\n"),
    );
    assert_eq!(
        r["error"]["data"]["errorKind"], "path_outside_workspace",
        "{r}"
    );
    assert!(!s.ws.join("in1.txt").exists());

    // An unregistered directory is refused (allow_dynamic_workspaces is off).
    let stranger = s.base.join("stranger");
    fs::create_dir(&stranger).unwrap();
    let mut c2 = d.connect();
    let r = c2.call_id(
        1,
        "initialize",
        json!({"protocolVersion": 1, "_meta": {"writegate/workspace": stranger}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // A connection without a choice belongs to the primary.
    let mut c3 = d.connect();
    let r = c3.call_id(1, "initialize", json!({"protocolVersion": 1}));
    assert_eq!(
        r["result"]["_meta"]["writegate"]["workspace"]["root"],
        json!(s.ws),
        "{r}"
    );
}

/// With reads off (the default), `_writegate/read_lines`
/// is off too, like `fs/read_text_file`: `-32601`, nothing read, no event.
#[test]
fn reads_off_means_read_lines_off() {
    let s = Tree::new(BIN);
    fs::write(s.ws.join("r.txt"), "secret\n").unwrap();
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    for method in ["_writegate/read_lines", "fs/read_text_file"] {
        let r = c.call_id(
            7,
            method,
            json!({"sessionId": "s", "path": s.ws.join("r.txt")}),
        );
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }
    assert!(s.audit_events().is_empty());
}
