//! End-to-end tests of the external host writer, of workspaces as runtimes
//! with generations (SIGHUP reloads), and of the approval gate: the real
//! `writegate` binary over real stdio pipes and Unix sockets, on real temp
//! directories with real symlinks, FIFOs and sockets (SPEC 2, 4, 7.1, 10, 12;
//! seed 003).
//!
//! Every spawned daemon gets `HOME`, `XDG_RUNTIME_DIR`, `XDG_STATE_HOME` and
//! `XDG_CONFIG_HOME` inside its test's temp dir. Timeouts exist only so that a
//! broken daemon fails a test instead of hanging it; nothing asserts on speed.
//! Reloads are asynchronous, so the tests that send SIGHUP poll (retrying the
//! same request) until the daemon shows the new state.
//!
//! The temp tree, daemons, line clients and audit cursor are in
//! `common/mod.rs`; the checks only these tests use are at the bottom.

mod common;

use common::{
    Audit, Client, Daemon, Opts, Tree, mode_of, req, run_with_stdin, temps, write_params,
};
use rustix::process::Signal;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Upper bound for a reload to become visible after SIGHUP.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(20);

const MARKER_KEY: &str = "qwen-code/tool-write-origin";
const SOURCES: [&str; 4] = ["write_file", "edit", "notebook_edit", "shell_sed_edit"];

// ---------------------------------------------------------------------------
// 1. The marker (SPEC 4): anything but a strictly valid marker is no marker.
// ---------------------------------------------------------------------------

#[test]
fn malformed_markers_fail_closed_as_path_outside_workspace() {
    let t = Tree::new();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let bad: Vec<(&str, Value)> = vec![
        ("version 2", json!({"version": 2, "source": "write_file"})),
        (
            "version 1.0",
            json!({"version": 1.0, "source": "write_file"}),
        ),
        (
            "version \"1\"",
            json!({"version": "1", "source": "write_file"}),
        ),
        ("unknown source", json!({"version": 1, "source": "shell"})),
        (
            "extra key",
            json!({"version": 1, "source": "write_file", "extra": true}),
        ),
        ("null", Value::Null),
        ("array", json!([1, "write_file"])),
        ("missing source", json!({"version": 1})),
        ("missing version", json!({"source": "write_file"})),
        ("source null", json!({"version": 1, "source": null})),
        ("string", json!("write_file")),
        ("version -1", json!({"version": -1, "source": "write_file"})),
    ];
    for (i, (what, marker)) in bad.into_iter().enumerate() {
        let target = t.out.join(format!("m{i}.txt"));
        let meta = json!({ MARKER_KEY: marker });
        let ev = refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&target, "nope\n", meta),
            "path_outside_workspace",
        );
        assert!(!target.exists(), "{what}: nothing may be created");
        assert_eq!(ev["writer"], "workspace", "{what}: {ev}");
        assert!(ev.get("source").is_none(), "{what}: no source: {ev}");
    }
}

#[test]
fn a_valid_marker_for_each_source_lands_through_the_external_writer() {
    let t = Tree::new();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for source in SOURCES {
        let target = t.out.join(format!("{source}.txt"));
        let r = c.call(
            "fs/write_text_file",
            marked_write(&target, "hi\n", marker(source)),
        );
        assert_eq!(r["result"], json!({}), "{source}: {r}");
        assert_eq!(fs::read(&target).unwrap(), b"hi\n", "{source}");
        assert_eq!(mode_of(&target), 0o600, "{source}: a new file is 0600");
        let ev = audit.one("fs.access");
        assert_eq!(ev["writer"], "external", "{source}: {ev}");
        assert_eq!(ev["source"], source, "{source}: {ev}");
        assert_eq!(ev["route"], "ACP writeTextFile", "{source}: {ev}");
        assert_eq!(ev["sessionId"], "s", "{source}: {ev}");
        assert_eq!(ev["created"], true, "{source}: {ev}");
    }
    // The edit tool takes the same route with the marker in its `_meta`.
    let target = t.out.join("edited.txt");
    let r = c.call(
        "_writegate/edit_text_file",
        json!({"sessionId": "s", "path": target, "mode": "append", "content": "one\n",
               "_meta": marker("edit")}),
    );
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(fs::read(&target).unwrap(), b"one\n");
    let ev = audit.one("fs.access");
    assert_eq!(ev["writer"], "external", "{ev}");
    assert_eq!(ev["source"], "edit", "{ev}");
    assert_eq!(ev["intent"], "edit", "{ev}");
}

// ---------------------------------------------------------------------------
// 2. --no-external-writes
// ---------------------------------------------------------------------------

#[test]
fn no_external_writes_refuses_a_marked_outside_write() {
    let t = Tree::new();
    let (_d, mut c, mut audit) = stdio_session(&t, &["--no-external-writes"]);
    for source in SOURCES {
        let target = t.out.join(format!("{source}.txt"));
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&target, "nope\n", marker(source)),
            "path_outside_workspace",
        );
    }
    // The workspace writer is unaffected.
    let r = c.call(
        "fs/write_text_file",
        marked_write(&t.ws.join("in.txt"), "in\n", marker("write_file")),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(audit.one("fs.access")["writer"], "workspace");
}

// ---------------------------------------------------------------------------
// 3. The refusals of SPEC 7.1, each with one fs.denied and nothing changed.
// ---------------------------------------------------------------------------

#[test]
fn external_write_in_an_untrusted_workspace_is_untrusted_workspace() {
    let t = Tree::new();
    fs::write(t.out.join("exists.txt"), "old\n").unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &["--untrusted"]);
    for name in ["new.txt", "exists.txt"] {
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&t.out.join(name), "x\n", marker("write_file")),
            "untrusted_workspace",
        );
    }
}

#[test]
fn external_size_caps_on_utf8_and_encoded_bytes_are_file_too_large() {
    let t = Tree::new();
    fs::write(t.out.join("exists.txt"), "old\n").unwrap();
    let mut d = t.daemon(Opts {
        stdio: true,
        env: &[("WRITEGATE_MAX_WRITE_BYTES", "1024")],
        ..Opts::default()
    });
    let mut c = d.stdio_client();
    let mut audit = t.audit();
    // UTF-8 size over the cap.
    for name in ["big.txt", "exists.txt"] {
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&t.out.join(name), &"a".repeat(1025), marker("write_file")),
            "file_too_large",
        );
    }
    // 600 UTF-8 bytes pass the precheck, but UTF-16LE doubles them to 1200.
    for name in ["wide.txt", "exists.txt"] {
        let mut meta = marker("write_file");
        meta["encoding"] = json!("utf-16le");
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&t.out.join(name), &"a".repeat(600), meta),
            "file_too_large",
        );
    }
    // Exactly the cap is fine.
    let target = t.out.join("exact.txt");
    let r = c.call(
        "fs/write_text_file",
        marked_write(&target, &"a".repeat(1024), marker("write_file")),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&target).unwrap().len(), 1024);
    audit.one("fs.access");
}

#[test]
fn external_dot_and_dot_dot_components_are_outside_not_external() {
    let t = Tree::new();
    fs::create_dir(t.out.join("sub")).unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let out = t.out.to_str().unwrap();
    let ws = t.ws.to_str().unwrap();
    for raw in [
        format!("{out}/./dot.txt"),
        format!("{out}/sub/../dotdot.txt"),
        format!("{out}/sub/./../dots.txt"),
        format!("{ws}/../out/escape.txt"),
        format!("{out}/sub/."),
    ] {
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(Path::new(&raw), "x\n", marker("write_file")),
            "path_outside_workspace",
        );
    }
}

#[test]
fn external_suspicious_leaf_names_are_outside() {
    let t = Tree::new();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for leaf in ["aux.ts", "x.", "...", "CON", "lpt1.txt", "trailing "] {
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&t.out.join(leaf), "x\n", marker("write_file")),
            "path_outside_workspace",
        );
    }
    // Not a device name: lands.
    let r = c.call(
        "fs/write_text_file",
        marked_write(&t.out.join("concat.txt"), "x\n", marker("write_file")),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    audit.one("fs.access");
}

#[test]
fn external_missing_parent_is_path_not_found_and_no_directory_is_created() {
    let t = Tree::new();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let target = t.out.join("missing/deeper/x.txt");
    refused_write(
        &t,
        &mut c,
        &mut audit,
        marked_write(&target, "x\n", marker("write_file")),
        "path_not_found",
    );
    // The wire shape of path_not_found carries the uri.
    let r = c.call(
        "fs/write_text_file",
        marked_write(&target, "x\n", marker("write_file")),
    );
    assert_eq!(r["error"]["code"], -32002, "{r}");
    assert_eq!(r["error"]["data"]["uri"], json!(target), "{r}");
    audit.one("fs.denied");
    assert!(!t.out.join("missing").exists());
}

#[test]
fn external_parent_that_is_a_file_is_parse_error() {
    let t = Tree::new();
    fs::write(t.out.join("file.txt"), "f\n").unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    refused_write(
        &t,
        &mut c,
        &mut audit,
        marked_write(&t.out.join("file.txt/x.txt"), "x\n", marker("write_file")),
        "parse_error",
    );
}

#[test]
fn external_leaf_symlink_is_symlink_escape_and_its_target_is_untouched() {
    let t = Tree::new();
    fs::write(t.out.join("real.txt"), "real\n").unwrap();
    symlink("real.txt", t.out.join("link.txt")).unwrap();
    symlink("created.txt", t.out.join("dangle.txt")).unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for leaf in ["link.txt", "dangle.txt"] {
        for method in ["fs/write_text_file", "_writegate/edit_text_file"] {
            let mut params = marked_write(&t.out.join(leaf), "x\n", marker("edit"));
            if method == "_writegate/edit_text_file" {
                params["mode"] = json!("append");
            }
            refused_unchanged(&t, &mut c, &mut audit, method, params, "symlink_escape");
        }
    }
    assert_eq!(fs::read(t.out.join("real.txt")).unwrap(), b"real\n");
    assert!(!t.out.join("created.txt").exists());
    assert!(
        fs::symlink_metadata(t.out.join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn external_leaf_fifo_socket_or_directory_is_parse_error() {
    let t = Tree::new();
    let fifo = t.out.join("fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .unwrap();
    let sock = t.out.join("sock");
    let _listener = UnixListener::bind(&sock).unwrap();
    fs::create_dir(t.out.join("dir")).unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for leaf in ["fifo", "sock", "dir"] {
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&t.out.join(leaf), "x\n", marker("write_file")),
            "parse_error",
        );
    }
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn external_unknown_encoding_is_unsupported_encoding() {
    let t = Tree::new();
    fs::write(t.out.join("exists.txt"), "old\n").unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for name in ["new.txt", "exists.txt"] {
        let mut meta = marker("write_file");
        meta["encoding"] = json!("klingon-8");
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&t.out.join(name), "x\n", meta),
            "unsupported_encoding",
        );
    }
}

#[test]
fn external_overwrite_keeps_mode_0644_and_a_new_external_file_is_0600() {
    let t = Tree::new();
    let keep = t.out.join("keep.txt");
    fs::write(&keep, "old\n").unwrap();
    fs::set_permissions(&keep, fs::Permissions::from_mode(0o644)).unwrap();
    let ino_before = fs::metadata(&keep).unwrap().ino();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let r = c.call(
        "fs/write_text_file",
        marked_write(&keep, "new\n", marker("write_file")),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&keep).unwrap(), b"new\n");
    assert_eq!(mode_of(&keep), 0o644);
    assert_ne!(
        fs::metadata(&keep).unwrap().ino(),
        ino_before,
        "published by rename, not rewritten in place"
    );
    let ev = audit.one("fs.access");
    assert_eq!(ev["created"], false, "{ev}");
    assert_eq!(ev["bytesBefore"], 4, "{ev}");
    let fresh = t.out.join("fresh.txt");
    let r = c.call(
        "fs/write_text_file",
        marked_write(&fresh, "fresh\n", marker("write_file")),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(mode_of(&fresh), 0o600);
    assert_eq!(audit.one("fs.access")["created"], true);
    assert!(temps(&t.out).is_empty(), "{:?}", temps(&t.out));
}

/// SPEC 4 and 10: a write that took the external route (enabled, valid
/// marker, resolver said outside) and was then refused by the external
/// writer's own checks is that writer's outcome: its one `fs.denied` names
/// `writer: "external"` and the marker's `source`, like the `fs.access` of a
/// success does.
#[test]
fn refusals_by_the_external_writer_are_audited_as_external_with_the_source() {
    let t = Tree::new();
    fs::write(t.out.join("real.txt"), "real\n").unwrap();
    symlink("real.txt", t.out.join("link.txt")).unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let out = t.out.to_str().unwrap();
    for (path, kind) in [
        (format!("{out}/link.txt"), "symlink_escape"),
        (format!("{out}/missing/x.txt"), "path_not_found"),
        (format!("{out}/./x.txt"), "path_outside_workspace"),
    ] {
        let ev = refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(Path::new(&path), "x\n", marker("notebook_edit")),
            kind,
        );
        assert_eq!(ev["writer"], "external", "{path}: {ev}");
        assert_eq!(ev["source"], "notebook_edit", "{path}: {ev}");
    }
}

/// SPEC 1 and 7.4: requests on one connection run concurrently and two
/// writes of one canonical target serialise on the path lock; pipelined
/// marked writes to one existing outside file must all land (the last one
/// to take the lock wins), not refuse each other as if the file had been
/// swapped by an attacker.
#[test]
fn pipelined_external_writes_to_one_existing_file_all_land() {
    const N: usize = 20;
    let t = Tree::new();
    let target = t.out.join("f.txt");
    fs::write(&target, "start\n").unwrap();
    let mut d = t.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    for i in 0..N {
        c.send(&req(
            json!(i),
            "fs/write_text_file",
            marked_write(&target, &format!("w{i}\n"), marker("write_file")),
        ));
    }
    let responses: Vec<Value> = (0..N).map(|_| c.recv()).collect();
    let refused: Vec<&Value> = responses
        .iter()
        .filter(|r| r.get("error").is_some())
        .collect();
    assert!(
        refused.is_empty(),
        "{} of {N} refused, e.g. {}",
        refused.len(),
        refused[0]
    );
    let text = fs::read_to_string(&target).unwrap();
    assert!(
        (0..N).any(|i| text == format!("w{i}\n")),
        "one whole write: {text:?}"
    );
    let events = t.audit_events();
    assert_eq!(events.len(), N);
    assert!(
        events.iter().all(|e| e["type"] == "fs.access"),
        "{events:?}"
    );
}

// ---------------------------------------------------------------------------
// 4. Another registered workspace is outside for this runtime (SPEC 4).
// ---------------------------------------------------------------------------

#[test]
fn another_registered_workspace_is_outside_unless_marked() {
    let t = Tree::new();
    let mut d = t.stdio_daemon(&["--workspace", t.wsb.to_str().unwrap()]);
    let mut c = d.stdio_client();
    let r = c.call("initialize", json!({"protocolVersion": 1}));
    let a_id = workspace_of(&r)["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    assert_eq!(workspace_of(&r)["root"], json!(t.ws));
    let mut audit = t.audit();
    let target = t.wsb.join("x.txt");
    refused_write(
        &t,
        &mut c,
        &mut audit,
        write_params(&target, "unmarked\n"),
        "path_outside_workspace",
    );
    let r = c.call(
        "fs/write_text_file",
        marked_write(&target, "marked\n", marker("write_file")),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&target).unwrap(), b"marked\n");
    let ev = audit.one("fs.access");
    assert_eq!(ev["writer"], "external", "{ev}");
    assert_eq!(ev["source"], "write_file", "{ev}");
    assert_eq!(ev["workspace"], a_id, "the connection's own runtime: {ev}");
}

/// 20 marked external appends from a connection of A and 20 unmarked
/// workspace appends from a socket connection bound to B, to one file of B,
/// from two threads at once: the shared path lock serialises them and all
/// 40 lines land.
#[test]
fn concurrent_appends_from_two_workspaces_to_one_file_all_land() {
    const N: usize = 20;
    let t = Tree::new();
    let target = t.wsb.join("log.txt");
    fs::write(&target, "").unwrap();
    let mut d = t.daemon(Opts {
        stdio: true,
        socket: true,
        args: &["--workspace", t.wsb.to_str().unwrap()],
        ..Opts::default()
    });
    let a = d.stdio_client();
    let mut b = d.connect();
    let r = initialize_in(&mut b, json!(t.wsb));
    assert_eq!(workspace_of(&r)["root"], json!(t.wsb), "{r}");
    let go = Arc::new(AtomicBool::new(false));
    let spawn = |mut c: Client, tag: &'static str, meta: Option<Value>| {
        let target = target.clone();
        let go = go.clone();
        std::thread::spawn(move || {
            while !go.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let mut out = Vec::new();
            for i in 0..N {
                let mut p = json!({"sessionId": tag, "path": target, "mode": "append",
                                   "content": format!("{tag} {i}\n")});
                if let Some(m) = &meta {
                    p["_meta"] = m.clone();
                }
                out.push(c.call("_writegate/edit_text_file", p));
            }
            out
        })
    };
    let ta = spawn(a, "A", Some(marker("edit")));
    let tb = spawn(b, "B", None);
    go.store(true, Ordering::SeqCst);
    let ra = ta.join().unwrap();
    let rb = tb.join().unwrap();
    let failures: Vec<&Value> = ra
        .iter()
        .chain(rb.iter())
        .filter(|r| r.get("error").is_some())
        .collect();
    let text = fs::read_to_string(&target).unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} appends refused, e.g. {}; file has {} lines",
        failures.len(),
        2 * N,
        failures[0],
        text.lines().count()
    );
    assert_eq!(text.lines().count(), 2 * N, "{text}");
    for tag in ["A", "B"] {
        for i in 0..N {
            assert!(
                text.contains(&format!("{tag} {i}\n")),
                "{tag} {i} lost:\n{text}"
            );
        }
    }
    let events = t.audit_events();
    assert_eq!(events.len(), 2 * N);
    for e in &events {
        assert_eq!(e["type"], "fs.access", "{e}");
        let want = if e["sessionId"] == "A" {
            "external"
        } else {
            "workspace"
        };
        assert_eq!(e["writer"], want, "{e}");
    }
    assert!(temps(&t.wsb).is_empty());
}

// ---------------------------------------------------------------------------
// 5. Generations, SIGHUP reloads, nested roots, dynamic workspaces (SPEC 2).
// ---------------------------------------------------------------------------

#[test]
fn sighup_trust_change_moves_the_connection_to_a_fresh_untrusted_runtime_and_removal_closes_it() {
    let t = Tree::new();
    let (cfg, b) = config_listing_b(&t);
    let mut d = t.daemon(Opts {
        stdio: true,
        socket: true,
        args: &["--config", cfg.to_str().unwrap()],
        ..Opts::default()
    });
    let mut a = d.stdio_client();
    let mut c = d.connect();
    let r = initialize_in(&mut c, json!(b));
    let w = workspace_of(&r);
    assert_eq!(w["root"], json!(t.wsb), "{r}");
    assert_eq!(w["trusted"], true, "{r}");
    let b_id = w["id"].as_str().unwrap().to_string();
    let mut audit = t.audit();
    let target = t.wsb.join("f.txt");
    let r = c.call("fs/write_text_file", write_params(&target, "v1\n"));
    assert_eq!(r["result"], json!({}), "{r}");
    audit.one("fs.access");

    // Trust flips to false: the same connection moves to the fresh runtime of
    // the same root and its writes are refused.
    fs::write(&cfg, workspace_toml(&b, false)).unwrap();
    d.signal(Signal::HUP);
    // A write caught in flight by the reload holds the old runtime and is
    // refused with generation_closed (nothing written); later ones run on
    // the fresh, untrusted runtime.
    let mut expected = b"v1\n".to_vec();
    let mut attempt = 0;
    poll("the trust change", || {
        attempt += 1;
        let content = format!("attempt {attempt}\n");
        let r = c.call("fs/write_text_file", write_params(&target, &content));
        let events = audit.new_events();
        assert_eq!(events.len(), 1, "{events:?}");
        if r.get("result").is_some() {
            expected = content.into_bytes();
            assert_eq!(fs::read(&target).unwrap(), expected);
            return None;
        }
        assert_eq!(fs::read(&target).unwrap(), expected, "refused: {r}");
        assert_eq!(events[0]["type"], "fs.denied");
        if r["error"]["data"]["errorKind"] == "generation_closed" {
            assert_refused(&r, "generation_closed");
            return None;
        }
        assert_refused(&r, "untrusted_workspace");
        assert_eq!(events[0]["errorKind"], "untrusted_workspace");
        assert_eq!(events[0]["workspace"], b_id, "same root, same id");
        Some(())
    });
    assert_eq!(fs::read(&target).unwrap(), expected);

    // B is removed: the connection's generation is closed for good.
    fs::write(&cfg, "").unwrap();
    d.signal(Signal::HUP);
    poll("the removal", || {
        let before = t.snapshot();
        let r = c.call("fs/write_text_file", write_params(&target, "v2\n"));
        let events = audit.new_events();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(t.snapshot(), before, "a refused write changes nothing");
        let kind = r["error"]["data"]["errorKind"].as_str().unwrap_or("");
        if kind == "untrusted_workspace" {
            return None;
        }
        assert_refused(&r, "generation_closed");
        assert_eq!(events[0]["type"], "fs.denied");
        assert_eq!(events[0]["errorKind"], "generation_closed", "{}", events[0]);
        Some(())
    });
    // Edits are closed too, and stay closed.
    let before = t.snapshot();
    let r = c.call(
        "_writegate/edit_text_file",
        json!({"sessionId": "s", "path": target, "mode": "append", "content": "more\n"}),
    );
    assert_refused(&r, "generation_closed");
    assert_eq!(audit.one("fs.denied")["errorKind"], "generation_closed");
    assert_eq!(t.snapshot(), before);
    assert_eq!(fs::read(&target).unwrap(), expected);

    // B is no longer registered; the command-line workspace A is unaffected.
    let mut c2 = d.connect();
    let r = initialize_in(&mut c2, json!(b));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = a.call(
        "fs/write_text_file",
        write_params(&t.ws.join("a.txt"), "a\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    audit.one("fs.access");
}

#[test]
fn sighup_with_an_invalid_config_keeps_the_old_one() {
    let t = Tree::new();
    let (cfg, b) = config_listing_b(&t);
    let mut d = t.daemon(Opts {
        socket: true,
        args: &["--config", cfg.to_str().unwrap()],
        ..Opts::default()
    });
    let mut c = d.connect();
    let r = initialize_in(&mut c, json!(b));
    assert_eq!(workspace_of(&r)["trusted"], true, "{r}");
    let target = t.wsb.join("f.txt");
    let r = c.call("fs/write_text_file", write_params(&target, "one\n"));
    assert_eq!(r["result"], json!({}), "{r}");

    fs::write(&cfg, "this is [[[ not = = toml\n").unwrap();
    d.signal(Signal::HUP);
    poll("the invalid-config log line", || {
        d.stderr_text().contains("invalid config").then_some(())
    });
    let err = d.stderr_text();
    assert!(err.contains(cfg.to_str().unwrap()), "names the file: {err}");
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon keeps running"
    );
    let r = c.call("fs/write_text_file", write_params(&target, "two\n"));
    assert_eq!(r["result"], json!({}), "old config, same generation: {r}");
    assert_eq!(fs::read(&target).unwrap(), b"two\n");
    // A new connection still finds B, trusted.
    let mut c2 = d.connect();
    let r = initialize_in(&mut c2, json!(b));
    assert_eq!(workspace_of(&r)["trusted"], true, "{r}");
}

#[test]
fn nested_workspace_roots_are_refused_at_start() {
    let t = Tree::new();
    let sub = t.ws.join("sub");
    fs::create_dir(&sub).unwrap();
    for args in [
        vec![
            "--workspace",
            t.ws.to_str().unwrap(),
            "--workspace",
            sub.to_str().unwrap(),
        ],
        vec![
            "--workspace",
            sub.to_str().unwrap(),
            "--workspace",
            t.ws.to_str().unwrap(),
        ],
    ] {
        let mut cmd = t.command();
        cmd.arg("serve").arg("--stdio").args(&args);
        let (status, stdout, stderr) = run_with_stdin(cmd, b"");
        assert!(!status.success(), "{args:?}: {status:?}");
        assert!(stderr.contains("nested"), "{args:?}: {stderr}");
        assert!(
            stdout.is_empty(),
            "nothing but protocol lines on stdout: {stdout}"
        );
    }
    // Siblings sharing a string prefix are not nested.
    let evil = t.base.join("ws-evil");
    fs::create_dir(&evil).unwrap();
    let mut d = t.stdio_daemon(&["--workspace", evil.to_str().unwrap()]);
    let mut c = d.stdio_client();
    let r = c.call("initialize", json!({"protocolVersion": 1}));
    assert!(r.get("result").is_some(), "{r}");
}

#[test]
fn dynamic_workspaces_off_refuses_an_unregistered_directory() {
    let t = Tree::new();
    let stranger = t.base.join("stranger");
    fs::create_dir(&stranger).unwrap();
    let d = t.socket_daemon(&[]);
    let mut c = d.connect();
    let r = initialize_in(&mut c, json!(stranger));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // The connection stays with the primary: the stranger is outside.
    let mut audit = t.audit();
    refused_write(
        &t,
        &mut c,
        &mut audit,
        write_params(&stranger.join("x.txt"), "x\n"),
        "path_outside_workspace",
    );
}

#[test]
fn dynamic_workspaces_on_register_with_trust_only_from_the_config_list() {
    let t = Tree::new();
    let listed = t.base.join("listed");
    let listed_untrusted = t.base.join("listed-untrusted");
    let stranger = t.base.join("stranger");
    for d in [&listed, &listed_untrusted, &stranger] {
        fs::create_dir(d).unwrap();
    }
    let cfg = t.base.join("config/wg.toml");
    fs::write(
        &cfg,
        format!(
            "allow_dynamic_workspaces = true\n{}{}",
            workspace_toml(listed.to_str().unwrap(), true),
            workspace_toml(listed_untrusted.to_str().unwrap(), false)
        ),
    )
    .unwrap();
    let d = t.socket_daemon(&["--config", cfg.to_str().unwrap()]);
    let mut audit = t.audit();

    // An unregistered directory is registered, untrusted.
    let mut c = d.connect();
    let r = initialize_in(&mut c, json!(stranger));
    let w = workspace_of(&r);
    assert_eq!(w["root"], json!(stranger), "{r}");
    assert_eq!(w["trusted"], false, "{r}");
    refused_write(
        &t,
        &mut c,
        &mut audit,
        write_params(&stranger.join("x.txt"), "x\n"),
        "untrusted_workspace",
    );
    // A second connection naming it by runtime id finds the same runtime.
    let id = w["id"].as_str().unwrap().to_string();
    let mut c_id = d.connect();
    let r = initialize_in(&mut c_id, json!(id));
    assert_eq!(workspace_of(&r)["root"], json!(stranger), "{r}");

    // Roots of the config list keep the list's trust.
    for (root, trusted) in [(&listed, true), (&listed_untrusted, false)] {
        let mut c = d.connect();
        let r = initialize_in(&mut c, json!(root));
        assert_eq!(workspace_of(&r)["trusted"], trusted, "{r}");
        let target = root.join("x.txt");
        if trusted {
            let r = c.call("fs/write_text_file", write_params(&target, "x\n"));
            assert_eq!(r["result"], json!({}), "{r}");
            audit.one("fs.access");
        } else {
            refused_write(
                &t,
                &mut c,
                &mut audit,
                write_params(&target, "x\n"),
                "untrusted_workspace",
            );
        }
    }

    // A directory inside a registered root is nested: refused.
    let inner = t.ws.join("inner");
    fs::create_dir(&inner).unwrap();
    let mut c = d.connect();
    let r = initialize_in(&mut c, json!(inner));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// SPEC 2 and 13: SIGHUP re-reads the config file; a workspace that a socket
/// client registered dynamically is not "removed" by a reload whose file
/// did not change, so its connections keep working (here: reading, which
/// an untrusted workspace still allows).
#[test]
fn sighup_with_an_unchanged_config_keeps_dynamically_registered_workspaces() {
    let t = Tree::new();
    let stranger = t.base.join("stranger");
    fs::create_dir(&stranger).unwrap();
    fs::write(stranger.join("r.txt"), "one\ntwo\n").unwrap();
    let cfg = t.base.join("config/wg.toml");
    fs::write(&cfg, "allow_dynamic_workspaces = true\n").unwrap();
    let d = t.socket_daemon(&["--config", cfg.to_str().unwrap()]);
    let mut c = d.connect();
    let r = initialize_in(&mut c, json!(stranger));
    let id = workspace_of(&r)["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let read = json!({"sessionId": "s", "path": stranger.join("r.txt")});
    let r = c.call("_writegate/read_lines", read.clone());
    assert_eq!(r["result"]["totalLines"], 2, "{r}");
    d.signal(Signal::HUP);
    poll("the reload", || {
        d.stderr_text().contains("config reloaded").then_some(())
    });
    let r = c.call("_writegate/read_lines", read);
    assert_eq!(
        r["result"]["totalLines"], 2,
        "an unchanged config must not close the dynamic workspace: {r}"
    );
    let mut c2 = d.connect();
    let r = initialize_in(&mut c2, json!(id));
    assert_eq!(
        workspace_of(&r)["root"],
        json!(stranger),
        "still registered under its id: {r}"
    );
}

// ---------------------------------------------------------------------------
// 6. The approval gate (SPEC 12).
// ---------------------------------------------------------------------------

#[test]
fn credential_and_repository_paths_need_approval() {
    let t = Tree::new();
    fs::create_dir(t.ws.join(".ssh")).unwrap();
    fs::create_dir(t.ws.join(".git")).unwrap();
    fs::write(t.ws.join(".git/config"), "[core]\n").unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for rel in [".ssh/config", ".env", "key.pem", ".git/config"] {
        let target = t.ws.join(rel);
        for method in ["fs/write_text_file", "_writegate/edit_text_file"] {
            let mut params = write_params(&target, "x\n");
            let mode = if method == "fs/write_text_file" {
                "write"
            } else {
                params["mode"] = json!("append");
                "append"
            };
            let before = t.snapshot();
            let r = c.call(method, params);
            assert_refused(&r, "approval_required");
            assert_eq!(r["error"]["code"], -32603, "{r}");
            assert_eq!(r["error"]["data"]["status"], 403, "{r}");
            assert_eq!(
                r["error"]["data"]["command"],
                format!("edit_file {mode} {}", target.display()),
                "{r}"
            );
            assert_eq!(t.snapshot(), before, "{rel}: nothing written");
            assert_eq!(audit.one("fs.denied")["errorKind"], "approval_required");
        }
    }
    // An ordinary path needs no approval.
    let r = c.call(
        "fs/write_text_file",
        write_params(&t.ws.join("main.rs"), "fn main() {}\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
}

#[test]
fn approval_once_lets_exactly_the_next_write_through() {
    let t = Tree::new();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let target = t.ws.join(".env");
    let command = needs_approval(&t, &mut c, &mut audit, &target, "s1");
    approve(&mut c, "s1", &command, "once");
    // Another session does not consume it.
    needs_approval(&t, &mut c, &mut audit, &target, "s2");
    write_ok(&mut c, &mut audit, &target, "s1", "A=1\n");
    needs_approval(&t, &mut c, &mut audit, &target, "s1");
    assert_eq!(fs::read(&target).unwrap(), b"A=1\n");
}

#[test]
fn approval_session_scope_covers_that_session_only() {
    let t = Tree::new();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let target = t.ws.join("key.pem");
    needs_approval(&t, &mut c, &mut audit, &target, "s1");
    approve(&mut c, "s1", "edit_file * */key.pem", "session");
    write_ok(&mut c, &mut audit, &target, "s1", "one\n");
    write_ok(&mut c, &mut audit, &target, "s1", "two\n");
    needs_approval(&t, &mut c, &mut audit, &target, "s2");
    assert_eq!(fs::read(&target).unwrap(), b"two\n");
}

#[test]
fn approval_workspace_scope_covers_every_session_of_that_workspace_only() {
    let t = Tree::new();
    let mut d = t.daemon(Opts {
        stdio: true,
        socket: true,
        args: &["--workspace", t.wsb.to_str().unwrap()],
        ..Opts::default()
    });
    let mut a = d.stdio_client();
    let mut b = d.connect();
    let r = initialize_in(&mut b, json!(t.wsb));
    assert!(r.get("result").is_some(), "{r}");
    let mut audit = t.audit();
    approve(&mut a, "s1", "edit_file write */.env", "workspace");
    for session in ["s1", "s2", "s3"] {
        write_ok(&mut a, &mut audit, &t.ws.join(".env"), session, "A=1\n");
    }
    // The same pattern from a connection of B is not approved.
    needs_approval(&t, &mut b, &mut audit, &t.wsb.join(".env"), "s1");
}

#[test]
fn approval_persistent_survives_a_restart_and_is_stored_0600() {
    let t = Tree::new();
    fs::create_dir(t.ws.join(".ssh")).unwrap();
    let target = t.ws.join(".ssh/config");
    let other = t.ws.join("id_rsa");
    let mut audit = t.audit();
    {
        let mut d = t.stdio_daemon(&[]);
        let mut c = d.stdio_client();
        let command = needs_approval(&t, &mut c, &mut audit, &target, "s1");
        approve(&mut c, "s1", &command, "persistent");
        write_ok(&mut c, &mut audit, &target, "s1", "Host a\n");
        write_ok(&mut c, &mut audit, &target, "s2", "Host b\n");
        c.close_write();
        assert!(d.wait_exit().success(), "{}", d.stderr_text());
    }
    let file = t.base.join("state/writegate/approvals.json");
    assert_eq!(mode_of(&file), 0o600);
    assert!(
        fs::read_to_string(&file)
            .unwrap()
            .contains(&format!("edit_file write {}", target.display())),
        "{}",
        fs::read_to_string(&file).unwrap()
    );
    assert!(temps(&t.base.join("state")).is_empty());
    // Same XDG_STATE_HOME, new process: still approved, nothing else is.
    let mut d = t.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    write_ok(&mut c, &mut audit, &target, "s9", "Host c\n");
    assert_eq!(fs::read(&target).unwrap(), b"Host c\n");
    needs_approval(&t, &mut c, &mut audit, &other, "s9");
}

#[test]
fn the_approval_gate_also_applies_on_the_external_route() {
    let t = Tree::new();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let target = t.out.join(".env");
    let params = json!({"sessionId": "s1", "path": target, "content": "K=v\n", "_meta": marker("write_file")});
    let before = t.snapshot();
    let r = c.call("fs/write_text_file", params.clone());
    assert_refused(&r, "approval_required");
    assert_eq!(
        r["error"]["data"]["command"],
        format!("edit_file write {}", target.display()),
        "{r}"
    );
    assert_eq!(t.snapshot(), before);
    let ev = audit.one("fs.denied");
    assert_eq!(ev["errorKind"], "approval_required", "{ev}");
    assert_eq!(ev["writer"], "external", "{ev}");
    approve(
        &mut c,
        "s1",
        r["error"]["data"]["command"].as_str().unwrap(),
        "once",
    );
    let r = c.call("fs/write_text_file", params);
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&target).unwrap(), b"K=v\n");
    assert_eq!(audit.one("fs.access")["writer"], "external");
}

#[test]
fn a_config_rule_raises_an_ordinary_path_and_auto_approve_dangerous_lets_credentials_through() {
    let t = Tree::new();
    fs::create_dir(t.ws.join("generated")).unwrap();
    fs::create_dir(t.ws.join(".ssh")).unwrap();
    let raise = t.base.join("config/raise.toml");
    fs::write(
        &raise,
        "[policy]\nrules = [{pattern = \"edit_file * */generated/*\", level = \"dangerous\"}]\n",
    )
    .unwrap();
    let mut audit = t.audit();
    {
        let mut d = t.stdio_daemon(&["--config", raise.to_str().unwrap()]);
        let mut c = d.stdio_client();
        needs_approval(&t, &mut c, &mut audit, &t.ws.join("generated/x.ts"), "s");
        write_ok(&mut c, &mut audit, &t.ws.join("src.ts"), "s", "ok\n");
    }
    let lax = t.base.join("config/lax.toml");
    fs::write(&lax, "[policy]\nauto_approve = \"dangerous\"\n").unwrap();
    let mut d = t.stdio_daemon(&["--config", lax.to_str().unwrap()]);
    let mut c = d.stdio_client();
    for rel in [".env", ".ssh/config", "key.pem"] {
        write_ok(&mut c, &mut audit, &t.ws.join(rel), "s", "ok\n");
    }
}

// ---------------------------------------------------------------------------
// 7. The lstat/realpath swap, racing end to end (SPEC 7.1 step 3, 7.3).
// ---------------------------------------------------------------------------

/// A thread keeps swapping an outside leaf between a regular file and a
/// symlink to a secret file (each by an atomic rename) while the client sends
/// 2000 marked external writes to that leaf. Whatever the interleaving, the
/// secret is never written, every answer is a success or a refusal of the
/// swap, and no temp file is left anywhere.
#[test]
fn racing_leaf_swap_between_file_and_symlink_never_writes_the_secret() {
    const WRITES: usize = 2000;
    const WINDOW: usize = 1;
    let t = Tree::new();
    let secret_dir = t.base.join("secret");
    let stage = t.base.join("stage");
    fs::create_dir(&secret_dir).unwrap();
    fs::create_dir(&stage).unwrap();
    let secret = secret_dir.join("secret.txt");
    fs::write(&secret, "TOP SECRET\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let secret_meta = fs::metadata(&secret).unwrap();
    let leaf = t.out.join("target.txt");
    fs::write(&leaf, "start\n").unwrap();

    let mut d = t.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        let (leaf, stage, secret) = (leaf.clone(), stage.clone(), secret.clone());
        std::thread::spawn(move || {
            let (f, l) = (stage.join("as-file"), stage.join("as-link"));
            while !stop.load(Ordering::Relaxed) {
                fs::write(&f, "decoy\n").unwrap();
                fs::rename(&f, &leaf).unwrap();
                // Pacing only (no assertion depends on it): give the daemon
                // a chance to see the regular file, so that both outcomes
                // and the windows between its checks get exercised.
                std::thread::sleep(Duration::from_micros(200));
                symlink(&secret, &l).unwrap();
                fs::rename(&l, &leaf).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut answered = BTreeSet::new();
    let mut unexpected = Vec::new();
    let mut sent = 0;
    while sent < WRITES {
        let n = WINDOW.min(WRITES - sent);
        for i in 0..n {
            let content = format!("write {}\n", sent + i);
            c.send(&req(
                json!(sent + i),
                "fs/write_text_file",
                marked_write(&leaf, &content, marker("write_file")),
            ));
        }
        for _ in 0..n {
            let r = c.recv();
            assert!(answered.insert(r["id"].to_string()), "answered twice: {r}");
            let kind = if r.get("result").is_some() {
                "ok".to_string()
            } else {
                r["error"]["data"]["errorKind"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string()
            };
            if !["ok", "symlink_escape", "parse_error"].contains(&kind.as_str()) {
                unexpected.push(r.clone());
            }
            *outcomes.entry(kind).or_default() += 1;
        }
        sent += n;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    eprintln!(
        "{} swaps; outcomes {outcomes:?}",
        swaps.load(Ordering::Relaxed)
    );

    let now = fs::symlink_metadata(&secret).unwrap();
    assert!(
        now.file_type().is_file(),
        "the secret is still a regular file"
    );
    assert_eq!(
        fs::read(&secret).unwrap(),
        b"TOP SECRET\n",
        "the secret never changes"
    );
    assert_eq!(
        (now.ino(), now.mode(), now.len()),
        (secret_meta.ino(), secret_meta.mode(), secret_meta.len()),
        "the secret was never replaced"
    );
    assert!(unexpected.is_empty(), "unexpected answers: {unexpected:?}");
    assert_eq!(outcomes.values().sum::<usize>(), WRITES);
    assert_eq!(answered.len(), WRITES, "every request answered once");
    for dir in [&t.out, &stage, &secret_dir, &t.ws] {
        assert!(temps(dir).is_empty(), "temp files left: {:?}", temps(dir));
    }
    let stray: Vec<_> = fs::read_dir(&t.out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "target.txt")
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
    let events = t.audit_events();
    assert_eq!(events.len(), WRITES, "one audit event per write");
    let accessed = events.iter().filter(|e| e["type"] == "fs.access").count();
    assert_eq!(accessed, outcomes.get("ok").copied().unwrap_or(0));
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Sends one request that must be refused with `kind`; checks the tree did
/// not change and exactly one audit event (`fs.denied` with that
/// `errorKind`) was written. Returns the event.
fn refused_unchanged(
    t: &Tree,
    c: &mut Client,
    audit: &mut Audit,
    method: &str,
    params: Value,
    kind: &str,
) -> Value {
    let before = t.snapshot();
    let r = c.call(method, params.clone());
    assert_refused(&r, kind);
    assert_eq!(
        t.snapshot(),
        before,
        "{method} {params}: a refusal must not change the tree"
    );
    let ev = audit.one("fs.denied");
    assert_eq!(ev["errorKind"], kind, "{ev}");
    ev
}

/// [`refused_unchanged`] for an `fs/write_text_file` with `params`.
fn refused_write(t: &Tree, c: &mut Client, audit: &mut Audit, params: Value, kind: &str) -> Value {
    refused_unchanged(t, c, audit, "fs/write_text_file", params, kind)
}

/// A refusal with `kind` and its documented wire shape (SPEC 11).
fn assert_refused(r: &Value, kind: &str) {
    let e = &r["error"];
    assert_eq!(e["data"]["errorKind"], kind, "{r}");
    if kind == "path_not_found" {
        assert_eq!(e["code"], -32002, "{r}");
        assert!(e["data"]["uri"].is_string(), "{r}");
    } else {
        assert_eq!(e["code"], -32603, "{r}");
        assert_eq!(e["data"]["status"], status_of(kind), "{r}");
    }
}

fn status_of(kind: &str) -> u16 {
    match kind {
        "path_outside_workspace" | "symlink_escape" | "parse_error" => 400,
        "untrusted_workspace" | "permission_denied" | "approval_required" => 403,
        "path_not_found" => 404,
        "hash_mismatch" | "file_already_exists" => 409,
        "file_too_large" => 413,
        "generation_closed" | "io_error" => 503,
        "internal_error" => 500,
        _ => 422,
    }
}

/// A write to `target` by `session` is refused with `approval_required`;
/// returns the synthetic command.
fn needs_approval(
    t: &Tree,
    c: &mut Client,
    audit: &mut Audit,
    target: &Path,
    session: &str,
) -> String {
    let before = t.snapshot();
    let r = c.call(
        "fs/write_text_file",
        json!({"sessionId": session, "path": target, "content": "needs approval\n"}),
    );
    assert_refused(&r, "approval_required");
    let command = format!("edit_file write {}", target.display());
    assert_eq!(r["error"]["data"]["command"], command, "{r}");
    assert_eq!(t.snapshot(), before, "nothing written");
    let ev = audit.one("fs.denied");
    assert_eq!(ev["errorKind"], "approval_required", "{ev}");
    assert_eq!(ev["sessionId"], session, "{ev}");
    command
}

fn approve(c: &mut Client, session: &str, pattern: &str, scope: &str) {
    let r = c.call(
        "_writegate/approve",
        json!({"sessionId": session, "pattern": pattern, "scope": scope}),
    );
    assert!(r.get("result").is_some(), "{r}");
}

fn write_ok(c: &mut Client, audit: &mut Audit, target: &Path, session: &str, content: &str) {
    let r = c.call(
        "fs/write_text_file",
        json!({"sessionId": session, "path": target, "content": content}),
    );
    assert_eq!(r["result"], json!({}), "{}: {r}", target.display());
    assert_eq!(fs::read_to_string(target).unwrap(), content);
    assert_eq!(audit.one("fs.access")["sessionId"], session);
}

fn marker(source: &str) -> Value {
    json!({ MARKER_KEY: {"version": 1, "source": source} })
}

/// [`write_params`] with `meta` (a marker) as `_meta`.
fn marked_write(path: &Path, content: &str, meta: Value) -> Value {
    let mut p = write_params(path, content);
    p["_meta"] = meta;
    p
}

/// A `--stdio` daemon of `t` (with `extra` arguments), its client, and a
/// reader of the audit log.
fn stdio_session(t: &Tree, extra: &[&str]) -> (Daemon, Client, Audit) {
    let mut d = t.stdio_daemon(extra);
    let c = d.stdio_client();
    (d, c, t.audit())
}

/// `initialize` asking for `workspace` (a root or a runtime id).
fn initialize_in(c: &mut Client, workspace: Value) -> Value {
    c.call(
        "initialize",
        json!({"protocolVersion": 1, "_meta": {"writegate/workspace": workspace}}),
    )
}

/// The workspace an `initialize` response names.
fn workspace_of(r: &Value) -> &Value {
    &r["result"]["_meta"]["writegate"]["workspace"]
}

/// Writes `config/wg.toml` listing workspace B as trusted; returns its path
/// and B's root.
fn config_listing_b(t: &Tree) -> (PathBuf, String) {
    let cfg = t.base.join("config/wg.toml");
    let b = t.wsb.to_str().unwrap().to_string();
    fs::write(&cfg, workspace_toml(&b, true)).unwrap();
    (cfg, b)
}

fn workspace_toml(root: &str, trusted: bool) -> String {
    format!(
        "[[workspace]]\nroot = {}\ntrusted = {trusted}\n",
        json!(root)
    )
}

/// Retries `f` until it returns `Some` (reloads are asynchronous).
fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < RELOAD_TIMEOUT,
            "{what} never became visible"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Review finding: a marked write whose path the resolver refused for a
/// suspicious name reached through a link (`lnk -> aux`, inside the root)
/// must not take the external route into the workspace (SPEC 4: only paths
/// outside every root reach the external writer).
#[test]
fn marked_write_through_a_link_to_a_suspicious_name_inside_the_root_stays_refused() {
    let t = Tree::new();
    fs::create_dir(t.ws.join("aux")).unwrap();
    std::os::unix::fs::symlink("aux", t.ws.join("lnk")).unwrap();
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    let r = c.call(
        "fs/write_text_file",
        marked_write(
            &t.ws.join("lnk/f.txt"),
            "x\n",
            json!({MARKER_KEY: marker("write_file")}),
        ),
    );
    assert_refused(&r, "path_outside_workspace");
    assert!(!t.ws.join("aux/f.txt").exists());
    let e = audit.one("fs.denied");
    assert_eq!(e["errorKind"], "path_outside_workspace");
}
