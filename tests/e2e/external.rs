//! The external host writer (SPEC 4, 7.1; seed 003): the `_meta` marker
//! (anything but a strictly valid marker is no marker), `--no-external-writes`,
//! and the refusals of SPEC 7.1, each with one `fs.denied` and nothing changed.

use crate::common::{
    BIN, Clients, MARKER_KEY, Opts, Tree, TreeAudit, assert_refused, marked_write, marker, mode_of,
    refused_unchanged, refused_write, req, stdio_session, temps,
};
use serde_json::{Value, json};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::Path;

/// The sources a valid marker may name.
const SOURCES: [&str; 4] = ["write_file", "edit", "notebook_edit", "shell_sed_edit"];

// ---------------------------------------------------------------------------
// The marker (SPEC 4): anything but a strictly valid marker is no marker.
// ---------------------------------------------------------------------------

#[test]
fn malformed_markers_fail_closed_as_path_outside_workspace() {
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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

/// A marked write whose path the resolver refused for a
/// suspicious name reached through a link (`lnk -> aux`, inside the root)
/// must not take the external route into the workspace (SPEC 4: only paths
/// outside every root reach the external writer).
#[test]
fn marked_write_through_a_link_to_a_suspicious_name_inside_the_root_stays_refused() {
    let t = Tree::new(BIN);
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
    assert_refused(&r, "reserved_name");
    assert!(!t.ws.join("aux/f.txt").exists());
    let e = audit.one("fs.denied");
    assert_eq!(e["errorKind"], "reserved_name");
}

// ---------------------------------------------------------------------------
// --no-external-writes
// ---------------------------------------------------------------------------

#[test]
fn no_external_writes_refuses_a_marked_outside_write() {
    let t = Tree::new(BIN);
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
// The refusals of SPEC 7.1, each with one fs.denied and nothing changed.
// ---------------------------------------------------------------------------

#[test]
fn external_write_in_an_untrusted_workspace_is_untrusted_workspace() {
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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
        // An existing file is converted only on explicit request.
        meta["writegate/convertEncoding"] = json!(true);
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
    let t = Tree::new(BIN);
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

/// Suspicious leaf names outside every root are refused: DOS device
/// names as `reserved_name`, the other aliasing names as
/// `path_outside_workspace`.
#[test]
fn external_suspicious_leaf_names_are_outside() {
    let t = Tree::new(BIN);
    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    for (leaf, kind) in [
        ("aux.ts", "reserved_name"),
        ("x.", "path_outside_workspace"),
        ("...", "path_outside_workspace"),
        ("CON", "reserved_name"),
        ("lpt1.txt", "reserved_name"),
        ("trailing ", "path_outside_workspace"),
    ] {
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&t.out.join(leaf), "x\n", marker("write_file")),
            kind,
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
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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

/// A fifo or socket leaf is `parse_error` (conformance case X20); a
/// directory leaf says what it is, `not_a_file`.
#[test]
fn external_leaf_fifo_or_socket_is_parse_error_and_a_directory_is_not_a_file() {
    let t = Tree::new(BIN);
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
    for (leaf, kind) in [
        ("fifo", "parse_error"),
        ("sock", "parse_error"),
        ("dir", "not_a_file"),
    ] {
        refused_write(
            &t,
            &mut c,
            &mut audit,
            marked_write(&t.out.join(leaf), "x\n", marker("write_file")),
            kind,
        );
    }
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn external_unknown_encoding_is_unsupported_encoding() {
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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
