//! Framing and JSON-RPC: one request a line; parse errors, batches, unknown
//! methods and notifications, bad params and ids, CRLF and blank lines, the
//! frame-size limit, lone surrogates, invalid UTF-8; no bad line closes the
//! connection.

use crate::common::{
    BIN, Clients, Opts, Tree, TreeAudit, by_id, check_initialize, req, write_params,
};
use serde_json::{Value, json};
use std::fs;

#[test]
fn framing_unparseable_line_is_parse_error_with_null_id() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\n");
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert!(r["id"].is_null(), "{r}");
    assert!(c.sync().is_empty());
}

#[test]
fn framing_batch_gets_one_invalid_request_with_null_id() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let p = s.ws.join("batched.txt");
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "fs/write_text_file", "params": write_params(&p, "a")},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": 1}}
    ]);
    c.send(&batch);
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(r["id"].is_null(), "{r}");
    assert!(c.sync().is_empty(), "exactly one response for a batch");
    assert!(!p.exists(), "no member of a batch is executed");
}

#[test]
fn framing_unknown_method_names_the_method() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let r = c.call_id(3, "no/such_method", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(r["id"], 3);
    assert!(
        r["error"]["data"].to_string().contains("no/such_method"),
        "{r}"
    );
}

#[test]
fn framing_unknown_notification_gets_no_response() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    c.send(&json!({"jsonrpc": "2.0", "method": "no/such_notification", "params": {"x": 1}}));
    c.send(&json!({"jsonrpc": "2.0", "method": "session/update"}));
    // A request sent after them is the only thing answered.
    let r = c.call_id(9, "_writegate/receipt", json!({"sessionId": "s"}));
    assert_eq!(r["id"], 9, "{r}");
    assert!(r["result"].is_object(), "{r}");
    assert!(c.sync().is_empty());
}

#[test]
fn framing_bad_params_are_invalid_params_with_reason() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let p = s.ws.join("num.txt");
    let cases = [
        json!({"sessionId": "s", "path": p, "content": 5}),
        json!({"sessionId": "s", "path": p}),
        json!({"path": p, "content": "x"}),
        json!([1, 2]),
        json!(null),
    ];
    for (i, params) in (0_i64..).zip(&cases) {
        let r = c.call_id(i, "fs/write_text_file", params.clone());
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
        let data = &r["error"]["data"];
        assert!(
            !data.is_null() && data.to_string().len() > 2,
            "a reason in data: {r}"
        );
    }
    assert!(!p.exists());
    assert!(
        s.audit_events().is_empty(),
        "bad params are not audit events"
    );
}

#[test]
fn framing_ids_are_echoed_exactly() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    for raw_id in [
        "null",
        "0",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
        "\"str\"",
        "\"\"",
        "\"a b\\u00e9\"",
    ] {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{raw_id},"method":"_writegate/receipt","params":{{"sessionId":"s"}}}}"#
        );
        c.send_raw(format!("{line}\n").as_bytes());
        let (raw, r) = c.recv_raw();
        assert!(r["result"].is_object(), "{raw_id}: {raw}");
        let want: Value = serde_json::from_str(raw_id).unwrap();
        assert_eq!(r["id"], want, "{raw_id}: {raw}");
        assert!(
            raw.contains(&format!("\"id\":{}", serde_json::to_string(&want).unwrap())),
            "{raw_id} must be echoed exactly: {raw}"
        );
    }
}

#[test]
fn framing_float_or_huge_ids_are_invalid_requests() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let p = s.ws.join("bad-id.txt");
    for raw_id in [
        "1.5",
        "9223372036854775808",
        "-9223372036854775809",
        "1e3",
        "true",
        "{}",
        "[1]",
    ] {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{raw_id},"method":"fs/write_text_file","params":{}}}"#,
            write_params(&p, "x")
        );
        c.send_raw(format!("{line}\n").as_bytes());
        let r = c.recv();
        assert_eq!(r["error"]["code"], -32600, "{raw_id}: {r}");
        assert!(r["id"].is_null(), "{raw_id}: {r}");
    }
    assert!(c.sync().is_empty());
    assert!(!p.exists(), "a request with an invalid id is not executed");
}

#[test]
fn framing_crlf_endings_and_blank_lines_are_tolerated() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let a = req(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("a.txt"), "A"),
    );
    let b = req(
        2,
        "fs/write_text_file",
        write_params(&s.ws.join("b.txt"), "B\r\n"),
    );
    let mut bytes = b"\n\r\n   \n\t\r\n".to_vec();
    bytes.extend_from_slice(a.to_string().as_bytes());
    bytes.extend_from_slice(b"\r\n\r\n\n");
    bytes.extend_from_slice(b.to_string().as_bytes());
    bytes.extend_from_slice(b"\r\n");
    c.send_raw(&bytes);
    let got = by_id(vec![c.recv(), c.recv()]);
    assert_eq!(got.get(1)["result"], json!({}));
    assert_eq!(got.get(2)["result"], json!({}));
    assert_eq!(fs::read(s.ws.join("a.txt")).unwrap(), b"A");
    assert_eq!(fs::read(s.ws.join("b.txt")).unwrap(), b"B\r\n");
    assert!(c.sync().is_empty(), "blank lines get no answer");
}

#[test]
fn framing_line_over_max_frame_bytes_gets_one_error_and_connection_goes_on() {
    let s = Tree::new(BIN);
    let mut d = s.daemon(Opts {
        stdio: true,
        env: &[("WRITEGATE_MAX_FRAME_BYTES", "4096")],
        ..Default::default()
    });
    let mut c = d.stdio_client();
    let big = s.ws.join("big.txt");
    // A valid request, just too long (and sent in pieces).
    let line = req(
        1,
        "fs/write_text_file",
        write_params(&big, &"a".repeat(20_000)),
    )
    .to_string();
    for chunk in line.as_bytes().chunks(3000) {
        c.send_raw(chunk);
    }
    c.send_raw(b"\n");
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(r["id"].is_null(), "{r}");
    // The next request on the same connection works.
    let r = c.call_id(
        2,
        "fs/write_text_file",
        write_params(&s.ws.join("next.txt"), "next"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(s.ws.join("next.txt")).unwrap(), b"next");
    assert!(!big.exists());
    assert!(c.sync().is_empty(), "exactly one error for the long line");

    // The limit is exact: a 4096-byte line is served (with or without a
    // trailing \r), a 4097-byte one is not.
    let exact = |id: i64, name: &str, len: usize| {
        let p = s.ws.join(name);
        let base = req(id, "fs/write_text_file", write_params(&p, ""))
            .to_string()
            .len();
        let l = req(
            id,
            "fs/write_text_file",
            write_params(&p, &"b".repeat(len - base)),
        )
        .to_string();
        assert_eq!(l.len(), len);
        l
    };
    c.send_raw(format!("{}\n", exact(10, "exact.txt", 4096)).as_bytes());
    let r = c.recv();
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (json!(10), json!({})),
        "{r}"
    );
    c.send_raw(format!("{}\r\n", exact(11, "exact-cr.txt", 4096)).as_bytes());
    let r = c.recv();
    assert_eq!(
        (r["id"].clone(), r["result"].clone()),
        (json!(11), json!({})),
        "{r}"
    );
    c.send_raw(format!("{}\n", exact(12, "over.txt", 4097)).as_bytes());
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(r["id"].is_null(), "{r}");
    assert!(s.ws.join("exact.txt").exists() && s.ws.join("exact-cr.txt").exists());
    assert!(!s.ws.join("over.txt").exists());
    assert!(c.sync().is_empty());
}

#[test]
fn framing_lone_surrogate_is_invalid_params_with_the_request_id() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let p = s.ws.join("sur.txt");
    let ps = p.to_str().unwrap();
    // Lone leading and trailing surrogates, in the middle and at the end of
    // the string, and a leading one followed by a non-surrogate escape.
    let cases = [
        ("7", r"x\ud800y"),
        ("\"low\"", r"\udc00"),
        ("8", r"ok\ud83d"),
        ("\"pair-reversed\"", r"\ude00\ud83d"),
        ("10", r"\ud800\u0041"),
        ("11", r"\ud800"),
    ];
    let mut wrong = Vec::new();
    for (id, content) in cases {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"fs/write_text_file","params":{{"sessionId":"s","path":"{ps}","content":"{content}"}}}}"#
        );
        c.send_raw(format!("{line}\n").as_bytes());
        let r = c.recv();
        let want_id = serde_json::from_str::<Value>(id).unwrap();
        if r["error"]["code"] != -32602 || r["id"] != want_id {
            wrong.push(format!("content \"{content}\" (id {id}) -> {r}"));
        }
        assert!(!p.exists(), "nothing may be written for {content}");
    }
    assert!(
        wrong.is_empty(),
        "a lone surrogate must be -32602 with the request's id:\n{}",
        wrong.join("\n")
    );
    assert!(
        s.audit_events().is_empty(),
        "refused before anything is touched"
    );
    // A valid surrogate pair is fine and becomes the 4-byte UTF-8 sequence.
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"fs/write_text_file","params":{{"sessionId":"s","path":"{ps}","content":"\ud83d\ude00"}}}}"#
    );
    c.send_raw(format!("{line}\n").as_bytes());
    let r = c.recv();
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&p).unwrap(), "\u{1F600}".as_bytes());
}

#[test]
fn framing_relative_path_is_invalid_params() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    for path in ["rel.txt", "./rel.txt", "", "ws/rel.txt"] {
        let r = c.call_id(
            1,
            "fs/write_text_file",
            json!({"sessionId": "s", "path": path, "content": "x"}),
        );
        assert_eq!(r["error"]["code"], -32602, "{path:?}: {r}");
    }
    let r = c.call_id(
        2,
        "_writegate/edit_text_file",
        json!({"sessionId": "s", "path": "rel.txt", "mode": "append", "content": "x"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(!s.base.join("rel.txt").exists() && !s.ws.join("rel.txt").exists());
}

#[test]
fn framing_invalid_utf8_is_parse_error_and_connection_survives() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let p = s.ws.join("u.txt");
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{{"sessionId":"s","path":"{}","content":"a"#,
        p.display()
    )
    .into_bytes();
    line.extend_from_slice(b"\xff\xfe\xc3b\"}}\n");
    c.send_raw(&line);
    let r = c.recv();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert!(r["id"].is_null(), "{r}");
    assert!(!p.exists());
    let r = c.call_id(2, "fs/write_text_file", write_params(&p, "fine"));
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&p).unwrap(), b"fine");
}

#[test]
fn framing_no_bad_line_closes_the_connection() {
    let s = Tree::new(BIN);
    let d = s.socket_daemon(&[]);
    let mut c = d.connect();
    // Each of these gets exactly one error answer.
    let bad: Vec<&[u8]> = vec![
        b"{nope",
        b"[]",
        b"[1,2,3]",
        b"42",
        b"\"just a string\"",
        b"null",
        b"\x00",
        b"\xc3\x28",
        br#"{"jsonrpc":"1.0","id":1,"method":"initialize"}"#,
        br#"{"id":2,"method":"initialize"}"#,
        br#"{"jsonrpc":"2.0","id":3}"#,
        br#"{"jsonrpc":"2.0","id":4,"method":5}"#,
        br#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":5}"#,
        br#"{"jsonrpc":"2.0","id":6,"method":"fs/write_text_file","params":"x"}"#,
        br#"{"jsonrpc":"2.0","id":7,"method":"nope"}"#,
        br#"{"jsonrpc":"2.0","id":1.25,"method":"initialize"}"#,
    ];
    for line in &bad {
        let mut l = line.to_vec();
        l.push(b'\n');
        c.send_raw(&l);
    }
    // A response object and a notification are not answered.
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n");
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"whatever\"}\n");
    let mut errors = Vec::new();
    for _ in 0..bad.len() {
        let r = c.recv();
        assert!(r.get("error").is_some(), "{r}");
        errors.push(r);
    }
    let extra = c.sync();
    assert!(
        extra.is_empty(),
        "one answer per bad line, none for the others: {extra:?}"
    );
    let r = c.call_id(
        100,
        "fs/write_text_file",
        write_params(&s.ws.join("after.txt"), "still here"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(s.ws.join("after.txt")).unwrap(), b"still here");
    // The daemon itself is fine: a new connection works too.
    let mut c2 = d.connect();
    check_initialize(
        &c2.call_id(1, "initialize", json!({"protocolVersion": 1})),
        &s.ws,
        false,
    );
}

/// An edit whose parameters do not fit its mode is invalid
/// params before routing: no audit event, nothing touched (SPEC 10).
#[test]
fn edit_with_params_that_do_not_fit_the_mode_is_invalid_params_and_not_audited() {
    let t = Tree::new(BIN);
    let f = t.ws.join("f.txt");
    fs::write(&f, b"a\n").unwrap();
    let mut d = t.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    for params in [
        json!({"sessionId": "s", "path": f, "mode": "insert", "content": "x"}),
        json!({"sessionId": "s", "path": f, "mode": "replace", "content": "x"}),
        json!({"sessionId": "s", "path": f, "mode": "delete", "line": 2, "endLine": 1}),
        json!({"sessionId": "s", "path": f, "mode": "write", "content": "x", "line": 1}),
    ] {
        let r = c.call("_writegate/edit_text_file", params.clone());
        assert_eq!(r["error"]["code"], -32602, "{params} -> {r}");
        assert!(r["error"]["data"].is_string(), "{r}");
    }
    assert_eq!(fs::read(&f).unwrap(), b"a\n");
    assert!(t.audit_events().is_empty(), "{:?}", t.audit_events());
}
