//! `writegate`: the daemon (`serve`) and a command line for people
//! (`write`, `edit`, `read`) that talks to the running daemon over its
//! socket. This file only parses arguments, builds the service and hands
//! over to `writegate-acp`; it holds no policy and writes no files.

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use writegate_acp::client::{CallError, Client};
use writegate_core::{Config, Registry, Service, config::state_dir};

#[derive(Parser)]
#[command(
    name = "writegate",
    version,
    about = "The safe final write for AI coding agents: an ACP daemon that keeps encodings and line endings, writes atomically and stays inside the workspace.",
    after_help = "Example:\n  writegate serve --workspace .          # start the daemon on the current directory\n  echo hi | writegate write ./notes.txt  # write through it"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: ACP over stdio and/or a Unix socket.
    #[command(
        after_help = "Examples:\n  writegate serve --workspace .\n  writegate serve --stdio --workspace /src/app --audit-log /tmp/audit.jsonl\n  writegate serve --socket /run/user/1000/wg.sock --workspace ~/a --workspace ~/b"
    )]
    Serve(ServeArgs),
    /// Write a whole file through the running daemon; content is read from stdin.
    #[command(
        after_help = "Example:\n  printf 'hello\\n' | writegate write src/hello.txt\nExit status: 0 written, 1 refused (errorKind and hint on stderr), 2 daemon unreachable."
    )]
    Write(WriteArgs),
    /// Edit a file through the running daemon (replace by text or line, insert, delete, append).
    #[command(
        after_help = "Examples:\n  writegate edit src/a.py --find 'return 1' --content 'return 2'\n  writegate edit src/a.py --line 3 --content '    return 10' --dry-run\n  writegate edit src/a.py --insert --line 1 --content '# header'\n  writegate edit src/a.py --delete --line 4 --end-line 6"
    )]
    Edit(EditArgs),
    /// Print a file's numbered lines and hash, through the running daemon.
    #[command(after_help = "Example:\n  writegate read src/a.py --line 10 --limit 5")]
    Read(ReadArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Serve one connection on stdin/stdout (how a host spawns writegate).
    #[arg(long)]
    stdio: bool,
    /// Listen on this Unix socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Register a workspace (repeatable; the first is the primary).
    #[arg(long = "workspace", value_name = "DIR")]
    workspaces: Vec<PathBuf>,
    /// Register the command-line workspaces as untrusted (writes refused).
    #[arg(long)]
    untrusted: bool,
    /// Config file [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Audit log [default: $XDG_STATE_HOME/writegate/audit.jsonl].
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Never route marked tool writes to the external host writer.
    #[arg(long)]
    no_external_writes: bool,
    /// Serve fs/read_text_file.
    #[arg(long)]
    allow_read: bool,
}

#[derive(Args)]
struct ClientArgs {
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Session id recorded in the audit log and receipts.
    #[arg(long, default_value = "cli")]
    session: String,
}

#[derive(Args)]
struct WriteArgs {
    /// File to write (relative paths are taken from the current directory).
    path: PathBuf,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args)]
struct EditArgs {
    /// File to edit.
    path: PathBuf,
    /// Replace the one occurrence of this text.
    #[arg(long)]
    find: Option<String>,
    /// Line to replace (or insert before, or first line to delete), 1-based.
    #[arg(long)]
    line: Option<u64>,
    /// Last line of a range (replace or delete).
    #[arg(long)]
    end_line: Option<u64>,
    /// Insert content before --line.
    #[arg(long, conflicts_with_all = ["delete", "append", "find"])]
    insert: bool,
    /// Delete lines --line..=--end-line.
    #[arg(long, conflicts_with_all = ["append", "find", "content"])]
    delete: bool,
    /// Append content to the file.
    #[arg(long, conflicts_with_all = ["find", "line"])]
    append: bool,
    /// New text (otherwise read from stdin).
    #[arg(long)]
    content: Option<String>,
    /// Refuse unless the file still has this hash (`sha256:<hex>`, from `writegate read`).
    #[arg(long)]
    expected_hash: Option<String>,
    /// Compute and print the diff; write nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args)]
struct ReadArgs {
    /// File to read.
    path: PathBuf,
    /// First line, 1-based.
    #[arg(long)]
    line: Option<u64>,
    /// Number of lines.
    #[arg(long)]
    limit: Option<u64>,
    #[command(flatten)]
    client: ClientArgs,
}

fn env_var(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(a) => serve(a),
        Command::Write(a) => client_write(a),
        Command::Edit(a) => client_edit(a),
        Command::Read(a) => client_read(a),
    }
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WRITEGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

fn default_config_path() -> Option<PathBuf> {
    if let Some(x) = env_var("XDG_CONFIG_HOME").filter(|s| s.starts_with('/')) {
        return Some(PathBuf::from(x).join("writegate/config.toml"));
    }
    env_var("HOME")
        .filter(|s| s.starts_with('/'))
        .map(|h| PathBuf::from(h).join(".config/writegate/config.toml"))
}

/// Loads the config file and environment, then applies the flags.
fn load_config(a: &ServeArgs) -> Result<Config, String> {
    let (path, required) = match &a.config {
        Some(p) => (Some(p.clone()), true),
        None => (default_config_path(), false),
    };
    let mut cfg = Config::load(path.as_deref(), required, &env_var).map_err(|e| e.to_string())?;
    if a.allow_read {
        cfg.read_text_file = true;
    }
    if a.no_external_writes {
        cfg.external_tool_writes = Some(false);
    }
    if let Some(p) = &a.audit_log {
        cfg.audit.path = absolutize(p).display().to_string();
    }
    Ok(cfg)
}

fn serve(a: ServeArgs) -> ExitCode {
    init_logs();
    let cfg = match load_config(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("writegate: {e}");
            return ExitCode::from(2);
        }
    };
    let registry = Registry::default();
    let cli_workspaces: Vec<(PathBuf, bool)> = a
        .workspaces
        .iter()
        .map(|w| (absolutize(w), !a.untrusted))
        .collect();
    for (root, trusted) in cli_workspaces
        .iter()
        .cloned()
        .chain(cfg.workspace.iter().map(|w| (w.root.clone(), w.trusted)))
    {
        if let Err(e) = registry.register(&root, trusted) {
            eprintln!("writegate: {e}");
            return ExitCode::from(2);
        }
    }
    if registry.primary().is_none() {
        eprintln!(
            "writegate: no workspace: pass --workspace DIR or add [[workspace]] to the config"
        );
        return ExitCode::from(2);
    }
    // Stale temp files of dead processes (SPEC 7.3), in the background so a
    // large tree does not delay the first request.
    let roots: Vec<PathBuf> = registry.all().iter().map(|r| r.root.clone()).collect();
    std::thread::spawn(move || {
        for root in roots {
            writegate_fs::remove_stale_temps(&root);
        }
    });
    let audit_path = cfg.audit_path(&env_var);
    let approvals = state_dir(&env_var).join("approvals.json");
    let service = Arc::new(Service::new(cfg, registry, &audit_path, approvals));
    // Issue 14: no silently missing audit log.
    if let Some(problem) = service.audit().startup_problem() {
        if service.audit().required() {
            eprintln!(
                "writegate: cannot use the audit log {}: {problem}; fix it (or point audit.path / --audit-log elsewhere), or set audit.required = false to serve without a working audit log",
                audit_path.display()
            );
            return ExitCode::from(2);
        }
        tracing::error!(path = %audit_path.display(), problem = %problem,
            "THE AUDIT LOG DOES NOT WORK; serving anyway because audit.required = false");
    }
    let socket = match (&a.socket, a.stdio) {
        (Some(p), _) => Some(absolutize(p)),
        (None, true) => None,
        (None, false) => Some(writegate_acp::default_socket_path(&env_var)),
    };
    let reload = {
        let service = service.clone();
        let config_path = a.config.clone();
        let args_keep = cli_workspaces.clone();
        let allow_read = a.allow_read;
        let no_ext = a.no_external_writes;
        let audit_log = a.audit_log.clone();
        Arc::new(move || {
            let args = ServeArgs {
                stdio: false,
                socket: None,
                workspaces: vec![],
                untrusted: false,
                config: config_path.clone(),
                audit_log: audit_log.clone(),
                no_external_writes: no_ext,
                allow_read,
            };
            match load_config(&args) {
                Ok(cfg) => match service.reload(cfg, &args_keep) {
                    Ok(report) => tracing::info!(?report, "config reloaded"),
                    Err(e) => tracing::error!(error = %e, "reload refused; keeping the old config"),
                },
                Err(e) => {
                    tracing::error!(error = %e, "invalid config on reload; keeping the old one")
                }
            }
        }) as Arc<dyn Fn() + Send + Sync>
    };
    // At least 4 workers: up to all but one may be running a small request
    // (writegate_acp::conn::WORKER_LINE_MAX), one stays free for I/O.
    let workers = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .max(4);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .max_blocking_threads(64)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("writegate: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = writegate_acp::ServeOptions {
        stdio: a.stdio,
        socket,
        on_reload: Some(reload),
    };
    let result = runtime.block_on(writegate_acp::serve(service.clone(), opts));
    // Last audit flush; a clean journal is removed.
    service.audit().close();
    // Do not wait for a blocked stdin reader thread.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("writegate: {e}");
            ExitCode::from(2)
        }
    }
}

/// Makes a path absolute against the current directory (no symlink
/// resolution: the daemon's resolver decides where it really points).
fn absolutize(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

fn socket_of(c: &ClientArgs) -> PathBuf {
    c.socket
        .as_deref()
        .map(absolutize)
        .unwrap_or_else(|| writegate_acp::default_socket_path(&env_var))
}

/// Runs one call, printing a refusal as `writegate: <errorKind>: <hint>`.
fn call(c: &ClientArgs, method: &str, params: Value) -> Result<Value, ExitCode> {
    let socket = socket_of(c);
    let mut client = Client::connect(&socket).map_err(|e| report(&e, &socket))?;
    client.call(method, params).map_err(|e| report(&e, &socket))
}

fn report(e: &CallError, socket: &Path) -> ExitCode {
    match e {
        CallError::Io(e) => {
            eprintln!(
                "writegate: cannot reach the daemon at {}: {e} (start it with `writegate serve --workspace DIR`)",
                socket.display()
            );
            ExitCode::from(2)
        }
        CallError::Rpc(r) => {
            let kind = r.error_kind().unwrap_or(&r.message);
            let hint = r
                .data
                .get("hint")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| r.data.as_str().map(str::to_string))
                .unwrap_or_default();
            eprintln!("writegate: refused: {kind}: {hint}");
            ExitCode::from(1)
        }
    }
}

fn read_stdin() -> Result<String, ExitCode> {
    let mut buf = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut buf) {
        eprintln!("writegate: cannot read stdin: {e}");
        return Err(ExitCode::from(2));
    }
    String::from_utf8(buf).map_err(|_| {
        eprintln!("writegate: stdin is not UTF-8 text");
        ExitCode::from(2)
    })
}

fn client_write(a: WriteArgs) -> ExitCode {
    let content = match read_stdin() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let path = absolutize(&a.path);
    let len = content.len();
    let params = json!({"sessionId": a.client.session, "path": path, "content": content});
    match call(&a.client, "fs/write_text_file", params) {
        Ok(_) => {
            println!("wrote {} ({len} bytes of text)", path.display());
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

fn client_edit(a: EditArgs) -> ExitCode {
    let mode = if a.append {
        "append"
    } else if a.insert {
        "insert"
    } else if a.delete {
        "delete"
    } else if a.find.is_some() || a.line.is_some() {
        "replace"
    } else {
        "write"
    };
    let content = match (&a.content, mode) {
        (Some(c), _) => Some(c.clone()),
        (None, "delete") => None,
        (None, _) => match read_stdin() {
            Ok(c) => Some(c),
            Err(code) => return code,
        },
    };
    let path = absolutize(&a.path);
    let mut params =
        json!({"sessionId": a.client.session, "path": path, "mode": mode, "dryRun": a.dry_run});
    let obj = params.as_object_mut().expect("object");
    if let Some(c) = content {
        obj.insert("content".into(), c.into());
    }
    if let Some(f) = &a.find {
        obj.insert("find".into(), f.clone().into());
    }
    if let Some(l) = a.line {
        obj.insert("line".into(), l.into());
    }
    if let Some(l) = a.end_line {
        obj.insert("endLine".into(), l.into());
    }
    if let Some(h) = &a.expected_hash {
        obj.insert("expectedHash".into(), h.clone().into());
    }
    match call(&a.client, "_writegate/edit_text_file", params) {
        Ok(r) => {
            if let Some(d) = r.get("diff").and_then(Value::as_str) {
                print!("{d}");
            }
            if let Some(m) = r.get("message").and_then(Value::as_str) {
                println!("{m}");
            }
            if let Some(h) = r.get("hash").and_then(Value::as_str) {
                println!("hash: {h}");
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

fn client_read(a: ReadArgs) -> ExitCode {
    let path = absolutize(&a.path);
    let mut params = json!({"sessionId": a.client.session, "path": path});
    if let Some(l) = a.line {
        params["line"] = l.into();
    }
    if let Some(l) = a.limit {
        params["limit"] = l.into();
    }
    match call(&a.client, "_writegate/read_lines", params) {
        Ok(r) => {
            for l in r["lines"].as_array().into_iter().flatten() {
                println!(
                    "{:>6}\t{}",
                    l["n"].as_u64().unwrap_or(0),
                    l["text"].as_str().unwrap_or("")
                );
            }
            println!(
                "hash: {} ({} lines, {}, bom {}, {})",
                r["hash"].as_str().unwrap_or(""),
                r["totalLines"],
                r["encoding"].as_str().unwrap_or(""),
                r["bom"],
                r["lineEnding"].as_str().unwrap_or("")
            );
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
