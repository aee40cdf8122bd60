//! Regression tests named after the issue that found the defect.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use writegate_core::{
    Allowances, Config, EditMode, EditParams, OpCtx, Registry, Service, WriteOptions,
};

fn append(path: &Path, line: String) -> EditParams {
    EditParams {
        path: path.to_path_buf(),
        mode: EditMode::Append,
        content: Some(line),
        find: None,
        line: None,
        end_line: None,
        expected_hash: None,
        dry_run: false,
        options: WriteOptions::default(),
        marker: None,
        convert_encoding: false,
    }
}

/// Unmounts a bind mount when dropped (also when the test fails).
struct Bind(PathBuf);

impl Drop for Bind {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Issue 13 item 2: the path lock was keyed by path text, so a directory
/// reachable by two canonical paths (a bind mount) got two locks, and
/// concurrent appends through both lost acknowledged updates. The lock is
/// now keyed by the directory's device and inode plus the leaf.
#[test]
fn issue_13_appends_through_a_bind_mount_lose_nothing() {
    if writegate_fs::current_uid() != 0 {
        eprintln!("skipped: a bind mount needs root");
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(root.join("real")).unwrap();
    std::fs::create_dir(root.join("alias")).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["--bind"])
        .arg(root.join("real"))
        .arg(root.join("alias"))
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: mount --bind is not allowed here");
        return;
    }
    let _bind = Bind(root.join("alias"));
    std::fs::write(root.join("real/log.txt"), b"").unwrap();
    let registry = Registry::default();
    let rt = registry.register(&root, true).unwrap();
    let svc = Arc::new(Service::new(
        Config::default(),
        registry,
        &state.path().join("audit.jsonl"),
        state.path().join("approvals.json"),
    ));
    let (threads, per) = (8, 60);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let svc = svc.clone();
            let rt = rt.clone();
            let dir = root.join(if t % 2 == 0 { "real" } else { "alias" });
            std::thread::spawn(move || {
                let ctx = OpCtx {
                    runtime: rt,
                    session_id: Some(format!("t{t}")),
                    allows: Allowances::NONE,
                    route: "test",
                    cancel: Arc::new(AtomicBool::new(false)),
                    approver: None,
                    client_root: false,
                };
                for i in 0..per {
                    svc.edit_text_file(&ctx, &append(&dir.join("log.txt"), format!("{t} {i}\n")))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let text = std::fs::read_to_string(root.join("real/log.txt")).unwrap();
    let lines: std::collections::BTreeSet<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        threads * per,
        "lost updates: {} of {} appends landed",
        lines.len(),
        threads * per
    );
    assert_eq!(svc.live_locks(), 0);
}

/// A service over a fresh trusted workspace: (service, context of session
/// `s`, canonical root, the temp dirs to keep alive).
fn workspace() -> (
    Service,
    OpCtx,
    PathBuf,
    (tempfile::TempDir, tempfile::TempDir),
) {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let registry = Registry::default();
    let rt = registry.register(&root, true).unwrap();
    let svc = Service::new(
        Config::default(),
        registry,
        &state.path().join("audit.jsonl"),
        state.path().join("approvals.json"),
    );
    let ctx = OpCtx {
        runtime: rt,
        session_id: Some("s".into()),
        allows: Allowances::NONE,
        route: "test",
        cancel: Arc::new(AtomicBool::new(false)),
        approver: None,
        client_root: false,
    };
    (svc, ctx, root, (ws, state))
}

/// The names in `dir`, sorted (a temp file left behind would show).
fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

fn mode_of(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Issue 25 (trust at the seams): a write, append or edit of a file whose
/// owner write bit is off replaced it silently (the atomic rename needs
/// only the directory's permission, and the new file kept 0444). The gate
/// holds it now (`approval_required`, reason "read-only file"), leaving
/// the file byte-identical and no temp file; approved, the write lands and
/// the file keeps its mode.
#[test]
fn issue_25_a_read_only_file_is_not_replaced_silently() {
    use std::os::unix::fs::PermissionsExt;
    use writegate_core::policy::{Grant, Scope};
    use writegate_core::{Detail, ErrorKind, Failure, WriteParams};
    let (svc, ctx, root, _keep) = workspace();
    let f = root.join("frozen.txt");
    std::fs::write(&f, b"keep me\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
    let write = |content: &str| WriteParams {
        path: f.clone(),
        content: content.into(),
        options: WriteOptions::default(),
        marker: None,
        convert_encoding: false,
    };
    let mut replace = append(&f, "changed".into());
    replace.mode = EditMode::Replace;
    replace.find = Some("keep".into());
    let held = |r: Result<(), Failure>| {
        let Err(Failure::Refused(r)) = r else {
            panic!("expected approval_required, got {r:?}")
        };
        assert_eq!(r.kind, ErrorKind::ApprovalRequired, "{}", r.hint);
        assert!(r.hint.contains("read-only file (mode 0444)"), "{}", r.hint);
        let Some(Detail::Approval {
            command, reason, ..
        }) = r.detail
        else {
            panic!("no approval detail")
        };
        assert!(reason.starts_with("read-only file"), "{reason}");
        assert_eq!(std::fs::read(&f).unwrap(), b"keep me\n");
        assert_eq!(mode_of(&f), 0o444);
        assert_eq!(names(&root), ["frozen.txt"], "no temp file");
        command
    };
    held(svc.write_text_file(&ctx, &write("new\n")).map(|_| ()));
    held(
        svc.edit_text_file(&ctx, &append(&f, "more\n".into()))
            .map(|_| ()),
    );
    let command = held(svc.edit_text_file(&ctx, &replace).map(|_| ()));
    assert!(command.starts_with("edit_file replace "), "{command}");
    // Approved, the edit lands and the file stays read-only.
    svc.approve(&ctx, &Grant::Command(command), Scope::Once)
        .unwrap();
    svc.edit_text_file(&ctx, &replace).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"changed me\n");
    assert_eq!(mode_of(&f), 0o444);
    assert_eq!(names(&root), ["frozen.txt"]);
    // A writable file is not held.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    svc.write_text_file(&ctx, &write("free\n")).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"free\n");
}

/// Issue 25: a path over `PATH_MAX` was created component by component by
/// the first write (its missing tail is never looked up), and every later
/// write, edit or read failed with `ENAMETOOLONG`. It is refused
/// `parse_error` before anything is created, and so is a name over
/// `NAME_MAX`.
#[test]
fn issue_25_a_path_over_path_max_is_refused_before_anything_is_created() {
    use writegate_core::{ErrorKind, Failure, WriteParams};
    let (svc, ctx, root, _keep) = workspace();
    let mut long = root.clone();
    while long.as_os_str().len() < 4239 - 201 {
        long.push("d".repeat(200));
    }
    long.push("f".repeat(4239 - long.as_os_str().len() - 1));
    assert_eq!(long.as_os_str().len(), 4239);
    for (path, limit) in [
        (long, "PATH_MAX"),
        (root.join("sub").join("n".repeat(256)), "NAME_MAX"),
    ] {
        let r = svc.write_text_file(
            &ctx,
            &WriteParams {
                path: path.clone(),
                content: "x\n".into(),
                options: WriteOptions::default(),
                marker: None,
                convert_encoding: false,
            },
        );
        let Err(Failure::Refused(r)) = r else {
            panic!("expected parse_error, got {r:?}")
        };
        assert_eq!(r.kind, ErrorKind::ParseError, "{}", r.hint);
        assert!(r.hint.contains(limit), "{}", r.hint);
        assert!(
            names(&root).is_empty(),
            "nothing created: {:?}",
            names(&root)
        );
        let r = svc.edit_text_file(&ctx, &append(&path, "x\n".into()));
        assert!(
            matches!(&r, Err(Failure::Refused(r)) if r.kind == ErrorKind::ParseError),
            "{r:?}"
        );
        assert!(names(&root).is_empty());
    }
}
