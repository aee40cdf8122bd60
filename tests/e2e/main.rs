//! End-to-end tests: the real `writegate` binary, driven over real stdio
//! pipes and real Unix sockets, on real temporary directories. No mocks.
//!
//! One test binary, one module per topic; a test's name is
//! `<module>::<test>`, so `cargo test -p writegate --test e2e framing::`
//! runs one topic. The temp tree, the daemons spawned in it and the raw
//! line client come from `writegate-testkit`; what several modules add on
//! top (the JSON-RPC client, the audit reader, the refusal checks) is in
//! [`common`].
//!
//! Every spawned process gets `HOME`, `XDG_RUNTIME_DIR`, `XDG_STATE_HOME` and
//! `XDG_CONFIG_HOME` inside its own temp dir, so no test touches the real
//! home. Timeouts exist only so that a broken daemon fails a test instead of
//! hanging it; nothing asserts on speed.

mod common;

mod activation;
mod approval;
mod audit;
mod budget;
mod cancel;
mod cases;
mod command_line;
mod concurrency;
mod environment;
mod external;
mod framing;
mod handshake;
mod history;
mod large_writes;
mod mcp;
mod memory;
mod own_files;
mod paged_read;
mod permissions;
mod protocol_doc;
mod proxy;
mod race;
mod readme_doc;
mod sandbox;
mod setup;
mod shutdown;
mod sizes;
mod socket;
mod workspaces;
mod writes;
