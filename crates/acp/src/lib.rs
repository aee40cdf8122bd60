//! writegate's wire: ACP v1 over JSON-RPC 2.0 with one compact JSON object
//! per line (SPEC 1), the method table (SPEC 3), the stdio and Unix-socket
//! transports with the peer-UID check, signals and graceful shutdown, and a
//! small synchronous client for the CLI.
//!
//! This is the only async crate and the only one that knows JSON-RPC codes.
//! It must never decide policy (paths, routing, encodings: that is
//! `writegate-core`), never write files itself except the socket it listens
//! on (through `writegate-fs`), and never write anything but protocol lines
//! to stdout.

pub mod client;
pub mod conn;
pub mod frame;
pub mod jsonrpc;
pub mod methods;
pub mod server;

pub use server::{ServeOptions, default_socket_path, serve};
