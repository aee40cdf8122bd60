//! Workspaces as runtimes (SPEC 2, 4): another registered workspace is
//! outside for a connection of the first, generations and SIGHUP reloads,
//! nested roots, dynamic workspaces.
//!
//! Reloads are asynchronous, so the tests that send SIGHUP poll (retrying the
//! same request) until the daemon shows the new state.

use crate::common::{
    BIN, Client, Clients, Finished, Opts, Tree, TreeAudit, assert_refused, initialize_in,
    marked_write, marker, refused_write, run_with_stdin, temps, workspace_of, write_params,
};
use rustix::process::Signal;
use serde_json::{Value, json};
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Upper bound for a reload to become visible after SIGHUP.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------
// Another registered workspace is outside for this runtime (SPEC 4).
// ---------------------------------------------------------------------------

#[test]
fn another_registered_workspace_is_outside_unless_marked() {
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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
    let r = initialize_in(&mut b, &json!(t.wsb));
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
// Generations, SIGHUP reloads, nested roots, dynamic workspaces (SPEC 2).
// ---------------------------------------------------------------------------

#[test]
fn sighup_trust_change_moves_the_connection_to_a_fresh_untrusted_runtime_and_removal_closes_it() {
    let t = Tree::new(BIN);
    let (cfg, b) = config_listing_b(&t);
    let mut d = t.daemon(Opts {
        stdio: true,
        socket: true,
        args: &["--config", cfg.to_str().unwrap()],
        ..Opts::default()
    });
    let mut a = d.stdio_client();
    let mut c = d.connect();
    let r = initialize_in(&mut c, &json!(b));
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
    let r = initialize_in(&mut c2, &json!(b));
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
    let t = Tree::new(BIN);
    let (cfg, b) = config_listing_b(&t);
    let mut d = t.daemon(Opts {
        socket: true,
        args: &["--config", cfg.to_str().unwrap()],
        ..Opts::default()
    });
    let mut c = d.connect();
    let r = initialize_in(&mut c, &json!(b));
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
    let r = initialize_in(&mut c2, &json!(b));
    assert_eq!(workspace_of(&r)["trusted"], true, "{r}");
}

#[test]
fn nested_workspace_roots_are_refused_at_start() {
    let t = Tree::new(BIN);
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
        let Finished {
            status,
            stdout,
            stderr,
            ..
        } = run_with_stdin(cmd, b"");
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
    let t = Tree::new(BIN);
    let stranger = t.base.join("stranger");
    fs::create_dir(&stranger).unwrap();
    let d = t.socket_daemon(&[]);
    let mut c = d.connect();
    let r = initialize_in(&mut c, &json!(stranger));
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
    let t = Tree::new(BIN);
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
    let r = initialize_in(&mut c, &json!(stranger));
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
    let r = initialize_in(&mut c_id, &json!(id));
    assert_eq!(workspace_of(&r)["root"], json!(stranger), "{r}");

    // Roots of the config list keep the list's trust.
    for (root, trusted) in [(&listed, true), (&listed_untrusted, false)] {
        let mut c = d.connect();
        let r = initialize_in(&mut c, &json!(root));
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
    let r = initialize_in(&mut c, &json!(inner));
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// SPEC 2 and 13: SIGHUP re-reads the config file; a workspace that a socket
/// client registered dynamically is not "removed" by a reload whose file
/// did not change, so its connections keep working (here: reading, which
/// an untrusted workspace still allows).
#[test]
fn sighup_with_an_unchanged_config_keeps_dynamically_registered_workspaces() {
    let t = Tree::new(BIN);
    let stranger = t.base.join("stranger");
    fs::create_dir(&stranger).unwrap();
    fs::write(stranger.join("r.txt"), "one\ntwo\n").unwrap();
    let cfg = t.base.join("config/wg.toml");
    fs::write(
        &cfg,
        "allow_dynamic_workspaces = true\nread_text_file = true\n",
    )
    .unwrap();
    let d = t.socket_daemon(&["--config", cfg.to_str().unwrap()]);
    let mut c = d.connect();
    let r = initialize_in(&mut c, &json!(stranger));
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
    let r = initialize_in(&mut c2, &json!(id));
    assert_eq!(
        workspace_of(&r)["root"],
        json!(stranger),
        "still registered under its id: {r}"
    );
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
