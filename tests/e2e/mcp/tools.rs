//! The tools of `writegate mcp` through the official client: `tools/list`
//! and its schemas; reads, writes and edits that keep a file's format,
//! with one audit event per call that touched a path; every refusal as a
//! tool error a model can act on; bad arguments; files at the size caps;
//! concurrent calls on one file; the same outcome's fields over ACP and
//! MCP.

use super::{PLAIN, error_meta, mcp_command, one_event, read_facts, start, text, ws_arg};
use crate::common::{BIN, Clients, Tree, TreeAudit, temps};
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value, json};
use std::fs;

#[test]
fn tools_list_offers_the_three_tools_with_schemas_for_a_model() {
    let t = Tree::new(BIN);
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let tools =
        m.rt.block_on(m.client().list_all_tools())
            .expect("tools/list");
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, ["read_file", "write_file", "edit_file"]);
    for tool in &tools {
        let d = tool.description.as_deref().unwrap();
        assert!(d.contains(&ws_arg(&t)), "names the workspace: {d}");
        // read_file answers text only (its lines once: ADR 0034).
        assert_eq!(
            tool.output_schema.is_some(),
            tool.name != "read_file",
            "{}",
            tool.name
        );
        assert_eq!(tool.input_schema["type"], "object");
        let required = tool.input_schema["required"].as_array().unwrap();
        assert!(required.contains(&json!("path")), "{}", tool.name);
    }
    let edit = tools.iter().find(|t| t.name == "edit_file").unwrap();
    let d = edit.description.as_deref().unwrap();
    for must in [
        "exactly once",
        "read_file",
        "expectedHash",
        "ambiguous_text_match",
        "hash_mismatch",
    ] {
        assert!(
            d.contains(must),
            "edit_file's description mentions {must}: {d}"
        );
    }
    let info = m.client().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "writegate");
    m.close();
}

#[test]
fn read_write_and_edit_keep_the_file_format_and_leave_one_audit_event_each() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let file = t.ws.join("notes.txt");

    // write_file creates (relative paths start at the workspace root).
    let (txt, w) = m.ok(
        "write_file",
        json!({"path": "notes.txt", "content": "one\ntwo\nthree\n"}),
    );
    assert!(txt.contains("created"), "{txt}");
    assert_eq!(w["created"], true);
    assert_eq!(fs::read(&file).unwrap(), b"one\ntwo\nthree\n");
    let e = one_event(&mut audit, "fs.access", "write_file");
    assert_eq!(e["intent"], "write");

    // read_file: numbered lines, hash, format, all in its one text block.
    let (txt, structured) = m.ok("read_file", json!({"path": file}));
    assert_eq!(structured, Value::Null, "no structuredContent");
    let r = read_facts(&txt);
    assert!(txt.starts_with("1\tone\n2\ttwo\n3\tthree\n"), "{txt}");
    assert_eq!(r["totalLines"], 3);
    assert_eq!(r["lines"][1], json!({"n": 2, "text": "two"}));
    assert_eq!(r["encoding"], "utf-8");
    assert_eq!(r["lineEnding"], "lf");
    assert_eq!(r["bom"], false);
    let hash = r["hash"].as_str().unwrap().to_string();
    assert!(txt.contains(&hash), "{txt}");
    one_event(&mut audit, "fs.access", "read_file");
    let (txt, _) = m.ok("read_file", json!({"path": file, "line": 2, "limit": 1}));
    assert_eq!(read_facts(&txt)["lines"], json!([{"n": 2, "text": "two"}]));
    assert!(txt.contains("lines 2-2 of 3; read on with line=3"), "{txt}");
    one_event(&mut audit, "fs.access", "read_file");

    // edit_file: replace by find, with the hash just read.
    let (txt, e) = m.ok(
        "edit_file",
        json!({"path": file, "find": "two", "content": "TWO", "expectedHash": hash}),
    );
    assert!(txt.contains("line 2"), "{txt}");
    assert_eq!(fs::read(&file).unwrap(), b"one\nTWO\nthree\n");
    let new_hash = e["hash"].as_str().unwrap().to_string();
    let ev = one_event(&mut audit, "fs.access", "edit_file");
    assert_eq!(ev["intent"], "edit");
    assert_eq!(ev["mode"], "replace");
    // By line, insert, delete, append.
    m.ok(
        "edit_file",
        json!({"path": file, "line": 3, "content": "3", "expectedHash": new_hash}),
    );
    m.ok(
        "edit_file",
        json!({"path": file, "mode": "insert", "line": 1, "content": "zero"}),
    );
    m.ok(
        "edit_file",
        json!({"path": file, "mode": "delete", "line": 2}),
    );
    m.ok(
        "edit_file",
        json!({"path": file, "mode": "append", "content": "four\n"}),
    );
    assert_eq!(fs::read(&file).unwrap(), b"zero\nTWO\n3\nfour\n");
    assert_eq!(audit.new_events().len(), 4);

    // A dry run reports the diff and writes nothing.
    let before = t.snapshot();
    let (txt, e) = m.ok(
        "edit_file",
        json!({"path": file, "find": "TWO", "content": "two", "dryRun": true}),
    );
    assert!(txt.contains("-TWO\n+two"), "{txt}");
    assert_eq!(e["dryRun"], true);
    assert_eq!(t.snapshot(), before);
    assert_eq!(
        one_event(&mut audit, "fs.access", "edit_file")["dryRun"],
        true
    );

    // An existing CRLF, UTF-16LE file with a BOM keeps all three, on a whole
    // write and on an edit; the model sends "\n".
    let wide = t.ws.join("wide.txt");
    let mut bytes = vec![0xFF, 0xFE];
    for u in "a\r\nb\r\n".encode_utf16() {
        bytes.extend(u.to_le_bytes());
    }
    fs::write(&wide, &bytes).unwrap();
    let (txt, _) = m.ok("read_file", json!({"path": wide}));
    let r = read_facts(&txt);
    assert_eq!(
        (
            r["encoding"].as_str(),
            r["bom"].as_bool(),
            r["lineEnding"].as_str()
        ),
        (Some("utf-16le"), Some(true), Some("crlf"))
    );
    m.ok("write_file", json!({"path": wide, "content": "x\ny\nz\n"}));
    m.ok(
        "edit_file",
        json!({"path": wide, "find": "y", "content": "Y"}),
    );
    let mut want = vec![0xFF, 0xFE];
    for u in "x\r\nY\r\nz\r\n".encode_utf16() {
        want.extend(u.to_le_bytes());
    }
    assert_eq!(fs::read(&wide).unwrap(), want);
    assert_eq!(audit.new_events().len(), 3);
    assert!(temps(&t.base).is_empty());
    m.close();
}

#[test]
fn every_refusal_is_a_tool_error_a_model_can_act_on_and_the_server_keeps_answering() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let file = t.ws.join("a.py");
    fs::write(&file, "x = 1\nprint(x)\nx = 1\n").unwrap();
    let before = t.snapshot();

    // Ambiguous find: the count and the lines.
    let txt = m.refused(
        "edit_file",
        json!({"path": file, "find": "x = 1", "content": "x = 2"}),
        "ambiguous_text_match",
    );
    assert!(
        txt.contains("2 times") && txt.contains("lines 1, 3"),
        "{txt}"
    );
    let r = m.call(
        "edit_file",
        json!({"path": file, "find": "x = 1", "content": "x = 2"}),
    );
    assert_eq!(error_meta(&r)["lines"], json!([1, 3]));
    assert_eq!(audit.new_events().len(), 2);
    // Not found.
    m.refused(
        "edit_file",
        json!({"path": file, "find": "y = 1", "content": "z"}),
        "text_not_found",
    );
    one_event(&mut audit, "fs.denied", "edit_file");
    // Outside the workspace: the hint names the workspace root.
    let outside = t.out.join("o.txt");
    let txt = m.refused(
        "write_file",
        json!({"path": outside, "content": "x"}),
        "path_outside_workspace",
    );
    assert!(txt.contains(&ws_arg(&t)), "{txt}");
    one_event(&mut audit, "fs.denied", "write_file");
    let txt = m.refused(
        "read_file",
        json!({"path": "../out/o.txt"}),
        "path_outside_workspace",
    );
    assert!(txt.contains(&ws_arg(&t)), "{txt}");
    one_event(&mut audit, "fs.denied", "read_file");
    // A stale hash: the current one.
    let stale = format!("sha256:{}", "0".repeat(64));
    let txt = m.refused(
        "edit_file",
        json!({"path": file, "line": 2, "content": "pass", "expectedHash": stale}),
        "hash_mismatch",
    );
    let (read, _) = m.ok("read_file", json!({"path": file}));
    assert!(
        txt.contains(read_facts(&read)["hash"].as_str().unwrap()),
        "{txt}"
    );
    assert_eq!(audit.new_events().len(), 2);
    // Line out of range, line mismatch, missing file.
    let txt = m.refused(
        "edit_file",
        json!({"path": file, "line": 9, "content": "x"}),
        "line_out_of_range",
    );
    assert!(txt.contains("3 lines"), "{txt}");
    let txt = m.refused(
        "edit_file",
        json!({"path": file, "line": 2, "find": "nothing here", "content": "x"}),
        "line_mismatch",
    );
    assert!(txt.contains("print(x)"), "{txt}");
    m.refused(
        "read_file",
        json!({"path": "missing.txt"}),
        "path_not_found",
    );
    m.refused(
        "edit_file",
        json!({"path": "missing.txt", "line": 1, "content": "x"}),
        "path_not_found",
    );
    assert_eq!(audit.new_events().len(), 4);

    // Bad arguments: tool errors naming the argument; no operation, no event.
    for (tool, args, says) in [
        (
            "read_file",
            json!({"path": file, "line": "2"}),
            "line: invalid type",
        ),
        ("read_file", json!({"line": 2}), "missing field `path`"),
        ("read_file", json!({"path": 7}), "path: invalid type"),
        (
            "write_file",
            json!({"path": file}),
            "missing field `content`",
        ),
        (
            "edit_file",
            json!({"path": file, "edits": [{"oldText": "a", "newText": "b"}]}),
            "unknown field `edits`",
        ),
        (
            "edit_file",
            json!({"path": file, "mode": "replace_all", "content": "x", "find": "x"}),
            "mode: unknown variant",
        ),
        (
            "edit_file",
            json!({"path": file, "content": "x"}),
            "replace needs find, line, or both",
        ),
        (
            "edit_file",
            json!({"path": file, "mode": "insert", "content": "x"}),
            "insert needs line",
        ),
        (
            "edit_file",
            json!({"path": file, "mode": "delete"}),
            "delete needs line",
        ),
        (
            "edit_file",
            json!({"path": file, "find": "x"}),
            "needs content",
        ),
        (
            "edit_file",
            json!({"path": file, "line": 3, "endLine": 2, "content": "x"}),
            "endLine must not be before line",
        ),
        (
            "write_file",
            json!({"path": "", "content": "x"}),
            "path is empty",
        ),
    ] {
        let txt = m.refused(tool, args.clone(), "invalid_arguments");
        assert!(txt.contains(says), "{tool} {args}: {txt}");
    }
    assert!(
        audit.new_events().is_empty(),
        "bad arguments are not audited"
    );

    // An unknown tool is a protocol error; the server keeps answering.
    let params = CallToolRequestParams::new("delete_file").with_arguments(Map::new());
    let err = m.rt.block_on(m.client().call_tool(params)).unwrap_err();
    assert!(
        err.to_string()
            .contains("read_file, write_file and edit_file"),
        "{err}"
    );

    assert_eq!(
        t.snapshot(),
        before,
        "every refusal left every file byte-identical"
    );
    assert!(temps(&t.base).is_empty());
    m.ok(
        "edit_file",
        json!({"path": file, "line": 2, "content": "print(x + 1)"}),
    );
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "x = 1\nprint(x + 1)\nx = 1\n"
    );
    m.close();
}

#[test]
fn files_at_the_size_caps() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let cap = 5 * 1024 * 1024;
    // Exactly max_write_bytes: written; one byte more: file_too_large.
    let line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopq\n"; // 64 bytes
    let mut big = line.repeat(cap / line.len());
    assert_eq!(big.len(), cap);
    let file = t.ws.join("big.txt");
    m.ok("write_file", json!({"path": file, "content": big}));
    assert_eq!(fs::metadata(&file).unwrap().len(), cap as u64);
    one_event(&mut audit, "fs.access", "write_file");
    let over = format!("{big}x");
    m.refused(
        "write_file",
        json!({"path": t.ws.join("over.txt"), "content": over}),
        "file_too_large",
    );
    one_event(&mut audit, "fs.denied", "write_file");
    assert!(!t.ws.join("over.txt").exists());
    // A file of exactly max_edit_bytes: read and edited in the middle.
    let (txt, _) = m.ok(
        "read_file",
        json!({"path": file, "line": 40_000, "limit": 1}),
    );
    assert_eq!(read_facts(&txt)["totalLines"], cap / line.len());
    let middle = cap / line.len() / 2;
    m.ok(
        "edit_file",
        json!({"path": file, "line": middle, "content": "MIDDLE"}),
    );
    let written = fs::read_to_string(&file).unwrap();
    big.replace_range((middle - 1) * 64..middle * 64 - 1, "MIDDLE");
    assert_eq!(written, big);
    audit.new_events();
    // A file over max_edit_bytes cannot be edited (or read whole).
    let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
    // (the edit above made it 57 bytes shorter)
    std::io::Write::write_all(&mut f, "tail\n".repeat(20).as_bytes()).unwrap();
    drop(f);
    m.refused(
        "edit_file",
        json!({"path": file, "mode": "append", "content": "x"}),
        "file_too_large",
    );
    m.refused("read_file", json!({"path": file}), "file_too_large");
    assert_eq!(audit.new_events().len(), 2);
    assert!(temps(&t.base).is_empty());
    m.close();
}

#[test]
fn concurrent_calls_on_one_file_all_land_and_nothing_is_torn() {
    let t = Tree::new(BIN);
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let file = t.ws.join("log.txt");
    fs::write(&file, "").unwrap();
    let peer = m.client().peer().clone();
    let call = |args: Value| {
        let peer = peer.clone();
        let Value::Object(args) = args else {
            unreachable!()
        };
        async move {
            peer.call_tool(CallToolRequestParams::new("edit_file").with_arguments(args))
                .await
                .unwrap()
        }
    };
    // 24 appends at once: every one lands (read-modify-write in the lock).
    let results = m.rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..24 {
            set.spawn(call(
                json!({"path": file, "mode": "append", "content": format!("line {i}\n")}),
            ));
        }
        set.join_all().await
    });
    assert!(results.iter().all(|r| r.is_error == Some(false)));
    let all = fs::read_to_string(&file).unwrap();
    for i in 0..24 {
        assert!(all.contains(&format!("line {i}\n")), "line {i} lost: {all}");
    }
    assert_eq!(all.lines().count(), 24);

    // Whole writes of two large contents racing edits of the same file: the
    // file is always one whole version; each edit lands or is a clear error.
    let a = "a".repeat(1 << 20) + "\n";
    let b = "b".repeat(1 << 20) + "\n";
    let results = m.rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..8 {
            let content = if i % 2 == 0 { &a } else { &b };
            set.spawn(call(
                json!({"path": file, "mode": "write", "content": content}),
            ));
            set.spawn(call(json!({"path": file, "find": "a\n", "content": "A\n"})));
        }
        set.join_all().await
    });
    for r in &results {
        if r.is_error == Some(true) {
            let t = text(r);
            assert!(t.starts_with("text_not_found: "), "{t}");
        }
    }
    let now = fs::read_to_string(&file).unwrap();
    let whole =
        |c: char| now.len() == (1 << 20) + 1 && now[..now.len() - 2].chars().all(|x| x == c);
    assert!(whole('a') || whole('b'), "torn: {} bytes", now.len());
    assert!(temps(&t.base).is_empty());
    assert_eq!(t.audit_events().len(), 24 + 16);
    m.close();
}

/// SPEC 7.2: the workspace writer creates missing parents. That is the
/// publisher's (`crates/fs`, `open_creating`); `writegate mcp` adds nothing
/// for it, and gets it through the shared pipeline.
#[test]
fn missing_parent_directories_are_created_inside_the_workspace() {
    let t = Tree::new(BIN);
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let deep = t.ws.join("src/new/mod.rs");
    m.ok("write_file", json!({"path": deep, "content": "x\n"}));
    assert_eq!(fs::read(&deep).unwrap(), b"x\n");
    m.close();
}

/// Regression: a `tools/call` whose strings hold a lone surrogate
/// escape (`\ud83d` without its pair: a model's truncated emoji) is JSON by
/// RFC 8259, but `serde_json` refuses it as a syntax error, and the server
/// skipped it as "not JSON": the client waited for an answer forever. It is
/// answered "Invalid params" with its id now (as ACP answers it), nothing
/// is written, and a notification with one is still never answered.
#[test]
fn regression_a_call_with_a_lone_surrogate_is_answered_invalid_params() {
    let t = Tree::new(BIN);
    let mut d = t.spawn(mcp_command(&t), true, None);
    let mut c = d.stdio_client();
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"write_file\",\"arguments\":{\"path\":\"a.txt\",\"content\":\"smile \\ud83d\"}}}\n");
    let r = c.recv();
    assert_eq!(r["id"], 2, "{r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("lone surrogate")),
        "{r}"
    );
    c.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{\"a\":\"\\udc00\"}}\n",
    );
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/call\",\"params\":{\"name\":\"edit_file\",\"arguments\":{\"path\":\"a.txt\",\"mode\":\"append\",\"content\":\"x\\udc00\"}}}\n");
    let r = c.recv();
    assert_eq!(r["id"], "s", "{r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    c.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    let r = c.recv();
    assert_eq!(r["id"], 3, "the notification got no answer: {r}");
    // `arguments` that are not an object are invalid params, not "method
    // not found" (-32601).
    c.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "write_file", "arguments": ["a.txt", "x"]}}));
    let r = c.recv();
    assert_eq!(r["id"], 4, "{r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(!t.ws.join("a.txt").exists());
    assert!(t.audit_events().is_empty());
}

/// Both front ends serialise core's outcomes and refusal details once: for
/// the same edit, ACP's result and MCP's `structuredContent` are equal (for
/// a read, ACP's result and what MCP's text block says), and
/// ACP's `error.data` and MCP's `_meta["writegate/error"]` have the same
/// members with the same values (the hint is worded for each; ACP alone
/// adds `uri` to `path_not_found`).
#[test]
fn acp_and_mcp_show_the_same_fields_for_the_same_outcome() {
    let t = Tree::new(BIN);
    let file = t.ws.join("same.py");
    fs::write(&file, "x = 1\nprint(x)\nx = 1\n").unwrap();
    let mut d = t.stdio_daemon(&["--allow-read"]);
    let mut acp = d.stdio_client();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let acp_edit = |c: &mut crate::common::Client, args: &Value| {
        let mut params = args.clone();
        params["sessionId"] = json!("s1");
        c.call("_writegate/edit_text_file", params)
    };

    // A dry run: the same report, member for member.
    let args =
        json!({"path": file, "mode": "insert", "line": 2, "content": "y = 2", "dryRun": true});
    let r = acp_edit(&mut acp, &args);
    let (_, out) = m.ok("edit_file", args);
    assert_eq!(r["result"], out, "{r}");
    assert_eq!(out["dryRun"], true, "{out}");

    // A read: the same lines and facts.
    let r = acp.call(
        "_writegate/read_lines",
        json!({"sessionId": "s1", "path": file}),
    );
    let (txt, _) = m.ok("read_file", json!({"path": file}));
    let out = read_facts(&txt);
    assert_eq!(r["result"], out, "{r}");
    assert_eq!(
        out["lines"][1],
        json!({"n": 2, "text": "print(x)"}),
        "{out}"
    );

    let missing = t.ws.join("missing.py");
    let refusals = [
        (
            json!({"path": file, "mode": "replace", "find": "x = 1", "content": "x = 2"}),
            "ambiguous_text_match",
        ),
        (
            json!({"path": file, "mode": "replace", "line": 9, "content": "z"}),
            "line_out_of_range",
        ),
        (
            json!({"path": file, "mode": "replace", "find": "y", "content": "z", "expectedHash": format!("sha256:{}", "0".repeat(64))}),
            "hash_mismatch",
        ),
        (
            json!({"path": missing, "mode": "replace", "find": "a", "content": "b"}),
            "path_not_found",
        ),
    ];
    for (args, kind) in refusals {
        let r = acp_edit(&mut acp, &args);
        let mut data = r["error"]["data"].clone();
        assert_eq!(data["errorKind"], kind, "{r}");
        let meta = error_meta(&m.call("edit_file", args));
        if kind == "path_not_found" {
            assert_eq!(data["uri"], data["path"], "{r}");
            data.as_object_mut().unwrap().remove("uri");
        }
        let keys = |v: &Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(keys(&data), keys(&meta), "{kind}: ACP {data} MCP {meta}");
        for k in keys(&data).iter().filter(|k| *k != "hint") {
            assert_eq!(data[k], meta[k], "{kind}.{k}: ACP {data} MCP {meta}");
        }
    }
    assert_eq!(
        fs::read(&file).unwrap(),
        b"x = 1\nprint(x)\nx = 1\n",
        "nothing written"
    );
    m.close();
    drop(acp);
    d.wait_exit();
}
