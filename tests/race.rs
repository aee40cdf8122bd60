//! A directory inside the workspace is swapped for a symlink to a directory
//! outside it, again and again, while the daemon takes a few thousand writes
//! into it. Nothing may ever land outside (SPEC 5, 7.3: the resolver and the
//! publisher's directory handle with O_NOFOLLOW/renameat).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[test]
fn directory_swapped_for_symlink_never_lets_a_write_escape() {
    let w = tempfile::tempdir().unwrap();
    let root = w.path().join("root");
    let outside = w.path().join("outside");
    let dir = root.join("d");
    let parked = root.join("d.real");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let link_tmp = root.join("d.link");
    let mut child = stdio_daemon(w.path(), &root);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());

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
        let req = json!({"jsonrpc": "2.0", "id": i, "method": "fs/write_text_file",
            "params": {"sessionId": "race", "path": dir.join(format!("f{}.txt", i % 16)), "content": format!("write {i}\n")}});
        writeln!(stdin, "{req}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["id"], i);
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
    drop(stdin);
    assert!(child.wait().unwrap().success());

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
        assert!(!name.ends_with(".tmp"), "temp file left: {name}");
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
    let w = tempfile::tempdir().unwrap();
    let a = w.path().join("a");
    let root = a.join("root");
    std::fs::create_dir_all(&root).unwrap();
    let elsewhere = w.path().join("elsewhere");
    std::fs::create_dir_all(elsewhere.join("root")).unwrap();
    let mut child = stdio_daemon(w.path(), &root);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut call = |i: u64, path: &std::path::Path| -> Value {
        let req = json!({"jsonrpc": "2.0", "id": i, "method": "fs/write_text_file",
            "params": {"sessionId": "s", "path": path, "content": "x\n"}});
        writeln!(stdin, "{req}").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    // Registered and working.
    let ok = call(1, &root.join("before.txt"));
    assert!(ok.get("result").is_some(), "{ok}");
    // Swap the root's parent for a symlink to a look-alike tree.
    std::fs::rename(&a, w.path().join("a.real")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &a).unwrap();
    let r = call(2, &root.join("after.txt"));
    assert_eq!(r["error"]["data"]["errorKind"], "symlink_escape", "{r}");
    assert!(
        !elsewhere.join("root/after.txt").exists(),
        "the write followed the swapped ancestor"
    );
    assert!(!w.path().join("a.real/root/after.txt").exists());
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `writegate serve --stdio` on `root`, with every XDG directory and the
/// audit log under `base` so the test never touches the real home.
fn stdio_daemon(base: &std::path::Path, root: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_writegate"))
        .args(["serve", "--stdio", "--workspace"])
        .arg(root)
        .arg("--audit-log")
        .arg(base.join("audit.jsonl"))
        .env("XDG_RUNTIME_DIR", base)
        .env("XDG_STATE_HOME", base)
        .env("XDG_CONFIG_HOME", base)
        .env("HOME", base)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}
