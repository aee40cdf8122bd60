//! Permission refusals: the daemon running as `nobody` (switched with
//! `setpriv`, so it needs root) is refused with `permission_denied` and
//! changes nothing.

use crate::common::{
    BIN, Clients, Daemon, Tree, TreeAudit, find_program, nobody_reachable_binary, running_as_root,
    snapshot, temps, write_params,
};
use serde_json::json;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

/// A tree whose workspace, home, state, config and runtime directories
/// belong to nobody (uid and gid 65534), reachable by nobody.
fn nobody_tree() -> Tree {
    let s = Tree::new(BIN);
    fs::set_permissions(&s.base, fs::Permissions::from_mode(0o755)).unwrap();
    for d in ["ws", "home", "state", "config", "run"] {
        std::os::unix::fs::chown(s.base.join(d), Some(65534), Some(65534)).unwrap();
    }
    s
}

/// `writegate serve --stdio` on `s`'s workspace, run as nobody by `setpriv`.
fn nobody_daemon(s: &Tree, setpriv: &Path) -> Daemon {
    let bin = nobody_reachable_binary(&s.base);
    let mut cmd = Command::new(setpriv);
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["serve", "--stdio", "--workspace"])
        .arg(&s.ws)
        .arg("--audit-log")
        .arg(&s.audit_log);
    s.set_env(&mut cmd);
    s.spawn(cmd, true, None)
}

#[test]
fn permission_denied_when_the_daemon_runs_as_nobody() {
    if !running_as_root("permission_denied_when_the_daemon_runs_as_nobody") {
        return;
    }
    let Some(setpriv) = find_program("setpriv") else {
        eprintln!("note: setpriv is missing; skipping the permission test");
        return;
    };
    let s = nobody_tree();
    // A root-owned directory nobody cannot write into, with a file in it.
    let locked = s.ws.join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(locked.join("f.txt"), "original\n").unwrap();
    fs::set_permissions(locked.join("f.txt"), fs::Permissions::from_mode(0o644)).unwrap();
    // A root-owned 0600 file in nobody's own directory. (A read-only one,
    // 0400, is held by the approval gate before anything reads it: below.)
    let secret = s.ws.join("secret.txt");
    fs::write(&secret, "top secret\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let frozen = s.ws.join("frozen.txt");
    fs::write(&frozen, "top secret\n").unwrap();
    fs::set_permissions(&frozen, fs::Permissions::from_mode(0o400)).unwrap();
    let mut d = nobody_daemon(&s, &setpriv);
    let mut c = d.stdio_client();

    // The daemon really runs as nobody: what it creates belongs to nobody.
    let ok = s.ws.join("ok.txt");
    let r = c.call_id(1, "fs/write_text_file", write_params(&ok, "fine\n"));
    assert_eq!(r["result"], json!({}), "{r}\n{}", d.stderr_text());
    assert_eq!(fs::metadata(&ok).unwrap().uid(), 65534);

    let before = snapshot(&s.ws, &[]);
    let refused = [
        ("write", locked.join("f.txt")),
        ("write", locked.join("new.txt")),
        ("write", secret.clone()),
        ("append", locked.join("f.txt")),
    ];
    for (i, (mode, p)) in (0_i64..).zip(&refused) {
        let r = if *mode == "write" {
            c.call_id(
                10 + i,
                "fs/write_text_file",
                write_params(p, "overwritten\n"),
            )
        } else {
            c.call_id(
                10 + i,
                "_writegate/edit_text_file",
                json!({"sessionId": "s", "path": p, "mode": "append", "content": "more\n"}),
            )
        };
        assert_eq!(r["error"]["code"], -32021, "{mode} {p:?}: {r}");
        assert_eq!(
            r["error"]["data"]["errorKind"], "permission_denied",
            "{mode} {p:?}: {r}"
        );
        assert_eq!(r["error"]["data"]["status"], 403, "{mode} {p:?}: {r}");
    }
    let r = c.call_id(20, "fs/write_text_file", write_params(&frozen, "x\n"));
    assert_eq!(r["error"]["data"]["errorKind"], "approval_required", "{r}");
    assert_eq!(
        snapshot(&s.ws, &[]),
        before,
        "refused writes change nothing"
    );
    assert_eq!(fs::read(locked.join("f.txt")).unwrap(), b"original\n");
    assert_eq!(fs::read(&secret).unwrap(), b"top secret\n");
    assert_eq!(fs::read(&frozen).unwrap(), b"top secret\n");
    assert!(!locked.join("new.txt").exists());
    assert!(temps(&s.ws).is_empty(), "no temp file left");
    let a = s.audit_events();
    let denied: Vec<_> = a.iter().filter(|e| e["type"] == "fs.denied").collect();
    assert_eq!(denied.len(), 5, "{a:?}");
    assert!(
        denied[..4]
            .iter()
            .all(|e| e["errorKind"] == "permission_denied"),
        "{a:?}"
    );
    assert_eq!(denied[4]["errorKind"], "approval_required", "{a:?}");
}

/// The read a write or an edit makes of the file it replaces asks for
/// `O_NOATIME`, which the kernel refuses (`EPERM`) to anyone but the
/// file's owner. A file of another owner in a directory the daemon may
/// write is still replaced, and still edited, as before the flag.
#[test]
fn a_file_of_another_owner_is_replaced_without_o_noatime() {
    if !running_as_root("a_file_of_another_owner_is_replaced_without_o_noatime") {
        return;
    }
    let Some(setpriv) = find_program("setpriv") else {
        eprintln!("note: setpriv is missing; skipping the permission test");
        return;
    };
    let s = nobody_tree();
    // Root's files, readable by all, in nobody's own directory.
    let (whole, edited) = (s.ws.join("root-whole.txt"), s.ws.join("root-edit.txt"));
    for f in [&whole, &edited] {
        fs::write(f, "one\r\ntwo\r\n").unwrap();
        fs::set_permissions(f, fs::Permissions::from_mode(0o644)).unwrap();
    }
    let mut d = nobody_daemon(&s, &setpriv);
    let mut c = d.stdio_client();

    let r = c.call_id(1, "fs/write_text_file", write_params(&whole, "uno\ndos\n"));
    assert_eq!(r["result"], json!({}), "{r}\n{}", d.stderr_text());
    let r = c.call_id(
        2,
        "_writegate/edit_text_file",
        json!({"sessionId": "s", "path": edited, "mode": "replace", "line": 2, "content": "2"}),
    );
    assert!(r["result"].is_object(), "{r}\n{}", d.stderr_text());
    // The line endings were read from the old files: they were read.
    assert_eq!(fs::read(&whole).unwrap(), b"uno\r\ndos\r\n");
    assert_eq!(fs::read(&edited).unwrap(), b"one\r\n2\r\n");
    for f in [&whole, &edited] {
        let m = fs::metadata(f).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (65534, 0o644), "{f:?}");
    }
    assert!(temps(&s.ws).is_empty(), "no temp file left");
}
