//! Whose operations a connection can see and take back: on one daemon that
//! serves two workspaces, `_writegate/history` and `_writegate/undo` answer
//! for the connection's own workspace only (another workspace's `opId` is
//! answered exactly like one that does not exist), while the person at the
//! terminal (`writegate history`, `undo`, `rewind`) reaches both.

use crate::common::{
    BIN, Client, Clients, Daemon, Opts, Tree, initialize_in, marked_write, marker, run_with_stdin,
    snapshot, workspace_of, write_params,
};
use serde_json::{Value, json};
use std::fs;
use std::path::Path;

/// A socket daemon serving `t.ws` (primary) and `t.wsb`, a connection on
/// each, and the runtime ids of both.
fn two_workspaces(t: &Tree) -> (Daemon, Client, Client, String, String) {
    let d = t.daemon(Opts {
        socket: true,
        args: &["--workspace", t.wsb.to_str().unwrap()],
        ..Opts::default()
    });
    let mut a = d.connect();
    let r = a.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(workspace_of(&r)["root"], json!(t.ws), "{r}");
    let a_id = workspace_of(&r)["id"].as_str().unwrap().to_string();
    let mut b = d.connect();
    let r = initialize_in(&mut b, &json!(t.wsb));
    assert_eq!(workspace_of(&r)["root"], json!(t.wsb), "{r}");
    let b_id = workspace_of(&r)["id"].as_str().unwrap().to_string();
    (d, a, b, a_id, b_id)
}

fn write_ok(c: &mut Client, p: Value) {
    let r = c.call("fs/write_text_file", p);
    assert_eq!(r["result"], json!({}), "{r}");
}

/// The operations a connection lists (params `p`), newest first.
fn listed(c: &mut Client, p: Value) -> Vec<Value> {
    let r = c.call("_writegate/history", p);
    r["result"]["operations"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .clone()
}

/// The opId of the newest operation on `path` the connection lists.
fn op_on(c: &mut Client, path: &Path) -> String {
    let ops = listed(c, json!({"path": path}));
    ops.first()
        .unwrap_or_else(|| panic!("no operation on {}", path.display()))["opId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// An undo's error with `op` written as `OP` (what must be identical for
/// another workspace's operation and an unknown one).
fn refusal(c: &mut Client, op: &str, extra: &Value) -> String {
    let mut p = json!({"opId": op});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    let r = c.call("_writegate/undo", p);
    assert!(r.get("result").is_none(), "{r}");
    r["error"].to_string().replace(op, "OP")
}

/// Connection A lists and undoes A's operations (its workspace writes and
/// its external write), B only B's; each other's `opId`s, through
/// `_writegate/undo` with or without `force` and `dryRun`, get the very
/// answer of an `opId` that does not exist, change no file and write no
/// audit event. Then each takes back its own.
#[test]
fn a_connection_sees_and_undoes_only_its_own_workspace() {
    let t = Tree::new(BIN);
    let (_d, mut a, mut b, a_id, b_id) = two_workspaces(&t);
    let (fa, fb, fx) = (
        t.ws.join("a.txt"),
        t.wsb.join("b.txt"),
        t.out.join("x.conf"),
    );
    fs::write(&fa, "a0\n").unwrap();
    fs::write(&fb, "b0\n").unwrap();
    fs::write(&fx, "x0\n").unwrap();
    write_ok(&mut a, write_params(&fa, "a1\n"));
    write_ok(&mut b, write_params(&fb, "b1\n"));
    write_ok(&mut a, marked_write(&fx, "x1\n", marker("write_file")));

    let (la, lb) = (listed(&mut a, json!({})), listed(&mut b, json!({})));
    assert_eq!(la.len(), 2, "{la:?}");
    assert!(la.iter().all(|o| o["workspace"] == json!(a_id)), "{la:?}");
    assert_eq!(lb.len(), 1, "{lb:?}");
    assert_eq!(lb[0]["workspace"], json!(b_id), "{lb:?}");
    assert!(listed(&mut a, json!({"path": fb})).is_empty());
    assert!(listed(&mut b, json!({"path": fx})).is_empty());
    assert!(listed(&mut b, json!({"sessionId": "s"})).len() == 1);
    let (a_op, x_op) = (op_on(&mut a, &fa), op_on(&mut a, &fx));
    let b_op = op_on(&mut b, &fb);

    let files = || {
        (
            snapshot(&t.ws, &[]),
            snapshot(&t.wsb, &[]),
            snapshot(&t.out, &[]),
        )
    };
    let before = files();
    let events = t.audit_lines().len();
    let unknown = "0123456789ab-424242";
    for extra in [
        json!({}),
        json!({"force": true}),
        json!({"dryRun": true}),
        json!({"force": true, "dryRun": true}),
    ] {
        let want = refusal(&mut a, unknown, &extra);
        assert!(want.contains("not_undoable"), "{want}");
        assert_eq!(refusal(&mut a, &b_op, &extra), want, "{extra}");
        assert_eq!(refusal(&mut b, unknown, &extra), want, "{extra}");
        assert_eq!(refusal(&mut b, &a_op, &extra), want, "{extra}");
        assert_eq!(refusal(&mut b, &x_op, &extra), want, "{extra}");
    }
    assert!(before == files(), "a refused undo changed a file");
    assert_eq!(
        t.audit_lines().len(),
        events,
        "refusals of unknown ids are not audited"
    );

    for (on_a, op, f, old) in [
        (true, &a_op, &fa, "a0\n"),
        (false, &b_op, &fb, "b0\n"),
        (true, &x_op, &fx, "x0\n"),
    ] {
        let c = if on_a { &mut a } else { &mut b };
        let r = c.call("_writegate/undo", json!({"opId": op}));
        assert_eq!(r["result"]["action"], "restored", "{r}");
        assert_eq!(fs::read_to_string(f).unwrap(), old);
    }
}

/// `writegate <args> --socket <sock>`: exit code and stdout.
fn cli(t: &Tree, args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = t.command();
    cmd.args(args).arg("--socket").arg(&t.sock);
    let o = run_with_stdin(cmd, b"");
    assert!(
        o.code == Some(0),
        "{args:?}: exit {:?}\n{}{}",
        o.code,
        o.stdout,
        o.stderr
    );
    (o.code, o.stdout)
}

/// The person's commands reach every workspace the daemon serves:
/// `history` lists both workspaces' operations newest first, `undo` takes
/// back an operation of the second workspace, and `rewind` a session's
/// operations in both.
#[test]
fn the_command_line_reaches_every_workspace() {
    let t = Tree::new(BIN);
    let (_d, mut a, mut b, a_id, b_id) = two_workspaces(&t);
    let (fa, fb) = (t.ws.join("a.txt"), t.wsb.join("b.txt"));
    fs::write(&fa, "a0\n").unwrap();
    fs::write(&fb, "b0\n").unwrap();
    write_ok(&mut a, write_params(&fa, "a1\n"));
    write_ok(&mut b, write_params(&fb, "b1\n"));
    write_ok(&mut a, write_params(&fa, "a2\n"));
    write_ok(&mut b, write_params(&fb, "b2\n"));

    let (_, out) = cli(&t, &["history", "--json"]);
    let ops: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Each workspace's operations, newest first (the two lists are
    // interleaved by their millisecond timestamps).
    let of = |id: &str| -> Vec<String> {
        ops.iter()
            .filter(|o| o["workspace"] == json!(id))
            .map(|o| o["opId"].as_str().unwrap().to_string())
            .collect()
    };
    let (in_a, in_b) = (of(&a_id), of(&b_id));
    assert_eq!((in_a.len(), in_b.len()), (2, 2), "{out}");
    assert_eq!(in_a[0], op_on(&mut a, &fa), "{out}");
    assert_eq!(in_b[0], op_on(&mut b, &fb), "{out}");
    // An operation of the second workspace, undone as session `s`.
    let (_, out) = cli(&t, &["undo", &in_b[0], "--session", "s"]);
    assert!(out.contains("was restored"), "{out}");
    assert_eq!(fs::read_to_string(&fb).unwrap(), "b1\n");

    // The rest of session `s`, in both workspaces (the undone one skipped).
    let (_, out) = cli(&t, &["rewind", "--session", "s", "--all-workspaces"]);
    assert!(out.contains("3 operations undone"), "{out}");
    assert_eq!(fs::read_to_string(&fa).unwrap(), "a0\n");
    assert_eq!(fs::read_to_string(&fb).unwrap(), "b0\n");
}

/// `writegate rewind --session cli` took back every command-line write in
/// every workspace, with only a note. A rewind now reaches the workspace
/// of the current directory; run elsewhere, it is refused naming the
/// session's workspaces; `--all-workspaces` reaches them all and
/// `--workspace DIR` the files under DIR.
#[test]
fn regression_rewind_of_a_session_reached_every_workspace() {
    let t = Tree::new(BIN);
    let (_d, mut a, mut b, _, _) = two_workspaces(&t);
    let (fa, fb) = (t.ws.join("a.txt"), t.wsb.join("b.txt"));
    fs::write(&fa, "a0\n").unwrap();
    fs::write(&fb, "b0\n").unwrap();
    write_ok(&mut a, write_params(&fa, "a1\n"));
    write_ok(&mut b, write_params(&fb, "b1\n"));
    let sub = t.ws.join("sub");
    fs::create_dir(&sub).unwrap();
    let rewind = |dir: &Path, more: &[&str]| {
        let mut cmd = t.command();
        cmd.current_dir(dir)
            .args(["rewind", "--session", "s"])
            .args(more)
            .arg("--socket")
            .arg(&t.sock);
        run_with_stdin(cmd, b"")
    };

    // Outside both: refused, both named, nothing changed.
    let o = rewind(&t.out, &[]);
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("wrote nothing in the workspace of the current directory")
            && o.stderr.contains(t.ws.to_str().unwrap())
            && o.stderr.contains(t.wsb.to_str().unwrap())
            && o.stderr.contains("--all-workspaces"),
        "{}",
        o.stderr
    );
    assert_eq!(fs::read_to_string(&fa).unwrap(), "a1\n");
    assert_eq!(fs::read_to_string(&fb).unwrap(), "b1\n");

    // --all-workspaces: the plan reaches both, wherever it is run.
    let o = rewind(&t.out, &["--all-workspaces", "--dry-run"]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("2 operations")
            && o.stdout.contains("a.txt")
            && o.stdout.contains("b.txt"),
        "{}",
        o.stdout
    );

    // From a directory inside the first: its plan and its undo only.
    let o = rewind(&sub, &["--dry-run"]);
    assert!(
        o.stdout.contains("1 operations") && o.stdout.contains("a.txt"),
        "{}",
        o.stdout
    );
    assert!(!o.stdout.contains("b.txt"), "{}", o.stdout);
    let o = rewind(&sub, &[]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("1 operations undone"), "{}", o.stdout);
    assert_eq!(fs::read_to_string(&fa).unwrap(), "a0\n");
    assert_eq!(fs::read_to_string(&fb).unwrap(), "b1\n");

    // --workspace and --all-workspaces do not go together.
    let o = rewind(&sub, &["--all-workspaces", "--workspace", "."]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);

    // --workspace DIR: the files under DIR, wherever it is run.
    let o = rewind(&t.out, &["--workspace", t.wsb.to_str().unwrap()]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("1 operations undone"), "{}", o.stdout);
    assert_eq!(fs::read_to_string(&fb).unwrap(), "b0\n");
}
