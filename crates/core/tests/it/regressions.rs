//! Regression tests named after the issue that found the defect.

use crate::world;
use std::path::Path;
use std::sync::Arc;
use writegate_core::{EditMode, EditParams, WriteOptions};
use writegate_testkit::{BindMount, mode_of, names};

fn append(path: &Path, line: impl Into<String>) -> EditParams {
    EditParams::new(path, EditMode::Append, line)
}

/// Defect pinned: the path lock was keyed by path text, so a directory
/// reachable by two canonical paths (a bind mount) got two locks, and
/// concurrent appends through both lost acknowledged updates. The lock is
/// now keyed by the directory's device and inode plus the leaf.
#[test]
fn appends_through_a_bind_mount_lose_nothing() {
    let w = Arc::new(world());
    let root = w.root.clone();
    std::fs::create_dir(root.join("real")).unwrap();
    std::fs::create_dir(root.join("alias")).unwrap();
    let Some(_bind) = BindMount::new(&root.join("real"), &root.join("alias")) else {
        return;
    };
    std::fs::write(root.join("real/log.txt"), b"").unwrap();
    let (threads, per) = (8, 60);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let w = w.clone();
            let dir = root.join(if t % 2 == 0 { "real" } else { "alias" });
            std::thread::spawn(move || {
                let mut ctx = w.ctx();
                ctx.session_id = Some(format!("t{t}"));
                for i in 0..per {
                    w.svc
                        .edit_text_file(&ctx, &append(&dir.join("log.txt"), format!("{t} {i}\n")))
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
    assert_eq!(w.svc.live_locks(), 0);
}

/// Defect pinned: a write, append or edit of a file whose
/// owner write bit is off replaced it silently (the atomic rename needs
/// only the directory's permission, and the new file kept 0444). The gate
/// holds it now (`approval_required`, reason "read-only file"), leaving
/// the file byte-identical and no temp file; approved, the write lands and
/// the file keeps its mode.
#[test]
fn a_read_only_file_is_not_replaced_silently() {
    use std::os::unix::fs::PermissionsExt;
    use writegate_core::policy::{Grant, Scope};
    use writegate_core::{Detail, ErrorKind, Failure, WriteParams};
    let w = world();
    let (svc, ctx, root) = (&w.svc, w.ctx(), &w.root);
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
    let mut replace = append(&f, "changed");
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
        assert_eq!(names(root), ["frozen.txt"], "no temp file");
        command
    };
    held(svc.write_text_file(&ctx, &write("new\n")).map(|_| ()));
    held(svc.edit_text_file(&ctx, &append(&f, "more\n")).map(|_| ()));
    let command = held(svc.edit_text_file(&ctx, &replace).map(|_| ()));
    assert!(command.starts_with("edit_file replace "), "{command}");
    // Approved, the edit lands and the file stays read-only.
    svc.approve(&ctx, &Grant::Command(command), Scope::Once)
        .unwrap();
    svc.edit_text_file(&ctx, &replace).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"changed me\n");
    assert_eq!(mode_of(&f), 0o444);
    assert_eq!(names(root), ["frozen.txt"]);
    // A writable file is not held.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    svc.write_text_file(&ctx, &write("free\n")).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"free\n");
}

/// Defect pinned: a path over `PATH_MAX` was created component by component by
/// the first write (its missing tail is never looked up), and every later
/// write, edit or read failed with `ENAMETOOLONG`. It is refused
/// `parse_error` before anything is created, and so is a name over
/// `NAME_MAX`.
#[test]
fn a_path_over_path_max_is_refused_before_anything_is_created() {
    use writegate_core::{ErrorKind, Failure, WriteParams};
    let w = world();
    let (svc, ctx, root) = (&w.svc, w.ctx(), &w.root);
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
        assert!(names(root).is_empty(), "nothing created: {:?}", names(root));
        let r = svc.edit_text_file(&ctx, &append(&path, "x\n"));
        assert!(
            matches!(&r, Err(Failure::Refused(r)) if r.kind == ErrorKind::ParseError),
            "{r:?}"
        );
        assert!(names(root).is_empty());
    }
}
