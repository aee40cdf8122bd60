//! `initialize` (SPEC 2, 3): discovery, and for the first request of a
//! connection whose transport may choose its workspace, the choice by
//! `_meta["writegate/workspace"]` (absolute path or runtime id;
//! unregistered directories are registered only with
//! `allow_dynamic_workspaces`). Answered on the reader (no file IO).
//! `_meta.writegate.workspace` is the connection's workspace and
//! `_meta.writegate.workspaces` every registered one (`{id, root,
//! trusted}`, primary first), so a client (the CLI) can pick the one that
//! contains a path and name it in a new connection.

use super::{Call, Method, MethodError, extension_methods, serves};
use crate::message::ErrorObject;
use crate::wire::WORKSPACE_META_KEY;
use serde_json::{Value, json};

/// The method.
pub(crate) struct Initialize;

impl Method for Initialize {
    const NAME: &'static str = "initialize";
    const INLINE: bool = true;
    type Params = Value;
    type Result = Value;

    fn handle(call: &Call<'_>, params: Value) -> Result<Value, MethodError> {
        let conn = call.conn;
        let wanted = params
            .get("_meta")
            .and_then(|m| m.get(WORKSPACE_META_KEY))
            .and_then(Value::as_str);
        if let Some(name) = wanted {
            if !conn.transport.allowances().choose_workspace || !call.first {
                return Err(MethodError::Protocol(ErrorObject::invalid_params(
                    "a workspace can be chosen only by the first request of a socket connection",
                )));
            }
            let service = &conn.service;
            let rt = match service.registry().find(name) {
                Some(rt) => rt,
                None if name.starts_with('/') => service
                    .register_dynamic(std::path::Path::new(name))
                    .map_err(|e| {
                        MethodError::Protocol(ErrorObject::invalid_params(e.to_string()))
                    })?,
                None => {
                    return Err(MethodError::Protocol(ErrorObject::invalid_params(format!(
                        "{name} is neither a registered runtime id nor an absolute path"
                    ))));
                }
            };
            conn.set_runtime(rt);
        }
        let rt = conn.runtime();
        let cfg = conn.service.config();
        let reads = cfg.read_text_file && conn.transport.allowances().reads;
        let workspaces: Vec<Value> = conn
            .service
            .registry()
            .all()
            .iter()
            .map(|w| json!({"id": w.id, "root": w.root, "trusted": w.trusted}))
            .collect();
        Ok(json!({
            "protocolVersion": 1,
            "agentCapabilities": {},
            "authMethods": [],
            "_meta": {
                "writegate": {
                    "version": env!("CARGO_PKG_VERSION"),
                    "workspace": {"id": rt.id, "root": rt.root, "trusted": rt.trusted},
                    "workspaces": workspaces,
                    "fs": {
                        "readTextFile": reads,
                        "writeTextFile": serves("fs/write_text_file"),
                    },
                    // Only what this connection will serve: `read_lines` is
                    // a read, off with the other reads.
                    "extensionMethods": extension_methods()
                        .filter(|m| reads || *m != "_writegate/read_lines")
                        .collect::<Vec<_>>(),
                }
            }
        }))
    }
}
