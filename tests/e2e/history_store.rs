//! Undo's history store seen from outside: `writegate diff` and the
//! `_writegate/history`/`_writegate/undo` methods through the real binary,
//! with a same-UID process that plants things at the paths they read.

use crate::common::{BIN, TIMEOUT, Tree, stdio_session, write_params};
use serde_json::json;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The opIds of the operations on `path` the daemon lists, newest first.
fn op_ids(c: &mut crate::common::Client, path: &Path) -> Vec<String> {
    let r = c.call("_writegate/history", json!({"path": path}));
    r["result"]["operations"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|o| o["opId"].as_str().unwrap().to_string())
        .collect()
}

/// Runs `writegate diff <op>`; `unblock` is called when it has not ended
/// within [`TIMEOUT`] (it then must end), and the result says so.
fn diff(t: &Tree, op: &str, unblock: &dyn Fn()) -> (bool, std::process::Output) {
    let mut cmd = t.command();
    cmd.args(["diff", op])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    let mut hung = false;
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > TIMEOUT && !hung {
            hung = true;
            unblock();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (hung, child.wait_with_output().unwrap())
}

#[test]
fn regression_diff_opens_no_fifo_and_follows_no_link_planted_at_the_path() {
    let t = Tree::new(BIN);
    let (_d, mut c, _audit) = stdio_session(&t, &[]);
    let f = t.ws.join("notes.txt");
    for text in ["one\n", "two\n"] {
        let r = c.call("fs/write_text_file", write_params(&f, text));
        assert!(r.get("error").is_none(), "{r}");
    }
    let ops = op_ids(&mut c, &f);
    assert_eq!(ops.len(), 2, "{ops:?}");
    // Untouched, the diff of the newest operation reads the file itself.
    let (hung, out) = diff(&t, &ops[0], &|| {});
    assert!(!hung);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("-one") && text.contains("+two"),
        "{text}"
    );

    // A fifo in the file's place: the diff must not open it (it would wait
    // for a writer for ever).
    fs::remove_file(&f).unwrap();
    rustix::fs::mkfifoat(rustix::fs::CWD, &f, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
    let unblock = || {
        // Open the write end and close it: the blocked reader sees EOF.
        let _ = fs::OpenOptions::new().write(true).open(&f);
    };
    let (hung, out) = diff(&t, &ops[0], &unblock);
    assert!(
        !hung,
        "writegate diff opened the fifo planted at {} and waited on it",
        f.display()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("file_changed"), "{err}");

    // A symlink to an endless device: not followed (it would read for ever).
    fs::remove_file(&f).unwrap();
    symlink("/dev/zero", &f).unwrap();
    // Bounded memory: a reader that followed the link runs out of it and
    // dies instead of eating the machine's.
    let mut limited = Command::new("prlimit");
    limited
        .arg("--as=1073741824")
        .arg(crate::common::BIN)
        .args(["diff", &ops[0]]);
    t.set_env(&mut limited);
    let out = limited.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("file_changed"), "{err}");

    // The older operation's result comes from the newer one's image: still
    // served.
    let (_, out) = diff(&t, &ops[1], &|| {});
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("+one"), "{text}");
}
