//! Permission refusals: the daemon running as `nobody` (switched with
//! `setpriv`, so it needs root) is refused with `permission_denied` and
//! changes nothing.

use crate::common::{
    Tree, find_program, nobody_reachable_binary, running_as_root, snapshot, temps, write_params,
};
use serde_json::json;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;

#[test]
fn permission_denied_when_the_daemon_runs_as_nobody() {
    if !running_as_root("permission_denied_when_the_daemon_runs_as_nobody") {
        return;
    }
    let Some(setpriv) = find_program("setpriv") else {
        eprintln!("note: setpriv is missing; skipping the permission test");
        return;
    };
    let s = Tree::new();
    // Make the tree reachable by nobody and give it its own dirs.
    fs::set_permissions(&s.base, fs::Permissions::from_mode(0o755)).unwrap();
    for d in ["ws", "home", "state", "config", "run"] {
        std::os::unix::fs::chown(s.base.join(d), Some(65534), Some(65534)).unwrap();
    }
    // A root-owned directory nobody cannot write into, with a file in it.
    let locked = s.ws.join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(locked.join("f.txt"), "original\n").unwrap();
    fs::set_permissions(locked.join("f.txt"), fs::Permissions::from_mode(0o644)).unwrap();
    // A root-owned 0400 file in nobody's own directory.
    let secret = s.ws.join("secret.txt");
    fs::write(&secret, "top secret\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o400)).unwrap();
    let bin = nobody_reachable_binary(&s.base);

    let mut cmd = Command::new(&setpriv);
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["serve", "--stdio", "--workspace"])
        .arg(&s.ws)
        .arg("--audit-log")
        .arg(&s.audit_log);
    s.set_env(&mut cmd);
    let mut d = s.spawn(cmd, true, false);
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
    assert_eq!(
        snapshot(&s.ws, &[]),
        before,
        "refused writes change nothing"
    );
    assert_eq!(fs::read(locked.join("f.txt")).unwrap(), b"original\n");
    assert_eq!(fs::read(&secret).unwrap(), b"top secret\n");
    assert!(!locked.join("new.txt").exists());
    assert!(temps(&s.ws).is_empty(), "no temp file left");
    let a = s.audit_events();
    let denied: Vec<_> = a.iter().filter(|e| e["type"] == "fs.denied").collect();
    assert_eq!(denied.len(), 4, "{a:?}");
    assert!(
        denied.iter().all(|e| e["errorKind"] == "permission_denied"),
        "{a:?}"
    );
}
