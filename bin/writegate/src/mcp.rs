//! `writegate mcp`: the MCP front end on stdio (`writegate-mcp`), over the
//! same start-up and service as `serve`.

use crate::args::McpArgs;
use crate::serve::{Startup, build_service, init_logs_or};
use crate::{Status, absolutize, default_config_path};

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
