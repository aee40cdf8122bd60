//! History and undo in-process (ADR 0020): a [`World`] whose `Service`
//! keeps a real history store on temp directories.

use crate::World;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use writegate_core::history::{Reach, UndoAction, UndoParams};
use writegate_core::{
    Config, EditMode, EditParams, ErrorKind, Failure, OpCtx, Registry, Service, WriteOptions,
    WriteParams,
};

/// A [`World`] whose service keeps a history store.
struct Kept {
    world: World,
    /// The store's directory.
    store: PathBuf,
}

impl std::ops::Deref for Kept {
    type Target = World;

    fn deref(&self) -> &World {
        &self.world
    }
}

/// A trusted workspace served with `config`, its history in `store` or
/// in the state directory.
fn kept_with(config: Config, store: Option<PathBuf>) -> Kept {
    let mut world = World::new(true, config, None);
    let store = store.unwrap_or_else(|| world.log.with_file_name("history"));
    world.svc.open_history(&store).unwrap();
    Kept { world, store }
}

/// [`kept_with`] the default config and store.
fn kept() -> Kept {
    kept_with(Config::default(), None)
}

impl Kept {
    /// Writes `content` to `path`; returns the operation's id.
    fn write_op(&self, path: &Path, content: &str) -> String {
        let p = WriteParams {
            path: path.to_path_buf(),
            content: content.into(),
            options: WriteOptions::default(),
            marker: None,
            convert_encoding: false,
        };
        self.svc.write_text_file(&self.ctx(), &p).unwrap();
        self.last_op()
    }

    /// Appends `content` to `path`; returns the operation's id.
    fn append_op(&self, path: &Path, content: &str) -> String {
        let p = EditParams::new(path, EditMode::Append, content);
        self.svc.edit_text_file(&self.ctx(), &p).unwrap();
        self.last_op()
    }

    fn last_op(&self) -> String {
        self.svc.history_entries(None, Reach::default()).unwrap()[0]
            .record
            .op_id
            .clone()
    }

    fn undo(&self, op: &str, force: bool) -> Result<writegate_core::history::UndoOutcome, Failure> {
        self.svc.undo(
            &self.ctx(),
            &UndoParams {
                op_id: op.into(),
                force,
                dry_run: false,
                session: None,
                own_workspace: false,
            },
        )
    }
}

fn kind<T: std::fmt::Debug>(r: Result<T, Failure>) -> ErrorKind {
    match r {
        Err(Failure::Refused(r)) => r.kind,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A write over a file is taken back byte for byte, mode included; the
/// store keeps the replaced inode itself (a hard link: same filesystem).
#[test]
fn undo_puts_back_the_exact_bytes_and_mode() {
    let w = kept();
    let f = w.root.join("a.txt");
    let old = b"\xef\xbb\xbfone\r\ntwo\r\n";
    std::fs::write(&f, old).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&f).unwrap());
    let op = w.write_op(&f, "changed\n");
    assert_ne!(std::fs::read(&f).unwrap(), old);
    let image = w.store.join("images").join(&op);
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&image).unwrap()),
        ino
    );
    let out = w.undo(&op, false).unwrap();
    assert_eq!(out.action, UndoAction::Restored);
    assert_eq!(std::fs::read(&f).unwrap(), old);
    assert_eq!(
        std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
        0o640
    );
    // The store is private.
    let dir = std::fs::metadata(w.store.join("images")).unwrap();
    assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    let index = std::fs::metadata(w.store.join("index.jsonl")).unwrap();
    assert_eq!(index.permissions().mode() & 0o777, 0o600);
}

/// Undoing an undo re-applies the operation; an older operation whose file
/// a later one changed is refused `file_changed` until the later one is
/// undone, or with force.
#[test]
fn undo_of_an_undo_and_later_operations_first() {
    let w = kept();
    let f = w.root.join("b.txt");
    std::fs::write(&f, "v0\n").unwrap();
    let a = w.write_op(&f, "v1\n");
    let b = w.append_op(&f, "v2\n");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "v1\nv2\n");
    let entries = w.svc.history_entries(Some(&f), Reach::default()).unwrap();
    let ea = entries.iter().find(|e| e.record.op_id == a).unwrap();
    assert!(
        !ea.undoable && ea.reason.as_deref().unwrap().contains(&b),
        "{ea:?}"
    );
    assert_eq!(kind(w.undo(&a, false)), ErrorKind::FileChanged);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "v1\nv2\n");
    w.undo(&b, false).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "v1\n");
    let u = w.last_op();
    w.undo(&a, false).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "v0\n");
    // Undo of the undo of b: needs the file as that undo left it.
    assert_eq!(kind(w.undo(&u, false)), ErrorKind::FileChanged);
    w.undo(&u, true).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "v1\nv2\n");
}

/// Undoing a creation removes the file and the directories it created.
#[test]
fn undo_of_a_creation_removes_the_file_and_its_new_directories() {
    let w = kept();
    let f = w.root.join("new/deeper/c.txt");
    let op = w.write_op(&f, "hello\n");
    assert!(f.exists());
    let out = w.undo(&op, false).unwrap();
    assert_eq!(out.action, UndoAction::Removed);
    assert!(!f.exists());
    assert!(!w.root.join("new").exists());
    // And the removal can be undone in turn.
    let again = w.last_op();
    w.undo(&again, false).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "hello\n");
}

/// A before-image changed through another hard link of the old file is
/// never put back.
#[test]
fn a_before_image_changed_through_another_link_is_refused() {
    let w = kept();
    let f = w.root.join("d.txt");
    std::fs::write(&f, "old\n").unwrap();
    let other = w.root.join("d-link.txt");
    std::fs::hard_link(&f, &other).unwrap();
    let op = w.write_op(&f, "new\n");
    std::fs::write(&other, "tampered\n").unwrap();
    assert_eq!(kind(w.undo(&op, true)), ErrorKind::FileChanged);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "new\n");
}

/// Over `history.max_bytes` the oldest images go first; their undo is
/// `not_undoable`; an unknown opId too.
#[test]
fn the_oldest_images_are_evicted_first() {
    let mut cfg = Config::default();
    cfg.history.max_bytes = 3000;
    // No window: every image may go.
    cfg.history.min_age_minutes = 0;
    let w = kept_with(cfg, None);
    let mut ops = Vec::new();
    for i in 0..5 {
        let f = w.root.join(format!("e{i}.txt"));
        std::fs::write(&f, "x".repeat(1000)).unwrap();
        ops.push(w.write_op(&f, "y\n"));
    }
    assert_eq!(kind(w.undo(&ops[0], false)), ErrorKind::NotUndoable);
    assert!(!w.store.join("images").join(&ops[0]).exists());
    w.undo(&ops[4], false).unwrap();
    assert_eq!(kind(w.undo("nope-1", false)), ErrorKind::NotUndoable);
}

/// `history = false`: nothing is kept.
#[test]
fn history_off_keeps_nothing() {
    let mut cfg = Config::default();
    cfg.history.enabled = false;
    let w = kept_with(cfg, None);
    let f = w.root.join("f.txt");
    std::fs::write(&f, "a\n").unwrap();
    let p = WriteParams {
        path: f.clone(),
        content: "b\n".into(),
        options: WriteOptions::default(),
        marker: None,
        convert_encoding: false,
    };
    w.svc.write_text_file(&w.ctx(), &p).unwrap();
    assert!(
        w.svc
            .history_entries(None, Reach::default())
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        std::fs::read_dir(w.store.join("images")).unwrap().count(),
        0
    );
}

/// A store on another filesystem (tmpfs, /dev/shm) copies the image
/// (0600) instead of linking it, and undo still puts the bytes back.
#[test]
fn a_store_on_another_filesystem_copies() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("note: no /dev/shm; skipped");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let w = kept_with(Config::default(), Some(dir.path().join("history")));
    let f = w.root.join("g.txt");
    std::fs::write(&f, "before\n").unwrap();
    let op = w.write_op(&f, "after\n");
    let image = w.store.join("images").join(&op);
    let meta = std::fs::metadata(&image).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read(&image).unwrap(), b"before\n");
    w.undo(&op, false).unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "before\n");
}

/// Every conformance case's setup file survives a write and its undo byte
/// for byte (encodings, BOMs, line endings).
#[test]
fn every_conformance_file_is_restored_byte_for_byte() {
    use base64::Engine as _;
    let w = kept();
    let cases = include_str!("../../../../tests/fixtures/cases.jsonl");
    let mut n = 0;
    for line in cases.lines().filter(|l| !l.trim().is_empty()) {
        // Some cases' content holds escapes serde_json refuses (lone
        // surrogates); their setup bytes are in the others too.
        let Ok(case) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        for (i, s) in case["setup"].as_array().into_iter().flatten().enumerate() {
            let Some(b64) = s["bytes_b64"].as_str() else {
                continue;
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            let f = w.root.join(format!("{}-{i}", case["id"].as_str().unwrap()));
            std::fs::write(&f, &bytes).unwrap();
            let op = w.write_op(&f, "replaced\n");
            w.undo(&op, false).unwrap();
            assert_eq!(std::fs::read(&f).unwrap(), bytes, "{}", case["id"]);
            n += 1;
        }
    }
    assert!(n > 10, "{n} files");
}

/// A file at the 5 MiB cap: kept and restored whole.
#[test]
fn a_file_at_the_cap_is_restored() {
    let w = kept();
    let f = w.root.join("big.txt");
    let old: Vec<u8> = (0..5 * 1024 * 1024)
        .map(|i: u32| b'a' + u8::try_from(i % 26).unwrap())
        .collect();
    std::fs::write(&f, &old).unwrap();
    let op = w.write_op(&f, &"z".repeat(5 * 1024 * 1024));
    w.undo(&op, false).unwrap();
    assert!(std::fs::read(&f).unwrap() == old);
}

/// The store survives the service: a new one over the same store lists
/// and undoes what the first one kept.
#[test]
fn history_survives_a_restart() {
    let w = kept();
    let f = w.root.join("h.txt");
    std::fs::write(&f, "one\n").unwrap();
    let op = w.write_op(&f, "two\n");
    let mut svc2 = Service::new(
        Config::default(),
        {
            let r = Registry::default();
            r.register(&w.root, true).unwrap();
            r
        },
        &w.log.with_file_name("audit2.jsonl"),
        w.log.with_file_name("approvals.json"),
    );
    svc2.open_history(&w.store).unwrap();
    let ctx = w.ctx();
    svc2.undo(
        &ctx,
        &UndoParams {
            op_id: op,
            force: false,
            dry_run: false,
            session: None,
            own_workspace: false,
        },
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "one\n");
}

/// The index does not grow one line per write forever: once most of its
/// lines are dead (evicted or void records, `done` and `evict` lines) it
/// is rewritten with the live records only, atomically (a new 0600 file
/// renamed over it, no temp file left), under the lock every daemon
/// sharing the store takes. A second service opened on the store before
/// the compaction goes on appending to the new index (not to the file it
/// had open), and both see every live operation.
#[test]
fn the_index_is_compacted_once_most_of_it_is_dead() {
    let mut cfg = Config::default();
    // Room for one image (at most 12 bytes): every write evicts the image
    // before it.
    cfg.history.max_bytes = 20;
    cfg.history.min_age_minutes = 0;
    let w = kept_with(cfg.clone(), None);
    let mut other = Service::new(
        cfg,
        Registry::default(),
        &w.log.with_file_name("audit-2.jsonl"),
        w.log.with_file_name("approvals-2.json"),
    );
    other.open_history(&w.store).unwrap();
    let index = w.store.join("index.jsonl");
    let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let first_ino = ino(&index);
    let f = w.root.join("c.txt");
    std::fs::write(&f, "start\n").unwrap();
    let mut largest = 0;
    let mut last = String::new();
    for i in 0..300 {
        last = w.write_op(&f, &format!("version {i}\n"));
        largest = largest.max(std::fs::metadata(&index).unwrap().len());
    }
    assert_ne!(ino(&index), first_ino, "the index was replaced");
    // One record is about 700 bytes: without compaction 300 writes leave
    // over 200 KiB.
    assert!(largest < 100 * 1024, "index grew to {largest} bytes");
    assert_eq!(
        std::fs::metadata(&index).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let leftovers: Vec<_> = std::fs::read_dir(&w.store)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    for line in std::fs::read_to_string(&index).unwrap().lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    // The other service, opened on the first index, sees the live
    // operation and appends its own to the new index.
    let listed = other.history_entries(None, Reach::default()).unwrap();
    assert_eq!(listed[0].record.op_id, last);
    w.undo(&last, false).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"version 298\n");
    let g = w.root.join("d.txt");
    std::fs::write(&g, "d0\n").unwrap();
    let ctx = OpCtx {
        runtime: other.registry().register(&w.root, true).unwrap(),
        ..w.ctx()
    };
    let p = WriteParams {
        path: g.clone(),
        content: "d1\n".into(),
        options: WriteOptions::default(),
        marker: None,
        convert_encoding: false,
    };
    other.write_text_file(&ctx, &p).unwrap();
    let mine = w.svc.history_entries(Some(&g), Reach::default()).unwrap();
    assert_eq!(mine.len(), 1, "written through the other service");
    w.undo(&mine[0].record.op_id, false).unwrap();
    assert_eq!(std::fs::read(&g).unwrap(), b"d0\n");
}

/// A write's outcome names its `opId` (the history's), and an undo limited
/// to a session takes back only that session's operations: another
/// session's `opId` is answered exactly as one that does not exist, and
/// nothing changes.
#[test]
fn an_undo_limited_to_a_session_sees_only_that_session() {
    let w = kept();
    let f = w.root.join("a.txt");
    std::fs::write(&f, "old\n").unwrap();
    let p = WriteParams {
        path: f.clone(),
        content: "new\n".into(),
        options: WriteOptions::default(),
        marker: None,
        convert_encoding: false,
    };
    let out = w.svc.write_text_file(&w.ctx(), &p).unwrap();
    let op = out.op_id.clone().expect("a committed write names its opId");
    assert_eq!(op, w.last_op());
    let limited = |session: &str, op: &str| {
        w.svc.undo(
            &w.ctx(),
            &UndoParams {
                op_id: op.into(),
                force: false,
                dry_run: false,
                session: Some(session.into()),
                own_workspace: false,
            },
        )
    };
    let hint = |r: Result<writegate_core::history::UndoOutcome, Failure>| match r {
        Err(Failure::Refused(r)) => (r.kind, r.hint.replace(&op, "OP")),
        other => panic!("{other:?}"),
    };
    let foreign = hint(limited("s2", &op));
    assert_eq!(foreign.0, ErrorKind::NotUndoable);
    let unknown = hint(limited("s2", "OP"));
    assert_eq!(foreign, unknown, "another session's opId reads as unknown");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "new\n");
    let done = limited("s1", &op).unwrap();
    assert_eq!(done.undone, op);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "old\n");
}
