//! `writegate mcp`: the MCP front end on stdio (`writegate-mcp`), over the
//! same start-up and service as `serve`.

use crate::serve::{Startup, build_service, init_logs_or};
use crate::{Status, absolutize, default_config_path};
use clap::Args;
use std::path::PathBuf;

/// `writegate mcp`.
// Its doc comments are the `--help` text (backticks would be shown as they
// are).
#[allow(clippy::doc_markdown)]
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

impl McpArgs {
    /// The MCP server's start-up: its config, audit log and trusted
    /// `--workspace`s; reads are the config's, external writes too.
    fn startup(&self) -> Startup {
        Startup {
            config: self.config.clone(),
            audit_log: self.audit_log.clone(),
            allow_read: false,
            no_external_writes: false,
            workspaces: self
                .workspaces
                .iter()
                .map(|w| (absolutize(w), true))
                .collect(),
            client_roots: self.client_roots,
        }
    }
}

/// Serves MCP on stdin/stdout until the client closes it (status 0, before
/// the `initialize` handshake as after it). Status 2 when it cannot start.
pub(crate) fn mcp(a: McpArgs) -> Status {
    // Inside `writegate run`: this process cannot write the workspace, the
    // run's writegate outside can. Relay to it, whatever the arguments.
    if let Some(socket) = std::env::var_os(crate::run::RUN_SOCKET_VAR).filter(|s| !s.is_empty()) {
        return crate::relay::relay_to_run(std::path::Path::new(&socket));
    }
    if let Some(socket) = &a.connect {
        return crate::relay::relay(socket.as_deref(), a.cwd_workspace);
    }
    init_logs_or(0, 0, "info,rmcp=warn");
    // Client roots may bring the workspaces: none on the command line is fine.
    let service = match build_service(&a.startup(), false) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let opts = writegate_mcp::McpOptions {
        config_file: a
            .config
            .map(|p| absolutize(&p))
            .or_else(default_config_path),
        cwd_workspace: a.cwd_workspace,
        sandboxed: a.sandboxed_client,
        ..writegate_mcp::McpOptions::default()
    };
    let result = writegate_mcp::run(service.clone(), opts);
    // Last audit flush; a clean journal is removed.
    service.audit().close();
    match result {
        Ok(()) => Status::Ok,
        Err(e) => {
            eprintln!("writegate: {e}");
            Status::Usage
        }
    }
}
