//! The operation pipeline: each test checks the bytes on disk and the
//! audit log (exactly one event per operation, SPEC 10).

use crate::{World, config, world, write};
use serde_json::Value;
use std::sync::Arc;
use writegate_core::policy::{Grant, Scope};
use writegate_core::{
    Allowances, ApprovalAnswer, ApprovalQuestion, Approver, Detail, EditMode, EditParams,
    ErrorKind, Failure, MarkerSource, ReadParams,
};

fn kind(r: Result<impl std::fmt::Debug, Failure>) -> ErrorKind {
    match r {
        Err(Failure::Refused(r)) => r.kind,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A write keeps the file's CRLF; the read reports format and hash; two
/// operations, two events.
#[test]
fn write_keeps_crlf_and_read_reports_the_format() {
    let w = world();
    let f = w.root.join("a.txt");
    std::fs::write(&f, b"one\r\ntwo\r\n").unwrap();
    let ctx = w.ctx();
    let out = w.svc.write_text_file(&ctx, &write(&f, "x\ny\n")).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"x\r\ny\r\n");
    assert!(!out.created);
    assert_eq!((out.bytes_before, out.bytes_after), (10, 6));
    let read = w
        .svc
        .read_lines(
            &ctx,
            &ReadParams {
                path: f.clone(),
                line: None,
                limit: None,
            },
        )
        .unwrap();
    assert_eq!(read.hash, out.hash);
    assert_eq!(read.format.line_ending.as_str(), "crlf");
    let lines: Vec<(u64, &str)> = read.lines.iter().map(|l| (l.n, l.text.as_str())).collect();
    assert_eq!(lines, vec![(1, "x"), (2, "y")]);
    let events = w.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["type"], "fs.access");
    assert_eq!(events[0]["intent"], "write");
    assert_eq!(events[0]["route"], "test");
    assert_eq!(events[1]["intent"], "read");
}

/// SPEC 2: an untrusted workspace refuses writes and still reads.
#[test]
fn untrusted_refuses_writes_not_reads() {
    let w = World::new(false, config(), None);
    let f = w.root.join("a.txt");
    std::fs::write(&f, b"keep\n").unwrap();
    let ctx = w.ctx();
    assert_eq!(
        kind(w.svc.write_text_file(&ctx, &write(&f, "new\n"))),
        ErrorKind::UntrustedWorkspace
    );
    assert_eq!(std::fs::read(&f).unwrap(), b"keep\n");
    let read = w.svc.read_text_file(
        &ctx,
        &ReadParams {
            path: f,
            line: None,
            limit: None,
        },
    );
    assert_eq!(read.unwrap().content, "keep\n");
    let events = w.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["errorKind"], "untrusted_workspace");
}

/// SPEC 2: a closed generation refuses before anything is touched.
#[test]
fn closed_generation_writes_nothing() {
    let w = world();
    w.rt.guard.close();
    let f = w.root.join("new.txt");
    let ctx = w.ctx();
    assert_eq!(
        kind(w.svc.write_text_file(&ctx, &write(&f, "x\n"))),
        ErrorKind::GenerationClosed
    );
    assert!(w.names().is_empty());
    assert_eq!(w.events().len(), 1);
}

/// SPEC 8: a stale `expectedHash` is refused with the current hash; the
/// file is unchanged and no temp file is left.
#[test]
fn stale_expected_hash_names_the_current_hash() {
    let w = world();
    let f = w.root.join("a.txt");
    std::fs::write(&f, b"a\nb\n").unwrap();
    let ctx = w.ctx();
    let mut p = EditParams::new(&f, EditMode::Replace, "B");
    p.line = Some(2);
    p.expected_hash = Some(format!("sha256:{}", "0".repeat(64)));
    let Err(Failure::Refused(r)) = w.svc.edit_text_file(&ctx, &p) else {
        panic!("expected hash_mismatch")
    };
    assert_eq!(r.kind, ErrorKind::HashMismatch);
    let Some(Detail::HashMismatch { current, .. }) = r.detail else {
        panic!("no detail: {r:?}")
    };
    assert!(current.starts_with("sha256:") && current.len() == 71);
    assert_eq!(std::fs::read(&f).unwrap(), b"a\nb\n");
    assert_eq!(w.names(), ["a.txt"]);
    assert_eq!(w.events()[0]["errorKind"], "hash_mismatch");
}

/// An `expectedHash` not in the form the daemon gives hashes (no
/// `sha256:`, too short, not hex) is `invalid_params`, not `hash_mismatch`
/// (the file did not change); upper-case hex of the right hash matches.
#[test]
fn a_malformed_expected_hash_is_invalid_params_and_hex_case_is_ignored() {
    let w = world();
    let f = w.root.join("a.txt");
    std::fs::write(&f, b"a\nb\n").unwrap();
    let ctx = w.ctx();
    let right = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(b"a\nb\n"));
    for bad in [
        right.clone(),
        format!("sha256:{}", &right[..63]),
        format!("sha256:{}z", &right[..63]),
        format!("md5:{right}"),
        "sha256:00".to_string(),
    ] {
        let mut p = EditParams::new(&f, EditMode::Replace, "B");
        p.line = Some(2);
        p.expected_hash = Some(bad.clone());
        match w.svc.edit_text_file(&ctx, &p) {
            Err(Failure::InvalidParams(m)) => {
                assert!(m.contains("sha256:") && m.contains("64 hex digits"), "{m}");
            }
            other => panic!("{bad}: expected invalid_params, got {other:?}"),
        }
        assert_eq!(std::fs::read(&f).unwrap(), b"a\nb\n");
    }
    assert_eq!(w.events().len(), 5, "one event each");
    let mut p = EditParams::new(&f, EditMode::Replace, "B");
    p.line = Some(2);
    p.expected_hash = Some(format!("sha256:{}", right.to_uppercase()));
    w.svc
        .edit_text_file(&ctx, &p)
        .expect("upper-case hex matches");
    assert_eq!(std::fs::read(&f).unwrap(), b"a\nB\n");
    assert_eq!(w.names(), ["a.txt"]);
}

/// SPEC 8.6: a dry run reports a diff and writes nothing; its event says so.
#[test]
fn dry_run_writes_nothing_and_reports_a_diff() {
    let w = world();
    let f = w.root.join("a.txt");
    std::fs::write(&f, b"a\nb\n").unwrap();
    let ctx = w.ctx();
    let mut p = EditParams::new(&f, EditMode::Replace, "B");
    p.line = Some(2);
    p.dry_run = true;
    let r = w.svc.edit_text_file(&ctx, &p).unwrap();
    assert!(r.dry_run);
    assert!(r.diff.unwrap().contains("+B"));
    assert_eq!(std::fs::read(&f).unwrap(), b"a\nb\n");
    let events = w.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["dryRun"], true);
    assert!(
        w.svc.receipt("s1").is_empty(),
        "a dry run leaves no receipt"
    );
}

/// SPEC 1: a request cancelled before it takes the lock writes nothing
/// and still leaves one event.
#[test]
fn cancelled_before_the_lock_writes_nothing() {
    let w = world();
    let f = w.root.join("a.txt");
    let ctx = w.ctx();
    ctx.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        w.svc.write_text_file(&ctx, &write(&f, "x\n")).unwrap_err(),
        Failure::Cancelled
    );
    assert!(w.names().is_empty());
    assert_eq!(w.events().len(), 1);
    assert_eq!(w.svc.live_locks(), 0);
}

/// SPEC 12: a held write needs an approval; `once` is spent by one write.
#[test]
fn approval_once_is_spent() {
    let w = world();
    let f = w.root.join(".env");
    let ctx = w.ctx();
    let Err(Failure::Refused(r)) = w.svc.write_text_file(&ctx, &write(&f, "K=1\n")) else {
        panic!("expected approval_required")
    };
    let Some(Detail::Approval { command, .. }) = r.detail else {
        panic!("no command")
    };
    assert!(!f.exists());
    w.svc
        .approve(&ctx, &Grant::Command(command), Scope::Once)
        .unwrap();
    w.svc.write_text_file(&ctx, &write(&f, "K=1\n")).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"K=1\n");
    assert_eq!(
        kind(w.svc.write_text_file(&ctx, &write(&f, "K=2\n"))),
        ErrorKind::ApprovalRequired
    );
    assert_eq!(std::fs::read(&f).unwrap(), b"K=1\n");
    // Three operations and the grant (grants are audited).
    let types: Vec<_> = w.events().iter().map(|e| e["type"].clone()).collect();
    assert_eq!(
        types,
        ["fs.denied", "approval.grant", "fs.access", "fs.denied"]
    );
}

/// SPEC 4: a marked write outside the workspace takes the external writer
/// only when the connection's transport allows it.
#[test]
fn the_external_writer_needs_the_allowance() {
    let w = world();
    let outside = tempfile::tempdir().unwrap();
    let f = std::fs::canonicalize(outside.path()).unwrap().join("o.txt");
    let mut p = write(&f, "out\n");
    p.marker = Some(MarkerSource::WriteFile);
    assert_eq!(
        kind(w.svc.write_text_file(&w.ctx(), &p)),
        ErrorKind::PathOutsideWorkspace
    );
    assert!(!f.exists());
    let allows = Allowances {
        external_writer: true,
        ..Allowances::NONE
    };
    w.svc.write_text_file(&w.ctx_allowing(allows), &p).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"out\n");
    let events = w.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["writer"], "workspace");
    assert_eq!(events[1]["writer"], "external");
    assert_eq!(events[1]["source"], "write_file");
}

/// SPEC 8.3 and 10: an edit that fails in the text core leaves the file and
/// one event with the kind; receipts list only what was written.
#[test]
fn failed_edit_is_one_denied_event_and_no_receipt() {
    let w = world();
    let f = w.root.join("a.txt");
    std::fs::write(&f, b"x\nx\n").unwrap();
    let ctx = w.ctx();
    let mut p = EditParams::new(&f, EditMode::Replace, "y");
    p.find = Some("x".into());
    let Err(Failure::Refused(r)) = w.svc.edit_text_file(&ctx, &p) else {
        panic!("expected ambiguous_text_match")
    };
    assert_eq!(
        r.detail,
        Some(Detail::Ambiguous {
            count: 2,
            lines: vec![1, 2]
        })
    );
    assert_eq!(std::fs::read(&f).unwrap(), b"x\nx\n");
    w.svc
        .edit_text_file(&ctx, &EditParams::new(&f, EditMode::Append, "z\n"))
        .unwrap();
    let receipts = w.svc.receipt("s1");
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0].mode.name(), "append");
    let events = w.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["type"], "fs.denied");
    assert_eq!(events[1]["type"], "fs.access");
}

/// A person asked about a held write, answering in turn.
struct Scripted(
    std::sync::Mutex<Vec<ApprovalAnswer>>,
    std::sync::Mutex<Vec<ApprovalQuestion>>,
);

impl Approver for Scripted {
    fn ask(&self, q: &ApprovalQuestion) -> ApprovalAnswer {
        self.1.lock().unwrap().push(q.clone());
        self.0.lock().unwrap().remove(0)
    }
}

/// SPEC 12 with a front end that can ask (the proxy, MCP): the answer
/// decides, and the operation still leaves exactly one event, which says
/// what the person answered.
#[test]
fn a_held_write_asks_the_approver_once_per_operation() {
    let w = world();
    let f = w.root.join(".env");
    let person = Arc::new(Scripted(
        std::sync::Mutex::new(vec![
            ApprovalAnswer::Deny,
            ApprovalAnswer::AllowOnce,
            ApprovalAnswer::AllowAlways,
        ]),
        std::sync::Mutex::new(Vec::new()),
    ));
    let mut ctx = w.ctx();
    ctx.approver = Some(person.clone());
    // Denied: refused, the file untouched.
    let Err(Failure::Refused(r)) = w.svc.write_text_file(&ctx, &write(&f, "A=1\n")) else {
        panic!("expected a refusal")
    };
    assert_eq!(r.kind, ErrorKind::ApprovalRequired);
    assert!(r.hint.contains("declined"), "{}", r.hint);
    assert!(!f.exists());
    // Allowed once: written; nothing remembered.
    w.svc.write_text_file(&ctx, &write(&f, "A=2\n")).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"A=2\n");
    // Allowed always: written, and the next write is not asked about.
    w.svc.write_text_file(&ctx, &write(&f, "A=3\n")).unwrap();
    w.svc.write_text_file(&ctx, &write(&f, "A=4\n")).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"A=4\n");
    let asked = person.1.lock().unwrap();
    assert_eq!(asked.len(), 3, "asked once per held operation");
    assert_eq!(asked[0].path, f);
    assert_eq!(asked[0].level.as_str(), "dangerous");
    assert!(asked[0].command.ends_with("/.env"));
    let events = w.events();
    assert_eq!(events.len(), 4);
    let approvals: Vec<_> = events.iter().map(|e| e["approval"].clone()).collect();
    assert_eq!(
        approvals,
        [
            serde_json::json!("denied"),
            serde_json::json!("allowed_once"),
            serde_json::json!("allowed_always"),
            Value::Null
        ]
    );
    assert_eq!(events[0]["type"], "fs.denied");
    assert_eq!(events[3]["type"], "fs.access");
}

/// An approver with an answer about one command only (an MCP retry).
struct AboutOne(String);

impl Approver for AboutOne {
    fn ask(&self, _: &ApprovalQuestion) -> ApprovalAnswer {
        ApprovalAnswer::AllowOnce
    }

    fn asks_about(&self, q: &ApprovalQuestion) -> bool {
        q.command == self.0
    }
}

/// An approver that cannot answer a question leaves the operation held as
/// if it had none: refused unasked (`asked: false`, so the front end can
/// ask its own way), with no `approval` in the event; the question it can
/// answer goes ahead.
#[test]
fn a_question_the_approver_does_not_ask_about_is_held_unasked() {
    let w = world();
    let env = w.root.join(".env");
    let other = w.root.join(".env.local");
    let mut ctx = w.ctx();
    let about = format!("edit_file write {}", env.display());
    ctx.approver = Some(Arc::new(AboutOne(about.clone())));
    let Err(Failure::Refused(r)) = w.svc.write_text_file(&ctx, &write(&other, "B=2\n")) else {
        panic!("expected a refusal")
    };
    assert_eq!(r.kind, ErrorKind::ApprovalRequired);
    assert!(
        matches!(
            r.detail,
            Some(writegate_core::Detail::Approval { asked: false, .. })
        ),
        "{:?}",
        r.detail
    );
    assert!(!other.exists());
    w.svc.write_text_file(&ctx, &write(&env, "A=1\n")).unwrap();
    assert_eq!(std::fs::read(&env).unwrap(), b"A=1\n");
    let events = w.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["type"], "fs.denied");
    assert!(events[0].get("approval").is_none(), "{}", events[0]);
    assert_eq!(events[1]["approval"], "allowed_once");
}

/// Files of a MiB and more are hashed on helper threads (ADR 0005) while the
/// commit writes and fsyncs. The event still has the old file's hash and
/// the new one's, and a write refused after the old file was read (here an
/// unmappable character for its legacy encoding) still has `hashBefore`;
/// an edit with `expectedHash` checks the same hash.
#[test]
fn large_files_keep_hash_before_and_after_in_every_event() {
    let w = world();
    let c = w.ctx();
    let big = w.root.join("big.txt");
    let old = "0123456789 abcdefghijklmnopqrstuvwxyz\n".repeat(40_000); // 1.5 MB
    std::fs::write(&big, &old).unwrap();
    let new = "the new content of a large file, line by line\n".repeat(40_000);
    w.svc.write_text_file(&c, &write(&big, &new)).unwrap();
    assert_eq!(std::fs::read_to_string(&big).unwrap(), new);
    let e = &w.events()[0];
    assert_eq!(e["type"], "fs.access");
    assert_eq!(
        e["hashBefore"],
        writegate_core::sha256_tagged(old.as_bytes())
    );
    assert_eq!(
        e["hashAfter"],
        writegate_core::sha256_tagged(new.as_bytes())
    );

    // A windows-1252 file of 1.2 MB, and content it cannot encode.
    let legacy = w.root.join("legacy.txt");
    let bytes: Vec<u8> = b"caf\xe9 cr\xe8me br\xfbl\xe9e\n".repeat(70_000);
    std::fs::write(&legacy, &bytes).unwrap();
    let r = w
        .svc
        .write_text_file(&c, &write(&legacy, &"snowman \u{2603}\n".repeat(100_000)));
    assert_eq!(kind(r), ErrorKind::UnmappableCharacter);
    assert_eq!(std::fs::read(&legacy).unwrap(), bytes);
    let e = &w.events()[1];
    assert_eq!(e["type"], "fs.denied");
    assert_eq!(e["hashBefore"], writegate_core::sha256_tagged(&bytes));

    // An edit: the expected hash is the one the event records.
    let mut p = EditParams::new(&big, EditMode::Append, "one more line\n");
    p.expected_hash = Some(writegate_core::sha256_tagged(new.as_bytes()));
    w.svc.edit_text_file(&c, &p).unwrap();
    let e = &w.events()[2];
    assert_eq!(
        e["hashBefore"],
        writegate_core::sha256_tagged(new.as_bytes())
    );
    assert_eq!(
        e["hashAfter"],
        writegate_core::sha256_tagged(format!("{new}one more line\n").as_bytes())
    );
    assert_eq!(w.events().len(), 3);
    assert_eq!(w.names(), ["big.txt", "legacy.txt"]);
}
