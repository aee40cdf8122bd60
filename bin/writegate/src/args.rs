//! The command line's shape: `Cli`, the list of subcommands and each one's
//! about, examples and exit statuses. Parsing only. A subcommand's flags
//! (its `Args` struct, whose doc comments are the flags' help) are defined
//! in its own module, beside the code that reads them: `serve.rs`,
//! `proxy.rs`, `mcp.rs`, `commands.rs`, `queue.rs`, `audit.rs`,
//! `history.rs`, `setup/`, `service.rs`, `run.rs`; those of `completions`
//! and `man`, which `main.rs` runs, are here.
//!
//! Every check clap can make is made while parsing, so that a bad argument
//! is a usage error (exit status 2) before anything is sent to the daemon:
//! line numbers start at 1, `--end-line` needs `--line`, mode flags that
//! contradict each other are refused, `--find` is not empty,
//! `--expected-hash` is `sha256:` and 64 hex digits. The checks that need
//! two values at once (`--end-line` before `--line`, an edit without a
//! mode) are in `commands.rs`.

// The doc comments of this module are the `--help` text (backticks would be
// shown as they are).
#![allow(clippy::doc_markdown)]

use clap::{Args, Parser, Subcommand};

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
    Serve(crate::serve::ServeArgs),
    /// Run an ACP agent behind writegate: the command an editor launches as its agent.
    #[command(
        after_help = "The agent's fs/read_text_file and fs/write_text_file (and _writegate/*) are answered by writegate\nin the workspace of each session (the cwd of its session/new); everything else passes through.\nExamples:\n  writegate proxy -- my-agent --acp\n  writegate proxy --audit-log /tmp/audit.jsonl -- npx @example/agent --acp\n  writegate proxy --sandbox -- my-agent --acp   # the agent cannot write the workspace itself\nExit status: the agent's (128 + signal if a signal ended it); 127 if it cannot be found, 2 for a bad config."
    )]
    Proxy(crate::proxy::ProxyArgs),
    /// Serve the tools read_file, write_file and edit_file over MCP on stdio (for any agent that loads MCP servers).
    #[command(
        after_help = "Examples:\n  writegate mcp --workspace .\n  claude mcp add writegate -- writegate mcp --workspace /src/app\nSee the README for Codex, Gemini CLI and qwen-code.\nExit status: 0 when the client closed stdin, 2 when it cannot start."
    )]
    Mcp(crate::mcp::McpArgs),
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
    Write(crate::commands::WriteArgs),
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
    Edit(crate::commands::EditArgs),
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
    Read(crate::commands::ReadArgs),
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
    Approve(crate::commands::ApproveArgs),
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
    Pending(crate::queue::PendingArgs),
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
    Answer(crate::queue::AnswerArgs),
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
    Audit(crate::audit::AuditArgs),
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
    Setup(crate::setup::SetupArgs),
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
    Service(crate::service::ServiceArgs),
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
