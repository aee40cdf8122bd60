//! Shared setup of writegate's tests and benches: a temp tree with its own
//! home and XDG directories ([`Tree`]), the real `writegate` binary spawned
//! in it ([`Daemon`]), a raw line client over the daemon's stdio or its
//! Unix socket ([`LineClient`]), a small tmpfs that fills up ([`Tmpfs`]), a
//! counting global allocator ([`CountingAlloc`]), and the small file and
//! process helpers several test binaries use (an audit log's lines, tree
//! snapshots, temp files left behind, running a command with stdin).
//!
//! This crate is only ever a dev-dependency: no production crate may
//! depend on it, and it never depends on a writegate crate (it drives the
//! binary a test names, so it compiles fast and cannot change what is
//! tested). It knows writegate's command line and file layout, never its
//! protocols: JSON and JSON-RPC stay in the tests that speak them.
//! Timeouts exist only so that a broken daemon fails a test instead of
//! hanging it; nothing here measures or asserts speed.

use std::time::Duration;

mod alloc;
mod files;
mod lines;
mod mount;
mod process;
mod tree;

pub use alloc::CountingAlloc;
pub use files::{Entry, audit_lines, mode_of, names, snapshot, tempdir, temps};
pub use lines::LineClient;
pub use mount::{BindMount, MountInfo, Tmpfs};
pub use process::{Finished, find_program, is_root, proc_status_kib, run_with_stdin};
pub use tree::{Daemon, Opts, Tree};

/// Upper bound for any single wait on a spawned process (its socket to
/// answer, a line, its exit): a broken daemon fails instead of hanging.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Asserts that the `Result` `$r` is an `Err` matching the pattern `$p`,
/// showing what it was otherwise (after the optional format arguments).
#[macro_export]
macro_rules! assert_err {
    ($r:expr, $p:pat) => {{
        let r = $r;
        assert!(
            matches!(r, Err($p)),
            "expected Err({}), got {r:?}",
            stringify!($p)
        );
    }};
    ($r:expr, $p:pat, $($msg:tt)+) => {{
        let r = $r;
        assert!(
            matches!(r, Err($p)),
            "{}: expected Err({}), got {r:?}",
            format_args!($($msg)+),
            stringify!($p)
        );
    }};
}
