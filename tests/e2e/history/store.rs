//! Undo's history store seen from outside: `writegate diff` and the
//! `_writegate/history`/`_writegate/undo` methods through the real binary,
//! with a same-UID process that plants things at the paths they read.

use crate::common::{BIN, TIMEOUT, Tree, snapshot, stdio_session, write_params};
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

/// The history index with the `keep` record of `op` changed by `change`
/// (what a same-UID process that rewrites the 0600 index can do; done while
/// no daemon has read it).
fn tamper(t: &Tree, op: &str, change: impl Fn(&mut serde_json::Value)) {
    let index = t.base.join("state/writegate/history/index.jsonl");
    let text = fs::read_to_string(&index).unwrap();
    let mut found = false;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["t"] == "keep" && v["opId"] == op {
                change(&mut v);
                found = true;
            }
            v.to_string()
        })
        .collect();
    assert!(found, "no keep record of {op} in {text}");
    fs::write(&index, lines.join("\n") + "\n").unwrap();
}

/// Each `path` of an undo result's `skippedDirs`.
fn skipped(r: &serde_json::Value) -> Vec<String> {
    r["result"]["skippedDirs"]
        .as_array()
        .unwrap_or_else(|| panic!("no skippedDirs: {r}"))
        .iter()
        .map(|d| {
            assert!(d["reason"].as_str().is_some_and(|s| !s.is_empty()), "{d}");
            d["path"].as_str().unwrap().to_string()
        })
        .collect()
}

/// A same-UID process rewrites the `createdDirs` of a creation's record in
/// the index: directories outside the workspace, a `..` path out of it, a
/// relative name, an empty directory reached through a symlinked parent,
/// an empty directory of the workspace off the file's own way, and the
/// file's own directories written other than canonically. Undo
/// takes back the file and the two directories the write really made, and
/// leaves every planted entry alone, reporting each in `skippedDirs`.
#[test]
fn a_tampered_index_cannot_make_undo_remove_other_directories() {
    let t = Tree::new(BIN);
    let f = t.ws.join("a/b/new.txt");
    let op = {
        let (_d, mut c, _) = stdio_session(&t, &[]);
        let r = c.call("fs/write_text_file", write_params(&f, "new\n"));
        assert!(r.get("error").is_none(), "{r}");
        op_ids(&mut c, &f).remove(0)
    };
    let outside = t.out.join("victim");
    let dotdot_target = t.out.join("dotdot");
    let real = t.out.join("real");
    let sibling = t.ws.join("sibling");
    for d in [&outside, &dotdot_target, &real.join("linked"), &sibling] {
        fs::create_dir_all(d).unwrap();
    }
    symlink(&real, t.ws.join("link")).unwrap();
    let dotdot = format!("{}/a/b/../../../out/dotdot", t.ws.display());
    let through_link = t.ws.join("link/linked");
    let planted: Vec<String> = vec![
        outside.display().to_string(),
        dotdot.clone(),
        "victim".to_string(),
        through_link.display().to_string(),
        sibling.display().to_string(),
        t.out.display().to_string(),
        // The file's own directories, written other than canonically.
        format!("{}//a", t.ws.display()),
        format!("{}/./a/b", t.ws.display()),
        format!("{}/a/", t.ws.display()),
    ];
    let mut all = planted.clone();
    all.push(t.ws.join("a").display().to_string());
    all.push(t.ws.join("a/b").display().to_string());
    tamper(&t, &op, |v| v["createdDirs"] = json!(all));

    let (_d, mut c, mut audit) = stdio_session(&t, &[]);
    audit.new_events();
    let r = c.call("_writegate/undo", json!({"opId": op}));
    assert_eq!(r["result"]["action"], "removed", "{r}");
    assert!(!f.exists());
    assert_eq!(
        r["result"]["removedDirs"],
        json!([t.ws.join("a/b"), t.ws.join("a")]),
        "only the directories on the file's way, innermost first: {r}"
    );
    let mut got = skipped(&r);
    got.sort();
    let mut want = planted.clone();
    want.sort();
    assert_eq!(got, want, "{r}");
    for d in [
        &outside,
        &dotdot_target,
        &real.join("linked"),
        &sibling,
        &t.out,
    ] {
        assert!(d.is_dir(), "{} was removed", d.display());
    }
    assert!(t.ws.join("link").is_symlink());
    let ev = audit.one("fs.access");
    assert_eq!(ev["intent"], "undo", "{ev}");
}

/// The external writer creates no directories, so `createdDirs` on the
/// record of an external creation is a forgery: undo removes the file it
/// created and no directory, even empty ones on the file's own way.
#[test]
fn a_tampered_external_record_removes_no_directory() {
    let t = Tree::new(BIN);
    let ext = t.out.join("ext");
    fs::create_dir(&ext).unwrap();
    let f = ext.join("made.conf");
    let op = {
        let (_d, mut c, _) = stdio_session(&t, &[]);
        let r = c.call(
            "fs/write_text_file",
            crate::common::marked_write(&f, "k = 1\n", crate::common::marker("write_file")),
        );
        assert!(r.get("error").is_none(), "{r}");
        op_ids(&mut c, &f).remove(0)
    };
    let planted = [ext.display().to_string(), t.out.display().to_string()];
    tamper(&t, &op, |v| {
        assert_eq!(v["writer"], "external", "{v}");
        v["createdDirs"] = json!(planted);
    });
    let (_d, mut c, _) = stdio_session(&t, &[]);
    let r = c.call("_writegate/undo", json!({"opId": op}));
    assert_eq!(r["result"]["action"], "removed", "{r}");
    assert!(!f.exists());
    assert!(r["result"].get("removedDirs").is_none(), "{r}");
    assert_eq!(skipped(&r), planted, "{r}");
    assert!(ext.is_dir(), "the empty directory stays");
}

/// Undo resolves the operation's path again and refuses (`symlink_escape`,
/// every file byte-identical) when a parent was swapped for a symlink since
/// the write, wherever the link leads (inside the workspace, outside it)
/// and even with `force`; for a restore, a removal, and an external
/// operation. With the directory put back, the same undo works.
#[test]
fn undo_follows_no_symlink_put_on_the_path_since_the_operation() {
    let t = Tree::new(BIN);
    let (_d, mut c, _) = stdio_session(&t, &[]);
    let write = |c: &mut crate::common::Client, p: serde_json::Value| {
        let r = c.call("fs/write_text_file", p);
        assert!(r.get("error").is_none(), "{r}");
    };
    // A restore: ws/d/f.txt, old -> new.
    let d = t.ws.join("d");
    fs::create_dir(&d).unwrap();
    fs::write(d.join("f.txt"), "old\n").unwrap();
    write(&mut c, write_params(&d.join("f.txt"), "new\n"));
    let restore = op_ids(&mut c, &d.join("f.txt")).remove(0);
    // A creation: ws/n/c.txt.
    let n = t.ws.join("n");
    write(&mut c, write_params(&n.join("c.txt"), "made\n"));
    let creation = op_ids(&mut c, &n.join("c.txt")).remove(0);
    // An external write: out/conf/s.conf, k = 1 -> k = 2.
    let conf = t.out.join("conf");
    fs::create_dir(&conf).unwrap();
    fs::write(conf.join("s.conf"), "k = 1\n").unwrap();
    write(
        &mut c,
        crate::common::marked_write(
            &conf.join("s.conf"),
            "k = 2\n",
            crate::common::marker("write_file"),
        ),
    );
    let external = op_ids(&mut c, &conf.join("s.conf")).remove(0);

    // Each parent moved aside and replaced by a link to a directory
    // holding a file with exactly what the operation left there (so only
    // the path can tell them apart).
    let swap = |dir: &Path, to: &Path, leaf: &str, bytes: &str| {
        let aside = dir.with_extension("real");
        if !aside.exists() {
            fs::rename(dir, &aside).unwrap();
        }
        let _ = fs::remove_file(dir);
        fs::create_dir_all(to).unwrap();
        fs::write(to.join(leaf), bytes).unwrap();
        symlink(to, dir).unwrap();
    };
    // A link out of the workspace is the resolver's own `symlink_escape`;
    // one that stays inside, or an external path that now resolves
    // elsewhere, is undo's ("now resolves to").
    let cases = [
        (&d, t.ws.join("inside"), "f.txt", "new\n", &restore, true),
        (&d, t.out.join("evil"), "f.txt", "new\n", &restore, false),
        (&n, t.ws.join("m"), "c.txt", "made\n", &creation, true),
        (
            &conf,
            t.out.join("other"),
            "s.conf",
            "k = 2\n",
            &external,
            true,
        ),
    ];
    for (dir, to, leaf, bytes, op, moved) in cases {
        swap(dir, &to, leaf, bytes);
        let before = (snapshot(&t.ws, &[]), snapshot(&t.out, &[]));
        for force in [false, true] {
            let r = c.call("_writegate/undo", json!({"opId": op, "force": force}));
            crate::common::assert_refused(&r, "symlink_escape");
            let hint = r["error"]["data"]["hint"].as_str().unwrap();
            assert_eq!(hint.contains("now resolves to"), moved, "{hint}");
        }
        assert!(
            before == (snapshot(&t.ws, &[]), snapshot(&t.out, &[])),
            "a file changed"
        );
        assert_eq!(fs::read_to_string(to.join(leaf)).unwrap(), bytes);
    }
    // Put back, the undo goes through.
    fs::remove_file(&d).unwrap();
    fs::rename(d.with_extension("real"), &d).unwrap();
    let r = c.call("_writegate/undo", json!({"opId": restore}));
    assert_eq!(r["result"]["action"], "restored", "{r}");
    assert_eq!(fs::read_to_string(d.join("f.txt")).unwrap(), "old\n");
}

/// A forged index record whose `opId` reaches out of the store
/// (`../../../../out/precious`), with that file's hash as its `hashBefore`
/// and old enough to be evicted first: an undo of it does not copy that
/// file into the workspace, and the eviction at the next commit removes
/// nothing outside the store.
#[test]
fn a_forged_op_id_never_reaches_out_of_the_store() {
    use sha2::{Digest, Sha256};
    let t = Tree::new(BIN);
    let f = t.ws.join("a.txt");
    fs::write(&f, "a0\n").unwrap();
    {
        let (_d, mut c, _) = stdio_session(&t, &[]);
        let r = c.call("fs/write_text_file", write_params(&f, "a1\n"));
        assert!(r.get("error").is_none(), "{r}");
    }
    let precious = t.out.join("precious");
    fs::write(&precious, "keep me\n").unwrap();
    let forged = "../../../../out/precious";
    let store = t.base.join("state/writegate/history");
    assert_eq!(
        fs::canonicalize(store.join("images").join(forged)).unwrap(),
        precious,
        "the forged name would reach it"
    );
    let index = store.join("index.jsonl");
    let text = fs::read_to_string(&index).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    v["opId"] = json!(forged);
    v["keptMs"] = json!(1);
    let hash = Sha256::digest(b"keep me\n")
        .iter()
        .fold("sha256:".to_string(), |s, b| format!("{s}{b:02x}"));
    v["hashBefore"] = json!(hash);
    v["bytesBefore"] = json!(8);
    fs::write(&index, format!("{v}\n{text}")).unwrap();

    let (_d, mut c, _) = stdio_session(&t, &[]);
    let r = c.call("_writegate/undo", json!({"opId": forged, "force": true}));
    assert_eq!(r["error"]["data"]["errorKind"], "not_undoable", "{r}");
    let hint = r["error"]["data"]["hint"].as_str().unwrap();
    assert!(
        hint.starts_with(&format!("no operation {forged} in the history")),
        "{hint}"
    );
    assert_eq!(fs::read_to_string(&f).unwrap(), "a1\n");
    // The next commit evicts the forged record (over max_age_days).
    let r = c.call("fs/write_text_file", write_params(&f, "a2\n"));
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(fs::read_to_string(&precious).unwrap(), "keep me\n");
}

/// `writegate <args>` of the tree, talking to its socket daemon.
fn wg(t: &Tree, args: &[&str]) -> std::process::Output {
    let mut cmd = t.command();
    cmd.args(args);
    if matches!(args[0], "history" | "undo") {
        cmd.arg("--socket").arg(&t.sock);
    }
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// docs/security.md's promise that a tampered index cannot make undo do
/// something other than it says. A same-UID process plants, in the index,
/// the record of a write to notes.txt whose `target` names build.sh (the
/// shown path and the written file disagree), one whose sizes are not its
/// image's, and a record of build.sh with mode 06777. The first two are
/// listed not undoable, and `undo` (with `--force`, and `--dry-run`) and
/// `diff` refuse them with `not_undoable`, every file byte-identical; the
/// third is undone as it says: the result and the dry run name the mode
/// the file gets, which has no setuid, setgid or other-write bit the file
/// lacks now, and say that they were dropped.
#[test]
fn a_tampered_index_cannot_make_undo_do_other_than_it_says() {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new(BIN);
    let notes = t.ws.join("notes.txt");
    let build = t.ws.join("build.sh");
    let other = t.ws.join("other.txt");
    fs::write(&notes, "n0\n").unwrap();
    fs::write(&build, "#!/bin/sh\necho b0\n").unwrap();
    fs::set_permissions(&build, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(&other, "o0\n").unwrap();
    let (notes_op, build_op, other_op) = {
        let (_d, mut c, _) = stdio_session(&t, &[]);
        for (f, text) in [
            (&notes, "n1\n"),
            (&build, "#!/bin/sh\necho b1\n"),
            (&other, "o1\n"),
        ] {
            let r = c.call("fs/write_text_file", write_params(f, text));
            assert!(r.get("error").is_none(), "{r}");
        }
        (
            op_ids(&mut c, &notes).remove(0),
            op_ids(&mut c, &build).remove(0),
            op_ids(&mut c, &other).remove(0),
        )
    };
    // Shown: notes.txt; written: build.sh.
    tamper(&t, &notes_op, |v| {
        v["target"] = json!(hex(build.as_os_str().as_encoded_bytes()));
        v["mode"] = json!([0o6777, 0, 0]);
    });
    // Shown: 1 byte before; put back: the 3-byte image.
    tamper(&t, &other_op, |v| v["bytesBefore"] = json!(1));
    // Consistent, but with setuid, setgid and other-write planted.
    tamper(&t, &build_op, |v| {
        let m = v["mode"].as_array().unwrap().clone();
        v["mode"] = json!([0o6777, m[1], m[2]]);
    });

    let _d = t.socket_daemon(&[]);
    let listed = wg(&t, &["history", "--json"]);
    assert!(listed.status.success(), "{listed:?}");
    let ops: Vec<serde_json::Value> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let entry = |id: &str| {
        ops.iter()
            .find(|o| o["opId"] == id)
            .unwrap_or_else(|| panic!("{id} not listed: {ops:?}"))
            .clone()
    };
    for op in [&notes_op, &other_op] {
        let e = entry(op);
        assert_eq!(e["undoable"], false, "{e}");
        assert!(
            e["reason"].as_str().unwrap().contains("inconsistent"),
            "{e}"
        );
    }
    assert_eq!(entry(&build_op)["undoable"], true);

    let before = (snapshot(&t.ws, &[]), snapshot(&t.out, &[]));
    for op in [&notes_op, &other_op] {
        for extra in [&[][..], &["--dry-run"], &["--force"]] {
            let mut args = vec!["undo", op.as_str()];
            args.extend_from_slice(extra);
            let o = wg(&t, &args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert!(
                err.contains("refused: not_undoable") && err.contains("inconsistent"),
                "{args:?}: {err}"
            );
        }
        let (_, o) = diff(&t, op, &|| {});
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("not_undoable"), "{err}");
    }
    assert!(
        before == (snapshot(&t.ws, &[]), snapshot(&t.out, &[])),
        "a refused undo changed a file"
    );
    assert_eq!(fs::read_to_string(&build).unwrap(), "#!/bin/sh\necho b1\n");

    // The planted mode: the dry run says what the undo then does.
    let dry = wg(&t, &["undo", &build_op, "--dry-run"]);
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{dry:?}");
    assert!(said.contains("mode 0775"), "{said}");
    for bit in ["setuid", "setgid", "other-write"] {
        assert!(said.contains(bit), "{said}");
    }
    let done = wg(&t, &["undo", &build_op]);
    let said = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "{done:?}");
    assert!(
        said.contains("build.sh was restored") && said.contains("mode 0775"),
        "{said}"
    );
    assert!(said.contains("setuid"), "{said}");
    assert_eq!(fs::read_to_string(&build).unwrap(), "#!/bin/sh\necho b0\n");
    assert_eq!(
        fs::metadata(&build).unwrap().permissions().mode() & 0o7777,
        0o775,
        "no setuid, setgid or other-write bit added"
    );
    assert_eq!(fs::read_to_string(&notes).unwrap(), "n1\n");
}

/// An agent cannot evict the before-image of its own damaging write by
/// writing more (at small scale: a 64 KiB store instead of 1 GiB). The
/// agent overwrites a file, then rewrites two junk files of 20 KiB again
/// and again: with the default `min_age_minutes` (60) no eviction takes an
/// image younger than an hour, so once the store is full the junk writes
/// are refused (`io_error`, naming `history.max_bytes` and
/// `history.min_age_minutes`; the junk file byte-identical) instead of
/// the first write becoming `not_undoable: evicted`; the person's undo of
/// that write then goes through (an undo may pass the limit). With
/// `min_age_minutes = 0` the same writes go through and evict oldest
/// first, as before.
#[test]
fn an_agent_cannot_evict_the_before_image_of_its_own_write() {
    let t = Tree::new(BIN);
    let conf = t.base.join("config/small.toml");
    let junk_write = |c: &mut crate::common::Client, f: &Path, i: usize| {
        let body = format!("{i:05}\n").repeat(20 * 1024 / 6);
        c.call("fs/write_text_file", write_params(f, &body))
    };
    let victim = t.ws.join("victim.txt");
    let junk = [t.ws.join("junk-a.bin"), t.ws.join("junk-b.bin")];

    fs::write(&conf, "[history]\nmax_bytes = 65536\n").unwrap();
    fs::write(&victim, "precious\n".repeat(900)).unwrap();
    let (_d, mut c, _) = stdio_session(&t, &["--config", conf.to_str().unwrap()]);
    let r = c.call("fs/write_text_file", write_params(&victim, "damage\n"));
    assert!(r.get("error").is_none(), "{r}");
    let damage = op_ids(&mut c, &victim).remove(0);
    let mut refused = None;
    for i in 0..40 {
        let f = &junk[i % 2];
        let before = fs::read(f).ok();
        let r = junk_write(&mut c, f, i);
        if r.get("error").is_some() {
            crate::common::assert_refused(&r, "io_error");
            let hint = r["error"]["data"]["hint"].as_str().unwrap();
            assert!(
                hint.contains("history.max_bytes") && hint.contains("history.min_age_minutes"),
                "{hint}"
            );
            assert_eq!(fs::read(f).ok(), before, "a refused write changed {f:?}");
            refused = Some(i);
            break;
        }
    }
    let refused = refused.expect("the junk writes were never refused");
    assert!(refused >= 3, "refused too early: at write {refused}");
    let listed = c.call("_writegate/history", json!({"path": victim}));
    let op = &listed["result"]["operations"][0];
    assert_eq!(op["opId"], damage.as_str(), "{listed}");
    assert_eq!(op["undoable"], true, "{listed}");
    // A creation keeps no image, so it still goes through.
    let r = c.call(
        "fs/write_text_file",
        write_params(&t.ws.join("new.txt"), "new\n"),
    );
    assert!(r.get("error").is_none(), "{r}");
    // The person's undo goes through, though it keeps an image of its own.
    let r = c.call("_writegate/undo", json!({"opId": damage}));
    assert_eq!(r["result"]["action"], "restored", "{r}");
    assert_eq!(
        fs::read_to_string(&victim).unwrap(),
        "precious\n".repeat(900)
    );

    // Without the window, the same writes evict the oldest images.
    fs::write(&conf, "[history]\nmax_bytes = 65536\nmin_age_minutes = 0\n").unwrap();
    let t2 = Tree::new(BIN);
    let victim = t2.ws.join("victim.txt");
    fs::write(&victim, "precious\n".repeat(900)).unwrap();
    let (_d, mut c, _) = stdio_session(&t2, &["--config", conf.to_str().unwrap()]);
    let r = c.call("fs/write_text_file", write_params(&victim, "damage\n"));
    assert!(r.get("error").is_none(), "{r}");
    let damage = op_ids(&mut c, &victim).remove(0);
    for i in 0..12 {
        let f = t2.ws.join(if i % 2 == 0 {
            "junk-a.bin"
        } else {
            "junk-b.bin"
        });
        let r = junk_write(&mut c, &f, i);
        assert!(r.get("error").is_none(), "{r}");
    }
    let r = c.call("_writegate/undo", json!({"opId": damage}));
    assert_eq!(r["error"]["data"]["errorKind"], "not_undoable", "{r}");
}

/// `writegate diff` read both sides whole however large (a 200 MB image
/// took 686 MiB, a 3 GiB sparse one 9.4 GiB): it now reads at most 4 MiB
/// and 128 Ki lines a side, so the largest diff it shows (two sides at
/// both limits, no line in common) stays within 64 MiB of memory; a side
/// with more lines (4 MiB of empty lines) is refused `file_too_large`, and
/// so is a larger side (here a before-image grown to a 3 GiB sparse file,
/// under a 1 GiB address-space limit a whole read cannot pass) at once, by
/// its size, without being read.
#[test]
fn diff_stays_within_64_mib_and_refuses_a_side_over_its_limit() {
    let t = Tree::new(BIN);
    let f = t.ws.join("big.txt");
    let g = t.ws.join("lines.txt");
    // 128 Ki lines of 32 bytes: 4 MiB.
    let side = |tag: char| {
        (0..128 * 1024).fold(String::new(), |mut s, i| {
            use std::fmt::Write as _;
            let _ = writeln!(s, "{tag}{i:030}");
            s
        })
    };
    fs::write(&f, side('a')).unwrap();
    fs::write(&g, "\n".repeat(4 << 20)).unwrap();
    let (op, lines_op) = {
        let (_d, mut c, _) = stdio_session(&t, &[]);
        let r = c.call("fs/write_text_file", write_params(&f, &side('b')));
        assert!(r.get("error").is_none(), "{r}");
        let r = c.call("fs/write_text_file", write_params(&g, "x\n"));
        assert!(r.get("error").is_none(), "{r}");
        (op_ids(&mut c, &f).remove(0), op_ids(&mut c, &g).remove(0))
    };
    let out = t.command().args(["diff", &lines_op]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused: file_too_large") && err.contains("line breaks"),
        "{err}"
    );
    if let Some(time) = crate::common::find_program("time").filter(|p| p.starts_with("/usr")) {
        let mut cmd = Command::new(time);
        cmd.args(["-f", "maxrss %M"]).arg(BIN).args(["diff", &op]);
        t.set_env(&mut cmd);
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(out.stdout.len() > 8 << 20, "the diff is shown whole");
        let kib: u64 = err
            .lines()
            .find_map(|l| l.strip_prefix("maxrss "))
            .and_then(|k| k.trim().parse().ok())
            .unwrap_or_else(|| panic!("{err}"));
        eprintln!("note: writegate diff peaked at {kib} KiB");
        assert!(
            kib <= 64 * 1024,
            "writegate diff peaked at {} MiB",
            kib / 1024
        );
    } else {
        eprintln!("note: no /usr/bin/time; the memory bound is not measured");
    }

    let image = t.base.join("state/writegate/history/images").join(&op);
    fs::OpenOptions::new()
        .write(true)
        .open(&image)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let mut limited = Command::new("prlimit");
    limited.arg("--as=1073741824").arg(BIN).args(["diff", &op]);
    t.set_env(&mut limited);
    let start = Instant::now();
    let out = limited.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused: file_too_large") && err.contains("3221225472 bytes"),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "the image was read"
    );
}

/// `history` listed as undoable an operation whose before-image `undo`
/// then refused as too large (over `max_write_bytes`): it now lists it
/// not undoable with the same reason, and `undo` refuses it
/// `file_too_large`, the file unchanged.
#[test]
fn history_does_not_list_as_undoable_what_undo_refuses_as_too_large() {
    let t = Tree::new(BIN);
    let f = t.ws.join("large.txt");
    fs::write(&f, "y".repeat(3 << 20)).unwrap();
    let op = {
        let (_d, mut c, _) = stdio_session(&t, &[]);
        let r = c.call("fs/write_text_file", write_params(&f, "small\n"));
        assert!(r.get("error").is_none(), "{r}");
        op_ids(&mut c, &f).remove(0)
    };
    let conf = t.base.join("config/small.toml");
    fs::write(&conf, "max_write_bytes = 1048576\n").unwrap();
    let (_d, mut c, _) = stdio_session(&t, &["--config", conf.to_str().unwrap()]);
    let r = c.call("_writegate/history", json!({"path": f}));
    let listed = &r["result"]["operations"][0];
    assert_eq!(listed["opId"], op.as_str(), "{r}");
    assert_eq!(listed["undoable"], false, "{r}");
    let reason = listed["reason"].as_str().unwrap();
    assert!(
        reason.contains("too large") && reason.contains("max_write_bytes"),
        "{reason}"
    );
    for dry in [true, false] {
        let r = c.call("_writegate/undo", json!({"opId": op, "dryRun": dry}));
        crate::common::assert_refused(&r, "file_too_large");
        assert_eq!(r["error"]["data"]["hint"].as_str().unwrap(), reason, "{r}");
    }
    assert_eq!(fs::read_to_string(&f).unwrap(), "small\n");
}
