//! The append-only log (SPEC 10) and the private state-file writer (SPEC 12).

mod common;

use std::collections::HashSet;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::sync::Arc;

use common::{assert_err, mode, names, tempdir};
use writegate_fs::{AppendLog, FsError, write_private_file};

#[test]
fn whole_lines_from_many_threads() {
    const THREADS: usize = 8;
    const LINES: usize = 300;
    let (_t, base) = tempdir();
    let path = base.join("state/writegate/audit.jsonl");
    let log = Arc::new(AppendLog::open(&path).unwrap());
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&base.join("state")), 0o700);
    assert_eq!(mode(&base.join("state/writegate")), 0o700);
    let pad = |t: usize, i: usize| "x".repeat((t * 7919 + i * 37) % 6000);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..LINES {
                    let line = format!("{{\"t\":{t},\"i\":{i},\"pad\":\"{}\"}}", pad(t, i));
                    if i % 2 == 0 {
                        log.append(line.as_bytes()).unwrap();
                    } else {
                        log.append(format!("{line}\n").as_bytes()).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    log.sync().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'));
    let mut seen = HashSet::new();
    for line in text.lines() {
        let rest = line.strip_prefix("{\"t\":").expect(line);
        let (t, rest) = rest.split_once(",\"i\":").unwrap();
        let (i, rest) = rest.split_once(",\"pad\":\"").unwrap();
        let (t, i): (usize, usize) = (t.parse().unwrap(), i.parse().unwrap());
        assert_eq!(rest, format!("{}\"}}", pad(t, i)));
        assert!(seen.insert((t, i)));
    }
    assert_eq!(seen.len(), THREADS * LINES);

    // Reopening appends.
    drop(log);
    let log = AppendLog::open(&path).unwrap();
    log.append(b"last").unwrap();
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .ends_with("}\nlast\n")
    );
}

#[test]
fn refuses_interior_newline_and_symlink() {
    let (_t, base) = tempdir();
    let path = base.join("audit.jsonl");
    let log = AppendLog::open(&path).unwrap();
    let err = log.append(b"a\nb").unwrap_err();
    assert!(matches!(err, FsError::InvalidInput { .. }), "{err:?}");
    log.append(b"\n").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"\n");

    std::fs::write(base.join("target"), b"t").unwrap();
    symlink(base.join("target"), base.join("link.jsonl")).unwrap();
    assert_err!(
        AppendLog::open(&base.join("link.jsonl")),
        FsError::SymlinkEscape { .. }
    );
    assert_eq!(std::fs::read(base.join("target")).unwrap(), b"t");
}

#[test]
fn existing_log_keeps_its_mode() {
    let (_t, base) = tempdir();
    let path = base.join("audit.jsonl");
    std::fs::write(&path, b"old\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    AppendLog::open(&path).unwrap().append(b"new").unwrap();
    assert_eq!(mode(&path), 0o640);
    assert_eq!(std::fs::read(&path).unwrap(), b"old\nnew\n");
}

#[test]
fn private_file_is_0600_and_atomic() {
    let (_t, base) = tempdir();
    let path = base.join("state/writegate/approvals.json");
    write_private_file(&path, b"{\"a\":1}").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&base.join("state/writegate")), 0o700);

    // A looser existing file is tightened; content replaced.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    write_private_file(&path, b"{}").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    assert_eq!(mode(&path), 0o600);
    assert_eq!(names(&base.join("state/writegate")), vec!["approvals.json"]);

    // A symlink at the path is refused, never followed.
    let target = base.join("elsewhere");
    std::fs::write(&target, b"keep").unwrap();
    let link = base.join("state/writegate/link.json");
    symlink(&target, &link).unwrap();
    assert_err!(
        write_private_file(&link, b"x"),
        FsError::SymlinkEscape { .. }
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
}
