//! The audit sink in-process (docs/behaviour.md, "Audit"): a real `Service` on real
//! directories; for a full disk, a real tmpfs (root only, as in CI; skipped
//! with a note otherwise).

use crate::{World, config, world};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use writegate_core::config::FlushMode;
use writegate_core::policy::{Grant, Scope};
use writegate_core::{Config, ErrorKind, Failure};
use writegate_testkit::Tmpfs;

/// [`config`] with `edit` applied.
fn config_with(edit: impl FnOnce(&mut Config)) -> Config {
    let mut c = config();
    edit(&mut c);
    c
}

fn sha(content: &str) -> String {
    writegate_core::sha256_tagged(content.as_bytes())
}

/// `hashAfter` of each `fs.access` event, counted.
fn access_hashes(events: &[Value]) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for e in events.iter().filter(|e| e["type"] == "fs.access") {
        *m.entry(e["hashAfter"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    m
}

/// Defect pinned: with `audit.required = true`, the write whose event
/// first failed still succeeded with no complete event. On a full
/// audit filesystem, the write is refused before it commits (`io_error`,
/// the file untouched, no temp file), every write that succeeded has
/// exactly one whole event, and once space returns the refusals' events
/// are written too: one event per operation, no torn or glued line.
#[test]
fn required_audit_refuses_the_write_whose_event_cannot_be_written() {
    required_refusal(0);
}

/// The same for writes of 1 MiB and more, whose `hashAfter` is taken on a
/// helper thread beside the temp file's write and whose intent is
/// journaled just before the rename: refused as cleanly (no temp file, the
/// file untouched).
#[test]
fn required_audit_refuses_a_large_write_whose_event_cannot_be_written() {
    required_refusal(1024 * 1024);
}

/// Writes `write <i>\n` plus `pad` bytes until the full audit filesystem
/// refuses five of them; see the two tests above.
fn required_refusal(pad: usize) {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let w = World::new(true, config(), Some(fs.path().join("audit.jsonl")));
    assert!(w.svc.audit().required(), "required is the default");
    assert_eq!(w.svc.audit().startup_problem(), None);
    // Room for a few dozen events, then the audit filesystem is full.
    fs.fill(24 * 1024);
    let mut ok = Vec::new();
    let mut refused = 0;
    for i in 0..400 {
        let leaf = format!("f{}.txt", i % 7);
        let before = std::fs::read(w.root.join(&leaf)).ok();
        let content = format!("write {i}\n{}", "x".repeat(pad));
        match w.write(&leaf, &content) {
            Ok(()) => ok.push(content),
            Err(Failure::Refused(r)) => {
                assert_eq!(r.kind, ErrorKind::IoError, "{r:?}");
                assert!(r.hint.contains("audit"), "{}", r.hint);
                assert_eq!(std::fs::read(w.root.join(&leaf)).ok(), before, "untouched");
                refused += 1;
                if refused >= 5 {
                    break;
                }
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(refused >= 5, "the audit filesystem never filled");
    assert!(
        ok.len() > 10,
        "only {} writes before the disk filled",
        ok.len()
    );
    let names: Vec<_> = std::fs::read_dir(&w.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| Path::new(n).extension().is_none_or(|e| e != "tmp")),
        "{names:?}"
    );
    let events = w.events();
    let hashes = access_hashes(&events);
    for c in &ok {
        assert_eq!(
            hashes.get(&sha(c)),
            Some(&1),
            "acknowledged write {:?}",
            &c[..c.len().min(40)]
        );
    }
    assert_eq!(hashes.values().sum::<usize>(), ok.len());
    // Space comes back.
    fs.unfill();
    assert!(w.svc.audit().healthy());
    w.write("after.txt", "after\n").unwrap();
    let events = w.events();
    let denied = events.iter().filter(|e| e["type"] == "fs.denied").count();
    assert_eq!(denied, refused, "every refusal's event, once there is room");
    assert_eq!(events.len(), ok.len() + 1 + refused);
    let ids: std::collections::HashSet<_> = events.iter().map(|e| e["opId"].clone()).collect();
    assert_eq!(ids.len(), events.len(), "opIds are unique");
}

/// `audit.required = false`: writes go ahead while the log is full; their
/// events wait in memory and land, in order and whole, once space returns.
#[test]
fn without_required_writes_go_ahead_and_their_events_wait() {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let w = World::new(
        true,
        config_with(|c| c.audit.required = false),
        Some(fs.path().join("audit.jsonl")),
    );
    fs.fill(8 * 1024);
    for i in 0..60 {
        w.write("a.txt", &format!("v{i}\n")).unwrap();
    }
    assert!(
        w.svc.audit().healthy(),
        "not required: healthy for admission"
    );
    fs.unfill();
    w.write("a.txt", "last\n").unwrap();
    let events = w.events();
    assert_eq!(events.len(), 61);
    let order: Vec<_> = events.iter().map(|e| e["hashAfter"].clone()).collect();
    let want: Vec<_> = (0..60)
        .map(|i| Value::from(sha(&format!("v{i}\n"))))
        .chain([Value::from(sha("last\n"))])
        .collect();
    assert_eq!(order, want, "events in the order of the operations");
}

/// `pathHash` is the hash of the canonical path, also when the request
/// named the file another way (a `..`, a symlinked directory), and of the
/// path as named when that is already canonical.
#[test]
fn path_hash_is_the_canonical_paths_whatever_the_spelling() {
    let w = world();
    std::fs::create_dir(w.root.join("real")).unwrap();
    std::os::unix::fs::symlink(w.root.join("real"), w.root.join("link")).unwrap();
    w.write("real/a.txt", "a\n").unwrap();
    w.write("real/../real/a.txt", "b\n").unwrap();
    w.write("link/a.txt", "c\n").unwrap();
    let events = w.events();
    assert_eq!(events.len(), 3, "{events:?}");
    let canonical = writegate_core::path_hash(&w.root.join("real/a.txt"));
    for e in &events {
        assert_eq!(e["type"], "fs.access", "{e}");
        assert_eq!(e["pathHash"], canonical.as_str(), "{e}");
    }
}

/// An approval grant is an audit event, with the path
/// hashed (raw text only with `audit.raw_paths`); with `audit.required` a
/// grant whose event cannot be written grants nothing.
#[test]
fn approval_grants_are_audited() {
    let w = world();
    let target = w.root.join(".env");
    let command = format!("edit_file write {}", target.display());
    w.svc
        .approve(&w.ctx(), &Grant::Command(command.clone()), Scope::Session)
        .unwrap();
    w.svc
        .approve(
            &w.ctx(),
            &Grant::Pattern(format!("edit_file * {}/*.pem", w.root.display())),
            Scope::Workspace,
        )
        .unwrap();
    let events = w.events();
    assert_eq!(events.len(), 2);
    let e = &events[0];
    assert_eq!(e["type"], "approval.grant");
    assert_eq!(e["scope"], "session");
    assert_eq!(e["form"], "command");
    assert_eq!(e["mode"], "write");
    assert_eq!(e["sessionId"], "s1");
    assert_eq!(e["workspace"], w.rt.id.as_str());
    assert_eq!(e["pathHash"], writegate_core::path_hash(&target).as_str());
    assert_eq!(e["expiresInSecs"], 12 * 3600);
    assert!(e.get("command").is_none(), "no raw text by default: {e}");
    assert!(!e.to_string().contains(".env"), "{e}");
    assert_eq!(events[1]["form"], "pattern");
    assert_eq!(events[1]["scope"], "workspace");
    assert!(events[1].get("pattern").is_none());

    let w = World::new(true, config_with(|c| c.audit.raw_paths = true), None);
    w.svc
        .approve(&w.ctx(), &Grant::Command(command.clone()), Scope::Workspace)
        .unwrap();
    assert_eq!(w.events()[0]["command"], command.as_str());
}

/// With audit.required, a grant is refused (and grants nothing) while the
/// log cannot take its event.
#[test]
fn a_grant_is_refused_while_the_required_log_is_full() {
    let Some(fs) = Tmpfs::mount("64k") else {
        return;
    };
    let w = World::new(true, config(), Some(fs.path().join("audit.jsonl")));
    fs.fill(0);
    // Refused writes whose events use up the space reserved at start.
    for i in 0..200 {
        let _ = w.write(&format!("r{i}.txt"), "x\n");
    }
    let target = w.root.join(".env");
    let command = format!("edit_file write {}", target.display());
    let err = w
        .svc
        .approve(&w.ctx(), &Grant::Command(command), Scope::Session)
        .unwrap_err();
    let Failure::Refused(r) = err else {
        panic!("{err:?}")
    };
    assert_eq!(r.kind, ErrorKind::IoError);
    // Not granted: the write is still held.
    fs.unfill();
    let Err(Failure::Refused(r)) = w.write(".env", "K=1\n") else {
        panic!("granted although refused")
    };
    assert_eq!(r.kind, ErrorKind::ApprovalRequired);
    assert!(
        w.events().iter().all(|e| e["type"] != "approval.grant"),
        "no grant event for a refused grant"
    );
}

/// `flush = "sync"` (ADR 0010): every event is on disk when the
/// operation returns, also with concurrent writers (group commit).
#[test]
fn sync_flush_has_every_event_on_disk_before_the_operation_returns() {
    let w = Arc::new(World::new(
        true,
        config_with(|c| c.audit.flush = FlushMode::Sync),
        None,
    ));
    for i in 0..20 {
        w.write("a.txt", &format!("{i}\n")).unwrap();
        assert!(
            w.svc.audit().flushed(),
            "write {i} returned before its event was on disk"
        );
    }
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let w = w.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    w.write(&format!("t{t}.txt"), &format!("{i}\n")).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(w.svc.audit().flushed());
    assert_eq!(w.events().len(), 100);
}

/// `flush = "interval"` (the default, ADR 0010): the event is in
/// the log when the operation returns (a killed daemon loses none), and
/// the background flusher gets it to disk shortly after without any
/// further activity; closing flushes too.
#[test]
fn interval_flush_gets_events_to_disk_in_the_background() {
    let w = world();
    assert_eq!(w.svc.audit().flush_mode(), FlushMode::Interval);
    w.write("a.txt", "1\n").unwrap();
    assert_eq!(w.events().len(), 1, "in the log at return");
    let start = Instant::now();
    while !w.svc.audit().flushed() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the flusher never flushed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 0..10 {
        w.write("a.txt", &format!("{i}\n")).unwrap();
    }
    w.svc.audit().close();
    assert!(w.svc.audit().flushed(), "close flushes");
}

/// A log that cannot be opened is a start-up problem
/// (the binary refuses to start on it unless audit.required = false), and
/// with audit.required every write is refused meanwhile.
#[test]
fn an_audit_log_that_cannot_be_opened_is_a_startup_problem() {
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("audit.jsonl");
    std::fs::create_dir(&log).unwrap();
    let w = World::new(true, config(), Some(log.clone()));
    let problem = w.svc.audit().startup_problem().expect("a problem");
    assert!(problem.contains("directory"), "{problem}");
    let Err(Failure::Refused(r)) = w.write("a.txt", "x\n") else {
        panic!("written without an audit log")
    };
    assert_eq!(r.kind, ErrorKind::IoError);
    assert!(!w.root.join("a.txt").exists());
    let w = World::new(true, config_with(|c| c.audit.required = false), Some(log));
    assert!(w.svc.audit().startup_problem().is_some());
    w.write("a.txt", "x\n").unwrap();
}

/// Events beyond what may wait in memory are not dropped silently: once
/// the log works again, an `audit.gap` line says how many were lost, and
/// what was kept plus what was lost is every operation.
#[test]
fn events_that_cannot_wait_are_counted_in_an_audit_gap_line() {
    let Some(fs) = Tmpfs::mount("8m") else {
        return;
    };
    let w = World::new(
        true,
        config_with(|c| c.audit.required = false),
        Some(fs.path().join("audit.jsonl")),
    );
    std::fs::write(w.root.join("r.txt"), "r\n").unwrap();
    fs.fill(0);
    let p = writegate_core::ReadParams {
        path: w.root.join("r.txt"),
        line: None,
        limit: None,
    };
    let mut total = writegate_core::audit::MAX_BACKLOG + 500;
    for _ in 0..total {
        w.svc.read_lines(&w.ctx(), &p).unwrap();
    }
    fs.unfill();
    let start = Instant::now();
    'caught_up: loop {
        // Each operation first writes what waits; then the flusher has a
        // moment with no new event to sync it all (checking right after
        // each operation raced the flusher: under load it never won).
        w.svc.read_lines(&w.ctx(), &p).unwrap();
        total += 1;
        for _ in 0..20 {
            if w.svc.audit().flushed() {
                break 'caught_up;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(start.elapsed() < Duration::from_secs(60), "never caught up");
    }
    let (mut kept, mut lost, mut gaps) = (0u64, 0u64, 0);
    for e in w.events() {
        if e["type"] == "audit.gap" {
            gaps += 1;
            lost += e["lost"].as_u64().unwrap();
        } else {
            kept += 1;
        }
    }
    assert_eq!(gaps, 1, "one gap line");
    assert!(lost > 0);
    assert_eq!(kept + lost, total as u64, "every operation kept or counted");
}
