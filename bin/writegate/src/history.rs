//! `writegate history`, `undo`, `rewind` and `diff`: see and
//! take back what agents wrote. `history`, `undo` and `rewind` talk to the
//! running daemon (`_writegate/history`, `_writegate/undo`: an undo goes
//! through the daemon's write pipeline); `diff` reads the history store
//! directly, like `writegate audit` reads the log.
//!
//! The daemon answers those methods for the connection's own workspace
//! only; the person at the terminal reaches every workspace it serves: the
//! commands open one connection per workspace (`--workspace` limits them
//! to one), list the operations of each, and undo each operation on the
//! connection of its own workspace.

// The doc comments of the argument structs are the `--help` text.
#![allow(clippy::doc_markdown)]

use crate::args::ClientArgs;
use crate::client::CallError;
use crate::commands::{Session, connect_each};
use crate::{Status, absolutize, canonical_target, load_config_file, out};
use clap::Args;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::PathBuf;

/// `writegate history`.
#[derive(Args)]
pub(crate) struct HistoryArgs {
    /// Only the operations on this file.
    pub(crate) path: Option<PathBuf>,
    /// Only the operations of this session (e.g. `cli`, an ACP session id, `mcp-<pid>-<8 random hex digits>`).
    #[arg(long = "session", value_name = "ID")]
    pub(crate) only_session: Option<String>,
    /// One JSON object a line instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) daemon: DaemonArgs,
}

/// The daemon to ask (`--session` is the filter in these subcommands).
#[derive(Args, Clone)]
pub(crate) struct DaemonArgs {
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
}

impl DaemonArgs {
    /// The client options: the socket, the daemon's own workspace choice,
    /// audited as session `cli`.
    fn client(&self) -> ClientArgs {
        ClientArgs {
            socket: self.socket.clone(),
            workspace: None,
            session: "cli".to_string(),
        }
    }
}

/// `writegate undo`.
#[derive(Args)]
pub(crate) struct UndoArgs {
    /// The operation to take back (its opId, from `writegate history`).
    pub(crate) op_id: String,
    /// Put the old file back even though the file changed since that operation.
    #[arg(long)]
    pub(crate) force: bool,
    /// Only check and say what would be done.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) client: ClientArgs,
}

/// `writegate rewind`.
#[derive(Args)]
pub(crate) struct RewindArgs {
    /// The session whose operations are undone, newest first.
    #[arg(long = "session", value_name = "ID", required = true)]
    pub(crate) of_session: String,
    /// Stop after undoing this operation (default: all of the session's operations).
    #[arg(long, value_name = "OPID")]
    pub(crate) to: Option<String>,
    /// Only print the plan.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) daemon: DaemonArgs,
}

/// `writegate diff`.
#[derive(Args)]
pub(crate) struct DiffArgs {
    /// The operation (its opId, from `writegate history`).
    pub(crate) op_id: String,
    /// Config file to take history.path from [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

/// The history as the daemon lists it on each of `conns` (`path`:
/// canonical when it exists), merged newest first: each workspace's list
/// keeps its order, and the lists are interleaved by `ts`. Each operation
/// comes with the index of its connection in `conns`.
fn list(
    conns: &mut [Session],
    c: &ClientArgs,
    path: Option<&std::path::Path>,
    session: Option<&str>,
) -> Result<Vec<(usize, Value)>, Status> {
    let target = path.map(absolutize);
    let mut params = json!({});
    if let Some(p) = &target {
        params["path"] = json!(canonical_target(p));
    }
    if let Some(id) = session {
        params["sessionId"] = json!(id);
    }
    let mut lists = Vec::new();
    for s in conns.iter_mut() {
        let r = s.call("_writegate/history", &params, c)?;
        let ops = r["operations"].as_array().cloned().unwrap_or_default();
        lists.push(std::collections::VecDeque::from(ops));
    }
    let mut merged = Vec::new();
    loop {
        // The list whose next operation is the newest (the first on a tie).
        let next = lists
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.front().map(|op| (i, text(op, "ts").to_string())))
            .reduce(|a, b| if b.1 > a.1 { b } else { a });
        let Some((i, _)) = next else { break };
        if let Some(op) = lists[i].pop_front() {
            merged.push((i, op));
        }
    }
    Ok(merged)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

/// `writegate history`.
pub(crate) fn history(a: &HistoryArgs) -> Status {
    let client = a.daemon.client();
    let ops = match connect_each(&client).and_then(|mut conns| {
        list(
            &mut conns,
            &client,
            a.path.as_deref(),
            a.only_session.as_deref(),
        )
    }) {
        Ok(o) => o,
        Err(st) => return st,
    };
    let mut s = String::new();
    for (_, op) in &ops {
        if a.json {
            s.push_str(&op.to_string());
            s.push('\n');
            continue;
        }
        let what = if op["created"] == json!(true) {
            "created".to_string()
        } else if op["removed"] == json!(true) {
            "removed".to_string()
        } else {
            format!("{} -> {} bytes", op["bytesBefore"], op["bytesAfter"])
        };
        let state = if op["undoable"] == json!(true) {
            "undoable".to_string()
        } else {
            format!("not undoable: {}", text(op, "reason"))
        };
        let _ = writeln!(
            s,
            "{}  {}  {:<5}  {}  {}  session {}  {}",
            text(op, "opId"),
            text(op, "ts"),
            text(op, "intent"),
            text(op, "path"),
            what,
            op["sessionId"].as_str().unwrap_or("-"),
            state
        );
    }
    if ops.is_empty() && !a.json {
        s.push_str("no operations to undo\n");
    }
    out(&s);
    Status::Ok
}

/// The `_writegate/undo` params.
fn undo_params(c: &ClientArgs, op_id: &str, force: bool, dry_run: bool) -> Value {
    json!({"opId": op_id, "force": force, "dryRun": dry_run, "sessionId": c.session})
}

/// Whether the daemon answered as it does for an `opId` it does not know
/// (or that is of another workspace than the connection's): core's
/// `unknown_op` words.
fn unknown_op(e: &CallError, op_id: &str) -> bool {
    matches!(e, CallError::Rpc(r) if r.kind() == "not_undoable"
        && r.hint().starts_with(&format!("no operation {op_id} in the history")))
}

/// `writegate undo`: `_writegate/undo` on each workspace's connection in
/// turn until one knows the operation (an unknown `opId` changes nothing
/// and writes no audit event); when none does, that refusal.
fn undo_anywhere(c: &ClientArgs, op_id: &str, force: bool, dry_run: bool) -> Result<Value, Status> {
    let mut conns = connect_each(c)?;
    let params = undo_params(c, op_id, force, dry_run);
    let mut last = None;
    for s in &mut conns {
        match s.try_call("_writegate/undo", &params) {
            Ok(r) => return Ok(r),
            Err(e) if unknown_op(&e, op_id) => last = Some(e),
            Err(e) => return Err(s.report(e, c)),
        }
    }
    match (last, conns.first()) {
        (Some(e), Some(s)) => Err(s.report(e, c)),
        _ => Err(Status::Refused),
    }
}

fn describe(r: &Value) -> String {
    let verb = if r["dryRun"] == json!(true) {
        "would be"
    } else {
        "was"
    };
    let action = text(r, "action");
    let mut line = format!("{}: {} {verb} {action}", text(r, "undone"), text(r, "path"));
    if action == "restored" {
        let _ = write!(line, " ({} bytes, {}", r["bytes"], text(r, "hash"));
        if let Some(mode) = r["mode"].as_str() {
            let _ = write!(line, ", mode {mode}");
        }
        line.push(')');
        if let Some(why) = r["modeDropped"].as_str() {
            let _ = write!(line, "; {why}");
        }
    }
    if let Some(dirs) = r["removedDirs"].as_array().filter(|d| !d.is_empty()) {
        let dirs: Vec<&str> = dirs.iter().filter_map(Value::as_str).collect();
        let _ = write!(line, ", with the directories {}", dirs.join(", "));
    }
    for d in r["skippedDirs"].as_array().into_iter().flatten() {
        let _ = write!(
            line,
            "; directory {} left: {}",
            text(d, "path"),
            text(d, "reason")
        );
    }
    if r["forced"] == json!(true) {
        line.push_str(" (forced over later changes)");
    }
    if r["dryRun"] != json!(true) {
        let _ = write!(line, "; undo it with `writegate undo {}`", text(r, "opId"));
    }
    line.push('\n');
    line
}

/// `writegate undo`.
pub(crate) fn undo(a: &UndoArgs) -> Status {
    match undo_anywhere(&a.client, &a.op_id, a.force, a.dry_run) {
        Ok(r) => {
            out(&describe(&r));
            Status::Ok
        }
        Err(st) => st,
    }
}

/// `writegate rewind`: the session's undoable operations, newest first,
/// each undone in turn; the first refusal stops it with a report.
pub(crate) fn rewind(a: &RewindArgs) -> Status {
    let client = a.daemon.client();
    let mut conns = match connect_each(&client) {
        Ok(c) => c,
        Err(st) => return st,
    };
    let ops = match list(&mut conns, &client, None, Some(&a.of_session)) {
        Ok(o) => o,
        Err(st) => return st,
    };
    // Undos the session made itself are not rewound (they are its way back
    // already); an operation already taken back is skipped.
    let undone: Vec<&str> = ops
        .iter()
        .filter(|(_, o)| text(o, "intent") == "undo")
        .map(|(_, o)| text(o, "undoes"))
        .collect();
    let mut plan = Vec::new();
    for (conn, op) in &ops {
        if text(op, "intent") == "undo" || undone.contains(&text(op, "opId")) {
            continue;
        }
        plan.push((*conn, op));
        if a.to.as_deref() == Some(text(op, "opId")) {
            break;
        }
    }
    if let Some(to) = &a.to
        && !plan.iter().any(|(_, o)| text(o, "opId") == to)
    {
        eprintln!(
            "writegate: refused: not_undoable: {to} is not an operation of session {} that can still be undone (see `writegate history --session {}`)",
            a.of_session, a.of_session
        );
        return Status::Refused;
    }
    if a.dry_run {
        let mut s = format!(
            "rewind of session {}: {} operations, newest first\n",
            a.of_session,
            plan.len()
        );
        for (_, op) in &plan {
            let note = if op["undoable"] == json!(true) {
                String::new()
            } else {
                format!("  (now: {})", text(op, "reason"))
            };
            let _ = writeln!(
                s,
                "  undo {}  {}  {}{note}",
                text(op, "opId"),
                text(op, "intent"),
                text(op, "path")
            );
        }
        out(&s);
        return Status::Ok;
    }
    let mut done = 0;
    for (conn, op) in &plan {
        let params = undo_params(&client, text(op, "opId"), false, false);
        // On the connection of the workspace that listed it.
        match conns[*conn].call("_writegate/undo", &params, &client) {
            Ok(r) => {
                out(&describe(&r));
                done += 1;
            }
            Err(st) => {
                let left: Vec<&str> = plan[done..].iter().map(|(_, o)| text(o, "opId")).collect();
                eprintln!(
                    "writegate: rewind stopped: {done} of {} operations undone; not undone: {}",
                    plan.len(),
                    left.join(", ")
                );
                return st;
            }
        }
    }
    out(&format!(
        "rewind of session {}: {done} operations undone\n",
        a.of_session
    ));
    Status::Ok
}

/// `writegate diff`: what the operation changed, as a unified diff of the
/// decoded text, from the store (the before-image) and the operation's
/// result (the next operation's before-image, or the file while it still
/// holds that result).
pub(crate) fn diff(a: &DiffArgs) -> Status {
    let cfg = match load_config_file(a.config.as_deref(), a.config.is_some()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("writegate: {e}");
            return Status::Usage;
        }
    };
    let root = cfg.history_path(&crate::env_var);
    if !root.join("index.jsonl").exists() {
        eprintln!(
            "writegate: refused: not_undoable: no history store at {}",
            root.display()
        );
        return Status::Refused;
    }
    let h = match writegate_core::history::History::open(&root) {
        Ok(h) => h,
        Err(e) => {
            eprintln!(
                "writegate: cannot read the history store {}: {e}",
                root.display()
            );
            return Status::Refused;
        }
    };
    match h.versions(&a.op_id, writegate_core::history::DIFF_MAX_BYTES) {
        Ok((rec, before, after)) => {
            let before = before.unwrap_or_default();
            let Some(after) = after else {
                eprintln!(
                    "writegate: refused: file_changed: the result of {} is no longer available (the file changed since, and no later operation kept it)",
                    a.op_id
                );
                return Status::Refused;
            };
            match writegate_core::history::diff_versions(&rec.path, &before, &after) {
                Ok(d) if d.is_empty() => {
                    out("no change in the text\n");
                    Status::Ok
                }
                Ok(d) => {
                    out(&d);
                    Status::Ok
                }
                Err(e) => {
                    eprintln!(
                        "writegate: refused: binary_file: cannot show {} as text: {e}",
                        rec.path
                    );
                    Status::Refused
                }
            }
        }
        Err(r) => {
            eprintln!("writegate: refused: {}: {}", r.kind.as_str(), r.hint);
            Status::Refused
        }
    }
}
