//! writegate's MCP front end (`writegate mcp`): the tools `read_file`,
//! `write_file` and `edit_file` (and `undo`, with `[mcp] undo_tool`) served over MCP on stdio with the official
//! Rust SDK (`rmcp`), for any agent that loads tools from MCP servers. Each
//! tool call is one operation of `writegate_core::Service` (resolver,
//! approval gate, path lock, writers, audit) run on a blocking thread; a held
//! write asks the person through MCP elicitation when the client offers it;
//! the client's MCP roots become workspaces as the config says. The
//! daemon (`writegate serve`) serves the same tools on a Unix socket of its
//! own ([`serve_socket`]), one handler and one writer per connection; a
//! held call of a client there that cannot be asked waits in the service's
//! approval queue for the person.
//!
//! This crate owns its wire types (tool arguments with their JSON schemas,
//! results, the text a model reads, what each transport allows)
//! and nothing else. It must never implement a rule of its own (paths,
//! encodings, approvals, the audit format all come from `writegate-core`),
//! never write to disk itself, and never put anything but MCP messages on
//! stdout.

mod approver;
mod http;
mod input;
mod out;
mod reply;
mod roots;
mod server;
mod socket;
mod tools;
mod transport;

pub use http::{HttpError, HttpOptions, LOOPBACK_ONLY, check_loopback, serve_http};
pub use server::{McpOptions, RunError, SANDBOX_NOTE, run};
pub use socket::{HELLO_KEY, SocketOptions, serve_socket};
