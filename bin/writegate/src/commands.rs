//! The subcommands that talk to the running daemon: `write`, `edit`, `read`
//! and `approve`. Each checks its input (usage errors exit 2 and send
//! nothing), opens a connection on the workspace that contains the path
//! (or `--workspace`), makes one call and prints the answer. Refusals print
//! `writegate: refused: <errorKind>: <hint>` and exit 1; an unreachable
//! daemon exits 3.

use crate::client::{CallError, Conn, RpcError, Workspace, containing, describe};
use crate::{Status, absolutize, canonical_target, env_var, out, usage_error};
use clap::{Args, ValueEnum, builder::NonEmptyStringValueParser};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use writegate_core::{EditMode, OpMode};

/// The options every subcommand that talks to the daemon shares.
// Its doc comments are the `--help` text (backticks would be shown as they
// are).
#[allow(clippy::doc_markdown)]
#[derive(Args, Clone)]
pub(crate) struct ClientArgs {
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
    /// Use this registered workspace [default: the daemon's workspace that contains the path].
    #[arg(long, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Session id recorded in the audit log and receipts (and matched by approvals).
    #[arg(long, default_value = "cli", value_parser = NonEmptyStringValueParser::new())]
    pub(crate) session: String,
}

/// `writegate write`.
#[derive(Args)]
pub(crate) struct WriteArgs {
    /// File to write (relative paths are taken from the current directory).
    pub(crate) path: PathBuf,
    /// Accept empty stdin and write an empty file.
    #[arg(long)]
    pub(crate) allow_empty: bool,
    #[command(flatten)]
    pub(crate) client: ClientArgs,
}

/// `writegate edit`.
// Its doc comments are the `--help` text (backticks would be shown as they
// are), and its flags are bools.
#[allow(clippy::doc_markdown, clippy::struct_excessive_bools)]
#[derive(Args)]
pub(crate) struct EditArgs {
    /// File to edit (relative paths are taken from the current directory).
    pub(crate) path: PathBuf,
    /// Replace the one occurrence of this text (with --line: a check that those lines hold it).
    #[arg(long, value_name = "TEXT", value_parser = NonEmptyStringValueParser::new())]
    pub(crate) find: Option<String>,
    /// Line to replace, insert before, or delete (1-based).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_line_number)]
    pub(crate) line: Option<u64>,
    /// Last line of the range to replace or delete (1-based, inclusive; not before --line).
    #[arg(long, value_name = "M", requires = "line", allow_negative_numbers = true, value_parser = parse_line_number)]
    pub(crate) end_line: Option<u64>,
    /// Insert the new text before --line.
    #[arg(long, requires = "line", conflicts_with_all = ["delete", "append", "find", "end_line"])]
    pub(crate) insert: bool,
    /// Delete lines --line through --end-line (or just --line).
    #[arg(long, requires = "line", conflicts_with_all = ["append", "find", "content"])]
    pub(crate) delete: bool,
    /// Append the new text to the end of the file, as whole lines: a line ending (the file's own) is added when the text does not end with one.
    #[arg(long, conflicts_with_all = ["find", "line", "end_line"])]
    pub(crate) append: bool,
    /// With --append: append the text exactly as given, without adding a line ending.
    #[arg(long, requires = "append")]
    pub(crate) no_newline: bool,
    /// The new text [default: stdin; empty stdin is refused].
    #[arg(long, value_name = "TEXT")]
    pub(crate) content: Option<String>,
    /// Refuse unless the file still has this hash (sha256:<64 hex>, from `writegate read`).
    #[arg(long, value_name = "HASH", value_parser = parse_hash)]
    pub(crate) expected_hash: Option<String>,
    /// Print the diff the edit would make; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) client: ClientArgs,
}

/// `writegate read`.
#[derive(Args)]
pub(crate) struct ReadArgs {
    /// File to read (relative paths are taken from the current directory).
    pub(crate) path: PathBuf,
    /// First line to print (1-based).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_line_number)]
    pub(crate) line: Option<u64>,
    /// Number of lines to print (at least 1).
    #[arg(long, value_name = "COUNT", allow_negative_numbers = true, value_parser = parse_count)]
    pub(crate) limit: Option<u64>,
    #[command(flatten)]
    pub(crate) client: ClientArgs,
}

/// Scope of an approval: the scopes of `_writegate/approve`.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ApproveScope {
    /// The next matching write or edit of the session.
    Once,
    /// Every matching write or edit of the session while the daemon runs.
    Session,
    /// Every matching write or edit in the workspace while the daemon runs.
    Workspace,
    /// Every matching write or edit, kept across restarts.
    Persistent,
}

impl ApproveScope {
    /// The wire name (`once`, `session`, `workspace`, `persistent`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            ApproveScope::Once => "once",
            ApproveScope::Session => "session",
            ApproveScope::Workspace => "workspace",
            ApproveScope::Persistent => "persistent",
        }
    }
}

/// `writegate approve`.
// Its doc comments are the `--help` text (backticks would be shown as they
// are).
#[allow(clippy::doc_markdown)]
#[derive(Args)]
pub(crate) struct ApproveArgs {
    /// The command from the refusal, e.g. 'edit_file write /src/app/.env' (one argument or several).
    #[arg(required = true, num_args = 1.., value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
    /// How long the approval lasts.
    #[arg(long, value_enum, default_value = "once")]
    pub(crate) scope: ApproveScope,
    #[command(flatten)]
    pub(crate) client: ClientArgs,
}

/// A 1-based line number (`--line`, `--end-line`).
fn parse_line_number(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("line numbers start at 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "`{s}` is not a line number (a whole number from 1)"
        )),
    }
}

/// A number of lines (`--limit`): at least 1.
fn parse_count(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err(
            "0 lines: pass at least 1, or leave --limit out for the rest of the file".to_string(),
        ),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "`{s}` is not a number of lines (a whole number from 1)"
        )),
    }
}

/// `--expected-hash`: `sha256:` and 64 hex digits (either case; sent in
/// lowercase, the form `writegate read` prints).
fn parse_hash(s: &str) -> Result<String, String> {
    let hex = s.strip_prefix("sha256:").ok_or_else(|| {
        format!("`{s}` is not a hash: expected sha256:<64 hex digits>, as `writegate read` prints")
    })?;
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "`{s}` is not a hash: expected sha256: and exactly 64 hex digits (got {} characters after the prefix)",
            hex.chars().count()
        ));
    }
    Ok(format!("sha256:{}", hex.to_ascii_lowercase()))
}

/// A connection opened for one command, with what is needed to explain a
/// refusal.
pub(crate) struct Session {
    pub(crate) conn: Conn,
    socket: PathBuf,
    served: Vec<Workspace>,
}

fn socket_of(c: &ClientArgs) -> PathBuf {
    c.socket
        .as_deref()
        .map_or_else(|| writegate_acp::default_socket_path(&env_var), absolutize)
}

/// Prints why the daemon could not be reached; [`Status::Unreachable`].
fn unreachable(e: &std::io::Error, socket: &Path) -> Status {
    eprintln!(
        "writegate: cannot reach the daemon at {}: {e} (start it with `writegate serve --workspace DIR`, or pass the --socket it listens on)",
        socket.display()
    );
    Status::Unreachable
}

/// What the file at `path` holds now (`None`: missing or unreadable), to
/// tell after a broken connection whether a write happened.
fn snapshot(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// Prints that the daemon went away during a write or edit of `path`, and
/// whether the file changed since `before` (the write happened, or nothing
/// was written); [`Status::Unreachable`].
fn broke_mid_write(
    e: &std::io::Error,
    socket: &Path,
    path: &Path,
    before: Option<&[u8]>,
) -> Status {
    let now = snapshot(path);
    let what = if now.as_deref() == before {
        "the file is as it was before: nothing was written".to_string()
    } else {
        format!(
            "the file changed since the command started: the write happened (see `writegate history {}`)",
            shell_quote(&path.display().to_string())
        )
    };
    eprintln!(
        "writegate: the daemon at {} stopped before answering ({e}); {what}. Start it again (`writegate serve --workspace DIR`) to go on",
        socket.display()
    );
    Status::Unreachable
}

/// Opens a connection for an operation on `target` (an absolute path, or
/// `None`): on `--workspace` if given, else on the served workspace that
/// contains the target's canonical path, else on the daemon's primary
/// workspace (which then refuses a path outside it with
/// `path_outside_workspace`, and the refusal lists the workspaces).
pub(crate) fn connect(c: &ClientArgs, target: Option<&Path>) -> Result<Session, Status> {
    let socket = socket_of(c);
    let fail = |e: CallError, served: &[Workspace], c: &ClientArgs| match e {
        CallError::Io(e) => unreachable(&e, &socket),
        CallError::Rpc(r) => refused(&r, served, c),
    };
    let first = Conn::open(&socket, None).map_err(|e| fail(e, &[], c))?;
    let served = first.workspaces();
    let wanted: Option<String> = match (&c.workspace, target) {
        (Some(dir), _) => {
            let canonical = canonical_target(dir);
            // A registered root by its canonical path; anything else is
            // passed as given and the daemon decides (dynamic workspaces).
            Some(
                served
                    .iter()
                    .find(|w| w.root == canonical)
                    .map_or_else(|| absolutize(dir), |w| w.root.clone())
                    .display()
                    .to_string(),
            )
        }
        (None, Some(t)) => {
            containing(&served, &canonical_target(t)).map(|w| w.root.display().to_string())
        }
        (None, None) => None,
    };
    let current = first.workspace().map(|w| w.root.display().to_string());
    let conn = match wanted {
        Some(root) if Some(&root) != current.as_ref() => {
            drop(first);
            match Conn::open(&socket, Some(&root)) {
                Ok(conn) => conn,
                Err(CallError::Rpc(r)) => {
                    eprintln!(
                        "writegate: refused: workspace {root}: {} (workspaces served: {})",
                        r.hint(),
                        describe(&served)
                    );
                    return Err(Status::Refused);
                }
                Err(e) => return Err(fail(e, &served, c)),
            }
        }
        _ => first,
    };
    Ok(Session {
        conn,
        socket,
        served,
    })
}

/// One connection on each workspace the daemon serves, primary first (only
/// on `--workspace`'s when it is given): the daemon's history methods
/// answer for the connection's own workspace only, and the person at the
/// terminal reaches every workspace this way.
pub(crate) fn connect_each(c: &ClientArgs) -> Result<Vec<Session>, Status> {
    if c.workspace.is_some() {
        return Ok(vec![connect(c, None)?]);
    }
    let socket = socket_of(c);
    let fail = |e: CallError, served: &[Workspace]| match e {
        CallError::Io(e) => unreachable(&e, &socket),
        CallError::Rpc(r) => refused(&r, served, c),
    };
    let first = Conn::open(&socket, None).map_err(|e| fail(e, &[]))?;
    let served = first.workspaces();
    let current = first.workspace().map(|w| w.id);
    let mut first = Some(first);
    let mut all = Vec::new();
    for w in &served {
        let conn = match first.take_if(|_| current.as_deref() == Some(w.id.as_str())) {
            Some(conn) => conn,
            None => Conn::open(&socket, Some(&w.id)).map_err(|e| fail(e, &served))?,
        };
        all.push(Session {
            conn,
            socket: socket.clone(),
            served: served.clone(),
        });
    }
    if let Some(conn) = first {
        // A daemon that lists no workspace: its connection's own.
        all.insert(
            0,
            Session {
                conn,
                socket,
                served,
            },
        );
    }
    Ok(all)
}

impl Session {
    /// One call; a failure is returned as it is (see [`Session::report`]).
    pub(crate) fn try_call(&mut self, method: &str, params: &Value) -> Result<Value, CallError> {
        self.conn.call(method, params)
    }

    /// Prints a failure of [`Session::try_call`]; the exit status.
    pub(crate) fn report(&self, e: CallError, c: &ClientArgs) -> Status {
        match e {
            CallError::Io(e) => unreachable(&e, &self.socket),
            CallError::Rpc(r) => refused(&r, &self.served, c),
        }
    }

    /// One call; a failure is printed and becomes the exit status.
    pub(crate) fn call(
        &mut self,
        method: &str,
        params: &Value,
        c: &ClientArgs,
    ) -> Result<Value, Status> {
        self.conn.call(method, params).map_err(|e| match e {
            CallError::Io(e) => unreachable(&e, &self.socket),
            CallError::Rpc(r) => refused(&r, &self.served, c),
        })
    }
}

/// Quotes `s` for a POSIX shell when it needs it (`'...'`, with `'` as `'\''`).
fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Prints a refusal, `writegate: refused: <errorKind>: <hint>`, and what to
/// do next where the CLI knows more than the daemon: the `writegate approve`
/// line for `approval_required`, the served workspaces for
/// `path_outside_workspace`. Returns [`Status::Refused`].
fn refused(r: &RpcError, served: &[Workspace], c: &ClientArgs) -> Status {
    let hint = cli_words(r.kind(), &r.hint());
    if hint.is_empty() {
        eprintln!("writegate: refused: {}", r.kind());
    } else {
        eprintln!("writegate: refused: {}: {hint}", r.kind());
    }
    match r.kind() {
        "approval_required" => {
            if let Some(command) = r.data.get("command").and_then(Value::as_str) {
                let mut line = format!("writegate approve {}", shell_quote(command));
                if c.session != "cli" {
                    let _ = write!(line, " --session {}", shell_quote(&c.session));
                }
                if let Some(s) = &c.socket {
                    let _ = write!(
                        line,
                        " --socket {}",
                        shell_quote(&absolutize(s).display().to_string())
                    );
                }
                eprintln!(
                    "writegate: to allow it once, run: {line}\nwritegate: (or add --scope session|workspace|persistent; see `writegate approve --help`)"
                );
            }
        }
        "path_outside_workspace" if !served.is_empty() => {
            eprintln!(
                "writegate: the daemon serves these workspaces: {}",
                describe(served)
            );
        }
        _ => {}
    }
    Status::Refused
}

/// The daemon's hint in the command line's words: its wire names (methods,
/// params, `data.*`) become the subcommands and flags a person types
/// (a person never sees a wire name); what the CLI cannot do is said as such.
fn cli_words(kind: &str, hint: &str) -> String {
    if kind == "approval_required" {
        // "`<command>` is rated X (...); ask the user, then call _writegate/approve ..."
        let what = hint.split("; ask the user").next().unwrap_or(hint);
        return format!(
            "{what}; if the person agrees, run the `writegate approve` line below, then run this again"
        );
    }
    if kind == "unsupported_encoding" && hint.contains("convertEncoding") {
        return "the existing file's encoding cannot be detected, so it cannot be rewritten as it is; \
                the command line does not convert encodings: rewrite the file with another tool, or \
                remove it first and `writegate write` it anew"
            .to_string();
    }
    let mut out = cli_text(hint);
    for (wire, cli) in [
        (
            "use mode write to create it",
            "use `writegate write` to create it",
        ),
        ("mode write", "`writegate write`"),
        ("mode `write`", "`writegate write`"),
        ("expectedHash", "--expected-hash"),
        ("endLine", "--end-line"),
        ("dryRun", "--dry-run"),
        ("_writegate/read_lines", "`writegate read`"),
        ("_writegate/edit_text_file", "`writegate edit`"),
        ("fs/write_text_file", "`writegate write`"),
        ("fs/read_text_file", "`writegate read`"),
        ("_writegate/approve", "`writegate approve`"),
        ("data.command", "the command shown"),
        (
            "or ask the user to register that directory as a workspace",
            "or register that directory as a workspace (`writegate serve --workspace DIR`, or a [[workspace]] entry in the config)",
        ),
        (
            "Do not retry: tell the user what you wanted to change, and they change it themselves (the writegate command or their editor)",
            "writegate never writes them: change it with your editor",
        ),
        ("data.currentHash", "the hash shown"),
        ("with line and limit", "with --line and --limit"),
    ] {
        out = out.replace(wire, cli);
    }
    out
}

/// The words of the edit engine's messages and hints for a person at the
/// command line: `find` (the request's field) becomes the `--find` text,
/// "mode write" the `writegate write` command, "1 lines" one line.
pub(crate) fn cli_text(text: &str) -> String {
    let mut out = text.to_string();
    for (wire, cli) in [
        (
            "the one occurrence of find",
            "the one occurrence of the --find text",
        ),
        ("matches find exactly", "matches the --find text exactly"),
        ("find is empty", "--find is empty"),
        ("omit find and", "drop --find and"),
        ("find occurs", "the --find text occurs"),
        ("find text occurs", "the --find text occurs"),
        ("does not contain find", "does not contain the --find text"),
        ("or correct find", "or correct --find"),
        ("edit by find instead", "edit with --find instead"),
        ("with mode write", "with `writegate write`"),
        ("insert also accepts", "--insert also accepts"),
        ("The file has 1 lines", "The file has 1 line"),
        ("the file has 1 lines", "the file has 1 line"),
        ("the file's 1 lines", "the file's 1 line"),
    ] {
        out = out.replace(wire, cli);
    }
    out
}

/// `n line` or `n lines`.
fn lines_word(n: u64) -> String {
    if n == 1 {
        "1 line".to_string()
    } else {
        format!("{n} lines")
    }
}

/// The modes an approval can name, `write, append, ..., undo`.
fn mode_names() -> String {
    OpMode::ALL
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `text` has the shape of an operation the approval gate judges,
/// `edit_file <mode> <absolute path>`, a glob standing in for any part
/// (`edit_file * /src/app/*`).
fn operation_shape(text: &str) -> bool {
    let glob = |s: &str| s.contains(['*', '?', '[']);
    let mut parts = text.splitn(3, ' ');
    let (Some(verb), Some(mode), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
        return glob(text) && text.starts_with("edit_file");
    };
    (verb == "edit_file" || (glob(verb) && "edit_file".starts_with(verb.trim_end_matches('*'))))
        && (OpMode::ALL.iter().any(|m| m.as_str() == mode) || glob(mode))
        && (path.starts_with('/') || path.starts_with('*'))
}

/// Reads all of stdin as UTF-8 text. `None` (after printing a usage error)
/// when it is a terminal (nothing piped), unreadable or not UTF-8.
fn read_stdin(subcommand: &str, what: &str) -> Result<String, Status> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(usage_error(
            subcommand,
            &format!("{what} is read from stdin, and stdin is a terminal: pipe the text in"),
        ));
    }
    let mut buf = Vec::new();
    if let Err(e) = stdin.lock().read_to_end(&mut buf) {
        eprintln!("writegate: cannot read stdin: {e}");
        return Err(Status::Usage);
    }
    String::from_utf8(buf).map_err(|e| {
        usage_error(
            subcommand,
            &format!(
                "stdin is not UTF-8 (invalid byte at offset {}): send UTF-8 text; the daemon keeps the file's own encoding",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// `writegate write PATH`: the whole file from stdin.
pub(crate) fn write(a: &WriteArgs) -> Status {
    let content = match read_stdin("write", "the new content") {
        Ok(c) => c,
        Err(s) => return s,
    };
    let path = absolutize(&a.path);
    if content.is_empty() && !a.allow_empty {
        return usage_error(
            "write",
            &format!(
                "stdin is empty: refusing to replace {} with nothing; pass --allow-empty to write an empty file",
                path.display()
            ),
        );
    }
    let mut s = match connect(&a.client, Some(&path)) {
        Ok(s) => s,
        Err(st) => return st,
    };
    let len = content.len();
    let params = json!({"sessionId": a.client.session, "path": path, "content": content});
    let before = snapshot(&path);
    match s.try_call("fs/write_text_file", &params) {
        Ok(_) => {
            out(&format!("wrote {} ({len} bytes of text)\n", path.display()));
            Status::Ok
        }
        Err(CallError::Io(e)) => broke_mid_write(&e, &s.socket, &path, before.as_deref()),
        Err(e) => s.report(e, &a.client),
    }
}

/// `writegate edit PATH <mode>`.
pub(crate) fn edit(a: &EditArgs) -> Status {
    let mode = if a.append {
        EditMode::Append
    } else if a.insert {
        EditMode::Insert
    } else if a.delete {
        EditMode::Delete
    } else if a.find.is_some() || a.line.is_some() {
        EditMode::Replace
    } else {
        return usage_error(
            "edit",
            "say what to change: --find TEXT, --line N, --insert --line N, --delete --line N or --append (to replace the whole file, use `writegate write`)",
        );
    };
    if let (Some(l), Some(e)) = (a.line, a.end_line)
        && e < l
    {
        return usage_error(
            "edit",
            &format!(
                "--end-line {e} is before --line {l}: the range is lines {l} through --end-line, inclusive"
            ),
        );
    }
    let content = match (&a.content, mode) {
        (_, EditMode::Delete) => None,
        (Some(c), _) => Some(c.clone()),
        (None, _) => match read_stdin("edit", &format!("without --content, the text to {mode}")) {
            Ok(c) if c.is_empty() => {
                return usage_error(
                    "edit",
                    &format!(
                        "no text to {mode}: stdin is empty; pass --content TEXT (--content '' for empty text) or pipe the text in"
                    ),
                );
            }
            Ok(c) => Some(c),
            Err(s) => return s,
        },
    };
    // Whole lines: the daemon writes `\n` in the file's own line ending.
    let content = match content {
        Some(mut c)
            if mode == EditMode::Append && !a.no_newline && !c.is_empty() && !c.ends_with('\n') =>
        {
            c.push('\n');
            Some(c)
        }
        other => other,
    };
    let path = absolutize(&a.path);
    let mut params = json!({
        "sessionId": a.client.session,
        "path": path,
        "mode": mode,
        "dryRun": a.dry_run,
    });
    for (key, value) in [
        ("content", content.map(Value::from)),
        ("find", a.find.clone().map(Value::from)),
        ("line", a.line.map(Value::from)),
        ("endLine", a.end_line.map(Value::from)),
        ("expectedHash", a.expected_hash.clone().map(Value::from)),
    ] {
        if let Some(v) = value {
            params[key] = v;
        }
    }
    let mut s = match connect(&a.client, Some(&path)) {
        Ok(s) => s,
        Err(st) => return st,
    };
    let before = snapshot(&path);
    let answer = match s.try_call("_writegate/edit_text_file", &params) {
        Ok(r) => Ok(r),
        Err(CallError::Io(e)) => Err(broke_mid_write(&e, &s.socket, &path, before.as_deref())),
        Err(e) => Err(s.report(e, &a.client)),
    };
    match answer {
        Ok(r) => {
            let mut text = String::new();
            if let Some(d) = r.get("diff").and_then(Value::as_str) {
                text.push_str(d);
                if !d.is_empty() && !d.ends_with('\n') {
                    text.push('\n');
                }
            }
            if let Some(m) = r.get("message").and_then(Value::as_str) {
                text.push_str(&cli_text(m));
                text.push('\n');
            }
            if let Some(h) = r.get("hash").and_then(Value::as_str) {
                let _ = writeln!(text, "hash: {h}");
            }
            if a.dry_run {
                text.push_str("dry run: nothing was written\n");
            }
            out(&text);
            Status::Ok
        }
        Err(st) => st,
    }
}

/// `writegate read PATH`: numbered lines, then the hash line.
pub(crate) fn read(a: &ReadArgs) -> Status {
    let path = absolutize(&a.path);
    let mut params = json!({"sessionId": a.client.session, "path": path});
    if let Some(l) = a.line {
        params["line"] = l.into();
    }
    if let Some(l) = a.limit {
        params["limit"] = l.into();
    }
    let mut s = match connect(&a.client, Some(&path)) {
        Ok(s) => s,
        Err(st) => return st,
    };
    if !s.conn.reads() {
        eprintln!(
            "writegate: refused: this daemon does not serve reads (they are off by default); restart it with \
             `writegate serve --allow-read ...`, or set `read_text_file = true` in its config file and reload it \
             (`kill -HUP <pid>`)"
        );
        return Status::Refused;
    }
    let answer = match s.try_call("_writegate/read_lines", &params) {
        Err(CallError::Rpc(r)) if r.kind() == "path_not_found" => {
            let st = s.report(CallError::Rpc(r), &a.client);
            eprintln!(
                "writegate: check the path (relative paths are taken from the current directory, {}), or create the file with `writegate write {}`",
                std::env::current_dir()
                    .map_or_else(|_| "?".to_string(), |d| d.display().to_string()),
                shell_quote(&a.path.display().to_string())
            );
            return st;
        }
        Err(e) => Err(s.report(e, &a.client)),
        Ok(r) => Ok(r),
    };
    match answer {
        Ok(r) => {
            let mut text = String::new();
            for l in r["lines"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    text,
                    "{:>6}\t{}",
                    l["n"].as_u64().unwrap_or(0),
                    l["text"].as_str().unwrap_or("")
                );
            }
            let _ = writeln!(
                text,
                "hash: {} ({}, {}, bom {}, {})",
                r["hash"].as_str().unwrap_or(""),
                lines_word(r["totalLines"].as_u64().unwrap_or(0)),
                r["encoding"].as_str().unwrap_or(""),
                r["bom"],
                r["lineEnding"].as_str().unwrap_or("")
            );
            out(&text);
            Status::Ok
        }
        Err(st) => st,
    }
}

/// The path of a synthetic command `edit_file <mode> <absolute path>`, if
/// `command` is one (to open the connection on that path's workspace).
fn command_path(command: &str) -> Option<PathBuf> {
    let rest = command.strip_prefix("edit_file ")?;
    let (_mode, path) = rest.split_once(' ')?;
    let path = PathBuf::from(path);
    path.is_absolute().then_some(path)
}

/// `writegate approve COMMAND`: `_writegate/approve` with the synthetic
/// command as `command`, matched literally (a path in an approval
/// is never a pattern); text that is not a synthetic command
/// (`edit_file <mode> /<path>`) is sent as a `pattern` the person wrote.
pub(crate) fn approve(a: &ApproveArgs) -> Status {
    let command = a.command.join(" ");
    if command.trim().is_empty() {
        return usage_error(
            "approve",
            "the command is empty: copy it from the refusal, e.g. 'edit_file write /src/app/.env'",
        );
    }
    if !operation_shape(&command) {
        return usage_error(
            "approve",
            &format!(
                "`{command}` is not an operation writegate judges, so approving it would allow nothing: \
                 approvals name `edit_file <mode> <absolute path>` (modes: {}), as a refusal's \
                 `writegate approve` line shows; a glob may stand for a part, \
                 e.g. 'edit_file * /src/app/.env'. Nothing was sent",
                mode_names()
            ),
        );
    }
    let target = command_path(&command);
    let mut s = match connect(&a.client, target.as_deref()) {
        Ok(s) => s,
        Err(st) => return st,
    };
    let scope = a.scope.name();
    let form = if target.is_some() {
        "command"
    } else {
        "pattern"
    };
    let params = json!({"sessionId": a.client.session, form: command, "scope": scope});
    match s.call("_writegate/approve", &params, &a.client) {
        Ok(_) => {
            let covers = match scope {
                "once" => format!(
                    "the next matching write or edit of session {}",
                    a.client.session
                ),
                "session" => format!(
                    "every matching write or edit of session {} until the daemon stops",
                    a.client.session
                ),
                "workspace" => format!(
                    "every matching write or edit in {} until the daemon stops",
                    s.conn.workspace().map_or_else(
                        || "this workspace".to_string(),
                        |w| w.root.display().to_string()
                    )
                ),
                _ => "every matching write or edit, also after a restart".to_string(),
            };
            out(&format!("approved `{command}` ({scope}): {covers}\n"));
            Status::Ok
        }
        Err(st) => st,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("/a/b.txt"), "/a/b.txt");
        assert_eq!(
            shell_quote("edit_file write /a/.env"),
            "'edit_file write /a/.env'"
        );
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn operation_shapes() {
        for ok in [
            "edit_file write /a/.env",
            "edit_file * /src/app/*",
            "edit_file delete /a b/c.txt",
            "edit_file read /etc/x",
            "* * /a/*",
        ] {
            assert!(operation_shape(ok), "{ok}");
        }
        // Every mode a refusal's synthetic command can name.
        for m in OpMode::ALL {
            let command =
                writegate_core::policy::synthetic_command(m.as_str(), Path::new("/src/app/.env"));
            assert!(operation_shape(&command), "{command}");
        }
        for bad in [
            "rm -rf /",
            "edit_file",
            "edit_file write rel.txt",
            "edit_file nuke /a",
            "ls",
        ] {
            assert!(!operation_shape(bad), "{bad}");
        }
    }

    #[test]
    fn wire_words_become_cli_words() {
        let h = cli_words(
            "approval_required",
            "`edit_file write /a/.env` is rated Dangerous (secret); ask the user, then call _writegate/approve with `command` set to data.command (matched literally; once) and retry",
        );
        assert!(
            h.starts_with("`edit_file write /a/.env` is rated Dangerous (secret); "),
            "{h}"
        );
        assert!(
            h.contains("writegate approve") && !h.contains("_writegate/") && !h.contains("data."),
            "{h}"
        );
        let h = cli_words(
            "path_not_found",
            "/a/x does not exist; use mode write to create it",
        );
        assert_eq!(h, "/a/x does not exist; use `writegate write` to create it");
        let h = cli_words(
            "hash_mismatch",
            "the file changed; send expectedHash from _writegate/read_lines",
        );
        assert_eq!(
            h,
            "the file changed; send --expected-hash from `writegate read`"
        );
        let h = cli_words(
            "unsupported_encoding",
            "... send _meta.encoding with _meta[\"writegate/convertEncoding\"]: true",
        );
        assert!(
            !h.contains("_meta") && h.contains("command line does not convert"),
            "{h}"
        );
    }

    #[test]
    fn synthetic_command_paths() {
        assert_eq!(
            command_path("edit_file write /a/b c.txt"),
            Some(PathBuf::from("/a/b c.txt"))
        );
        assert_eq!(command_path("edit_file write rel.txt"), None);
        assert_eq!(command_path("something else"), None);
    }
}
