//! `writegate proxy [OPTIONS] -- COMMAND [ARGS...]`: its arguments and its
//! start-up (serve's config, audit log and approvals file; no workspace of
//! its own: each session brings its `cwd`). The proxy itself is
//! `writegate_proxy::run`.

use crate::serve::{Startup, build_service, init_logs, run_on};
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub(crate) struct ProxyArgs {
    /// Config file (default `$XDG_CONFIG_HOME/writegate/config.toml`); see its `[proxy]` section.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Audit log (default `$XDG_STATE_HOME/writegate/audit.jsonl`).
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Never route the agent's marked tool writes to the external host writer.
    #[arg(long)]
    no_external_writes: bool,
    /// Run the agent inside `writegate run`'s sandbox (its workspace: the proxy's current
    /// directory): its fs/* requests still come here, its own direct writes to the workspace fail.
    #[arg(long)]
    sandbox: bool,
    /// The agent's command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

impl ProxyArgs {
    /// The proxy's start-up: serve's config and audit log, no workspace of
    /// its own (the workspaces come from the sessions' cwd). Reads are
    /// served: the editor answered them before, and an agent's edit tool
    /// reads a file before it writes it.
    fn startup(&self) -> Startup {
        Startup {
            config: self.config.clone(),
            audit_log: self.audit_log.clone(),
            allow_read: true,
            no_external_writes: self.no_external_writes,
            workspaces: vec![],
            client_roots: None,
        }
    }
}

/// Runs the proxy; the exit status is the agent's (128 + signal when a
/// signal ended it), 127 or 126 when it cannot be started (not found, not
/// executable, as a shell says), 2 for a bad config.
pub(crate) fn proxy(a: ProxyArgs) -> ExitCode {
    init_logs(0, 0);
    // The same start-up as serve (config, audit log check, stale temps).
    let Ok(service) = build_service(&a.startup(), false) else {
        return ExitCode::from(2);
    };
    // With --sandbox the agent is `writegate run -- AGENT`: this proxy stays
    // outside and answers fs/*; the agent and its children are inside.
    let argv = if a.sandbox {
        let exe = std::env::current_exe()
            .map_or_else(|_| OsString::from("writegate"), PathBuf::into_os_string);
        let mut v = vec![exe, "run".into(), "--".into()];
        v.extend(a.command);
        v
    } else {
        a.command
    };
    let mut command = argv.into_iter();
    let opts = writegate_proxy::ProxyOptions {
        program: command.next().unwrap_or_default(),
        args: command.collect(),
        // Sandboxed, the model is told where its writes go, so that it does
        // not loop on a refused shell write.
        session_instructions: a
            .sandbox
            .then(|| writegate_proxy::SANDBOX_INSTRUCTIONS.to_string()),
    };
    // One thread runs both connections: a forwarded line then never waits
    // for another thread to wake (on a small VM that wake-up was most of a
    // forwarded request's latency; docs/decisions/0011-proxy-forwarding.md).
    // writegate's own operations still run on blocking threads.
    let runtime = match tokio::runtime::Builder::new_current_thread()
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
    // block_on runs the future on this (main) thread, which spawns the
    // agent: the agent's parent-death signal is tied to this thread.
    match run_on(
        runtime,
        writegate_proxy::run(service.clone(), opts),
        &service,
    ) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("writegate: {e}");
            ExitCode::from(match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                std::io::ErrorKind::PermissionDenied => 126,
                _ => 2,
            })
        }
    }
}
