//! `writegate history`, `undo`, `rewind` and `diff`: see and take back
//! what agents wrote. The history store is the user's (`history.path`),
//! shared by every front end (`serve`, `proxy`, `mcp`), so these commands
//! read it themselves, under its lock, with or without a daemon running.
//!
//! An undo goes through a write's pipeline either way: when a daemon at
//! the socket serves the operation's workspace, through that daemon
//! (`_writegate/undo`, under its path lock); otherwise in this process,
//! through the same service a daemon runs (resolver, approval gate, path
//! lock, atomic durable publish, one audit event), in the workspace the
//! operation was recorded in. The person who runs the command is the one
//! the approval gate asks: on the terminal, or `--yes`. A daemon's path
//! lock is its own; between a daemon and this process the publish's check
//! that the file is still the one read (its inode, right before the
//! rename) stops the second of two writers, and the store's index is
//! appended under the store's lock.

// The doc comments of the argument structs are the `--help` text.
#![allow(clippy::doc_markdown)]

use crate::client::{CallError, Conn};
use crate::commands::{ClientArgs, Session, connect_each};
use crate::serve::{Startup, own_files};
use crate::{Status, absolutize, canonical_target, load_config_file, out};
use clap::Args;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use writegate_core::api::{ApprovalAnswer, ApprovalQuestion, Approver, OpCtx};
use writegate_core::history::{History, HistoryEntry, Reach, UndoParams};
use writegate_core::runtime::runtime_id;
use writegate_core::{ErrorKind, Failure, Registry, Service};

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
    /// Config file to take history.path from [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Accepted and unused: the history is read from the store, not a daemon.
    #[arg(long, value_name = "PATH", hide = true)]
    pub(crate) socket: Option<PathBuf>,
}

/// The daemon to go through (`--session` is the filter in `rewind`).
#[derive(Args, Clone)]
pub(crate) struct DaemonArgs {
    /// The socket of the daemon to undo through when it serves the file's workspace [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
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
    /// Allow the undo when the approval gate holds it (a protected file), without being asked.
    #[arg(long)]
    pub(crate) yes: bool,
    /// Config file to take history.path, the audit log and the policy from [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
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
    /// Only the session's operations on files under this directory (default: the operations in the workspace holding the current directory).
    #[arg(long, value_name = "DIR", conflicts_with = "all_workspaces")]
    pub(crate) workspace: Option<PathBuf>,
    /// The session's operations in every workspace it wrote in.
    #[arg(long)]
    pub(crate) all_workspaces: bool,
    /// Only print the plan.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Allow each undo the approval gate holds (a protected file), without being asked.
    #[arg(long)]
    pub(crate) yes: bool,
    /// Config file to take history.path, the audit log and the policy from [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
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

/// The history store the command line's config names (`history.path`),
/// and that config. `None` for the store when there is none yet.
pub(crate) struct Store {
    cfg: writegate_core::Config,
    root: PathBuf,
    history: Option<History>,
}

impl Store {
    /// Opens the store of `config` (the default config file when `None`)
    /// without creating it.
    fn open(config: Option<&Path>) -> Result<Store, Status> {
        let cfg = match load_config_file(config, config.is_some()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("writegate: {e}");
                return Err(Status::Usage);
            }
        };
        let root = cfg.history_path(&crate::env_var);
        if !root.join("index.jsonl").exists() {
            return Ok(Store {
                cfg,
                root,
                history: None,
            });
        }
        match History::open(&root) {
            Ok(h) => Ok(Store {
                cfg,
                root,
                history: Some(h),
            }),
            Err(e) => {
                eprintln!(
                    "writegate: cannot read the history store {}: {e}",
                    root.display()
                );
                Err(Status::Refused)
            }
        }
    }

    /// Every operation of the store within `reach`, newest first, as
    /// `history --json` shows each (only of `path` when given), read under
    /// the store's lock.
    fn list(&self, path: Option<&Path>, reach: Reach<'_>) -> Result<Vec<Value>, Status> {
        let Some(h) = &self.history else {
            return Ok(Vec::new());
        };
        let target = path.map(canonical_target);
        let entries = h
            .entries(self.cfg.history.enabled, self.cfg.max_write_bytes, reach)
            .map_err(|e| {
                eprintln!(
                    "writegate: cannot read the history store {}: {e}",
                    self.root.display()
                );
                Status::Refused
            })?;
        Ok(entries
            .into_iter()
            .filter(|e| target.as_ref().is_none_or(|t| e.record.canonical() == *t))
            .map(|e| entry_json(&e))
            .collect())
    }
}

/// One operation as `history --json` prints it.
fn entry_json(e: &HistoryEntry) -> Value {
    let r = &e.record;
    let mut v = json!({
        "opId": r.op_id,
        "ts": r.ts,
        "path": r.path,
        "workspace": r.workspace,
        "intent": r.intent,
        "writer": r.writer,
        "created": r.created,
        "bytesBefore": r.bytes_before,
        "bytesAfter": r.bytes_after,
        "undoable": e.undoable,
    });
    for (k, val) in [
        ("sessionId", r.session_id.clone()),
        ("hashBefore", r.hash_before.clone()),
        ("hashAfter", r.hash_after.clone()),
        ("image", r.image.clone()),
        ("undoes", r.undoes.clone()),
        ("reason", e.reason.clone()),
    ] {
        if let Some(val) = val {
            v[k] = json!(val);
        }
    }
    if r.removed {
        v["removed"] = json!(true);
    }
    v
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

/// `writegate history`: read from the store itself, so it lists the
/// operations of every front end (`serve`, `proxy`, `mcp`) with or without
/// a daemon running.
pub(crate) fn history(a: &HistoryArgs) -> Status {
    let store = match Store::open(a.config.as_deref()) {
        Ok(s) => s,
        Err(st) => return st,
    };
    let reach = Reach {
        session: a.only_session.as_deref(),
        workspace: None,
    };
    let ops = match store.list(a.path.as_deref(), reach) {
        Ok(o) => o,
        Err(st) => return st,
    };
    let mut s = String::new();
    for op in &ops {
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

/// How one run of `undo` or `rewind` takes operations back: through the
/// running daemon when one serves the operation's workspace (its path
/// lock then covers the undo), else in this process, on the store.
struct Undoer<'a> {
    client: &'a ClientArgs,
    config: Option<&'a Path>,
    yes: bool,
    /// The daemon's connections, one per workspace it serves; `None` when
    /// no daemon answers at the socket.
    daemon: Option<Vec<Session>>,
    /// The service of a local undo, built on first use.
    local: Option<Arc<Service>>,
}

impl<'a> Undoer<'a> {
    fn new(client: &'a ClientArgs, config: Option<&'a Path>, yes: bool) -> Undoer<'a> {
        let socket = client.socket.as_deref().map_or_else(
            || writegate_acp::default_socket_path(&crate::env_var),
            absolutize,
        );
        // A daemon that does not answer is no error: the undo runs here.
        let daemon = match Conn::open(&socket, None) {
            Ok(_) => connect_each(client).ok(),
            Err(_) => None,
        };
        Undoer {
            client,
            config,
            yes,
            daemon,
            local: None,
        }
    }

    /// Takes back `rec` (or, with `dry_run`, says what that would do).
    /// A refusal is printed; the exit status is returned.
    fn undo(&mut self, rec: &Value, force: bool, dry_run: bool) -> Result<Value, Status> {
        let op_id = text(rec, "opId");
        let workspace = text(rec, "workspace");
        let path = Path::new(text(rec, "path"));
        if let Some(conns) = &mut self.daemon {
            let params = undo_params(self.client, op_id, force, dry_run);
            let serving = conns.iter_mut().find(|s| {
                s.conn
                    .workspace()
                    .is_some_and(|w| w.id == workspace || path.starts_with(&w.root))
            });
            if let Some(s) = serving {
                match s.try_call("_writegate/undo", &params) {
                    Ok(r) => return Ok(r),
                    // Another store, or another workspace's operation: here.
                    Err(e) if unknown_op(&e, op_id) => {}
                    Err(e) => return Err(s.report(e, self.client)),
                }
            }
        }
        self.undo_here(rec, force, dry_run)
    }

    /// The undo in this process: the service's own pipeline (resolver,
    /// approval gate, path lock, atomic durable publish, one audit event),
    /// in the workspace the operation was recorded in, on the store.
    fn undo_here(&mut self, rec: &Value, force: bool, dry_run: bool) -> Result<Value, Status> {
        let op_id = text(rec, "opId");
        let service = if let Some(s) = &self.local {
            s.clone()
        } else {
            let s = local_service(self.config)?;
            self.local = Some(s.clone());
            s
        };
        let runtime = workspace_of(&service, rec)?;
        let ctx = OpCtx {
            runtime,
            session_id: Some(self.client.session.clone()),
            // The person's own command, as a host on stdio is: its
            // allowances are that transport's.
            allows: writegate_acp::transport::Transport::Stdio.allowances(),
            route: "cli undo",
            cancel: Arc::new(AtomicBool::new(false)),
            approver: Some(Arc::new(PersonApprover { yes: self.yes })),
            client_root: false,
        };
        let params = UndoParams {
            op_id: op_id.to_string(),
            force,
            dry_run,
            session: None,
            own_workspace: false,
        };
        match service.undo(&ctx, &params) {
            Ok(outcome) => Ok(serde_json::to_value(outcome).unwrap_or_default()),
            Err(Failure::Refused(r)) => {
                let hint = if r.kind == ErrorKind::ApprovalRequired {
                    let what = r.hint.split("; ask the user").next().unwrap_or(&r.hint);
                    if self.yes {
                        format!("{what}; you declined it")
                    } else {
                        format!(
                            "{what}; nobody was asked (stdin is not a terminal): run it in a terminal to be asked, or add --yes to allow it"
                        )
                    }
                } else if r.kind == ErrorKind::WritegateFile {
                    format!(
                        "{} is one of writegate's own files; writegate does not undo those: change it with your editor",
                        text(rec, "path")
                    )
                } else {
                    r.hint.clone()
                };
                eprintln!("writegate: refused: {}: {hint}", r.kind.as_str());
                Err(Status::Refused)
            }
            Err(Failure::InvalidParams(why)) => {
                eprintln!("writegate: {why}");
                Err(Status::Usage)
            }
            Err(Failure::Cancelled) => {
                eprintln!("writegate: refused: cancelled: nothing was changed");
                Err(Status::Refused)
            }
        }
    }

    /// The last audit flush of a local undo.
    fn close(&self) {
        if let Some(s) = &self.local {
            s.audit().close();
        }
    }
}

/// The approval gate's question in a local undo, put to the person who ran
/// the command: on the terminal, or answered by `--yes`. Without either
/// nobody is asked and the undo is refused `approval_required`.
struct PersonApprover {
    yes: bool,
}

impl PersonApprover {
    fn terminal() -> bool {
        use std::io::IsTerminal;
        std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
    }
}

impl Approver for PersonApprover {
    fn ask(&self, q: &ApprovalQuestion) -> ApprovalAnswer {
        if self.yes {
            return ApprovalAnswer::AllowOnce;
        }
        eprint!(
            "writegate: the undo writes {} ({}: {}). Allow it? [y/N] ",
            q.path.display(),
            q.level.as_str(),
            q.reason
        );
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(_) if matches!(line.trim(), "y" | "Y" | "yes") => ApprovalAnswer::AllowOnce,
            _ => ApprovalAnswer::Deny,
        }
    }

    fn asks_about(&self, _q: &ApprovalQuestion) -> bool {
        self.yes || Self::terminal()
    }
}

/// The service of an undo run in this process: the config, audit log,
/// approvals, writegate's own files and history store a daemon would use,
/// and no workspace yet ([`workspace_of`] adds the operation's).
fn local_service(config: Option<&Path>) -> Result<Arc<Service>, Status> {
    let start = Startup {
        config: config.map(Path::to_path_buf),
        audit_log: None,
        allow_read: false,
        no_external_writes: false,
        workspaces: Vec::new(),
        client_roots: None,
    };
    let cfg = start.load_config().map_err(|e| {
        eprintln!("writegate: {e}");
        Status::Usage
    })?;
    let audit_path = cfg.audit_path(&crate::env_var);
    let approvals = writegate_core::config::state_dir(&crate::env_var).join("approvals.json");
    let root = cfg.history_path(&crate::env_var);
    let own = own_files(&start, &audit_path, &root);
    let mut service = Service::new(cfg, Registry::default(), &audit_path, approvals);
    service.protect_own_files(own);
    if let Err(e) = service.open_history(&root) {
        eprintln!(
            "writegate: cannot open the history store {}: {e}",
            root.display()
        );
        return Err(Status::Refused);
    }
    let audit = service.audit();
    if let Some(problem) = audit.startup_problem()
        && audit.required()
    {
        eprintln!(
            "writegate: refused: audit_unavailable: cannot use the audit log {}: {problem}; nothing was changed",
            audit_path.display()
        );
        return Err(Status::Refused);
    }
    Ok(Arc::new(service))
}

/// The workspace `rec` was recorded in, registered in `service`: the
/// directory above its file whose runtime id is the record's (the id is a
/// hash of the root), else a `[[workspace]]` of the config or a directory
/// above the current one with that id. An operation of the external writer
/// whose workspace is not found runs in the store's own directory, so that
/// its file is outside and passes the external checks again.
fn workspace_of(service: &Service, rec: &Value) -> Result<Arc<writegate_core::Runtime>, Status> {
    let id = text(rec, "workspace");
    let path = Path::new(text(rec, "path"));
    let cfg = service.config();
    let configured: Vec<(PathBuf, bool)> = cfg
        .workspace
        .iter()
        .map(|w| (canonical_target(&w.root), w.trusted))
        .collect();
    let cwd = std::env::current_dir().unwrap_or_default();
    let found = path
        .ancestors()
        .skip(1)
        .chain(cwd.ancestors())
        .map(Path::to_path_buf)
        .chain(configured.iter().map(|(r, _)| r.clone()))
        .find(|r| runtime_id(r) == id);
    let root = match found {
        Some(r) => r,
        None if text(rec, "writer") == "external" => cfg.history_path(&crate::env_var),
        None => {
            eprintln!(
                "writegate: refused: not_undoable: the workspace {} was recorded in is not found above {}; nothing was changed",
                text(rec, "opId"),
                path.display()
            );
            return Err(Status::Refused);
        }
    };
    let trusted = configured
        .iter()
        .find(|(r, _)| *r == root)
        .is_none_or(|(_, t)| *t);
    service.registry().register(&root, trusted).map_err(|e| {
        eprintln!("writegate: refused: not_undoable: {e}; nothing was changed");
        Status::Refused
    })
}

/// The record of `op_id` in the store, or the refusal an unknown `opId`
/// gets (printed).
fn find(store: &Store, op_id: &str) -> Result<Value, Status> {
    let all = store.list(
        None,
        Reach {
            session: None,
            workspace: None,
        },
    )?;
    all.into_iter()
        .find(|o| text(o, "opId") == op_id)
        .ok_or_else(|| {
            eprintln!(
                "writegate: refused: not_undoable: no operation {op_id} in the history; `writegate history` lists the operations that can be undone"
            );
            Status::Refused
        })
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
    let store = match Store::open(a.config.as_deref()) {
        Ok(s) => s,
        Err(st) => return st,
    };
    let rec = match find(&store, &a.op_id) {
        Ok(r) => r,
        Err(st) => return st,
    };
    let mut undoer = Undoer::new(&a.client, a.config.as_deref(), a.yes);
    let result = undoer.undo(&rec, a.force, a.dry_run);
    undoer.close();
    match result {
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
    let store = match Store::open(a.config.as_deref()) {
        Ok(s) => s,
        Err(st) => return st,
    };
    let reach = Reach {
        session: Some(&a.of_session),
        workspace: None,
    };
    let mut ops = match store.list(None, reach) {
        Ok(o) => o,
        Err(st) => return st,
    };
    if let Some(dir) = &a.workspace {
        let dir = canonical_target(dir);
        ops.retain(|o| Path::new(text(o, "path")).starts_with(&dir));
    } else if !a.all_workspaces && !ops.is_empty() {
        match here(&ops) {
            Ok(id) => ops.retain(|o| text(o, "workspace") == id),
            Err(roots) => {
                let cwd = std::env::current_dir().unwrap_or_default();
                eprintln!(
                    "writegate: refused: not_undoable: session {} wrote nothing in the workspace of the current directory ({}); it wrote in {}: run this in one of them, or pass --workspace DIR or --all-workspaces",
                    a.of_session,
                    cwd.display(),
                    roots.join(", ")
                );
                return Status::Refused;
            }
        }
    }
    // Undos the session made itself are not rewound (they are its way back
    // already); an operation already taken back is skipped.
    let undone: Vec<&str> = ops
        .iter()
        .filter(|o| text(o, "intent") == "undo")
        .map(|o| text(o, "undoes"))
        .collect();
    let mut plan = Vec::new();
    for op in &ops {
        if text(op, "intent") == "undo" || undone.contains(&text(op, "opId")) {
            continue;
        }
        plan.push(op);
        if a.to.as_deref() == Some(text(op, "opId")) {
            break;
        }
    }
    if let Some(to) = &a.to
        && !plan.iter().any(|o| text(o, "opId") == to)
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
        for op in &plan {
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
    let client = ClientArgs {
        socket: a.daemon.socket.clone(),
        workspace: None,
        session: "cli".to_string(),
    };
    let mut undoer = Undoer::new(&client, a.config.as_deref(), a.yes);
    let mut done = 0;
    for op in &plan {
        match undoer.undo(op, false, false) {
            Ok(r) => {
                out(&describe(&r));
                done += 1;
            }
            Err(st) => {
                undoer.close();
                let left: Vec<&str> = plan[done..].iter().map(|o| text(o, "opId")).collect();
                eprintln!(
                    "writegate: rewind stopped: {done} of {} operations undone; not undone: {}",
                    plan.len(),
                    left.join(", ")
                );
                return st;
            }
        }
    }
    undoer.close();
    out(&format!(
        "rewind of session {}: {done} operations undone\n",
        a.of_session
    ));
    Status::Ok
}

/// The workspace of the current directory among those `ops` were recorded
/// in: the innermost directory above it (or it) whose runtime id is an
/// operation's. Else the roots of the workspaces `ops` were recorded in
/// (each the directory above one of its files with that id), to name them.
fn here(ops: &[Value]) -> Result<String, Vec<String>> {
    let cwd = canonical_target(&std::env::current_dir().unwrap_or_default());
    let ids: std::collections::BTreeSet<&str> = ops.iter().map(|o| text(o, "workspace")).collect();
    if let Some(id) = cwd
        .ancestors()
        .map(runtime_id)
        .find(|id| ids.contains(id.as_str()))
    {
        return Ok(id);
    }
    let mut roots: Vec<String> = ids
        .iter()
        .map(|id| {
            ops.iter()
                .filter(|o| text(o, "workspace") == *id)
                .find_map(|o| {
                    Path::new(text(o, "path"))
                        .ancestors()
                        .skip(1)
                        .find(|r| runtime_id(r) == *id)
                        .map(|r| r.display().to_string())
                })
                .unwrap_or_else(|| format!("workspace {id}"))
        })
        .collect();
    roots.sort_unstable();
    if roots.is_empty() {
        roots.push("no workspace".to_string());
    }
    Err(roots)
}

/// `writegate diff`: what the operation changed, as a unified diff of the
/// decoded text, from the store (the before-image) and the operation's
/// result (the next operation's before-image, or the file while it still
/// holds that result).
pub(crate) fn diff(a: &DiffArgs) -> Status {
    let store = match Store::open(a.config.as_deref()) {
        Ok(s) => s,
        Err(st) => return st,
    };
    let Some(h) = &store.history else {
        eprintln!(
            "writegate: refused: not_undoable: no history store at {}",
            store.root.display()
        );
        return Status::Refused;
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
