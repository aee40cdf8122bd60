//! Races against the file system (SPEC 5, 7.1 step 3, 7.3): a directory
//! inside the workspace swapped for a symlink to an outside directory, a
//! root ancestor swapped after registration, and an outside leaf swapped
//! between a regular file and a symlink to a secret. Nothing may ever land
//! outside, and the secret is never written.

use crate::common::{BIN, Clients, Tree, TreeAudit, marked_write, marker, req, temps};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

#[test]
fn directory_swapped_for_symlink_never_lets_a_write_escape() {
    let t = Tree::new(BIN);
    let (root, outside) = (t.ws.clone(), t.out.clone());
    let dir = root.join("d");
    let parked = root.join("d.real");
    std::fs::create_dir_all(&dir).unwrap();
    let link_tmp = root.join("d.link");
    let mut d = t.stdio_daemon(&[]);
    let mut c = d.stdio_client();

    // The attacker: swap `d` between the real directory and a symlink to `outside`.
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let attacker = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        let (dir, parked, outside, link_tmp) = (
            dir.clone(),
            parked.clone(),
            outside.clone(),
            link_tmp.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                // d -> parked; symlink -> d (atomic rename over nothing)
                if std::fs::rename(&dir, &parked).is_ok() {
                    let _ = std::fs::remove_file(&link_tmp);
                    std::os::unix::fs::symlink(&outside, &link_tmp).unwrap();
                    let _ = std::fs::rename(&link_tmp, &dir);
                    std::thread::yield_now();
                    // and back
                    let _ = std::fs::remove_file(&dir);
                    let _ = std::fs::rename(&parked, &dir);
                    swaps.fetch_add(1, Ordering::SeqCst);
                }
            }
        })
    };

    let n = 3000;
    let mut ok = 0;
    let mut refused = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..n {
        let params = json!({"sessionId": "race", "path": dir.join(format!("f{}.txt", i % 16)), "content": format!("write {i}\n")});
        let v = c.call_id(i, "fs/write_text_file", params);
        if v.get("result").is_some() {
            ok += 1;
        } else {
            let kind = v["error"]["data"]["errorKind"]
                .as_str()
                .unwrap_or("?")
                .to_string();
            assert!(
                [
                    "symlink_escape",
                    "file_changed",
                    "path_not_found",
                    "path_outside_workspace",
                    "parse_error"
                ]
                .contains(&kind.as_str()),
                "unexpected refusal: {v}"
            );
            *refused.entry(kind).or_default() += 1;
        }
    }
    stop.store(true, Ordering::SeqCst);
    attacker.join().unwrap();
    c.close_write();
    assert!(d.wait_exit().success());

    let escaped: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        escaped.is_empty(),
        "files landed outside the workspace: {escaped:?}"
    );
    // No temp file left anywhere under the workspace.
    let real = if dir.is_dir() && !dir.is_symlink() {
        dir.clone()
    } else {
        parked.clone()
    };
    for e in std::fs::read_dir(&real).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(
            Path::new(&name).extension().is_none_or(|x| x != "tmp"),
            "temp file left: {name}"
        );
    }
    let swaps = swaps.load(Ordering::SeqCst);
    eprintln!("{n} writes: {ok} landed, refused {refused:?}, {swaps} swaps");
    assert!(
        swaps > 0,
        "the attacker never swapped; the test proved nothing"
    );
    assert!(ok > 0, "no write landed; the test proved nothing");
}

/// An ancestor of the workspace root is swapped for a symlink after the
/// daemon registered the root: the resolver trusts the registered canonical
/// root, and the writer opens the target's directory with no symlink allowed
/// in any component, so the write is refused and nothing lands anywhere.
#[test]
fn root_ancestor_swapped_for_a_symlink_refuses_the_write() {
    let t = Tree::new(BIN);
    let a = t.base.join("a");
    let root = a.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let elsewhere = t.base.join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("root")).unwrap();
    let mut cmd = t.command();
    cmd.args(["serve", "--stdio", "--workspace"])
        .arg(&root)
        .arg("--audit-log")
        .arg(&t.audit_log);
    let mut d = t.spawn(cmd, true, None);
    let mut c = d.stdio_client();
    let mut call = |i: u64, path: &std::path::Path| -> Value {
        c.call_id(
            i,
            "fs/write_text_file",
            json!({"sessionId": "s", "path": path, "content": "x\n"}),
        )
    };
    // Registered and working.
    let ok = call(1, &root.join("before.txt"));
    assert!(ok.get("result").is_some(), "{ok}");
    // Swap the root's parent for a symlink to a look-alike tree.
    std::fs::rename(&a, t.base.join("a.real")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &a).unwrap();
    let r = call(2, &root.join("after.txt"));
    assert_eq!(r["error"]["data"]["errorKind"], "symlink_escape", "{r}");
    assert!(
        !elsewhere.join("root/after.txt").exists(),
        "the write followed the swapped ancestor"
    );
    assert!(!t.base.join("a.real/root/after.txt").exists());
    c.close_write();
    assert!(d.wait_exit().success());
}

/// A thread keeps swapping an outside leaf between a regular file and a
/// symlink to a secret file (each by an atomic rename) while the client sends
/// 2000 marked external writes to that leaf. Whatever the interleaving, the
/// secret is never written, every answer is a success or a refusal of the
/// swap, and no temp file is left anywhere.
#[test]
fn racing_leaf_swap_between_file_and_symlink_never_writes_the_secret() {
    const WRITES: usize = 2000;
    const WINDOW: usize = 1;
    let t = Tree::new(BIN);
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
            if !["ok", "symlink_escape", "file_changed", "parse_error"].contains(&kind.as_str()) {
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
