//! The Streamable HTTP transport (`writegate serve --mcp-http`): MCP at
//! `/mcp` on a loopback TCP listener, served by `rmcp`'s Streamable HTTP
//! service (both protocol eras: 2025 sessions over `initialize`, and
//! stateless 2026-07-28 requests), with hyper running HTTP/1.1 on each
//! accepted connection.
//!
//! In front of `rmcp`, every request must carry `Authorization: Bearer
//! <token>` (the token `serve` wrote to `$XDG_RUNTIME_DIR/writegate/mcp-token`):
//! a missing or wrong token is 401 before anything else is read. Then
//! `rmcp` checks `Host` and `Origin` against this listener's own loopback
//! authorities (`127.0.0.1`, `localhost` and `[::1]` with its port): any
//! other is 403, so a page that rebinds a DNS name to 127.0.0.1 is refused.
//!
//! Each 2025 session (and each stateless 2026 request) gets an
//! [`McpServer`] of its own, made by `rmcp`'s service factory: its own
//! session id, client roots and running calls. No `out::Out` writes here:
//! `rmcp` serialises every message, so a server made here holds no
//! prebuilt answer, and its calls run for `out::Writer::Rmcp`:
//! `read_file` is answered with the typed result.

use crate::server::{McpOptions, McpServer};
use crate::transport::Transport;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use writegate_core::Service;

/// The path MCP is served at.
pub(crate) const ENDPOINT: &str = "/mcp";

/// What the refusal of a non-loopback address says (the start-up error).
pub const LOOPBACK_ONLY: &str = "the MCP HTTP listener binds loopback only (127.0.0.1, [::1] or localhost): an agent on another machine would reach every workspace with one token sent in the clear";

/// How the HTTP listener serves.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The bearer token every request must carry.
    pub token: String,
    /// The config file, named in how-to-approve messages.
    pub config_file: Option<PathBuf>,
}

/// Why the listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// `--mcp-http` or `[mcp] http` is not `HOST:PORT`.
    #[error(
        "invalid MCP HTTP address {0:?}: expected 127.0.0.1:PORT, [::1]:PORT or localhost:PORT"
    )]
    Address(String),
    /// The address is not a loopback one.
    #[error("refusing MCP HTTP address {0:?}: {LOOPBACK_ONLY}")]
    NotLoopback(String),
}

/// The loopback socket address `given` names (`127.0.0.1:PORT`,
/// `[::1]:PORT`, or `localhost:PORT` for 127.0.0.1), or why it is refused:
/// any other address (`0.0.0.0`, a LAN address, a host name) is
/// [`HttpError::NotLoopback`].
pub fn check_loopback(given: &str) -> Result<SocketAddr, HttpError> {
    let given = given.trim();
    let parsed = match given.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p))),
        None => given.parse::<SocketAddr>().ok(),
    };
    match parsed {
        Some(addr) if addr.ip().is_loopback() => Ok(addr),
        Some(_) => Err(HttpError::NotLoopback(given.to_string())),
        // A name that is not `localhost` is no loopback address either.
        None if given
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok()) =>
        {
            Err(HttpError::NotLoopback(given.to_string()))
        }
        None => Err(HttpError::Address(given.to_string())),
    }
}

/// The `Host` values (authorities) a request may name: this listener's.
fn allowed_hosts(port: u16) -> Vec<String> {
    vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ]
}

/// The `Origin` values a request may carry (a request without one, which
/// is what a non-browser client sends, passes).
fn allowed_origins(port: u16) -> Vec<String> {
    allowed_hosts(port)
        .into_iter()
        .map(|h| format!("http://{h}"))
        .collect()
}

/// Whether `req` carries `Authorization: Bearer <token>`; compared in
/// time that does not depend on where the two differ.
fn authorized<B>(req: &Request<B>, token: &str) -> bool {
    let Some(given) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(rest.trim())
        })
    else {
        return false;
    };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

type Body = BoxBody<Bytes, Infallible>;

/// A refusal of the listener's own: a status and a one-line text saying
/// what to do.
fn refusal(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"writegate\""),
        );
    }
    r
}

/// What a request without the token is told.
const NO_TOKEN: &str = "unauthorized: every request needs the header `Authorization: Bearer <token>`, with the token in $XDG_RUNTIME_DIR/writegate/mcp-token (written by `writegate serve --mcp-http`; it changes at each start)";

/// Serves MCP over Streamable HTTP on `listener` (bound to a loopback
/// address) until `stop` is cancelled; then open sessions end.
pub async fn serve_http(
    service: Arc<Service>,
    listener: TcpListener,
    opts: HttpOptions,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let max_body = usize::try_from(service.config().max_frame_bytes).unwrap_or(usize::MAX);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(port))
        .with_allowed_origins(allowed_origins(port))
        .with_max_request_body_bytes(max_body)
        .with_cancellation_token(stop.child_token());
    // Shared by every server the factory makes: a 2026-07-28 call answered
    // `input_required` is retried in a request of its own, so in a server
    // of its own.
    let questions = Arc::default();
    let factory = {
        let service = service.clone();
        let stop = stop.clone();
        let config_file = opts.config_file.clone();
        move || {
            let opts = McpOptions {
                session_id: format!(
                    "mcp-http-{}-{}",
                    std::process::id(),
                    &writegate_core::unpredictable_hex()[..8]
                ),
                config_file: config_file.clone(),
                cwd_workspace: false,
                sandboxed: false,
                approval_queue: true,
            };
            Ok(McpServer::new(
                service.clone(),
                opts,
                Transport::Http,
                stop.clone(),
                None,
                Arc::clone(&questions),
                None,
            ))
        }
    };
    let mcp = StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    let token: Arc<str> = opts.token.into();
    tracing::info!(address = %listener.local_addr()?, endpoint = ENDPOINT, "serving MCP over Streamable HTTP");
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: go on accepting.
                    tracing::warn!(error = %e, "cannot accept an MCP HTTP connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let mcp = mcp.clone();
        let token = token.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let handle = hyper::service::service_fn(move |req: Request<Incoming>| {
                let mut mcp = mcp.clone();
                let token = token.clone();
                async move {
                    if !authorized(&req, &token) {
                        tracing::debug!(%peer, "MCP HTTP request without the token");
                        return Ok::<_, Infallible>(refusal(StatusCode::UNAUTHORIZED, NO_TOKEN));
                    }
                    if req.uri().path() != ENDPOINT {
                        return Ok(refusal(
                            StatusCode::NOT_FOUND,
                            "not_found: MCP is served at /mcp",
                        ));
                    }
                    tower_service::Service::call(&mut mcp, req).await
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handle);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(%peer, error = %e, "MCP HTTP connection ended");
                    }
                }
                () = stop.cancelled() => conn.as_mut().graceful_shutdown(),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_served() {
        for ok in ["127.0.0.1:8080", "[::1]:9", "localhost:7", "127.0.0.2:1"] {
            assert!(check_loopback(ok).unwrap().ip().is_loopback(), "{ok}");
        }
        for refused in [
            "0.0.0.0:8080",
            "192.168.1.2:80",
            "[::]:80",
            "example.com:80",
        ] {
            assert!(
                matches!(check_loopback(refused), Err(HttpError::NotLoopback(_))),
                "{refused}"
            );
        }
        for bad in ["", "8080", "127.0.0.1", "localhost"] {
            assert!(
                matches!(check_loopback(bad), Err(HttpError::Address(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_token_is_compared_whole() {
        let req = |v: &str| {
            Request::builder()
                .header(header::AUTHORIZATION, v)
                .body(())
                .unwrap()
        };
        assert!(authorized(&req("Bearer abc"), "abc"));
        assert!(authorized(&req("bearer abc"), "abc"));
        for wrong in ["Bearer ab", "Bearer abcd", "Basic abc", "abc", "Bearer "] {
            assert!(!authorized(&req(wrong), "abc"), "{wrong}");
        }
        assert!(!authorized(&Request::new(()), "abc"));
    }
}
