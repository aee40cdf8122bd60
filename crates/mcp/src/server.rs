//! The MCP server: the `rmcp` handler that answers `tools/list` and
//! `tools/call`, follows the client's roots, and runs each tool call as one
//! core operation on a blocking thread; and [`run`], which serves it on
//! stdin/stdout until the client goes away or a signal arrives.

use crate::ALLOWANCES;
use crate::approver::{self, ElicitApprover};
use crate::reply::{self, Situation};
use crate::roots::{Picked, Workspaces};
use crate::tools::{self, EDIT_FILE, EditArgs, Facts, READ_FILE, ReadArgs, WRITE_FILE, WriteArgs};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion, RequestId,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, ServerInitializeError};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::runtime::Handle;
use writegate_core::{
    Approver, EditMode, EditParams, ErrorKind, Failure, OpCtx, ReadParams, Refusal, Service,
    WriteOptions, WriteParams, validate_edit,
};

/// How `writegate mcp` runs.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// The session every tool call of this connection runs in (audit
    /// events, receipts, "allow for this session"). Default `mcp-<pid>`.
    pub session_id: String,
    /// The config file, named in how-to-approve messages (`None`: "the
    /// writegate config").
    pub config_file: Option<PathBuf>,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            session_id: format!("mcp-{}", std::process::id()),
            config_file: None,
        }
    }
}

/// Why `writegate mcp` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The async runtime could not be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The MCP `initialize` handshake did not complete: the client sent
    /// something else first, or answering it failed (a client that went
    /// away before it is no error: [`run`] returns `Ok`).
    #[error("MCP initialization failed: {0}")]
    Initialize(String),
}

/// Serves MCP on stdin/stdout with `service` until stdin closes (before or
/// after the `initialize` handshake: `Ok` either way) or SIGTERM, SIGINT or
/// SIGHUP arrives; then gives operations still running up to
/// `shutdown_grace_ms` to finish (each writes its file and audit event or
/// nothing). Logs go to stderr through `tracing`; stdout carries only MCP
/// messages.
pub fn run(service: Arc<Service>, opts: McpOptions) -> Result<(), RunError> {
    let grace = Duration::from_millis(service.config().shutdown_grace_ms);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .thread_name("writegate-mcp")
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let result = runtime.block_on(serve(service, opts));
    // Blocking threads still running a write finish it (or the grace ends).
    runtime.shutdown_timeout(grace);
    result
}

async fn serve(service: Arc<Service>, opts: McpOptions) -> Result<(), RunError> {
    let max_line = usize::try_from(service.config().max_frame_bytes).unwrap_or(usize::MAX);
    let grace = Duration::from_millis(service.config().shutdown_grace_ms);
    let transport = crate::transport::Stdio::new(max_line, grace);
    let server = McpServer::new(service, opts);
    let running = match server.serve(transport).await {
        Ok(running) => running,
        Err(e) if client_went_away(&e) => {
            tracing::info!(reason = %e, "the client went away before initialize completed");
            return Ok(());
        }
        Err(e) => return Err(RunError::Initialize(e.to_string())),
    };
    let stop = running.cancellation_token();
    let signals = tokio::spawn(async move {
        let why = stop_signal().await;
        tracing::info!("{why}: stopping");
        stop.cancel();
    });
    let reason = running.waiting().await;
    signals.abort();
    tracing::info!(?reason, "MCP connection closed");
    Ok(())
}

/// Whether the handshake failed only because the client went away: stdin
/// ended before `initialize` arrived, or stdout was closed under the answer.
/// That is how a client stops a server it no longer needs, before the
/// handshake as after it (`--help`: status 0 when the client closed stdin),
/// not a failure to start.
fn client_went_away(e: &ServerInitializeError) -> bool {
    match e {
        ServerInitializeError::ConnectionClosed(_) => true,
        ServerInitializeError::TransportError { error, .. } => error
            .error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe),
        _ => false,
    }
}

/// Waits for SIGTERM, SIGINT or SIGHUP (forever if they cannot be watched).
async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::warn!("cannot watch signals; stopping only when stdin closes");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}

/// The handler of one MCP connection (one per process).
struct McpServer {
    service: Arc<Service>,
    workspaces: Workspaces,
    opts: McpOptions,
    /// The cancel flag of each tool call whose operation is running, by
    /// request id: `notifications/cancelled` sets it. Shutdown does not: an
    /// operation that started finishes (or the grace period ends); a call
    /// whose operation has not started when the signal comes is cancelled
    /// (`rmcp` cancels its token, see [`McpServer::run`]).
    running: Mutex<HashMap<RequestId, Arc<AtomicBool>>>,
}

/// One tool call, ready to run.
struct Call {
    /// The path as the core gets it (absolute).
    path: PathBuf,
    ctx: OpCtx,
    client_root: bool,
}

impl McpServer {
    fn new(service: Arc<Service>, opts: McpOptions) -> McpServer {
        McpServer {
            workspaces: Workspaces::new(service.clone()),
            service,
            opts,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// The arguments of `tool`, or an error result saying what is wrong.
    fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, Box<CallToolResult>> {
        serde_path_to_error::deserialize(args).map_err(|e| {
            let at = e.path().to_string();
            let why = e.into_inner();
            let why = if at == "." {
                why.to_string()
            } else {
                format!("{at}: {why}")
            };
            Box::new(reply::invalid_arguments(tool, &why))
        })
    }

    /// The workspace and context of a call on `raw`: an absolute path, or
    /// one relative to the primary workspace root.
    async fn prepare(
        &self,
        raw: &str,
        cx: &RequestContext<RoleServer>,
        route: &'static str,
        tool: &str,
    ) -> Result<Call, Box<CallToolResult>> {
        self.workspaces.ready(&cx.peer).await;
        if raw.is_empty() {
            return Err(Box::new(reply::invalid_arguments(tool, "path is empty")));
        }
        let given = Path::new(raw);
        let primary = self.workspaces.all().into_iter().next();
        let path = match (&primary, given.is_absolute()) {
            (Some(p), false) => p.root.join(given),
            (_, true) | (None, false) => given.to_path_buf(),
        };
        let Some(Picked {
            runtime,
            client_root,
        }) = self.workspaces.pick(&path)
        else {
            return Err(Box::new(reply::error(
                "no_workspace: writegate has no workspace to work in: it was started without --workspace and the client shared no roots it may use. Nothing was done; tell the user to add --workspace <project directory> to the writegate mcp command.".to_string(),
                serde_json::Map::from_iter([("errorKind".to_string(), Value::from("no_workspace"))]),
            )));
        };
        let approver: Option<Arc<dyn Approver>> = if approver::can_ask(&cx.peer) {
            Some(Arc::new(ElicitApprover {
                peer: cx.peer.clone(),
                handle: Handle::current(),
                cancel: cx.ct.clone(),
            }))
        } else {
            None
        };
        Ok(Call {
            path,
            ctx: OpCtx {
                runtime,
                session_id: Some(self.opts.session_id.clone()),
                allows: ALLOWANCES,
                route,
                cancel: Arc::new(AtomicBool::new(false)),
                approver,
                client_root,
            },
            client_root,
        })
    }

    /// Runs `op` on a blocking thread. A `notifications/cancelled` for the
    /// call sets the operation's cancel flag (it stops before it begins to
    /// commit), and so does a call's token cancelled before the operation
    /// starts (a shutdown signal, or the end of input); nothing stops a
    /// running operation otherwise.
    async fn run<T: Send + 'static>(
        &self,
        call: &Call,
        cx: &RequestContext<RoleServer>,
        op: impl FnOnce(&Service, &OpCtx) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Failure> {
        let service = self.service.clone();
        let ctx = call.ctx.clone();
        self.running_calls()
            .insert(cx.id.clone(), call.ctx.cancel.clone());
        if cx.ct.is_cancelled() {
            // Cancelled before it got here (while waiting for the roots).
            call.ctx.cancel.store(true, Ordering::SeqCst);
        }
        let joined = tokio::task::spawn_blocking(move || op(&service, &ctx)).await;
        self.running_calls().remove(&cx.id);
        joined.unwrap_or_else(|e| {
            tracing::error!(error = %e, "a tool call's operation panicked");
            Err(Refusal::new(
                ErrorKind::InternalError,
                "the operation failed inside writegate (see its log); read the file again before retrying",
            )
            .into())
        })
    }

    fn running_calls(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Arc<AtomicBool>>> {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A failure as an error result, with what the text may mention.
    fn failure(&self, f: &Failure, call: &Call) -> CallToolResult {
        let cfg = self.service.config();
        reply::failure(
            f,
            &Situation {
                roots: &self.workspaces.roots(),
                client_root: call.client_root,
                auto_approve: cfg.policy.auto_approve.as_str(),
                config_file: self.opts.config_file.as_deref(),
                asked: call.ctx.approver.is_some(),
            },
        )
    }

    async fn read_file(&self, args: Value, cx: &RequestContext<RoleServer>) -> CallToolResult {
        let a: ReadArgs = match Self::parse(READ_FILE, args) {
            Ok(a) => a,
            Err(r) => return *r,
        };
        if !ALLOWANCES.reads {
            return reply::invalid_arguments(READ_FILE, "reads are not served");
        }
        let call = match self.prepare(&a.path, cx, "mcp read_file", READ_FILE).await {
            Ok(c) => c,
            Err(r) => return *r,
        };
        let params = ReadParams {
            path: call.path.clone(),
            line: a.line,
            limit: a.limit,
        };
        match self
            .run(&call, cx, move |s, ctx| s.read_lines(ctx, &params))
            .await
        {
            Ok(r) => reply::read(&call.path, r),
            Err(f) => self.failure(&f, &call),
        }
    }

    async fn write_file(&self, args: Value, cx: &RequestContext<RoleServer>) -> CallToolResult {
        let a: WriteArgs = match Self::parse(WRITE_FILE, args) {
            Ok(a) => a,
            Err(r) => return *r,
        };
        let call = match self
            .prepare(&a.path, cx, "mcp write_file", WRITE_FILE)
            .await
        {
            Ok(c) => c,
            Err(r) => return *r,
        };
        let params = WriteParams {
            path: call.path.clone(),
            content: a.content,
            options: WriteOptions::default(),
            marker: None,
            convert_encoding: false,
        };
        match self
            .run(&call, cx, move |s, ctx| s.write_text_file(ctx, &params))
            .await
        {
            Ok(w) => reply::wrote(&call.path, w),
            Err(f) => self.failure(&f, &call),
        }
    }

    async fn edit_file(&self, args: Value, cx: &RequestContext<RoleServer>) -> CallToolResult {
        let a: EditArgs = match Self::parse(EDIT_FILE, args) {
            Ok(a) => a,
            Err(r) => return *r,
        };
        let mode = a.mode.unwrap_or(EditMode::Replace);
        // Bad combinations are refused before any IO, unaudited.
        if let Err(Failure::InvalidParams(why)) = validate_edit(
            mode,
            a.content.as_deref(),
            a.find.as_deref(),
            a.line,
            a.end_line,
        ) {
            return reply::invalid_arguments(EDIT_FILE, why.trim_end_matches('.'));
        }
        let call = match self.prepare(&a.path, cx, "mcp edit_file", EDIT_FILE).await {
            Ok(c) => c,
            Err(r) => return *r,
        };
        let params = EditParams {
            path: call.path.clone(),
            mode,
            content: a.content,
            find: a.find,
            line: a.line,
            end_line: a.end_line,
            expected_hash: a.expected_hash,
            dry_run: a.dry_run.unwrap_or(false),
            options: WriteOptions::default(),
            marker: None,
            convert_encoding: false,
        };
        match self
            .run(&call, cx, move |s, ctx| s.edit_text_file(ctx, &params))
            .await
        {
            Ok(r) => reply::edited(r),
            Err(f) => self.failure(&f, &call),
        }
    }
}

/// What the server tells the client about itself in `initialize`.
const INSTRUCTIONS: &str = "writegate reads, writes and edits text files inside the user's workspaces. Every write is atomic and durable and keeps the file's encoding and line endings; sensitive paths (credentials, .git, shell start-up files) need the user's approval. To change part of a file, read_file it first (line numbers and hash), then edit_file; use write_file for new files or complete rewrites.";

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("writegate", env!("CARGO_PKG_VERSION")).with_title("writegate"),
            )
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
            .with_instructions(INSTRUCTIONS)
    }

    /// Up to 2025-11-25: the versions with an `initialize` handshake, where
    /// the server may ask the client (roots, elicitation).
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cfg = self.service.config();
        let roots = self.workspaces.roots();
        Ok(ListToolsResult::with_all_items(tools::list(&Facts {
            max_edit_bytes: cfg.max_edit_bytes,
            max_write_bytes: cfg.max_write_bytes,
            roots: &roots,
        })))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match request.name.as_ref() {
            READ_FILE => self.read_file(args, &context).await,
            WRITE_FILE => self.write_file(args, &context).await,
            EDIT_FILE => self.edit_file(args, &context).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool {other:?}: the tools are read_file, write_file and edit_file"
                    ),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Some(id) = notification.request_id
            && let Some(flag) = self.running_calls().get(&id)
        {
            flag.store(true, Ordering::SeqCst);
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.workspaces.ready(&context.peer).await;
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.workspaces.ready(&context.peer).await;
        self.workspaces.sync(&context.peer).await;
    }
}
