//! The command line's shape: every subcommand, flag and help text. Parsing
//! only; the subcommands live in `serve.rs`, `commands.rs` and `audit.rs`.
//!
//! Every check clap can make is made here, so that a bad argument is a usage
//! error (exit status 2) before anything is sent to the daemon: line numbers
//! start at 1, `--end-line` needs `--line`, mode flags that contradict each
//! other are refused, `--find` is not empty, `--expected-hash` is
//! `sha256:` and 64 hex digits. The checks that need two values at once
//! (`--end-line` before `--line`, an edit without a mode) are in
//! `commands.rs`.

// The doc comments of this module are the `--help` text (backticks would be
// shown as they are), and flags are bools.
#![allow(clippy::doc_markdown, clippy::struct_excessive_bools)]

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum, builder::NonEmptyStringValueParser};
use std::path::PathBuf;

/// `writegate --version`: the package version and the git commit the binary
/// was built from (`unknown` outside a git checkout, see `build.rs`).
pub(crate) const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("BUILD_GIT_COMMIT"),
    ")"
);

/// The exit statuses of the subcommands that talk to the daemon, appended to
/// their `--help` (a macro so that `concat!` can use it).
macro_rules! client_exit_statuses {
    () => {
        "Exit status:\n  0  done\n  1  refused by the daemon (errorKind and hint on stderr; the file is unchanged)\n  2  usage error: bad arguments or input, nothing was sent\n  3  the daemon could not be reached (not running, or another --socket)"
    };
}

/// The exit statuses of `history`, `undo` and `rewind`, which need no daemon.
macro_rules! history_exit_statuses {
    () => {
        "Exit status:\n  0  done\n  1  refused (errorKind and hint on stderr; the file is unchanged)\n  2  usage error: bad arguments, or an invalid config"
    };
}

/// The exit statuses of the subcommands that only print (`completions`, `man`).
macro_rules! print_exit_statuses {
    () => {
        "Exit status:\n  0  printed\n  2  usage error"
    };
}

#[derive(Parser)]
#[command(
    name = "writegate",
    version = VERSION,
    about = "The safe final write for AI coding agents: an ACP daemon that keeps encodings and line endings, writes atomically and stays inside the workspace.",
    after_help = concat!(
        "Examples:\n",
        "  writegate serve --workspace .            # start the daemon on the current directory\n",
        "  echo hi | writegate write ./notes.txt    # write a whole file through it\n",
        "  writegate edit notes.txt --line 1 --content 'hello'\n",
        "\n",
        "Exit status (every subcommand; see its --help):\n",
        "  0  done\n",
        "  1  refused by the daemon (or, for audit, the log cannot be read)\n",
        "  2  usage error (or, for serve, the daemon cannot start)\n",
        "  3  the daemon could not be reached"
    )
)]
/// The whole command line.
pub(crate) struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `writegate <subcommand>`.
#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run the daemon: ACP over stdio and/or a Unix socket.
    #[command(after_help = concat!(
        "Examples:\n",
        "  writegate serve --workspace .\n",
        "  writegate serve --stdio --workspace /src/app --audit-log /tmp/audit.jsonl\n",
        "  writegate serve --socket /run/user/1000/wg.sock --workspace ~/a --workspace ~/b\n",
        "\n",
        "Logs go to stderr. Their filter is, first match wins: -v/-q; WRITEGATE_LOG; RUST_LOG\n",
        "(both take RUST_LOG syntax, e.g. `debug` or `writegate_core=trace`); `info`.\n",
        "\n",
        "Exit status:\n",
        "  0  stopped cleanly (SIGTERM or SIGINT; with --stdio alone, also the end of stdin)\n",
        "  2  the daemon cannot start: bad arguments, invalid config, no workspace, socket in use"
    ))]
    Serve(ServeArgs),
    /// Run an ACP agent behind writegate: the command an editor launches as its agent.
    #[command(
        after_help = "The agent's fs/read_text_file and fs/write_text_file (and _writegate/*) are answered by writegate\nin the workspace of each session (the cwd of its session/new); everything else passes through.\nExamples:\n  writegate proxy -- my-agent --acp\n  writegate proxy --audit-log /tmp/audit.jsonl -- npx @example/agent --acp\n  writegate proxy --sandbox -- my-agent --acp   # the agent cannot write the workspace itself\nExit status: the agent's (128 + signal if a signal ended it); 127 if it cannot be found, 2 for a bad config."
    )]
    Proxy(crate::proxy::ProxyArgs),
    /// Serve the tools read_file, write_file and edit_file over MCP on stdio (for any agent that loads MCP servers).
    #[command(
        after_help = "Examples:\n  writegate mcp --workspace .\n  claude mcp add writegate -- writegate mcp --workspace /src/app\nSee the README for Codex, Gemini CLI and qwen-code.\nExit status: 0 when the client closed stdin, 2 when it cannot start."
    )]
    Mcp(McpArgs),
    /// Write a whole file through the running daemon; the content is read from stdin.
    #[command(after_help = concat!(
        "Examples:\n",
        "  printf 'hello\\n' | writegate write src/hello.txt\n",
        "  writegate write --allow-empty src/empty.txt </dev/null\n",
        "\n",
        "Empty stdin is refused (exit 2) unless --allow-empty: an empty pipe never empties a file.\n",
        "The workspace is the daemon's workspace that contains the path, or --workspace.\n",
        "\n",
        client_exit_statuses!()
    ))]
    Write(WriteArgs),
    /// Edit part of a file through the running daemon: replace text or lines, insert, delete, append.
    #[command(after_help = concat!(
        "Every edit names what it changes (there is no default; to replace a whole file use `writegate write`):\n",
        "  --find TEXT            replace the one occurrence of TEXT\n",
        "  --line N [--end-line M] replace line N (through M)\n",
        "  --insert --line N      insert before line N\n",
        "  --delete --line N [--end-line M]\n",
        "  --append               add to the end of the file\n",
        "The new text is --content TEXT, or stdin when --content is absent (empty stdin is refused;\n",
        "pass --content '' to mean empty text). Get line numbers and the hash from `writegate read`.\n",
        "\n",
        "Examples:\n",
        "  writegate edit src/a.py --find 'return 1' --content 'return 2'\n",
        "  writegate edit src/a.py --line 3 --content '    return 10' --dry-run\n",
        "  writegate edit src/a.py --insert --line 1 --content '# header'\n",
        "  writegate edit src/a.py --delete --line 4 --end-line 6 --expected-hash sha256:...\n",
        "  printf 'more\\n' | writegate edit notes.txt --append\n",
        "\n",
        client_exit_statuses!()
    ))]
    Edit(EditArgs),
    /// Print a file's numbered lines and hash, through the running daemon.
    #[command(after_help = concat!(
        "Example:\n",
        "  writegate read src/a.py --line 10 --limit 5\n",
        "\n",
        "Reads are off unless the daemon was started with `writegate serve --allow-read` (or its config\n",
        "says read_text_file = true); without them this exits 1 and says so.\n",
        "\n",
        client_exit_statuses!()
    ))]
    Read(ReadArgs),
    /// Grant an approval for an operation the daemon refused with approval_required.
    #[command(after_help = concat!(
        "A refusal `approval_required` names a command such as `edit_file write /src/app/.env`\n",
        "(modes: write, append, replace, insert, delete, read, undo) and prints the\n",
        "`writegate approve` line to run. The approval covers exactly that command:\n",
        "  once        the next matching write or edit of --session (default)\n",
        "  session     every matching write or edit of --session while the daemon runs\n",
        "  workspace   every matching write or edit in the file's workspace while the daemon runs\n",
        "  persistent  every matching write or edit, kept in the state directory across restarts\n",
        "\n",
        "Example:\n",
        "  writegate approve 'edit_file write /src/app/.env' && printf 'K=v\\n' | writegate write /src/app/.env\n",
        "\n",
        client_exit_statuses!()
    ))]
    Approve(ApproveArgs),
    /// List the held calls waiting for your answer (agents that cannot ask you themselves).
    #[command(after_help = concat!(
        "An agent connected with `writegate mcp --connect` whose client cannot show an approval\n",
        "question (no MCP elicitation) waits for your answer here, up to approval_timeout_ms.\n",
        "With --json: an array of {id, agent, session, command, reason, ageSecs}.\n",
        "\n",
        "Examples:\n",
        "  writegate pending\n",
        "  writegate pending --json | jq -r '.[].id'\n",
        "\n",
        client_exit_statuses!()
    ))]
    Pending(PendingArgs),
    /// Answer one waiting question: allow, allow-session or deny.
    #[command(after_help = concat!(
        "  allow          this call only\n",
        "  allow-session  this call and the same command for the rest of the agent's session\n",
        "  deny           refuse it; the file is not touched\n",
        "\n",
        "Example:\n",
        "  writegate answer 3f2a9c1d allow\n",
        "\n",
        client_exit_statuses!()
    ))]
    Answer(AnswerArgs),
    /// Show the audit log: one line per event, optionally filtered or followed.
    #[command(after_help = concat!(
        "The log is --audit-log FILE, else the config's audit.path (--config FILE, WRITEGATE_AUDIT_PATH),\n",
        "else $XDG_STATE_HOME/writegate/audit.jsonl (~/.local/state/writegate/audit.jsonl): the same\n",
        "place the daemon uses when started with the same config and flags.\n",
        "Each line: time, type, intent/mode, outcome (ok or the errorKind), pathHash, sizes, session.\n",
        "\n",
        "Examples:\n",
        "  writegate audit --path src/a.py          # events of one file (by its pathHash)\n",
        "  writegate audit --kind fs.denied --follow\n",
        "  writegate audit --session cli --json | jq .\n",
        "\n",
        "Exit status:\n",
        "  0  shown (also when no event matched)\n",
        "  1  the log does not exist or cannot be read\n",
        "  2  usage error (or an invalid config)"
    ))]
    Audit(AuditArgs),
    /// List the writes and edits that can be taken back, newest first.
    #[command(after_help = concat!(
        "Every committed write and edit keeps what it replaced (see `[history]` in the config), from\n",
        "every front end: `serve`, `proxy` and `mcp`. The history store is read directly; no daemon\n",
        "need run. With --json: one object a line (opId, ts, path, workspace, sessionId, intent,\n",
        "created, bytesBefore, bytesAfter, hashBefore, hashAfter, undoable, reason).\n",
        "\n",
        "Examples:\n",
        "  writegate history src/a.py\n",
        "  writegate history --session cli --json | jq .\n",
        "\n",
        history_exit_statuses!()
    ))]
    History(crate::history::HistoryArgs),
    /// Take back one write or edit by its opId: the file gets back its old bytes and mode.
    #[command(after_help = concat!(
        "The undo goes through writegate like a write (resolver, approval gate, lock, atomic publish,\n",
        "one audit event) and is itself an operation in the history (undo it to redo): through the\n",
        "daemon at --socket when it serves the file's workspace, else in this command, so an agent's\n",
        "writes through `writegate mcp` are taken back with no daemon running. When the approval gate\n",
        "holds it (a protected file), you are asked on the terminal; --yes allows it without asking.\n",
        "If the file changed since that operation it is refused (file_changed) unless --force.\n",
        "Undoing a creation removes the file and the directories it created, if they are empty (any\n",
        "other is left and named).\n",
        "\n",
        "Examples:\n",
        "  writegate undo 2944fdb83859-17 --dry-run\n",
        "  writegate undo 2944fdb83859-17\n",
        "\n",
        history_exit_statuses!()
    ))]
    Undo(crate::history::UndoArgs),
    /// Undo a session's writes and edits, newest first, stopping at the first conflict.
    #[command(after_help = concat!(
        "Each undo goes as `writegate undo` does (through the daemon, or in this command). It takes\n",
        "back the session's operations in the workspace holding the current directory (session `cli`\n",
        "is every command-line write, in every workspace): --workspace DIR takes the files under DIR\n",
        "instead, --all-workspaces every workspace the session wrote in.\n",
        "\n",
        "Examples:\n",
        "  writegate rewind --session cli --workspace . --dry-run\n",
        "  writegate rewind --session mcp-4242-1a2b3c4d --to 2944fdb83859-12\n",
        "\n",
        history_exit_statuses!()
    ))]
    Rewind(crate::history::RewindArgs),
    /// Show what one write or edit changed, as a unified diff of the text.
    #[command(
        after_help = "Reads the history store (history.path) directly; the daemon need not run.\nExit status: 0 shown, 1 not available (evicted, unknown, or the result is gone), 2 usage error."
    )]
    Diff(crate::history::DiffArgs),
    /// Configure an agent or editor to write through writegate (its MCP server, proxy, own write tools off).
    #[command(after_help = concat!(
        "Writes the agent's user-level settings: writegate's MCP server (`writegate mcp`, working in\n",
        "the directories of the agent's session), the setting that turns off the agent's own write and\n",
        "edit tools where it has one, and for Zed agent servers behind `writegate proxy`. Everything\n",
        "else in the file is kept (comments too); the old file is backed up beside it; a second run\n",
        "changes nothing. It ends with what the model sees, what can still write, and the step left.\n",
        "\n",
        "Examples:\n",
        "  writegate setup --list\n",
        "  writegate setup qwen-code --dry-run     # the change as a diff; nothing written\n",
        "  writegate setup gemini-cli\n",
        "  writegate setup qwen-code --sandbox     # and a launcher that starts qwen under `writegate run`\n",
        "  writegate setup zed --remove\n",
        "\n",
        "Exit status:\n",
        "  0  done (or nothing to change)\n",
        "  1  a settings file cannot be changed (not valid JSON/TOML, another shape, unwritable); nothing was\n",
        "     changed in it\n",
        "  2  usage error"
    ))]
    Setup(SetupArgs),
    /// Install writegate as a systemd user service (units and a config), for `writegate serve` at login.
    #[command(after_help = concat!(
        "Run it as a service, in three commands:\n",
        "  writegate service install --workspace ~/projects\n",
        "  systemctl --user daemon-reload && systemctl --user enable --now writegate.socket\n",
        "  loginctl enable-linger \"$USER\"\n",
        "\n",
        "install writes writegate.service (ExecStart = this binary's own path) and writegate.socket to\n",
        "$XDG_CONFIG_HOME/systemd/user/, and, when there is no config file yet, one that registers the\n",
        "--workspace directories (trusted). It starts nothing itself. --dry-run says what it would write.\n",
        "uninstall removes the two units (after `systemctl --user disable --now writegate.socket\n",
        "writegate.service`); the config file stays.\n",
        "\n",
        "Exit status:\n",
        "  0  written (or already up to date)\n",
        "  1  a file cannot be written\n",
        "  2  usage error"
    ))]
    Service(ServiceArgs),
    /// Run an agent in a sandbox where its only way to change workspace files is writegate.
    #[command(after_help = concat!(
        "The agent and everything it starts run under a Landlock ruleset: the workspaces (--workspace,\n",
        "default the current directory) are read-only to them; their writes go through writegate's tools\n",
        "(an MCP entry `writegate mcp ...` started inside relays to this run's writegate, outside).\n",
        "Writable: --allow-write paths, the config's [sandbox] writable, build outputs that exist in a\n",
        "workspace (target, node_modules, .venv, build, dist), the agents' state and cache directories\n",
        "(~/.cache, ~/.npm, ~/.claude, ~/.codex, ~/.gemini, ~/.qwen, ...), a private TMPDIR, /dev/null and\n",
        "terminals. Never writable: writegate's own config, state and runtime directories, shell start-up\n",
        "files and the rest of HOME. Reads are not restricted. See docs/security.md, \"The sandbox\".\n",
        "\n",
        "Examples:\n",
        "  writegate run -- qwen --yolo\n",
        "  writegate run --workspace ~/src/app --allow-write ~/src/app/generated -- claude\n",
        "\n",
        "Exit status: the agent's (128 + signal if a signal ended it); 127 if it cannot be found,\n",
        "126 if it cannot be run; 2 for a usage error, an invalid config, or no Landlock (without --best-effort)."
    ))]
    Run(crate::run::RunArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = concat!(
        "Examples:\n",
        "  writegate completions bash > ~/.local/share/bash-completion/completions/writegate\n",
        "  writegate completions zsh > ~/.zfunc/_writegate\n",
        "  writegate completions fish > ~/.config/fish/completions/writegate.fish\n",
        "\n",
        print_exit_statuses!()
    ))]
    Completions(CompletionsArgs),
    /// Print the man page (roff) of writegate or of one subcommand to stdout.
    #[command(after_help = concat!(
        "Examples:\n",
        "  writegate man > ~/.local/share/man/man1/writegate.1 && man writegate\n",
        "  writegate man edit > ~/.local/share/man/man1/writegate-edit.1 && man writegate-edit\n",
        "\n",
        print_exit_statuses!()
    ))]
    Man(ManArgs),
}

/// `writegate mcp`.
#[derive(Args)]
pub(crate) struct McpArgs {
    /// Register a workspace (repeatable; the first is the primary, where relative paths start).
    /// The client's MCP roots are added as `[mcp] client_roots` says.
    #[arg(long = "workspace", value_name = "DIR")]
    pub(crate) workspaces: Vec<PathBuf>,
    /// Config file [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Audit log [default: $XDG_STATE_HOME/writegate/audit.jsonl].
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
    /// What the client's MCP roots (the agent session's directories) become: ignore, untrusted
    /// (read-only) or trusted (writable) [default: the config's `[mcp] client_roots`, untrusted].
    #[arg(long, value_name = "MODE", value_parser = parse_client_roots)]
    pub(crate) client_roots: Option<writegate_core::config::ClientRoots>,
    /// When there is no workspace otherwise (no --workspace, none in the config, no client roots,
    /// as in MCP 2026-07-28), the directory the agent starts writegate in is the workspace, with
    /// the trust of client roots; never `/`, the home directory or a directory above it.
    #[arg(long)]
    pub(crate) cwd_workspace: bool,
    /// The client is an agent inside `writegate run` (set by the run that serves it): never ask
    /// it about a held call, and tell it that files change only through these tools.
    #[arg(long, hide = true)]
    pub(crate) sandboxed_client: bool,
    /// Relay this agent's MCP to the running daemon's MCP socket instead of serving it here
    /// [default SOCKET: $XDG_RUNTIME_DIR/writegate/mcp.sock]: one policy, audit log, history and
    /// approval queue for every agent. The daemon's config and workspaces apply.
    #[arg(long, value_name = "SOCKET", num_args = 0..=1, conflicts_with_all = ["workspaces", "config", "audit_log", "client_roots"])]
    // clap's shape of a flag with an optional value: absent, bare, or with a path.
    #[allow(clippy::option_option)]
    pub(crate) connect: Option<Option<PathBuf>>,
}

/// `--client-roots`: `ignore`, `untrusted` or `trusted`.
fn parse_client_roots(s: &str) -> Result<writegate_core::config::ClientRoots, String> {
    use writegate_core::config::ClientRoots;
    match s {
        "ignore" => Ok(ClientRoots::Ignore),
        "untrusted" => Ok(ClientRoots::Untrusted),
        "trusted" => Ok(ClientRoots::Trusted),
        _ => Err(format!("`{s}` is not one of ignore, untrusted, trusted")),
    }
}

/// `writegate serve`'s arguments.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Serve one connection on stdin/stdout (how a host spawns writegate).
    #[arg(long)]
    pub(crate) stdio: bool,
    /// Listen on this Unix socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
    /// Serve MCP on this Unix socket (for `writegate mcp --connect`) [default: mcp.sock beside
    /// the ACP socket; none with --stdio alone].
    #[arg(long, value_name = "PATH")]
    pub(crate) mcp_socket: Option<PathBuf>,
    /// Register a workspace (repeatable; the first is the primary).
    #[arg(long = "workspace", value_name = "DIR")]
    pub(crate) workspaces: Vec<PathBuf>,
    /// Register the command-line workspaces as untrusted (writes refused).
    #[arg(long)]
    pub(crate) untrusted: bool,
    /// Config file [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Audit log [default: $XDG_STATE_HOME/writegate/audit.jsonl].
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
    /// Never route marked tool writes to the external host writer.
    #[arg(long)]
    pub(crate) no_external_writes: bool,
    /// Serve reads: fs/read_text_file and _writegate/read_lines (`writegate read`); off by default.
    #[arg(long)]
    pub(crate) allow_read: bool,
    /// Serve MCP over Streamable HTTP at http://ADDRESS/mcp (loopback only; overrides `[mcp] http`).
    #[arg(long, value_name = "ADDRESS")]
    pub(crate) mcp_http: Option<String>,
    /// More log output: -v debug (one line per request), -vv trace.
    #[arg(short, long, action = ArgAction::Count, conflicts_with = "quiet")]
    pub(crate) verbose: u8,
    /// Less log output: -q warnings and errors only, -qq errors only.
    #[arg(short, long, action = ArgAction::Count)]
    pub(crate) quiet: u8,
}

/// The options every subcommand that talks to the daemon shares.
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

/// `writegate pending`.
#[derive(Args)]
pub(crate) struct PendingArgs {
    /// Print a JSON array instead of lines.
    #[arg(long)]
    pub(crate) json: bool,
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
}

/// `writegate answer`.
#[derive(Args)]
pub(crate) struct AnswerArgs {
    /// The question's id, as `writegate pending` lists it.
    #[arg(value_name = "ID")]
    pub(crate) id: String,
    /// The answer.
    #[arg(value_enum, value_name = "ANSWER")]
    pub(crate) answer: AnswerChoice,
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
}

/// `writegate answer`'s answers.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum AnswerChoice {
    /// This call only.
    Allow,
    /// This call and the same command for the rest of the session.
    AllowSession,
    /// Refuse it.
    Deny,
}

impl AnswerChoice {
    /// The wire name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            AnswerChoice::Allow => "allow",
            AnswerChoice::AllowSession => "allow-session",
            AnswerChoice::Deny => "deny",
        }
    }
}

/// `writegate audit`.
#[derive(Args)]
pub(crate) struct AuditArgs {
    /// The audit log [default: the config's audit.path, else $XDG_STATE_HOME/writegate/audit.jsonl].
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
    /// Config file to take audit.path from [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Keep running and print new events as they are written.
    #[arg(short, long)]
    pub(crate) follow: bool,
    /// Only events of this file (matched by pathHash: sha256 of its canonical path).
    #[arg(long, value_name = "FILE")]
    pub(crate) path: Option<PathBuf>,
    /// Only events of this type (fs.access, fs.denied, or access, denied), intent (write, edit,
    /// read, undo) or errorKind (e.g. approval_required).
    #[arg(long, value_name = "KIND", value_parser = NonEmptyStringValueParser::new())]
    pub(crate) kind: Option<String>,
    /// Only events of this session id.
    #[arg(long, value_name = "ID", value_parser = NonEmptyStringValueParser::new())]
    pub(crate) session: Option<String>,
    /// Print the matching events as they are in the log (one JSON object per line).
    #[arg(long)]
    pub(crate) json: bool,
}

/// `writegate setup`.
#[derive(Args)]
pub(crate) struct SetupArgs {
    /// The agent or editor to configure.
    #[arg(value_enum, required_unless_present = "list")]
    pub(crate) agent: Option<crate::setup::Agent>,
    /// List the agents, their settings files and whether writegate is set up in them.
    #[arg(long, conflicts_with_all = ["agent", "dry_run", "remove", "sandbox"])]
    pub(crate) list: bool,
    /// Print the change as a unified diff; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Take writegate's entries out again (the agent's own tools come back).
    #[arg(long)]
    pub(crate) remove: bool,
    /// Also start the agent under `writegate run` (its own writes to a project fail): a launcher in
    /// ~/.local/share/writegate/bin for a command-line agent, `writegate proxy --sandbox` for Zed.
    #[arg(long)]
    pub(crate) sandbox: bool,
}

/// `writegate service`.
#[derive(Args)]
pub(crate) struct ServiceArgs {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: ServiceCommand,
}

/// `writegate service <command>`.
#[derive(Subcommand)]
pub(crate) enum ServiceCommand {
    /// Write the systemd user units (and a config with the workspaces when there is none).
    Install(ServiceInstallArgs),
    /// Remove the systemd user units `install` wrote (the config file stays).
    Uninstall(ServiceUninstallArgs),
}

/// `writegate service install`.
#[derive(Args)]
pub(crate) struct ServiceInstallArgs {
    /// A directory agents may write in, registered trusted in a new config file (repeatable).
    #[arg(long = "workspace", value_name = "DIR")]
    pub(crate) workspaces: Vec<PathBuf>,
    /// Say what would be written; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// `writegate service uninstall`.
#[derive(Args)]
pub(crate) struct ServiceUninstallArgs {
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// `writegate completions`.
#[derive(Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to print the script for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::aot::Shell,
}

/// `writegate man`.
#[derive(Args)]
pub(crate) struct ManArgs {
    /// The subcommand whose page to print (`writegate-SUBCOMMAND(1)`), any of `writegate --help` [default: the main page].
    #[arg(value_name = "SUBCOMMAND")]
    pub(crate) subcommand: Option<String>,
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
