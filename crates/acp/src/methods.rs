//! Method table (SPEC 3): params parsed into ACP types (or this crate's
//! structs for the `_writegate/*` extensions), operations run on blocking
//! threads, results and failures turned into JSON-RPC responses.

use crate::conn::{Conn, Transport};
use crate::jsonrpc::{self, INVALID_PARAMS, METHOD_NOT_FOUND};
use agent_client_protocol_schema::v1::{ReadTextFileRequest, RequestId, WriteTextFileRequest};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use writegate_core::policy::Scope;
use writegate_core::{EditParams, Failure, OpCtx, ReadParams, WriteParams};
use writegate_text::EditMode;

/// The extension methods this daemon serves, as listed by `initialize`.
pub const EXTENSION_METHODS: [&str; 4] = [
    "_writegate/edit_text_file",
    "_writegate/read_lines",
    "_writegate/receipt",
    "_writegate/approve",
];

/// `_meta` key naming the workspace of a socket connection in `initialize`.
pub const WORKSPACE_META_KEY: &str = "writegate/workspace";

/// `initialize` (SPEC 2, 3): discovery, and for the first request of a socket
/// connection the choice of workspace by `_meta["writegate/workspace"]`
/// (absolute path or runtime id; unregistered directories are registered
/// only with `allow_dynamic_workspaces`). `_meta.writegate.workspace` is the
/// connection's workspace and `_meta.writegate.workspaces` every registered
/// one (`{id, root, trusted}`, primary first).
pub fn initialize(conn: &Conn, id: &RequestId, params: &Value, first: bool) -> Value {
    let wanted = params
        .get("_meta")
        .and_then(|m| m.get(WORKSPACE_META_KEY))
        .and_then(Value::as_str);
    if let Some(name) = wanted {
        if conn.transport != Transport::Socket || !first {
            return jsonrpc::error(
                id,
                INVALID_PARAMS,
                "invalid params",
                Some(json!(
                    "a workspace can be chosen only by the first request of a socket connection"
                )),
            );
        }
        let service = &conn.shared.service;
        let rt = match service.registry().find(name) {
            Some(rt) => rt,
            None if name.starts_with('/') => {
                match service.register_dynamic(std::path::Path::new(name)) {
                    Ok(rt) => rt,
                    Err(e) => {
                        return jsonrpc::error(
                            id,
                            INVALID_PARAMS,
                            "invalid params",
                            Some(json!(e)),
                        );
                    }
                }
            }
            None => {
                return jsonrpc::error(
                    id,
                    INVALID_PARAMS,
                    "invalid params",
                    Some(json!(format!(
                        "{name} is neither a registered runtime id nor an absolute path"
                    ))),
                );
            }
        };
        conn.set_runtime(rt);
    }
    let rt = conn.runtime();
    let cfg = conn.shared.service.config();
    // Every registered workspace, primary first, so that a client (the CLI)
    // can pick the one containing a path and name it in a new connection.
    let workspaces: Vec<Value> = conn
        .shared
        .service
        .registry()
        .all()
        .iter()
        .map(|w| json!({"id": w.id, "root": w.root, "trusted": w.trusted}))
        .collect();
    jsonrpc::success(
        id,
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {},
            "authMethods": [],
            "_meta": {
                "writegate": {
                    "version": env!("CARGO_PKG_VERSION"),
                    "workspace": {"id": rt.id, "root": rt.root, "trusted": rt.trusted},
                    "workspaces": workspaces,
                    "fs": {"readTextFile": cfg.read_text_file, "writeTextFile": true},
                    "extensionMethods": EXTENSION_METHODS,
                }
            }
        }),
    )
}

/// `_writegate/edit_text_file` params (SPEC 8).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EditWire {
    session_id: String,
    path: PathBuf,
    mode: String,
    content: Option<String>,
    find: Option<String>,
    line: Option<u64>,
    end_line: Option<u64>,
    expected_hash: Option<String>,
    #[serde(default)]
    dry_run: bool,
    #[serde(rename = "_meta")]
    meta: Option<Value>,
}

/// `_writegate/read_lines` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReadLinesWire {
    session_id: String,
    path: PathBuf,
    line: Option<u64>,
    limit: Option<u64>,
}

/// `_writegate/receipt` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReceiptWire {
    session_id: String,
}

/// `_writegate/approve` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApproveWire {
    #[serde(default)]
    session_id: Option<String>,
    pattern: String,
    scope: Scope,
}

/// Why a request was not answered with a result.
enum Unanswered {
    /// `-32601` with the method name in `data`.
    MethodNotFound,
    /// An operation's failure.
    Failed(Failure),
}

impl From<Failure> for Unanswered {
    fn from(f: Failure) -> Self {
        Unanswered::Failed(f)
    }
}

fn parse<T: for<'de> Deserialize<'de>>(params: Value) -> Result<T, Failure> {
    serde_json::from_value(params).map_err(|e| Failure::InvalidParams(e.to_string()))
}

fn absolute(path: &std::path::Path) -> Result<(), Failure> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(Failure::InvalidParams(format!(
            "path must be absolute, got {:?}",
            path.display().to_string()
        )))
    }
}

fn meta_object(meta: Option<Value>) -> Option<Map<String, Value>> {
    match meta {
        Some(Value::Object(m)) => Some(m),
        _ => None,
    }
}

fn edit_mode(s: &str) -> Result<EditMode, Failure> {
    Ok(match s {
        "write" => EditMode::Write,
        "append" => EditMode::Append,
        "replace" => EditMode::Replace,
        "insert" => EditMode::Insert,
        "delete" => EditMode::Delete,
        other => {
            return Err(Failure::InvalidParams(format!(
                "mode must be write, append, replace, insert or delete, got {other:?}"
            )));
        }
    })
}

/// Answers one request (everything but `initialize`). Runs on a blocking
/// thread: the operations do file IO.
pub fn dispatch(
    conn: &Arc<Conn>,
    id: &RequestId,
    method: &str,
    params: Value,
    cancel: Arc<AtomicBool>,
) -> Value {
    let service = conn.shared.service.clone();
    let mut uri = String::new();
    let result: Result<Value, Unanswered> = (|| {
        let ctx = |session: &str| OpCtx {
            runtime: conn.runtime(),
            session_id: Some(session.to_string()),
            // SPEC 4: on for stdio and for same-UID socket peers, the only
            // transports there are; a later transport must pass false.
            external_writes: true,
            cancel: cancel.clone(),
        };
        match method {
            "fs/write_text_file" => {
                let p: WriteTextFileRequest = parse(params)?;
                uri = p.path.display().to_string();
                absolute(&p.path)?;
                let ctx = ctx(&p.session_id.0);
                let wp = WriteParams {
                    path: p.path,
                    content: p.content,
                    meta: p.meta,
                };
                Ok(run(&cancel, || service.write_text_file(&ctx, &wp))?)
            }
            "_writegate/edit_text_file" => {
                let p: EditWire = parse(params)?;
                uri = p.path.display().to_string();
                absolute(&p.path)?;
                let mode = edit_mode(&p.mode)?;
                let content = match (mode, p.content) {
                    (EditMode::Delete, c) => c.unwrap_or_default(),
                    (_, Some(c)) => c,
                    (_, None) => {
                        return Err(Failure::InvalidParams(format!(
                            "mode {} needs content",
                            p.mode
                        ))
                        .into());
                    }
                };
                // Bad combinations are invalid params, before routing: no
                // audit event, no lock, no approval spent.
                writegate_text::validate(&writegate_text::EditRequest {
                    mode,
                    content: &content,
                    find: p.find.as_deref(),
                    line: p.line,
                    end_line: p.end_line,
                    display_path: "",
                    want_diff: false,
                })
                .map_err(|e| Failure::InvalidParams(e.hint()))?;
                let ctx = ctx(&p.session_id);
                let ep = EditParams {
                    path: p.path,
                    mode,
                    content,
                    find: p.find,
                    line: p.line,
                    end_line: p.end_line,
                    expected_hash: p.expected_hash,
                    dry_run: p.dry_run,
                    meta: meta_object(p.meta),
                };
                Ok(run(&cancel, || service.edit_text_file(&ctx, &ep))?)
            }
            "fs/read_text_file" => {
                if !service.config().read_text_file {
                    return Err(Unanswered::MethodNotFound);
                }
                let p: ReadTextFileRequest = parse(params)?;
                uri = p.path.display().to_string();
                absolute(&p.path)?;
                let ctx = ctx(&p.session_id.0);
                let rp = ReadParams {
                    path: p.path,
                    line: p.line.map(u64::from),
                    limit: p.limit.map(u64::from),
                };
                Ok(run(&cancel, || service.read_text_file(&ctx, &rp))?)
            }
            "_writegate/read_lines" => {
                let p: ReadLinesWire = parse(params)?;
                uri = p.path.display().to_string();
                absolute(&p.path)?;
                let ctx = ctx(&p.session_id);
                let rp = ReadParams {
                    path: p.path,
                    line: p.line,
                    limit: p.limit,
                };
                Ok(run(&cancel, || service.read_lines(&ctx, &rp))?)
            }
            "_writegate/receipt" => {
                let p: ReceiptWire = parse(params)?;
                Ok(run(&cancel, || Ok(service.receipt(&p.session_id)))?)
            }
            "_writegate/approve" => {
                let p: ApproveWire = parse(params)?;
                let ctx = ctx(p.session_id.as_deref().unwrap_or(""));
                // A cancelled approve stores nothing (-32800).
                Ok(run(&cancel, || service.approve(&ctx, &p.pattern, p.scope))?)
            }
            _ => Err(Unanswered::MethodNotFound),
        }
    })();
    match result {
        Ok(v) => jsonrpc::success(id, v),
        Err(Unanswered::MethodNotFound) => jsonrpc::error(
            id,
            METHOD_NOT_FOUND,
            "method not found",
            Some(json!(method)),
        ),
        Err(Unanswered::Failed(f)) => jsonrpc::failure(id, &f, &uri),
    }
}

/// The answer to a request whose handling panicked: `internal_error`,
/// nothing written (the publisher's temp guard has removed its temp file
/// while unwinding).
pub fn internal_error(id: &RequestId) -> Value {
    jsonrpc::failure(
        id,
        &writegate_core::Refusal::new(
            writegate_core::ErrorKind::InternalError,
            "the request failed unexpectedly; nothing was written",
        )
        .into(),
        "",
    )
}

/// Runs an operation unless it was cancelled before it began (then
/// `-32800`, and no audit event: it never reached routing). A panic in the
/// operation becomes `internal_error`, so the request is still answered
/// once; the publisher has removed its temp file on unwinding.
fn run<F>(cancel: &AtomicBool, op: F) -> Result<Value, Failure>
where
    F: FnOnce() -> Result<Value, Failure>,
{
    if cancel.load(Ordering::SeqCst) {
        return Err(Failure::Cancelled);
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(op)) {
        Ok(r) => r,
        Err(_) => {
            tracing::error!("operation panicked");
            Err(writegate_core::Refusal::new(
                writegate_core::ErrorKind::InternalError,
                "the operation failed unexpectedly; nothing was written",
            )
            .into())
        }
    }
}
