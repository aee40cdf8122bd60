//! `writegate serve`: logs, config, workspaces, then the transports of
//! `writegate-acp`.

use crate::{Status, absolutize, default_config_path, env_var};
use clap::{ArgAction, Args};
use std::path::PathBuf;
use std::sync::Arc;
use writegate_core::policy::{OwnFiles, OwnKind};
use writegate_core::{Config, Registry, Service, config::state_dir};

/// `writegate serve`'s arguments.
// Its doc comments are the `--help` text (backticks would be shown as they
// are), and its flags are bools.
#[allow(clippy::doc_markdown, clippy::struct_excessive_bools)]
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

/// The log filter: `-v`/`-q` when given, else `WRITEGATE_LOG`, else
/// `RUST_LOG` (both in `RUST_LOG` syntax), else `info`. Returns the filter
/// and, when a variable was invalid and skipped, a warning to log once the
/// subscriber is up.
#[cfg(test)]
fn log_filter(verbose: u8, quiet: u8) -> (tracing_subscriber::EnvFilter, Option<String>) {
    log_filter_or(verbose, quiet, "info")
}

/// The log filter of `log_filter` with `default` instead of `info` when nothing is set.
fn log_filter_or(
    verbose: u8,
    quiet: u8,
    default: &str,
) -> (tracing_subscriber::EnvFilter, Option<String>) {
    use tracing_subscriber::EnvFilter;
    let from_flags = match (verbose, quiet) {
        (0, 0) => None,
        (1, _) => Some("debug"),
        (_, 0) => Some("trace"),
        (_, 1) => Some("warn"),
        _ => Some("error"),
    };
    if let Some(level) = from_flags {
        return (EnvFilter::new(level), None);
    }
    let mut warning = None;
    for var in ["WRITEGATE_LOG", "RUST_LOG"] {
        let Some(value) = env_var(var).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        match EnvFilter::try_new(&value) {
            Ok(f) => return (f, warning),
            Err(e) => {
                warning.get_or_insert(format!(
                    "ignoring {var}=`{value}`: {e} (it takes RUST_LOG syntax, e.g. `debug` or `writegate_core=trace`)"
                ));
            }
        }
    }
    (EnvFilter::new(default), warning)
}

pub(crate) fn init_logs(verbose: u8, quiet: u8) {
    init_logs_or(verbose, quiet, "info");
}

/// [`init_logs`] with `default` as the filter when no flag or variable
/// sets one (`writegate mcp` quiets its SDK's info lines).
pub(crate) fn init_logs_or(verbose: u8, quiet: u8, default: &str) {
    let (filter, warning) = log_filter_or(verbose, quiet, default);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    if let Some(w) = warning {
        tracing::warn!("{w}");
    }
}

/// What start-up takes from a front end's command line (`serve`, `proxy`,
/// `mcp`): the config file, the overrides of its values, and the
/// command-line workspaces. Each subcommand's arguments give one
/// (`startup()`); the SIGHUP reload keeps serve's.
pub(crate) struct Startup {
    /// `--config`: the file, required to exist when given.
    pub(crate) config: Option<PathBuf>,
    /// `--audit-log`: overrides `audit.path`.
    pub(crate) audit_log: Option<PathBuf>,
    /// Serve `fs/read_text_file` whatever the config says.
    pub(crate) allow_read: bool,
    /// `--no-external-writes`: external tool writes off whatever the config says.
    pub(crate) no_external_writes: bool,
    /// The command-line workspaces, absolute, with their trust (kept across
    /// reloads).
    pub(crate) workspaces: Roots,
    /// `writegate mcp --client-roots`: overrides `[mcp] client_roots`.
    pub(crate) client_roots: Option<writegate_core::config::ClientRoots>,
}

impl Startup {
    /// The config to run with: the file (`--config`, else the default
    /// location, which may be missing), `WRITEGATE_*` variables, then the
    /// flags.
    pub(crate) fn load_config(&self) -> Result<Config, writegate_core::config::ConfigError> {
        let (path, required) = match &self.config {
            Some(p) => (Some(p.clone()), true),
            None => (default_config_path(), false),
        };
        let mut cfg = crate::load_config_file(path.as_deref(), required)?;
        if self.allow_read {
            cfg.read_text_file = true;
        }
        if self.no_external_writes {
            cfg.external_tool_writes = Some(false);
        }
        if let Some(p) = &self.audit_log {
            cfg.audit.path = absolutize(p).display().to_string();
        }
        if let Some(mode) = self.client_roots {
            cfg.mcp.client_roots = mode;
        }
        Ok(cfg)
    }
}

impl ServeArgs {
    /// Serve's start-up: its flags; its `--workspace`s are trusted unless
    /// `--untrusted`.
    fn startup(&self) -> Startup {
        Startup {
            config: self.config.clone(),
            audit_log: self.audit_log.clone(),
            allow_read: self.allow_read,
            no_external_writes: self.no_external_writes,
            workspaces: self
                .workspaces
                .iter()
                .map(|w| (absolutize(w), !self.untrusted))
                .collect(),
            client_roots: None,
        }
    }
}

/// Paths for a log line: `a, b` (or `-` for none).
fn join_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "-".to_string();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How long start-up waits for the stale temp cleanup before serving.
const STALE_TEMP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Logs one INFO line per served workspace with its trust.
fn log_workspaces(registry: &Registry) {
    for rt in registry.all() {
        if rt.trusted {
            tracing::info!(
                root = %rt.root.display(),
                id = %rt.id,
                "serving workspace (trusted: writes allowed)"
            );
        } else {
            tracing::info!(
                root = %rt.root.display(),
                id = %rt.id,
                "serving workspace (untrusted: writes are refused; drop --untrusted or set trusted = true in its [[workspace]] entry)"
            );
        }
    }
}

/// What to do when no workspace is registered: the flag, or the exact
/// lines to add to the config file that was read (the one a systemd unit
/// reads, since it passes no `--workspace`).
fn no_workspace_message(config: Option<&std::path::Path>) -> String {
    let file = config
        .map(absolutize)
        .or_else(default_config_path)
        .map_or_else(
            || "the config file (--config FILE)".to_string(),
            |p| p.display().to_string(),
        );
    let home = env_var("HOME").filter(|h| h.starts_with('/'));
    let root = home.as_deref().unwrap_or("/path/to/project");
    format!(
        "writegate: no workspace to serve: pass --workspace DIR, or add to {file}:\n\n[[workspace]]\nroot = \"{root}\"\ntrusted = true\n\n(root: a directory whose files agents may write; trusted = true allows writes)"
    )
}

/// Command-line workspaces: canonical-to-be roots and their trust.
pub(crate) type Roots = Vec<(PathBuf, bool)>;

/// The start-up every front end shares: the config (file, environment,
/// flags), the workspaces (`--workspace` then `[[workspace]]`), one log line
/// each and one about external writes, the stale temp cleanup, the audit
/// log and approvals. Returns the service, or the exit status when it
/// cannot start (a message on stderr). `need_workspace`: no workspace at all is an error
/// (`serve`; `writegate mcp` may get its workspaces from the client's
/// roots).
pub(crate) fn build_service(start: &Startup, need_workspace: bool) -> Result<Arc<Service>, Status> {
    let cfg = match start.load_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("writegate: {e}");
            return Err(Status::Usage);
        }
    };
    let registry = Registry::default();
    for (root, trusted) in start
        .workspaces
        .iter()
        .cloned()
        .chain(cfg.workspace.iter().map(|w| (w.root.clone(), w.trusted)))
    {
        if let Err(e) = registry.register(&root, trusted) {
            eprintln!("writegate: {e}");
            return Err(Status::Usage);
        }
    }
    if need_workspace && registry.primary().is_none() {
        eprintln!("{}", no_workspace_message(start.config.as_deref()));
        return Err(Status::Usage);
    }
    log_workspaces(&registry);
    // As root, external tool writes are off unless the config
    // turns them on explicitly; say which it is.
    tracing::info!("{}", cfg.external_writes_at_start().1);
    // Stale temp files of dead processes (SPEC 7.3), before serving. A
    // tree so large that the walk takes longer than STALE_TEMP_WAIT goes on
    // in the background (it only removes temp files of dead processes, never
    // ours), and the log says so.
    let roots: Vec<PathBuf> = registry.all().iter().map(|r| r.root.clone()).collect();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for root in roots {
            writegate_fs::remove_stale_temps(&root);
        }
        let _ = done_tx.send(());
    });
    if done_rx.recv_timeout(STALE_TEMP_WAIT).is_err() {
        tracing::info!(
            wait_ms = u64::try_from(STALE_TEMP_WAIT.as_millis()).unwrap_or(u64::MAX),
            "stale temp cleanup continues in the background (a large workspace)"
        );
    }
    let audit_path = cfg.audit_path(&env_var);
    let approvals = state_dir(&env_var).join("approvals.json");
    let history = cfg.history_path(&env_var);
    let keep_history = cfg.history.enabled;
    let own = own_files(start, &audit_path, &history);
    let mut service = Service::new(cfg, registry, &audit_path, approvals);
    service.protect_own_files(own);
    // The before-image store. Opened when history is on (or a
    // store is already there, so that its operations can still be undone).
    if (keep_history || history.exists())
        && let Err(e) = service.open_history(&history)
    {
        tracing::error!(path = %history.display(), error = %writegate_core::error::with_causes(&e),
            "cannot open the history store: writes are not kept and cannot be undone");
    }
    let service = Arc::new(service);
    // No silently missing audit log.
    let audit = service.audit();
    if let Some(problem) = audit.startup_problem() {
        if audit.required() {
            eprintln!(
                "writegate: cannot use the audit log {}: {problem}; fix it (or point audit.path / --audit-log elsewhere), or set audit.required = false to serve without a working audit log",
                audit_path.display()
            );
            return Err(Status::Usage);
        }
        tracing::error!(path = %audit_path.display(), problem = %problem,
            "THE AUDIT LOG DOES NOT WORK; serving anyway because audit.required = false");
    } else if !audit.required() {
        tracing::warn!(path = %audit_path.display(),
            "audit.required = false: writes go on even while the audit log cannot be written");
    }
    Ok(service)
}

/// writegate's own files, which no agent may read or change (see
/// `writegate_core::policy::OwnFiles`): the config file in use and the
/// default config directory, the state directory, the audit log and the
/// history store where the config puts them, the runtime directory, the
/// systemd user units `writegate service install` writes, and this binary.
pub(crate) fn own_files(
    start: &Startup,
    audit_path: &std::path::Path,
    history: &std::path::Path,
) -> OwnFiles {
    let mut own = OwnFiles::default();
    if let Some(dir) = default_config_path()
        .as_deref()
        .and_then(std::path::Path::parent)
    {
        own.add(dir, OwnKind::Config);
    }
    if let Some(file) = &start.config {
        own.add(&absolutize(file), OwnKind::Config);
    }
    own.add(&state_dir(&env_var), OwnKind::State);
    let audit_path = absolutize(audit_path);
    own.add(&audit_path, OwnKind::AuditLog);
    own.add(
        &writegate_core::audit::journal_dir(&audit_path),
        OwnKind::AuditLog,
    );
    own.add(&absolutize(history), OwnKind::History);
    if let Some(runtime) = writegate_acp::default_socket_path(&env_var).parent() {
        own.add(runtime, OwnKind::Runtime);
    }
    if let Some(units) = crate::service::units_dir() {
        for unit in crate::service::UNIT_NAMES {
            own.add(&units.join(unit), OwnKind::ServiceUnit);
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        own.add(&exe, OwnKind::Binary);
    }
    own
}

/// The soft descriptor limit the daemon asks for, at most (never above the
/// hard limit).
const WANT_NOFILE: u64 = 1 << 16;

/// Raises the soft `RLIMIT_NOFILE` towards the hard limit (at most
/// [`WANT_NOFILE`]). Each connection holds two descriptors and the
/// releaser up to 128 replaced files, so the usual soft limit of 1,024
/// served only a few hundred connections; past it, accepts failed and
/// requests were refused `io_error`. The daemon uses `epoll`, never
/// `select`, and its only child process is `notify-send` (which needs no
/// old limit), so nothing needs the old limit back. A failure leaves the limit as it was (logged at debug level).
fn raise_descriptor_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    let Some(soft) = limit.current else {
        return; // already unlimited
    };
    let want = limit
        .maximum
        .map_or(WANT_NOFILE, |hard| hard.min(WANT_NOFILE));
    if want <= soft {
        return;
    }
    limit.current = Some(want);
    match setrlimit(Resource::Nofile, limit) {
        Ok(()) => tracing::debug!(from = soft, to = want, "raised the descriptor limit"),
        Err(e) => tracing::debug!(error = %e, "cannot raise the descriptor limit"),
    }
}

/// Runs `fut` to its end on `runtime` (on this thread), then the last
/// audit flush (a clean journal is removed), then drops the runtime without
/// waiting for a blocked stdin reader thread. `serve` and `proxy` end this
/// way.
pub(crate) fn run_on<F: std::future::Future>(
    runtime: tokio::runtime::Runtime,
    fut: F,
    service: &Service,
) -> F::Output {
    let result = runtime.block_on(fut);
    service.audit().close();
    runtime.shutdown_background();
    result
}

/// What to do when a daemon already answers on `socket`.
fn already_serving(socket: &std::path::Path) -> String {
    format!(
        "writegate: a daemon is already answering on {}: use that one (`writegate write`, `edit`, `read` talk to it), or stop it first (`systemctl --user stop writegate.socket writegate.service` if `writegate service install` set it up, else end its process), or start this one on another socket (--socket PATH)",
        socket.display()
    )
}

/// Runs the daemon until SIGTERM/SIGINT (or the end of stdin with `--stdio`
/// alone). [`Status::Usage`] (2) when it cannot start.
pub(crate) fn serve(a: &ServeArgs) -> Status {
    // rmcp's info lines (one per MCP connection) are the SDK's, not ours.
    init_logs_or(a.verbose, a.quiet, "info,rmcp=warn");
    raise_descriptor_limit();
    // Socket activation first: descriptor 3, if systemd passed it.
    let activated = match writegate_acp::activated_listener(&env_var) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("writegate: socket activation: {e}");
            return Status::Usage;
        }
    };
    // A daemon already on the socket: say so before any start-up line.
    if activated.is_none() && !(a.stdio && a.socket.is_none()) {
        let path = a
            .socket
            .as_deref()
            .map_or_else(|| writegate_acp::default_socket_path(&env_var), absolutize);
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            eprintln!("{}", already_serving(&path));
            return Status::Usage;
        }
    }
    let start = a.startup();
    let service = match build_service(&start, true) {
        Ok(s) => s,
        Err(status) => return status,
    };
    // The MCP HTTP listener is bound (and its token written) before
    // anything is served, so a refused address stops the start.
    let mcp_http = match crate::mcp_http::prepare(
        a.mcp_http.as_deref(),
        a.config.as_deref(),
        &service,
        &env_var,
    ) {
        Ok(h) => h,
        Err(status) => return status,
    };
    let socket = match (&a.socket, a.stdio || activated.is_some()) {
        (Some(p), _) => Some(absolutize(p)),
        (None, true) => None,
        (None, false) => Some(writegate_acp::default_socket_path(&env_var)),
    };
    let reload = {
        let service = service.clone();
        Arc::new(move || match start.load_config() {
            Ok(cfg) => match service.reload(cfg, &start.workspaces) {
                Ok(report) => tracing::info!(
                    added = %join_paths(&report.added),
                    removed = %join_paths(&report.removed),
                    retrusted = %join_paths(&report.retrusted),
                    "config reloaded"
                ),
                Err(e) => tracing::error!(error = %e, "reload refused; keeping the old config"),
            },
            Err(e) => {
                tracing::error!(error = %e, "invalid config on reload; keeping the old one");
            }
        }) as Arc<dyn Fn() + Send + Sync>
    };
    // At least 4 workers: up to all but one may be running a small request
    // (writegate_stdio::run::INLINE_MAX), one stays free for I/O.
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
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
            return Status::Usage;
        }
    };
    // MCP beside ACP: `mcp.sock` in the ACP socket's directory (the
    // private runtime directory), unless --mcp-socket names another; none
    // for --stdio alone.
    let mcp_socket = match (&a.mcp_socket, &socket) {
        (Some(p), _) => Some(absolutize(p)),
        (None, Some(acp)) => Some(acp.with_file_name("mcp.sock")),
        (None, None) => activated
            .as_ref()
            .map(|_| crate::relay::default_mcp_socket()),
    };
    if let Some(notify) = notifier() {
        service.approval_queue().set_notifier(notify);
    }
    let opts = writegate_acp::ServeOptions {
        stdio: a.stdio,
        socket,
        activated,
        on_reload: Some(reload),
    };
    let mcp_opts = writegate_mcp::SocketOptions {
        config_file: a
            .config
            .as_deref()
            .map(absolutize)
            .or_else(default_config_path),
    };
    match run_on(
        runtime,
        crate::mcp_http::alongside(
            mcp_http,
            service.clone(),
            serve_both(service.clone(), opts, mcp_socket, mcp_opts),
        ),
        &service,
    ) {
        Ok(()) => Status::Ok,
        Err(e) => {
            eprintln!("writegate: {e}");
            Status::Usage
        }
    }
}

/// ACP (`writegate_acp::serve`) and, on `mcp_socket`, MCP
/// (`writegate_mcp::serve_socket`) over one service, until ACP's serve
/// ends (a signal); then the MCP connections get `shutdown_grace_ms` to
/// finish and the MCP socket file is removed if it is still ours.
async fn serve_both(
    service: Arc<Service>,
    opts: writegate_acp::ServeOptions,
    mcp_socket: Option<PathBuf>,
    mcp_opts: writegate_mcp::SocketOptions,
) -> std::io::Result<()> {
    let stop = tokio_util::sync::CancellationToken::new();
    let mcp = match mcp_socket {
        None => None,
        Some(path) => {
            let listener = writegate_acp::server::bind_socket(&path).map_err(|e| {
                std::io::Error::new(e.kind(), format!("MCP socket {}: {e}", path.display()))
            })?;
            tracing::info!(socket = %path.display(), "serving MCP (writegate mcp --connect)");
            let ino = std::fs::symlink_metadata(&path).ok().map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            });
            let task = tokio::spawn(writegate_mcp::serve_socket(
                service.clone(),
                listener,
                stop.clone(),
                mcp_opts,
            ));
            Some((task, path, ino))
        }
    };
    let result = writegate_acp::serve(service.clone(), opts).await;
    stop.cancel();
    if let Some((task, path, ino)) = mcp {
        let grace = std::time::Duration::from_millis(service.config().shutdown_grace_ms);
        if tokio::time::timeout(grace, task).await.is_err() {
            tracing::warn!("shutdown grace elapsed with MCP calls still running");
        }
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::symlink_metadata(&path)
            && Some((m.dev(), m.ino())) == ino
        {
            let _ = writegate_fs::remove_socket_file(&path);
        }
    }
    result
}

/// A desktop notification for each question that waits for the person,
/// through `notify-send` when it is on `PATH` (none otherwise).
fn notifier() -> Option<writegate_core::queue::Notifier> {
    let path = std::env::var_os("PATH")?;
    let program = std::env::split_paths(&path)
        .map(|d| d.join("notify-send"))
        .find(|p| p.is_file())?;
    Some(Box::new(move |w: &writegate_core::queue::Waiting| {
        let body = format!(
            "{}\n{}\nwritegate answer {} allow|allow-session|deny",
            w.command, w.reason, w.id
        );
        let child = std::process::Command::new(&program)
            .args([
                "--app-name=writegate",
                "writegate: an agent waits for your answer",
            ])
            .arg(body)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match child {
            // Reaped off the caller's thread.
            Ok(mut c) => drop(std::thread::spawn(move || c.wait())),
            Err(e) => tracing::debug!(error = %e, "notify-send failed"),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn flags_choose_the_level() {
        assert_eq!(log_filter(1, 0).0.to_string(), "debug");
        assert_eq!(log_filter(2, 0).0.to_string(), "trace");
        assert_eq!(log_filter(0, 1).0.to_string(), "warn");
        assert_eq!(log_filter(0, 2).0.to_string(), "error");
    }
}
