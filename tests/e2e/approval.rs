//! The approval gate (SPEC 12): credential and repository paths need
//! approval; the scopes `once`, `session`, `workspace` and `persistent`;
//! the external route; config rules that raise or lower a level.

use crate::common::{
    Audit, BIN, Client, Clients, Opts, Tree, TreeAudit, assert_refused, initialize_in, marker,
    mode_of, stdio_session, temps, write_params,
};
use serde_json::json;
use std::fs;
use std::path::Path;

#[test]
fn approval_gate_refuses_credentials_until_approved_once() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let env = s.ws.join(".env");
    let r = c.call_id(1, "fs/write_text_file", write_params(&env, "A=1\n"));
    assert_eq!(r["error"]["code"], -32022, "{r}");
    assert_eq!(r["error"]["data"]["errorKind"], "approval_required", "{r}");
    assert_eq!(r["error"]["data"]["status"], 403, "{r}");
    let command = r["error"]["data"]["command"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    assert!(command.ends_with("/.env"), "{command}");
    assert!(!env.exists());

    let r = c.call_id(
        2,
        "_writegate/approve",
        json!({"sessionId": "s", "pattern": command, "scope": "once"}),
    );
    assert!(r["result"].is_object(), "{r}");
    let r = c.call_id(3, "fs/write_text_file", write_params(&env, "A=1\n"));
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");
    // "once" is used up.
    let r = c.call_id(4, "fs/write_text_file", write_params(&env, "A=2\n"));
    assert_eq!(r["error"]["data"]["errorKind"], "approval_required", "{r}");
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");
}

#[test]
fn credential_and_repository_paths_need_approval() {
    let t = Tree::new(BIN);
    fs::create_dir(t.ws.join(".ssh")).unwrap();
    fs::create_dir(t.ws.join(".git")).unwrap();
    fs::write(t.ws.join(".git/config"), "[core]\n").unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for rel in [".ssh/config", ".env", "key.pem", ".git/config"] {
        let target = t.ws.join(rel);
        for method in ["fs/write_text_file", "_writegate/edit_text_file"] {
            let mut params = write_params(&target, "x\n");
            let mode = if method == "fs/write_text_file" {
                "write"
            } else {
                params["mode"] = json!("append");
                "append"
            };
            let before = t.snapshot();
            let r = c.call(method, params);
            assert_refused(&r, "approval_required");
            assert_eq!(r["error"]["code"], -32022, "{r}");
            assert_eq!(r["error"]["data"]["status"], 403, "{r}");
            assert_eq!(
                r["error"]["data"]["command"],
                format!("edit_file {mode} {}", target.display()),
                "{r}"
            );
            assert_eq!(t.snapshot(), before, "{rel}: nothing written");
            assert_eq!(audit.one("fs.denied")["errorKind"], "approval_required");
        }
    }
    // An ordinary path needs no approval.
    let r = c.call(
        "fs/write_text_file",
        write_params(&t.ws.join("main.rs"), "fn main() {}\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
}

#[test]
fn approval_once_lets_exactly_the_next_write_through() {
    let t = Tree::new(BIN);
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let target = t.ws.join(".env");
    let command = needs_approval(&t, &mut c, &mut audit, &target, "s1");
    approve(&mut c, &mut audit, "s1", &command, "once");
    // Another session does not consume it.
    needs_approval(&t, &mut c, &mut audit, &target, "s2");
    write_ok(&mut c, &mut audit, &target, "s1", "A=1\n");
    needs_approval(&t, &mut c, &mut audit, &target, "s1");
    assert_eq!(fs::read(&target).unwrap(), b"A=1\n");
}

#[test]
fn approval_session_scope_covers_that_session_only() {
    let t = Tree::new(BIN);
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let target = t.ws.join("key.pem");
    needs_approval(&t, &mut c, &mut audit, &target, "s1");
    approve(&mut c, &mut audit, "s1", "edit_file * */key.pem", "session");
    write_ok(&mut c, &mut audit, &target, "s1", "one\n");
    write_ok(&mut c, &mut audit, &target, "s1", "two\n");
    needs_approval(&t, &mut c, &mut audit, &target, "s2");
    assert_eq!(fs::read(&target).unwrap(), b"two\n");
}

#[test]
fn approval_workspace_scope_covers_every_session_of_that_workspace_only() {
    let t = Tree::new(BIN);
    let mut d = t.daemon(Opts {
        stdio: true,
        socket: true,
        args: &["--workspace", t.wsb.to_str().unwrap()],
        ..Opts::default()
    });
    let mut a = d.stdio_client();
    let mut b = d.connect();
    let r = initialize_in(&mut b, &json!(t.wsb));
    assert!(r.get("result").is_some(), "{r}");
    let mut audit = t.audit();
    approve(
        &mut a,
        &mut audit,
        "s1",
        "edit_file write */.env",
        "workspace",
    );
    for session in ["s1", "s2", "s3"] {
        write_ok(&mut a, &mut audit, &t.ws.join(".env"), session, "A=1\n");
    }
    // The same pattern from a connection of B is not approved.
    needs_approval(&t, &mut b, &mut audit, &t.wsb.join(".env"), "s1");
}

#[test]
fn approval_persistent_survives_a_restart_and_is_stored_0600() {
    let t = Tree::new(BIN);
    fs::create_dir(t.ws.join(".ssh")).unwrap();
    let target = t.ws.join(".ssh/config");
    let other = t.ws.join("id_rsa");
    let mut audit = t.audit();
    {
        let mut d = t.stdio_daemon(&[]);
        let mut c = d.stdio_client();
        let command = needs_approval(&t, &mut c, &mut audit, &target, "s1");
        approve(&mut c, &mut audit, "s1", &command, "persistent");
        write_ok(&mut c, &mut audit, &target, "s1", "Host a\n");
        write_ok(&mut c, &mut audit, &target, "s2", "Host b\n");
        c.close_write();
        assert!(d.wait_exit().success(), "{}", d.stderr_text());
    }
    let file = t.base.join("state/writegate/approvals.json");
    assert_eq!(mode_of(&file), 0o600);
    assert!(
        fs::read_to_string(&file)
            .unwrap()
            .contains(&format!("edit_file write {}", target.display())),
        "{}",
        fs::read_to_string(&file).unwrap()
    );
    assert!(temps(&t.base.join("state")).is_empty());
    // Same XDG_STATE_HOME, new process: still approved, nothing else is.
    let mut d = t.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    write_ok(&mut c, &mut audit, &target, "s9", "Host c\n");
    assert_eq!(fs::read(&target).unwrap(), b"Host c\n");
    needs_approval(&t, &mut c, &mut audit, &other, "s9");
}

#[test]
fn the_approval_gate_also_applies_on_the_external_route() {
    let t = Tree::new(BIN);
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let target = t.out.join(".env");
    let params = json!({"sessionId": "s1", "path": target, "content": "K=v\n", "_meta": marker("write_file")});
    let before = t.snapshot();
    let r = c.call("fs/write_text_file", params.clone());
    assert_refused(&r, "approval_required");
    assert_eq!(
        r["error"]["data"]["command"],
        format!("edit_file write {}", target.display()),
        "{r}"
    );
    assert_eq!(t.snapshot(), before);
    let ev = audit.one("fs.denied");
    assert_eq!(ev["errorKind"], "approval_required", "{ev}");
    assert_eq!(ev["writer"], "external", "{ev}");
    approve(
        &mut c,
        &mut audit,
        "s1",
        r["error"]["data"]["command"].as_str().unwrap(),
        "once",
    );
    let r = c.call("fs/write_text_file", params);
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&target).unwrap(), b"K=v\n");
    assert_eq!(audit.one("fs.access")["writer"], "external");
}

#[test]
fn a_config_rule_raises_an_ordinary_path_and_auto_approve_dangerous_lets_credentials_through() {
    let t = Tree::new(BIN);
    fs::create_dir(t.ws.join("generated")).unwrap();
    fs::create_dir(t.ws.join(".ssh")).unwrap();
    let raise = t.base.join("config/raise.toml");
    fs::write(
        &raise,
        "[policy]\nrules = [{pattern = \"edit_file * */generated/*\", level = \"dangerous\"}]\n",
    )
    .unwrap();
    let mut audit = t.audit();
    {
        let mut d = t.stdio_daemon(&["--config", raise.to_str().unwrap()]);
        let mut c = d.stdio_client();
        needs_approval(&t, &mut c, &mut audit, &t.ws.join("generated/x.ts"), "s");
        write_ok(&mut c, &mut audit, &t.ws.join("src.ts"), "s", "ok\n");
    }
    let lax = t.base.join("config/lax.toml");
    fs::write(&lax, "[policy]\nauto_approve = \"dangerous\"\n").unwrap();
    let mut d = t.stdio_daemon(&["--config", lax.to_str().unwrap()]);
    let mut c = d.stdio_client();
    for rel in [".env", ".ssh/config", "key.pem"] {
        write_ok(&mut c, &mut audit, &t.ws.join(rel), "s", "ok\n");
    }
}

/// Defect pinned: a write, append or edit of a read-only file (mode 0444)
/// replaced it silently through `serve`. It is held now (reason "read-only
/// file"), leaving the tree as it was and no temp file; once the refused
/// command is approved, the write lands and the file stays 0444.
#[test]
fn a_read_only_file_is_held_until_approved() {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new(BIN);
    let target = t.ws.join("frozen.txt");
    fs::write(&target, "keep me\n").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o444)).unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let mut last = None;
    for (method, mode) in [
        ("fs/write_text_file", "write"),
        ("_writegate/edit_text_file", "append"),
        ("_writegate/edit_text_file", "replace"),
    ] {
        let mut params = write_params(&target, "changed\n");
        if mode != "write" {
            params["mode"] = json!(mode);
        }
        if mode == "replace" {
            params["find"] = json!("keep");
            params["content"] = json!("changed");
        }
        let before = t.snapshot();
        let r = c.call(method, params.clone());
        assert_refused(&r, "approval_required");
        let data = &r["error"]["data"];
        assert_eq!(
            data["command"],
            format!("edit_file {mode} {}", target.display()),
            "{r}"
        );
        assert_eq!(data["level"], "dangerous", "{r}");
        assert!(
            data["reason"]
                .as_str()
                .unwrap()
                .starts_with("read-only file (mode 0444)"),
            "{r}"
        );
        assert_eq!(t.snapshot(), before, "{mode}: nothing written");
        assert!(temps(&t.ws).is_empty());
        assert_eq!(audit.one("fs.denied")["errorKind"], "approval_required");
        last = Some((
            method,
            params,
            data["command"].as_str().unwrap().to_string(),
        ));
    }
    let (method, params, command) = last.unwrap();
    let r = c.call(
        "_writegate/approve",
        json!({"sessionId": "s", "command": command, "scope": "once"}),
    );
    assert!(r["result"].is_object(), "{r}");
    audit.one("approval.grant");
    let r = c.call(method, params);
    assert!(r["result"].is_object(), "{r}");
    assert_eq!(fs::read(&target).unwrap(), b"changed me\n");
    assert_eq!(mode_of(&target), 0o444, "the file keeps its mode");
    assert!(temps(&t.ws).is_empty());
    assert_eq!(audit.one("fs.access")["mode"], "replace");
}

/// Defect pinned: NTFS spellings of protected names (an 8.3 short name, an
/// alternate data stream) were ordinary names, written without asking.
/// Through `serve` they are held like the names they stand for, and
/// nothing is created.
#[test]
fn ntfs_spellings_of_protected_names_are_held() {
    let t = Tree::new(BIN);
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for rel in [
        "GIT~1/config",
        "ENV~1",
        ".git::$INDEX_ALLOCATION/config",
        ".env::$DATA",
        ".env:stream",
        "SSH~1/authorized_keys",
    ] {
        let target = t.ws.join(rel);
        let before = t.snapshot();
        let r = c.call("fs/write_text_file", write_params(&target, "x\n"));
        assert_refused(&r, "approval_required");
        assert_eq!(r["error"]["data"]["level"], "dangerous", "{rel}: {r}");
        assert_eq!(t.snapshot(), before, "{rel}: nothing created");
        assert_eq!(audit.one("fs.denied")["errorKind"], "approval_required");
    }
    assert!(temps(&t.ws).is_empty());
}

/// A write to `target` by `session` is refused with `approval_required`;
/// returns the synthetic command.
fn needs_approval(
    t: &Tree,
    c: &mut Client,
    audit: &mut Audit,
    target: &Path,
    session: &str,
) -> String {
    let before = t.snapshot();
    let r = c.call(
        "fs/write_text_file",
        json!({"sessionId": session, "path": target, "content": "needs approval\n"}),
    );
    assert_refused(&r, "approval_required");
    let command = format!("edit_file write {}", target.display());
    assert_eq!(r["error"]["data"]["command"], command, "{r}");
    assert_eq!(t.snapshot(), before, "nothing written");
    let ev = audit.one("fs.denied");
    assert_eq!(ev["errorKind"], "approval_required", "{ev}");
    assert_eq!(ev["sessionId"], session, "{ev}");
    command
}

/// Approves, and checks the grant's one `approval.grant` audit event
/// (every grant is audited, without raw text by default).
fn approve(c: &mut Client, audit: &mut Audit, session: &str, pattern: &str, scope: &str) {
    let r = c.call(
        "_writegate/approve",
        json!({"sessionId": session, "pattern": pattern, "scope": scope}),
    );
    assert!(r.get("result").is_some(), "{r}");
    let ev = audit.one("approval.grant");
    assert_eq!(ev["scope"], scope, "{ev}");
    assert_eq!(ev["sessionId"], session, "{ev}");
    assert!(
        ev.get("pattern").is_none() && ev.get("command").is_none(),
        "{ev}"
    );
}

fn write_ok(c: &mut Client, audit: &mut Audit, target: &Path, session: &str, content: &str) {
    let r = c.call(
        "fs/write_text_file",
        json!({"sessionId": session, "path": target, "content": content}),
    );
    assert_eq!(r["result"], json!({}), "{}: {r}", target.display());
    assert_eq!(fs::read_to_string(target).unwrap(), content);
    assert_eq!(audit.one("fs.access")["sessionId"], session);
}
