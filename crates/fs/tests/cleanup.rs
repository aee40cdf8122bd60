//! Start-up removal of stale temp files (SPEC 7.3, last bullet).

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use writegate_fs::remove_stale_temps;
use writegate_testkit::tempdir;

/// A pid that belonged to a process that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn removes_only_dead_process_temps() {
    let (_t, base) = tempdir();
    let root = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let dead = dead_pid();
    let me = std::process::id();
    let hex = "0123456789ab";

    let removable = [
        root.join(format!(".a.txt.{dead}.{hex}.tmp")),
        root.join(format!("sub/deeper/.b.rs.{dead}.ffffffffffff.tmp")),
        root.join(format!("sub/.with.dots.{dead}.{hex}.tmp")),
    ];
    let kept = [
        root.join(format!(".mine.{me}.{hex}.tmp")),
        root.join(format!(".upper.{dead}.0123456789AB.tmp")),
        root.join(format!(".{dead}.{hex}.tmp")),
        root.join(format!(".bak.{dead}.{hex}.tmp.bak")),
        root.join(format!(".init.1.{hex}.tmp")),
        root.join("unrelated.txt"),
        root.join(format!("a.{dead}.{hex}.tmp")),
    ];
    for p in removable.iter().chain(kept.iter()) {
        std::fs::write(p, b"x").unwrap();
    }
    // A symlink with a temp name, and a directory with one.
    let outside_file = outside.join(format!(".o.{dead}.{hex}.tmp"));
    std::fs::write(&outside_file, b"outside").unwrap();
    let link = root.join(format!(".link.{dead}.{hex}.tmp"));
    symlink(&outside_file, &link).unwrap();
    let dir_named = root.join(format!(".dir.{dead}.{hex}.tmp"));
    std::fs::create_dir(&dir_named).unwrap();
    // A symlinked directory pointing outside is never entered.
    symlink(&outside, root.join("linked-dir")).unwrap();

    let mut removed = remove_stale_temps(&root);
    removed.sort();
    let mut want: Vec<PathBuf> = removable.to_vec();
    want.sort();
    assert_eq!(removed, want);
    for p in &removable {
        assert!(!p.exists(), "{} still there", p.display());
    }
    for p in &kept {
        assert!(p.exists(), "{} removed", p.display());
    }
    assert!(std::fs::symlink_metadata(&link).is_ok());
    assert!(dir_named.is_dir());
    assert_eq!(std::fs::read(&outside_file).unwrap(), b"outside");

    // Running again finds nothing.
    assert!(remove_stale_temps(&root).is_empty());
}

#[test]
fn unopenable_root_yields_nothing() {
    let (_t, base) = tempdir();
    assert!(remove_stale_temps(&base.join("missing")).is_empty());
    std::fs::create_dir(base.join("real")).unwrap();
    symlink(base.join("real"), base.join("alias")).unwrap();
    let dead = dead_pid();
    let f = base.join(format!("real/.x.{dead}.0123456789ab.tmp"));
    std::fs::write(&f, b"").unwrap();
    // A non-canonical root (a symlink) is refused, not followed.
    assert!(remove_stale_temps(&base.join("alias")).is_empty());
    assert!(f.exists());
}
