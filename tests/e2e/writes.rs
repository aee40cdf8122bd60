//! Writes: exact bytes, modes and one audit event per write, overwrites by
//! rename, CRLF files kept CRLF, refusals outside the workspace and under a
//! missing parent, receipts, symlinks inside the root, untrusted workspaces,
//! and replaced files released after a run of overwrites.

use crate::common::{
    BIN, Clients, Finished, TIMEOUT, Tree, TreeAudit, check_initialize, find_program, mode_of,
    refused_unchanged, run_with_stdin, snapshot, stdio_session, temps, write_params,
};
use rustix::process::Signal;
use serde_json::json;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn write_creates_private_file_with_exact_bytes_and_one_audit_event() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let ws_id = check_initialize(
        &c.call_id(0, "initialize", json!({"protocolVersion": 1})),
        &s.ws,
        false,
    );

    let p = s.ws.join("hello.txt");
    let content = "h\u{e9}llo\nw\u{f6}rld \u{1F680}\n\tend without newline";
    let r = c.call_id(
        1,
        "fs/write_text_file",
        json!({"sessionId": "sess-1", "path": p, "content": content}),
    );
    assert!(r.get("error").is_none(), "{r}");
    assert!(
        !r["result"].is_null(),
        "result must be {{}}, never null: {r}"
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&p).unwrap(), content.as_bytes());
    assert_eq!(mode_of(&p), 0o600);
    assert_eq!(
        mode_of(&s.audit_log),
        0o600,
        "the audit log is created 0600"
    );
    assert!(temps(&s.ws).is_empty());

    let raw = fs::read_to_string(&s.audit_log).unwrap();
    assert!(
        !raw.contains("hello.txt"),
        "raw paths must not reach the audit log by default: {raw}"
    );
    let a = s.audit_events();
    assert_eq!(a.len(), 1, "{a:?}");
    let e = &a[0];
    assert_eq!(e["v"], 1);
    assert_eq!(e["type"], "fs.access");
    assert_eq!(e["intent"], "write");
    assert_eq!(e["writer"], "workspace");
    assert_eq!(e["sessionId"], "sess-1");
    assert_eq!(e["workspace"], json!(ws_id));
    assert_eq!(e["created"], true);
    assert_eq!(e["bytesAfter"], content.len());
    assert!(e["ts"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(e["durationMs"].is_u64());
    let path_hash = e["pathHash"].as_str().unwrap();
    assert!(is_hex(path_hash, 16), "pathHash {path_hash}");
    let hash_after = e["hashAfter"].as_str().unwrap();
    assert!(
        hash_after
            .strip_prefix("sha256:")
            .is_some_and(|h| is_hex(h, 64)),
        "hashAfter {hash_after}"
    );
    if let Some(h) = sha256_hex(content.as_bytes()) {
        assert_eq!(hash_after, format!("sha256:{h}"));
    }
    if let Some(h) = sha256_hex(p.as_os_str().as_encoded_bytes()) {
        assert_eq!(
            path_hash,
            &h[..16],
            "pathHash is sha256 of the canonical path"
        );
    }
}

#[test]
fn overwrite_keeps_mode_and_records_before_and_after() {
    let s = Tree::new(BIN);
    let p = s.ws.join("script.sh");
    fs::write(&p, "old\n").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    let ino_before = fs::metadata(&p).unwrap().ino();
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let r = c.call_id(
        1,
        "fs/write_text_file",
        write_params(&p, "#!/bin/sh\necho new\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&p).unwrap(), b"#!/bin/sh\necho new\n");
    assert_eq!(mode_of(&p), 0o755);
    // Atomic publish: the file was replaced by rename, not rewritten in place.
    assert_ne!(fs::metadata(&p).unwrap().ino(), ino_before);
    let a = s.audit_events();
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0]["type"], "fs.access");
    assert_eq!(a[0]["created"], false);
    assert_eq!(a[0]["bytesBefore"], 4);
    assert!(
        a[0]["hashBefore"]
            .as_str()
            .is_some_and(|h| h.starts_with("sha256:"))
    );
    assert!(temps(&s.ws).is_empty());
}

#[test]
fn crlf_file_stays_crlf() {
    let s = Tree::new(BIN);
    let p = s.ws.join("win.txt");
    fs::write(&p, "one\r\ntwo\r\n").unwrap();
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let r = c.call_id(
        1,
        "fs/write_text_file",
        write_params(&p, "uno\ndos\ntres\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&p).unwrap(), b"uno\r\ndos\r\ntres\r\n");
    // Content that already has CRLF never becomes \r\r\n.
    let r = c.call_id(2, "fs/write_text_file", write_params(&p, "a\r\nb\nc"));
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&p).unwrap(), b"a\r\nb\r\nc");
    assert_eq!(s.audit_events().len(), 2);
}

#[test]
fn write_outside_workspace_is_refused_with_one_denied_event_and_nothing_changes() {
    let s = Tree::new(BIN);
    let outside = s.base.join("outside");
    let evil = s.base.join("ws-evil"); // shares a string prefix with ws
    fs::create_dir(&outside).unwrap();
    fs::create_dir(&evil).unwrap();
    fs::write(s.ws.join("keep.txt"), "keep\n").unwrap();
    // All but the audit log (state/) and the daemon's stderr (logs/).
    let before = snapshot(&s.base, &["state", "logs"]);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let targets = [
        outside.join("x.txt"),
        evil.join("x.txt"),
        s.ws.join("../outside/y.txt"),
    ];
    for (i, t) in (0_i64..).zip(&targets) {
        let r = c.call_id(i, "fs/write_text_file", write_params(t, "nope\n"));
        assert_eq!(r["error"]["code"], -32010, "{t:?}: {r}");
        assert_eq!(
            r["error"]["data"]["errorKind"], "path_outside_workspace",
            "{t:?}: {r}"
        );
        assert_eq!(r["error"]["data"]["status"], 400, "{t:?}: {r}");
    }
    let after = snapshot(&s.base, &["state", "logs"]);
    assert_eq!(before, after, "the file tree must not change");
    let a = s.audit_events();
    assert_eq!(a.len(), 3, "{a:?}");
    for e in &a {
        assert_eq!(e["type"], "fs.denied", "{e}");
        assert_eq!(e["errorKind"], "path_outside_workspace", "{e}");
        assert!(is_hex(e["pathHash"].as_str().unwrap(), 16), "{e}");
    }
}

/// A workspace write creates its missing parent
/// directories (agents write `src/new/mod.rs` directly), inside the
/// workspace only, and lists them in its one audit event.
#[test]
fn a_write_creates_missing_parents_inside_the_workspace() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let p = s.ws.join("missing/dir/a.txt");
    let r = c.call_id(1, "fs/write_text_file", write_params(&p, "x\n"));
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&p).unwrap(), b"x\n");
    for dir in [s.ws.join("missing"), s.ws.join("missing/dir")] {
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & !0o755, 0, "{} has mode {mode:o}", dir.display());
    }
    let a = s.audit_events();
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0]["type"], "fs.access");
    assert_eq!(
        a[0]["createdDirs"].as_array().map(Vec::len),
        Some(2),
        "{a:?}"
    );
}

/// The parent of a missing tail that leads through a symlink out of the
/// workspace is never created: refused, nothing made on either side.
#[test]
fn missing_parents_are_never_created_through_a_symlink() {
    let s = Tree::new(BIN);
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), s.ws.join("out")).unwrap();
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let p = s.ws.join("out/new/a.txt");
    let r = c.call_id(1, "fs/write_text_file", write_params(&p, "x"));
    assert_eq!(r["error"]["data"]["errorKind"], "symlink_escape", "{r}");
    assert!(fs::read_dir(outside.path()).unwrap().next().is_none());
    assert_eq!(s.audit_events().len(), 1);
}

/// A read of a missing file is still `-32002` with the path as `uri`.
#[test]
fn read_of_a_missing_file_is_resource_not_found_with_uri() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&["--allow-read"]);
    let mut c = d.stdio_client();
    let p = s.ws.join("missing/dir/a.txt");
    let r = c.call_id(1, "fs/read_text_file", json!({"sessionId": "s", "path": p}));
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert_eq!(r["error"]["data"]["uri"], json!(p), "{r}");
    assert_eq!(r["error"]["data"]["errorKind"], "path_not_found", "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("Resource not found"), "{msg}");
    assert!(!s.ws.join("missing").exists(), "a read creates nothing");
}

/// A directory where a file is needed is `not_a_file` (not the generic
/// `parse_error`) for a write, an edit and a read, with the path and the
/// next step in the message; the directory and its contents are untouched.
#[test]
fn a_directory_is_not_a_file_for_writes_edits_and_reads() {
    let t = Tree::new(BIN);
    let dir = t.ws.join("sub");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("inner.txt"), "inner\n").unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &["--allow-read"]);
    let path = dir.display().to_string();
    let calls = [
        ("fs/write_text_file", write_params(&dir, "x\n")),
        (
            "_writegate/edit_text_file",
            json!({"sessionId": "s", "path": path, "mode": "append", "content": "x\n"}),
        ),
        (
            "_writegate/read_lines",
            json!({"sessionId": "s", "path": path}),
        ),
    ];
    for (method, params) in calls {
        refused_unchanged(&t, &mut c, &mut audit, method, params.clone(), "not_a_file");
        let r = c.call(method, params);
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("not_a_file: ")
                && message.contains(&path)
                && message.contains("is a directory")
                && message.contains("name a file inside it"),
            "{r}"
        );
        audit.one("fs.denied");
    }
    assert_eq!(fs::read(dir.join("inner.txt")).unwrap(), b"inner\n");
}

#[test]
fn receipt_lists_the_writes_of_the_session() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let a = s.ws.join("a.txt");
    fs::write(&a, "old\n").unwrap();
    let mine =
        |path: &Path, content: &str| json!({"sessionId": "mine", "path": path, "content": content});
    assert_eq!(
        c.call_id(1, "fs/write_text_file", mine(&a, "new content\n"))["result"],
        json!({})
    );
    assert_eq!(
        c.call_id(2, "fs/write_text_file", mine(&s.ws.join("b.txt"), "b"))["result"],
        json!({})
    );
    assert_eq!(
        c.call_id(
            3,
            "fs/write_text_file",
            write_params(&s.ws.join("other.txt"), "o")
        )["result"],
        json!({})
    );
    let r = c.call_id(4, "_writegate/receipt", json!({"sessionId": "mine"}));
    let files = r["result"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(files.len(), 2, "{r}");
    let f = files
        .iter()
        .find(|f| f["path"] == json!(a))
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(f["created"], false, "{r}");
    assert_eq!(f["bytesBefore"], 4, "{r}");
    assert_eq!(f["bytesAfter"], 12, "{r}");
    assert!(
        f["hashAfter"]
            .as_str()
            .is_some_and(|h| h.starts_with("sha256:")),
        "{r}"
    );
    let b = files
        .iter()
        .find(|f| f["path"] == json!(s.ws.join("b.txt")))
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(b["created"], true, "{r}");
    let r = c.call_id(
        5,
        "_writegate/receipt",
        json!({"sessionId": "nobody-wrote"}),
    );
    assert_eq!(r["result"]["files"], json!([]), "{r}");
}

#[test]
fn symlinks_inside_are_followed_and_escapes_refused() {
    let s = Tree::new(BIN);
    let outside = s.base.join("outside");
    fs::create_dir(&outside).unwrap();
    fs::create_dir(s.ws.join("real")).unwrap();
    std::os::unix::fs::symlink(&outside, s.ws.join("out-link")).unwrap();
    std::os::unix::fs::symlink(s.ws.join("real"), s.ws.join("in-link")).unwrap();
    fs::write(s.ws.join("real/target.txt"), "old\n").unwrap();
    std::os::unix::fs::symlink("real/target.txt", s.ws.join("file-link")).unwrap();
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();

    let r = c.call_id(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("out-link/x.txt"), "x"),
    );
    assert_eq!(r["error"]["data"]["errorKind"], "symlink_escape", "{r}");
    assert_eq!(r["error"]["data"]["status"], 400, "{r}");
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written outside"
    );

    let r = c.call_id(
        2,
        "fs/write_text_file",
        write_params(&s.ws.join("in-link/y.txt"), "y"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(s.ws.join("real/y.txt")).unwrap(), b"y");

    // A link to a file inside: the target is written and the link stays a link.
    let r = c.call_id(
        3,
        "fs/write_text_file",
        write_params(&s.ws.join("file-link"), "new\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(
        fs::symlink_metadata(s.ws.join("file-link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(s.ws.join("real/target.txt")).unwrap(), b"new\n");
    assert!(temps(&s.ws).is_empty());
}

#[test]
fn untrusted_workspace_refuses_writes() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&["--untrusted"]);
    let mut c = d.stdio_client();
    let r = c.call_id(1, "initialize", json!({"protocolVersion": 1}));
    assert_eq!(
        r["result"]["_meta"]["writegate"]["workspace"]["trusted"], false,
        "{r}"
    );
    let r = c.call_id(
        2,
        "fs/write_text_file",
        write_params(&s.ws.join("a.txt"), "x"),
    );
    assert_eq!(r["error"]["code"], -32020, "{r}");
    assert_eq!(
        r["error"]["data"]["errorKind"], "untrusted_workspace",
        "{r}"
    );
    assert_eq!(r["error"]["data"]["status"], 403, "{r}");
    assert!(!s.ws.join("a.txt").exists());
    let a = s.audit_events();
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a[0]["type"], "fs.denied");
    assert_eq!(a[0]["errorKind"], "untrusted_workspace");
}

/// Descriptors the process `pid` holds on deleted files named `leaf`
/// (shown as `<path> (deleted)`).
fn deleted_descriptors(pid: u32, leaf: &Path) -> Vec<PathBuf> {
    let shown = format!("{} (deleted)", leaf.display());
    fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .filter(|t| t.as_os_str() == shown.as_str())
        .collect()
}

/// The daemon keeps the replaced file's read descriptor open across the
/// rename and closes it on its release thread
/// (docs/decisions/0002-small-write-latency.md): after a run of overwrites
/// every one of those descriptors is closed, so no replaced file stays
/// allocated and no descriptor leaks.
#[test]
fn overwrites_release_every_replaced_file() {
    let s = Tree::new(BIN);
    let p = s.ws.join("big.txt");
    let mut d = s.socket_daemon(&[]);
    let mut c = d.connect();
    let pid = d.child.id();
    let chunk = "0123456789abcdef\n".repeat(4096); // 68 KiB per version
    for i in 0..200 {
        let r = c.call(
            "fs/write_text_file",
            write_params(&p, &format!("{i}\n{chunk}")),
        );
        assert_eq!(r["result"], json!({}), "{r}");
    }
    assert!(fs::read_to_string(&p).unwrap().starts_with("199\n"));
    // The release thread closes asynchronously: wait for it (bounded).
    let deadline = Instant::now() + TIMEOUT;
    let mut held = deleted_descriptors(pid, &p);
    while !held.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        held = deleted_descriptors(pid, &p);
    }
    assert!(held.is_empty(), "descriptors still open: {held:?}");
    assert!(temps(&s.ws).is_empty());
    drop(c);
    d.signal(Signal::TERM);
    assert!(d.wait_exit().success());
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
}

/// sha256 hex via coreutils' `sha256sum`, if present.
fn sha256_hex(bytes: &[u8]) -> Option<String> {
    let mut cmd = Command::new(find_program("sha256sum")?);
    cmd.env_clear();
    let Finished {
        status,
        stdout: out,
        ..
    } = run_with_stdin(cmd, bytes);
    status
        .success()
        .then(|| out.split_whitespace().next().unwrap_or("").to_string())
}

/// Regression: deleting the line between a line that ends in a
/// lone `\r` and an empty line (or replacing a find there with nothing) was
/// answered `internal_error`, whose hint says to retry, for an edit that can
/// never be built: the `\r` and the next `\n` would read as one `\r\n`. It is
/// `line_ending_conflict` (-32054) naming the line; the file is unchanged,
/// no temp file is left, and the refusal is one `fs.denied` event.
#[test]
fn regression_an_edit_joining_a_lone_cr_and_a_lf_is_line_ending_conflict() {
    let s = Tree::new(BIN);
    let p = s.ws.join("mixed.txt");
    let before = b"one\rtwo\n\nthree\n";
    fs::write(&p, before).unwrap();
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let r = c.call_id(
        1,
        "_writegate/edit_text_file",
        json!({"sessionId": "s", "path": p, "mode": "delete", "line": 2}),
    );
    crate::common::assert_refused(&r, "line_ending_conflict");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("line 1"), "{r}");
    let r = c.call_id(
        2,
        "_writegate/edit_text_file",
        json!({"sessionId": "s", "path": p, "mode": "replace", "find": "two\n", "content": ""}),
    );
    crate::common::assert_refused(&r, "line_ending_conflict");
    assert_eq!(fs::read(&p).unwrap(), before);
    assert!(crate::common::temps(&s.ws).is_empty());
    let events = s.audit_events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| e["type"] == "fs.denied" && e["errorKind"] == "line_ending_conflict")
    );
}

/// Regression: a read refused by the resolver got its generic,
/// path-free hint ("write inside the workspace root; ..."), where a write
/// names what is wrong. Reads name it too now, and say "read".
#[test]
fn regression_read_refusals_name_the_path_and_say_read() {
    let s = Tree::new(BIN);
    // With external writes on, a read outside is served where a marked
    // write would be; off, it is refused in a read's words.
    let mut d = s.stdio_daemon(&["--allow-read", "--no-external-writes"]);
    let mut c = d.stdio_client();
    let device = s.ws.join("aux.ts");
    let outside = s.out.join("elsewhere.txt");
    for (i, method) in ["fs/read_text_file", "_writegate/read_lines"]
        .iter()
        .enumerate()
    {
        let id = i64::try_from(i).unwrap() * 2;
        let r = c.call_id(id, method, json!({"sessionId": "s", "path": device}));
        crate::common::assert_refused(&r, "reserved_name");
        let m = r["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains("aux.ts") && m.contains("DOS device"), "{r}");
        let r = c.call_id(id + 1, method, json!({"sessionId": "s", "path": outside}));
        crate::common::assert_refused(&r, "path_outside_workspace");
        let m = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("read inside") && !m.contains("write inside"),
            "{r}"
        );
    }
}

/// `base` followed by names of 200 bytes and a last one, `total` bytes in
/// all (every name within `NAME_MAX`).
fn path_of_len(base: &Path, total: usize) -> PathBuf {
    let mut p = base.to_path_buf();
    while total - p.as_os_str().len() > 1 + 255 {
        p.push("d".repeat(200));
    }
    let rest = total - p.as_os_str().len() - 1;
    p.push("f".repeat(rest));
    assert_eq!(p.as_os_str().len(), total);
    p
}

/// Defect pinned: a 4,239-byte path was created component by component by the
/// first write, and every later write, edit or read of it failed with
/// `ENAMETOOLONG`. Paths of 4096 bytes or more and names over 255 bytes
/// are refused `parse_error` before anything is created, the message
/// naming the limit.
#[test]
fn paths_over_path_max_and_names_over_name_max_are_refused_before_anything_is_created() {
    let t = Tree::new(BIN);
    let (_d, mut c, mut audit) = stdio_session(&t, &["--allow-read"]);
    let long = path_of_len(&t.ws, 4239);
    let name = t.ws.join("sub").join("n".repeat(256));
    for (target, limit) in [(&long, "(PATH_MAX"), (&name, "(NAME_MAX)")] {
        for (method, mut params) in [
            ("fs/write_text_file", write_params(target, "x\n")),
            ("_writegate/edit_text_file", write_params(target, "x\n")),
            (
                "_writegate/read_lines",
                json!({"sessionId": "s", "path": target}),
            ),
        ] {
            if method == "_writegate/edit_text_file" {
                params["mode"] = json!("append");
            }
            refused_unchanged(
                &t,
                &mut c,
                &mut audit,
                method,
                params.clone(),
                "parse_error",
            );
            let r = c.call(method, params);
            let msg = r["error"]["message"].as_str().unwrap_or_default();
            assert!(msg.starts_with("parse_error: "), "{method}: {r}");
            assert!(msg.contains(limit), "{method}: {msg}");
            assert!(
                msg.len() < 1000,
                "the message does not repeat the path: {msg}"
            );
            audit.one("fs.denied");
        }
    }
    assert_eq!(fs::read_dir(&t.ws).unwrap().count(), 0, "nothing created");
    // The longest path Linux takes still works.
    let at_limit = path_of_len(&t.ws, 4095);
    let r = c.call("fs/write_text_file", write_params(&at_limit, "ok\n"));
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&at_limit).unwrap(), b"ok\n");
}
