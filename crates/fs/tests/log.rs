//! The append-only log (SPEC 10) and the private state-file writer (SPEC 12).

use std::collections::HashSet;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::sync::Arc;

use writegate_fs::{AppendLog, FsError, Journal, orphan_journals, write_private_file};
use writegate_testkit::{Tmpfs, assert_err, audit_lines, mode_of, names, tempdir};

#[test]
fn whole_lines_from_many_threads() {
    const THREADS: usize = 8;
    const LINES: usize = 300;
    let (_t, base) = tempdir();
    let path = base.join("state/writegate/audit.jsonl");
    let log = Arc::new(AppendLog::open(&path).unwrap());
    assert_eq!(mode_of(&path), 0o600);
    assert_eq!(mode_of(&base.join("state")), 0o700);
    assert_eq!(mode_of(&base.join("state/writegate")), 0o700);
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
    assert_eq!(mode_of(&path), 0o640);
    assert_eq!(std::fs::read(&path).unwrap(), b"old\nnew\n");
}

#[test]
fn private_file_is_0600_and_atomic() {
    let (_t, base) = tempdir();
    let path = base.join("state/writegate/approvals.json");
    write_private_file(&path, b"{\"a\":1}").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}");
    assert_eq!(mode_of(&path), 0o600);
    assert_eq!(mode_of(&base.join("state/writegate")), 0o700);

    // A looser existing file is tightened; content replaced.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    write_private_file(&path, b"{}").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    assert_eq!(mode_of(&path), 0o600);
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

/// Every line of `path` is one of the lines appended (no fragment, nothing
/// glued), and the file ends with a line break.
fn whole_lines(path: &std::path::Path, line: impl Fn(usize) -> String) -> usize {
    let lines = audit_lines(path);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(*l, line(i), "line {i} is not whole");
    }
    lines.len()
}

/// Defect pinned: the audit log was torn by ENOSPC: a short write left
/// half an event with no line break, and the next event was glued onto it.
/// Now a short write is rolled back and the log holds whole lines only,
/// before and after space comes back.
#[test]
fn enospc_short_write_leaves_no_partial_line() {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let path = fs.path().join("audit.jsonl");
    let log = AppendLog::open(&path).unwrap();
    // Lines of 700 bytes: pages of 4 KiB do not hold a whole number of
    // them, so the disk fills in the middle of one.
    let line = |i: usize| format!("{i:06}{}", "x".repeat(694));
    let mut ok = 0;
    let mut short = 0;
    for i in 0..200 {
        match log.append(line(ok).as_bytes()) {
            Ok(_) => ok += 1,
            Err(FsError::ShortWrite { rolled_back, .. }) => {
                assert!(rolled_back, "the fragment must be removed");
                short += 1;
            }
            Err(FsError::Io { .. }) => {}
            Err(e) => panic!("append {i}: {e:?}"),
        }
    }
    assert!(short >= 1, "the disk never filled mid-line");
    assert_eq!(whole_lines(&path, line), ok);
    // Space comes back: the next line starts on its own line.
    let before = ok;
    std::fs::remove_file(&path).ok();
    drop(log);
    let log = AppendLog::open(&fs.path().join("audit2.jsonl")).unwrap();
    log.append(line(0).as_bytes()).unwrap();
    assert_eq!(whole_lines(&fs.path().join("audit2.jsonl"), line), 1);
    assert!(before > 10);
}

/// The other half of the ENOSPC defect: the log fills up while another
/// file holds the space; freeing it lets the next line land whole right
/// after the last whole line.
#[test]
fn enospc_then_space_returns_and_the_next_line_is_not_glued() {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let path = fs.path().join("audit.jsonl");
    let log = AppendLog::open(&path).unwrap();
    let line = |i: usize| format!("{i:06}{}", "y".repeat(994));
    log.append(line(0).as_bytes()).unwrap();
    fs.fill(0);
    let mut n = 1;
    let mut failed = 0;
    for _ in 0..40 {
        match log.append(line(n).as_bytes()) {
            Ok(_) => n += 1,
            Err(_) => failed += 1,
        }
    }
    assert!(failed > 0, "the disk never filled");
    fs.unfill();
    log.append(line(n).as_bytes()).unwrap();
    n += 1;
    assert_eq!(whole_lines(&path, line), n);
}

/// Space reserved ahead takes appends even when the disk is full.
#[test]
fn reserved_space_takes_appends_on_a_full_disk() {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let path = fs.path().join("audit.jsonl");
    let log = AppendLog::open(&path).unwrap();
    assert_eq!(
        log.reserve(0, 16 * 1024).unwrap(),
        writegate_fs::Reserved::Yes
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "size unchanged");
    fs.fill(0);
    let line = |i: usize| format!("{i:06}{}", "r".repeat(994));
    for i in 0..16 {
        log.append(line(i).as_bytes()).unwrap();
    }
    assert_eq!(whole_lines(&path, line), 16);
    assert!(
        log.append(line(16).as_bytes()).is_err(),
        "beyond the reservation the disk is full"
    );
    assert_eq!(whole_lines(&path, line), 16);
}

/// A writer that died in the middle of a line (kill -9 can cut a write(2)
/// between pages; a power cut can leave any tail) left a fragment: the
/// next append cuts it first, so nothing is glued onto it.
#[test]
fn a_torn_tail_is_cut_before_the_next_line() {
    let (_t, base) = tempdir();
    let path = base.join("audit.jsonl");
    std::fs::write(&path, b"{\"a\":1}\n{\"b\":2}\n{\"torn\":").unwrap();
    let log = AppendLog::open(&path).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap().len(),
        24,
        "opening changes nothing"
    );
    assert_eq!(log.append(b"{\"c\":3}").unwrap(), 24);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n"
    );
    // Explicit repair, and a file that is one fragment only.
    std::fs::write(&path, b"no line break at all").unwrap();
    let mut guard = log.lock().unwrap();
    assert_eq!(guard.repair_tail().unwrap(), 20);
    assert_eq!(guard.repair_tail().unwrap(), 0);
    drop(guard);
    assert_eq!(std::fs::read(&path).unwrap(), b"");
    // A long tail without a break, across the read chunk size.
    let mut big = b"{\"keep\":1}\n".to_vec();
    big.extend(std::iter::repeat_n(b'z', 200_000));
    std::fs::write(&path, &big).unwrap();
    assert_eq!(log.lock().unwrap().repair_tail().unwrap(), 200_000);
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"keep\":1}\n");
}

/// `whole_len` is the length of a log ending with a whole line (or
/// empty), `None` for a torn tail, and changes nothing either way.
#[test]
fn whole_len_sees_a_torn_tail_without_cutting_it() {
    let (_t, base) = tempdir();
    let path = base.join("audit.jsonl");
    let log = AppendLog::open(&path).unwrap();
    assert_eq!(log.whole_len().unwrap(), Some(0));
    log.append(b"{\"a\":1}").unwrap();
    assert_eq!(log.whole_len().unwrap(), Some(8));
    std::fs::write(&path, b"{\"a\":1}\n{\"torn\":").unwrap();
    assert_eq!(log.whole_len().unwrap(), None);
    assert_eq!(std::fs::read(&path).unwrap().len(), 16, "nothing cut");
    // The next append cuts it, and the length is whole again.
    assert_eq!(log.append(b"{\"b\":2}").unwrap(), 16);
    assert_eq!(log.whole_len().unwrap(), Some(16));
}

/// The log remembers the length it last left (so the
/// lock-free `whole_len` can skip its one-byte read), but the append's own
/// tail check under the lock must not trust it. An outside truncation
/// (logrotate's `copytruncate`) followed by another writer's fragment that
/// ends exactly at that length must still be cut, not glued onto.
#[test]
fn a_fragment_at_the_remembered_length_is_still_cut() {
    let (_t, base) = tempdir();
    let path = base.join("audit.jsonl");
    let log = AppendLog::open(&path).unwrap();
    assert_eq!(log.append(b"{\"a\":1}").unwrap(), 8);
    // Truncated from outside, then a writer dies 8 bytes into its line.
    std::fs::write(&path, b"{\"torn\":").unwrap();
    assert_eq!(std::fs::read(&path).unwrap().len(), 8);
    assert_eq!(log.append(b"{\"b\":2}").unwrap(), 8);
    assert_eq!(std::fs::read(&path).unwrap(), b"{\"b\":2}\n");
}

#[test]
fn lines_from_an_offset() {
    let (_t, base) = tempdir();
    let path = base.join("audit.jsonl");
    let log = AppendLog::open(&path).unwrap();
    let long = "L".repeat(150_000);
    for l in ["one", long.as_str(), "three"] {
        log.append(l.as_bytes()).unwrap();
    }
    let collect = |from: u64| {
        let mut v = Vec::new();
        log.lock()
            .unwrap()
            .lines_from(from, &mut |l| {
                v.push(String::from_utf8(l.to_vec()).unwrap());
            })
            .unwrap();
        v
    };
    assert_eq!(collect(0), vec!["one", long.as_str(), "three"]);
    assert_eq!(collect(4), vec![long.as_str(), "three"]);
    // Mid-line: skipped to the next line.
    assert_eq!(collect(2), vec![long.as_str(), "three"]);
    assert_eq!(collect(10), vec!["three"]);
    assert_eq!(collect(1 << 40), Vec::<String>::new());
}

/// Appends from two processes' worth of descriptors (two opens of one
/// file) take turns under the lock and never interleave or truncate each
/// other's lines.
#[test]
fn two_descriptors_take_turns() {
    let (_t, base) = tempdir();
    let path = base.join("audit.jsonl");
    let a = Arc::new(AppendLog::open(&path).unwrap());
    let b = Arc::new(AppendLog::open(&path).unwrap());
    let handles: Vec<_> = [a, b]
        .into_iter()
        .enumerate()
        .map(|(k, log)| {
            std::thread::spawn(move || {
                for i in 0..500 {
                    log.append(format!("{k}-{i}-{}", "p".repeat(i % 300)).as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 1000);
    for l in text.lines() {
        let mut it = l.splitn(3, '-');
        let (_, i, pad) = (it.next(), it.next().unwrap(), it.next().unwrap());
        assert_eq!(pad.len(), i.parse::<usize>().unwrap() % 300, "{l}");
    }
}

/// A journal is an orphan only once its owner is gone: a locked one is
/// skipped, an unlocked one is returned locked, and a removed one is never
/// taken twice.
#[test]
fn orphan_journals_are_those_nobody_holds() {
    let (_t, base) = tempdir();
    let dir = base.join("audit.jsonl.intents");
    let live = Journal::create(&dir).unwrap();
    assert_eq!(mode_of(&dir), 0o700);
    assert_eq!(mode_of(live.path()), 0o600);
    live.append(b"{\"live\":1}\n", 0).unwrap();
    assert!(
        orphan_journals(&dir).unwrap().is_empty(),
        "a live journal is no orphan"
    );
    // A dead process's journal: the file without anyone's lock.
    let dead = dir.join("999999.0123456789ab.intents");
    std::fs::write(&dead, b"{\"dead\":1}\n{\"torn").unwrap();
    std::fs::write(dir.join("other-file"), b"x").unwrap();
    let orphans = orphan_journals(&dir).unwrap();
    assert_eq!(orphans.len(), 1);
    assert_eq!(orphans[0].path(), dead);
    assert_eq!(orphans[0].read().unwrap(), b"{\"dead\":1}\n{\"torn");
    // Held by the first scan: a second scan does not get it.
    assert!(orphan_journals(&dir).unwrap().is_empty());
    for o in orphans {
        o.remove().unwrap();
    }
    assert!(!dead.exists());
    assert!(orphan_journals(&dir).unwrap().is_empty());
    // Clearing and removing the live one.
    live.clear().unwrap();
    assert_eq!(std::fs::read(live.path()).unwrap(), b"");
    let p = live.path().to_path_buf();
    live.remove().unwrap();
    assert!(!p.exists());
}
