//! Two things: a JSON-RPC 2.0 line-connection engine, and writegate's ACP
//! serve front end built on it (SPEC 1).
//!
//! The engine runs one connection of compact JSON objects, one per line,
//! in both directions: the message layer (`message`), the connection loop
//! with its handler seam, output queue and byte budget (`conn`, `budget`,
//! `state`), the method table with one module per method (`methods`) and
//! what each transport allows (`transport`). `writegate-proxy` runs its
//! two connections on it.
//!
//! The serve front end is the `serve` handler and the stdio and
//! Unix-socket transports with the peer-UID check, signals and graceful
//! shutdown (`server`; [`serve()`], [`ServeOptions`]). (The CLI's client is
//! the binary's own.)
//!
//! This is the only crate that knows ACP's wire: JSON-RPC codes, `_meta`
//! keys, result shapes. It must never decide policy (paths, routing,
//! encodings, approvals: that is `writegate-core`), never write files
//! itself except the socket it listens on (through `writegate-fs`), and
//! never write anything but protocol lines to stdout.

use writegate_jsonscan as scan;

pub mod budget;
pub mod conn;
pub mod message;
pub mod methods;
mod outbox;
mod outgoing;
pub use writegate_stdio::sandboxed;
pub mod serve;
pub mod server;
pub mod state;
pub mod transport;
mod wire;

pub use serve::serve_connection;
pub use server::{ServeOptions, activated_listener, default_socket_path, serve};
pub use writegate_core::unpredictable_hex;
