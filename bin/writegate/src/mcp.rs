//! `writegate mcp`: the MCP front end on stdio (`writegate-mcp`), over the
//! same start-up and service as `serve`.

use crate::args::{McpArgs, ServeArgs};
use crate::serve::{build_service, init_logs_or};
use crate::{Status, absolutize, default_config_path};

/// Serves MCP on stdin/stdout until the client closes it (status 0, before
/// the `initialize` handshake as after it). Status 2 when it cannot start.
pub(crate) fn mcp(a: McpArgs) -> Status {
    init_logs_or(0, 0, "info,rmcp=warn");
    let args = ServeArgs {
        stdio: true,
        socket: None,
        workspaces: a.workspaces,
        untrusted: false,
        config: a.config,
        audit_log: a.audit_log,
        no_external_writes: false,
        allow_read: false,
        verbose: 0,
        quiet: 0,
    };
    // Client roots may bring the workspaces: none on the command line is fine.
    let (service, _) = match build_service(&args, false) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let opts = writegate_mcp::McpOptions {
        config_file: args
            .config
            .map(|p| absolutize(&p))
            .or_else(default_config_path),
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
