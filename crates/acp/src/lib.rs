//! writegate's ACP front end: ACP v1 over JSON-RPC 2.0 with one compact
//! JSON object per line (SPEC 1). The message layer for both directions
//! (`message`, `outgoing`), one connection loop with a handler seam
//! (`conn`), the method table with one module per method (`methods`), the
//! `serve` handler, the stdio and Unix-socket transports with the peer-UID
//! check, signals and graceful shutdown (`server`). (The CLI's client is
//! the binary's own.)
//!
//! This is the only crate that knows ACP's wire: JSON-RPC codes, `_meta`
//! keys, result shapes. It must never decide policy (paths, routing,
//! encodings, approvals: that is `writegate-core`), never write files
//! itself except the socket it listens on (through `writegate-fs`), and
//! never write anything but protocol lines to stdout.

pub mod budget;
pub mod conn;
pub mod frame;
pub mod message;
pub mod methods;
pub mod outbox;
pub mod outgoing;
use writegate_jsonscan as scan;
pub mod serve;
pub mod server;
pub mod state;
pub use writegate_stdio as stdio;
pub mod transport;
pub mod wire;

pub use server::{ServeOptions, activated_listener, default_socket_path, serve};
