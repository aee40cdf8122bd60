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
        content: line,
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
