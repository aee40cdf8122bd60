//! The MCP server: the `rmcp` handler that answers `tools/list` and
//! `tools/call`, follows the client's roots, and runs each tool call as one
//! core operation on a blocking thread; and [`run`], which serves it on
//! stdin/stdout until the client goes away or a signal arrives.

use crate::approver::{self, ElicitApprover, QueueApprover};
use crate::input::{self, Answered, Questions};
use crate::out::{Answer, Pending, Writer};
use crate::reply::{self, Situation};
use crate::roots::{Picked, Workspaces};
use crate::tools::{self, Entry, Facts, Parsed};
use crate::transport::Transport;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion, RequestId,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, ServerInitializeError};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use writegate_core::{Approver, Failure, OpCtx, Service};

/// How `writegate mcp` runs.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// The session every tool call of this connection runs in (audit
    /// events, receipts, "allow for this session"). Default `mcp-<pid>-<8 random hex digits>`.
    pub session_id: String,
    /// The config file, named in how-to-approve messages (`None`: "the
    /// writegate config").
    pub config_file: Option<PathBuf>,
    /// `--cwd-workspace`: when the connection has no workspace otherwise
    /// (no `--workspace`, no `[[workspace]]`, no client roots), the
    /// directory writegate was started in is one, with the trust of client
    /// roots; not `/`, the home directory or above it.
    pub cwd_workspace: bool,
    /// The client runs inside a `writegate run` sandbox (`writegate run`
    /// serves it): it is never asked about a held call (the client is the
    /// agent whose call is held, and could answer for the person), and the
    /// instructions and tool descriptions say that files change only
    /// through these tools.
    pub sandboxed: bool,
    /// A held call whose client cannot be asked waits for the person's
    /// answer in the service's approval queue (`writegate pending`,
    /// `writegate answer`) instead of being refused: the daemon's
    /// connections, where the person can reach the queue.
    pub approval_queue: bool,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            // The pid alone is reused: a later process would reach the
            // session's history (the `undo` tool takes back only its own
            // session's operations).
            session_id: format!(
                "mcp-{}-{}",
                std::process::id(),
                &writegate_core::unpredictable_hex()[..8]
            ),
            config_file: None,
            cwd_workspace: false,
            sandboxed: false,
            approval_queue: false,
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
        // One worker: a small call runs where it was read, and rmcp's
        // per-request tasks wake no other worker (no thread hand-off per
        // call); larger calls run on blocking threads.
        .worker_threads(1)
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
    let input_ended = CancellationToken::new();
    let transport = crate::transport::Stdio::new(max_line, grace, input_ended.clone());
    let pending = transport.pending();
    let cwd = opts.cwd_workspace.then(|| {
        let dir = std::env::current_dir()
            .map_err(|e| format!("the directory it was started in cannot be read: {e}"))?;
        cwd_workspace(&dir)
    });
    let server = McpServer::new(
        service,
        opts,
        Transport::Stdio,
        input_ended,
        Some(pending),
        Arc::default(),
        cwd,
    );
    // The stop signals are watched from the start: a Ctrl-C before the
    // handshake ends the server as cleanly as one after it.
    let stopping = CancellationToken::new();
    let signals = tokio::spawn({
        let stopping = stopping.clone();
        async move {
            let why = writegate_stdio::run::stop_signal().await;
            tracing::info!("{why}: stopping");
            stopping.cancel();
        }
    });
    let handshake = tokio::select! {
        r = server.serve(transport) => r,
        () = stopping.cancelled() => {
            tracing::info!(reason = "stopped", "MCP connection closed before initialize completed");
            return Ok(());
        }
    };
    let running = match handshake {
        Ok(running) => running,
        Err(e) if client_went_away(&e) => {
            signals.abort();
            tracing::info!(reason = %e, "the client went away before initialize completed");
            return Ok(());
        }
        Err(e) => return Err(RunError::Initialize(e.to_string())),
    };
    let stop = running.cancellation_token();
    let forward = tokio::spawn(async move {
        stopping.cancelled().await;
        stop.cancel();
    });
    let reason = match running.waiting().await {
        Ok(rmcp::service::QuitReason::Cancelled) => "stopped".to_string(),
        Ok(rmcp::service::QuitReason::Closed) => "the client closed it".to_string(),
        Ok(rmcp::service::QuitReason::JoinError(e)) | Err(e) => e.to_string(),
        Ok(_) => "unknown".to_string(),
    };
    signals.abort();
    forward.abort();
    tracing::info!(reason = %reason, "MCP connection closed");
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

/// `dir` as a `--cwd-workspace` directory: the checks of
/// `roots::cwd_workspace` against the home directory. A refusal is logged.
pub(crate) fn cwd_workspace(dir: &Path) -> Result<PathBuf, String> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let checked = crate::roots::cwd_workspace(dir, home.as_deref());
    if let Err(why) = &checked {
        tracing::warn!("--cwd-workspace: {why}; a client that shares no roots gets no workspace");
    }
    checked
}

/// The handler of one MCP connection: one per process over stdio, one per
/// accepted connection on the daemon's socket, one per Streamable HTTP
/// session (and per stateless 2026-07-28 request) over HTTP.
pub(crate) struct McpServer {
    service: Arc<Service>,
    workspaces: Workspaces,
    opts: McpOptions,
    /// The cancel flag of each tool call whose operation is running, by
    /// request id: `notifications/cancelled` sets it. Shutdown does not: an
    /// operation that started finishes (or the grace period ends); a call
    /// whose operation has not started when the signal comes is cancelled
    /// (`rmcp` cancels its token, see [`McpServer::run`]).
    running: writegate_stdio::run::InFlight<RequestId>,
    /// The approval questions asked with `input_required` (2026-07-28):
    /// the connection's over stdio; over HTTP the listener's, since each
    /// stateless request (and so the retry that carries the answer) gets a
    /// server of its own.
    questions: Arc<Questions>,
    /// The transport it came over: what its calls may do.
    transport: Transport,
    /// Cancelled by the transport when stdin ends: a 2025 elicitation
    /// question still open can get no answer any more.
    input_ended: CancellationToken,
    /// The connection's prebuilt answers, sent only by its `out::Out`;
    /// `None` when no `Out` of its own writes the answers (Streamable HTTP:
    /// `rmcp`'s service serialises them), and its calls are run for
    /// `out::Writer::Rmcp`: a read is answered with the typed result.
    pending: Option<Pending>,
}

/// How the client of one request can be asked about a held call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asking {
    /// 2025-11-25 and earlier, with form elicitation: an
    /// `elicitation/create` request while the operation waits.
    Elicitation,
    /// 2026-07-28 with form elicitation in the request's capabilities: the
    /// call is answered `input_required` and retried with the answer.
    InputRequired,
    /// No way to ask: the refusal says what the person can do.
    No,
}

impl Asking {
    fn of(cx: &RequestContext<RoleServer>) -> Asking {
        let modern = cx.protocol_version().is_some_and(|v| !v.has_initialize());
        if !modern {
            return if approver::can_ask(&cx.peer) {
                Asking::Elicitation
            } else {
                Asking::No
            };
        }
        let form = cx
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        if form {
            Asking::InputRequired
        } else {
            Asking::No
        }
    }
}

/// One tool call, ready to run.
struct Call {
    /// The path as the core gets it (absolute).
    path: PathBuf,
    ctx: OpCtx,
    client_root: bool,
    /// The person could be asked.
    asked: bool,
}

impl McpServer {
    /// The handler of one connection over `transport`; `cwd`: the
    /// `--cwd-workspace` directory, checked ([`cwd_workspace`]), or `None`
    /// without the flag.
    pub(crate) fn new(
        service: Arc<Service>,
        opts: McpOptions,
        transport: Transport,
        input_ended: CancellationToken,
        pending: Option<Pending>,
        questions: Arc<Questions>,
        cwd: Option<Result<PathBuf, String>>,
    ) -> McpServer {
        McpServer {
            workspaces: match transport {
                Transport::Socket => Workspaces::new(service.clone(), cwd).cwd_first(),
                Transport::Stdio | Transport::Http => Workspaces::new(service.clone(), cwd),
            },
            service,
            opts,
            running: writegate_stdio::run::InFlight::default(),
            questions,
            transport,
            input_ended,
            pending,
        }
    }

    /// The workspace and context of a call on `raw`: an absolute path, or
    /// one relative to the primary workspace root; `None` (a tool that
    /// names no path) is the primary workspace root.
    async fn prepare(
        &self,
        raw: Option<&str>,
        cx: &RequestContext<RoleServer>,
        tool: &Entry,
        asking: Asking,
        answered: Option<Answered>,
    ) -> Result<Call, Box<CallToolResult>> {
        self.workspaces.ready(&cx.peer).await;
        if raw == Some("") {
            return Err(Box::new(reply::invalid_arguments(
                tool.name,
                "path is empty",
            )));
        }
        let primary = self.workspaces.all().into_iter().next();
        let path = match (raw.map(Path::new), &primary) {
            (Some(given), _) if given.is_absolute() => given.to_path_buf(),
            (Some(given), Some(p)) => p.root.join(given),
            (Some(given), None) => given.to_path_buf(),
            (None, Some(p)) => p.root.clone(),
            (None, None) => PathBuf::new(),
        };
        let Some(Picked {
            runtime,
            client_root,
        }) = self.workspaces.pick(&path)
        else {
            let text = match self.workspaces.why_no_cwd() {
                Some(why) => format!(
                    "no_workspace: writegate has no workspace to work in: the client shared no roots, and {why}. Nothing was done; tell the user to start the agent in a project directory, or to add --workspace <project directory> to the writegate mcp command."
                ),
                None => "no_workspace: writegate has no workspace to work in: it was started without --workspace and the client shared no roots it may use. Nothing was done; tell the user to run `writegate setup` for this agent again (its entry starts writegate with --cwd-workspace, so the project the agent runs in is the workspace), or to add --workspace <project directory> to the writegate mcp command.".to_string(),
            };
            return Err(Box::new(reply::error(
                text,
                serde_json::Map::from_iter([(
                    "errorKind".to_string(),
                    Value::from("no_workspace"),
                )]),
            )));
        };
        let approver: Option<Arc<dyn Approver>> = match asking {
            Asking::Elicitation => Some(Arc::new(ElicitApprover {
                peer: cx.peer.clone(),
                handle: Handle::current(),
                cancel: cx.ct.clone(),
                input_ended: self.input_ended.clone(),
                timeout: self.service.config().approval_timeout(),
            })),
            Asking::No if self.opts.approval_queue => Some(Arc::new(QueueApprover {
                service: self.service.clone(),
                asker: writegate_core::queue::Asker {
                    agent: cx.peer.peer_info().map(|i| i.client_info.name.clone()),
                    session: Some(self.opts.session_id.clone()),
                },
                cancel: cx.ct.clone(),
                input_ended: self.input_ended.clone(),
                timeout: self.service.config().approval_timeout(),
            })),
            Asking::InputRequired | Asking::No => {
                answered.map(|a| Arc::new(a) as Arc<dyn Approver>)
            }
        };
        Ok(Call {
            path,
            ctx: OpCtx {
                runtime,
                session_id: Some(self.opts.session_id.clone()),
                allows: self.transport.allowances(),
                route: tool.route,
                cancel: Arc::new(AtomicBool::new(false)),
                approver,
                client_root,
            },
            client_root,
            asked: asking != Asking::No || self.opts.approval_queue,
        })
    }

    /// Runs `op`: on the runtime worker that read the call when it is
    /// small and no other call is running (no thread hand-off: a worker's
    /// work, as ACP's small requests), else on a blocking thread. A
    /// `notifications/cancelled` for the call sets the operation's cancel
    /// flag (it stops before it begins to commit), and so does a call's
    /// token cancelled before the operation starts (a shutdown signal, or
    /// the end of input); nothing stops a running operation otherwise. A
    /// question to the person from the worker (2025 elicitation) hands the
    /// worker's other tasks to another thread while it waits
    /// (`approver::ElicitApprover`).
    async fn run(
        &self,
        call: &Call,
        cx: &RequestContext<RoleServer>,
        parsed: Parsed,
    ) -> Result<Answer, Failure> {
        let alone = self.running.begin(&cx.id, call.ctx.cancel.clone());
        let inline = parsed.content_len <= writegate_stdio::run::INLINE_MAX && alone;
        if cx.ct.is_cancelled() {
            // Cancelled before it got here (while waiting for the roots).
            call.ctx.cancel.store(true, Ordering::SeqCst);
        }
        let op = parsed.op;
        let tool = call.ctx.route;
        // Only the connection's own writer sends a prebuilt answer.
        let writer = if self.pending.is_some() {
            Writer::Own
        } else {
            Writer::Rmcp
        };
        let result = if inline {
            writegate_core::guarded(tool, || op(&self.service, &call.ctx, &call.path, writer))
        } else {
            let service = self.service.clone();
            let ctx = call.ctx.clone();
            let path = call.path.clone();
            tokio::task::spawn_blocking(move || {
                writegate_core::guarded(tool, || op(&service, &ctx, &path, writer))
            })
            .await
            .unwrap_or_else(|e| {
                // Not started before the runtime stopped.
                tracing::error!(error = %e, call = tool, "a tool call's thread ended without an answer");
                Err(Failure::internal())
            })
        };
        self.running.end(&cx.id);
        result.and_then(|r| r)
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
                asked: call.asked,
            },
        )
    }
}

/// The newest protocol version served.
const NEWEST: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// What the server tells the client about itself in `initialize`.
const INSTRUCTIONS: &str = "writegate reads, writes and edits text files inside the user's workspaces. Every write is atomic and durable and keeps the file's encoding and line endings; sensitive paths (credentials, .git, shell start-up files) need the user's approval. To change part of a file, read_file it first (line numbers and hash), then edit_file; use write_file for new files or complete rewrites.";

/// What a sandboxed client is told besides `INSTRUCTIONS`, and what the
/// descriptions of the tools that change files end with.
pub const SANDBOX_NOTE: &str = "You run in a writegate sandbox: files in the workspace change only through writegate's write_file and edit_file tools. A direct write (a shell redirection, sed -i, mv, rm, an editor, another tool's patch) fails with \"Permission denied\"; do not retry it, use these tools instead.";

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("writegate", env!("CARGO_PKG_VERSION")).with_title("writegate"),
            )
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
            .with_instructions(if self.opts.sandboxed {
                format!("{INSTRUCTIONS} {SANDBOX_NOTE}")
            } else {
                INSTRUCTIONS.to_string()
            })
    }

    /// 2024-11-05 to 2025-11-25 over `initialize` (roots and elicitation
    /// are requests to the client), and 2026-07-28 without it
    /// (`server/discover`, per-request `_meta`, `input_required`).
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&NEWEST))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cfg = self.service.config();
        let roots = self.workspaces.roots();
        let mut list = tools::list(
            &Facts {
                max_edit_bytes: cfg.max_edit_bytes,
                max_write_bytes: cfg.max_write_bytes,
                roots: &roots,
            },
            &cfg.mcp,
        );
        if self.opts.sandboxed {
            for tool in &mut list {
                if matches!(&*tool.name, "write_file" | "edit_file")
                    && let Some(d) = &mut tool.description
                {
                    *d = format!("{d} {SANDBOX_NOTE}").into();
                }
            }
        }
        Ok(ListToolsResult::with_all_items(list))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // A tool the config leaves out is answered as an unknown one.
        let cfg = self.service.config();
        let Some(tool) = tools::find(&request.name, &cfg.mcp) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}: the tools are {}",
                    request.name,
                    tools::names(&cfg.mcp)
                ),
                None,
            ));
        };
        let parsed = match tool.parse(request.arguments.unwrap_or_default()) {
            Ok(p) => p,
            Err(r) => return Ok((*r).into()),
        };
        // A sandboxed client is the agent itself: never asked. Nor is an
        // HTTP client: any local process that can read the token file (an
        // agent inside a `writegate run` sandbox among them, whose peer
        // cannot be told over TCP) could answer its own question; a held
        // call waits in the daemon's approval queue for the person
        // (`writegate pending`, `writegate answer`) instead.
        let asking = if self.opts.sandboxed || self.transport == Transport::Http {
            Asking::No
        } else {
            Asking::of(&context)
        };
        // A retry of a call answered `input_required`: the person's answer.
        let answered = self.questions.redeem(
            tool.name,
            request.request_state.as_deref(),
            request.input_responses.as_ref(),
        );
        let call = match self
            .prepare(parsed.path.as_deref(), &context, tool, asking, answered)
            .await
        {
            Ok(c) => c,
            Err(r) => return Ok((*r).into()),
        };
        match self.run(&call, &context, parsed).await {
            Ok(Answer::Typed(r)) => Ok(r.into()),
            Ok(Answer::Prebuilt(p)) => {
                let Some(pending) = &self.pending else {
                    // Never: a tool answers `Writer::Rmcp` typed.
                    tracing::error!(
                        call = tool.name,
                        "a prebuilt answer without a writer of its own"
                    );
                    return Ok(self.failure(&Failure::internal(), &call).into());
                };
                let placeholder = pending.hold(context.id.clone(), p);
                if context.ct.is_cancelled() {
                    // `rmcp` drops a cancelled call's answer unsent (a
                    // cancel that comes after this check is
                    // `on_cancelled`'s to discard).
                    pending.discard(&context.id);
                }
                Ok(placeholder.into())
            }
            Err(f) => {
                if asking == Asking::InputRequired
                    && let Some(q) = input::held_question(&f)
                {
                    return Ok(self.questions.ask(tool.name, &q).into());
                }
                Ok(self.failure(&f, &call).into())
            }
        }
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        if let Some(id) = notification.request_id {
            self.running.cancel(&id);
            if let Some(pending) = &self.pending {
                pending.discard(&id);
            }
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
