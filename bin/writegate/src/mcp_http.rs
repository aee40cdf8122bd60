//! `writegate serve --mcp-http ADDRESS` (or `[mcp] http`): MCP over
//! Streamable HTTP beside ACP (`writegate_mcp::serve_http`). Here: the
//! address checked (loopback only), the listener bound, and the bearer
//! token made and written to `$XDG_RUNTIME_DIR/writegate/mcp-token` (0600,
//! in the 0700 directory of the daemon's socket) before anything is
//! served. The file outlives the daemon (it opens nothing once the
//! listener is gone) and is replaced, with a new token, at each start.

use crate::{Status, absolutize, default_config_path};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use writegate_core::Service;

/// The token file's name, in the runtime directory.
const TOKEN_FILE: &str = "mcp-token";

/// A bound listener and what it serves with.
pub(crate) struct Prepared {
    listener: TcpListener,
    opts: writegate_mcp::HttpOptions,
}

/// The listener `serve` was asked for (`flag`: `--mcp-http`, else `[mcp]
/// http`; `config`: serve's `--config`), bound, with its token written;
/// `None` when neither names one. Status 2 with a message when the address
/// is refused or cannot be bound, or the token cannot be written.
pub(crate) fn prepare(
    flag: Option<&str>,
    config: Option<&Path>,
    service: &Service,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Prepared>, Status> {
    let given = match flag {
        Some(flag) => flag.to_string(),
        None => service.config().mcp.http.clone(),
    };
    if given.trim().is_empty() {
        return Ok(None);
    }
    let addr = writegate_mcp::check_loopback(&given).map_err(|e| {
        eprintln!("writegate: --mcp-http: {e}");
        Status::Usage
    })?;
    let listener = TcpListener::bind(addr).map_err(|e| {
        eprintln!("writegate: --mcp-http: cannot listen on {addr}: {e}");
        Status::Usage
    })?;
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        eprintln!("writegate: --mcp-http: {what}: {e}");
        Status::Usage
    };
    listener
        .set_nonblocking(true)
        .map_err(|e| fail("cannot set up the listener", &e))?;
    let runtime_dir = writegate_acp::default_socket_path(env)
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    writegate_fs::prepare_private_dir(&runtime_dir).map_err(|e| {
        fail(
            &format!("runtime directory {}", runtime_dir.display()),
            &writegate_core::error::with_causes(&e),
        )
    })?;
    // 256 bits from the operating system's random source.
    let token = format!(
        "{}{}",
        writegate_core::unpredictable_hex(),
        writegate_core::unpredictable_hex()
    );
    let token_file = runtime_dir.join(TOKEN_FILE);
    writegate_fs::write_private_file(&token_file, token.as_bytes()).map_err(|e| {
        fail(
            &format!("cannot write the token to {}", token_file.display()),
            &writegate_core::error::with_causes(&e),
        )
    })?;
    let bound = listener.local_addr().map_err(|e| fail("listener", &e))?;
    tracing::info!(
        url = %format!("http://{bound}/mcp"),
        token_file = %token_file.display(),
        "MCP over Streamable HTTP: every request needs Authorization: Bearer <the token file's text>"
    );
    Ok(Some(Prepared {
        listener,
        opts: writegate_mcp::HttpOptions {
            token,
            config_file: config.map(absolutize).or_else(default_config_path),
        },
    }))
}

/// Runs `daemon` (the ACP daemon) with the MCP HTTP listener beside it when
/// there is one; the listener stops when the daemon returns.
pub(crate) async fn alongside<F: Future>(
    http: Option<Prepared>,
    service: Arc<Service>,
    daemon: F,
) -> F::Output {
    let Some(http) = http else {
        return daemon.await;
    };
    let stop = CancellationToken::new();
    let listener = match tokio::net::TcpListener::from_std(http.listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve MCP over HTTP");
            return daemon.await;
        }
    };
    let task = tokio::spawn(writegate_mcp::serve_http(
        service,
        listener,
        http.opts,
        stop.clone(),
    ));
    let out = daemon.await;
    stop.cancel();
    match task.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "the MCP HTTP listener failed"),
        Err(e) => tracing::error!(error = %e, "the MCP HTTP listener stopped"),
    }
    out
}
