//! `writegate-core` in-process: a real `Service` on temp directories with
//! real files, no wire and no daemon. One test binary, one module per
//! topic (`cargo test -p writegate-core --test it pipeline::`); the world
//! every module builds its tests on is here.

mod audit;
mod history;
mod pipeline;
mod regressions;
mod round_trip;

use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use writegate_core::{
    Allowances, Config, Failure, OpCtx, Registry, Runtime, Service, WriteOptions, WriteParams,
};

/// A service over one fresh workspace, its audit log and approvals file.
pub(crate) struct World {
    pub(crate) svc: Service,
    pub(crate) rt: Arc<Runtime>,
    /// The workspace's canonical root.
    pub(crate) root: PathBuf,
    /// The audit log (approvals are next to it, `approvals.json`).
    pub(crate) log: PathBuf,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// The tests' config: the default, with external tool writes explicitly on
/// (as root, which CI runs as, the default is off).
pub(crate) fn config() -> Config {
    Config {
        external_tool_writes: Some(true),
        ..Config::default()
    }
}

/// A trusted workspace with [`config`], its audit log in a fresh state
/// directory.
pub(crate) fn world() -> World {
    World::new(true, config(), None)
}

impl World {
    /// A workspace (`trusted` or not) served with `config`; the audit log
    /// at `log` (a tmpfs, a path that cannot be opened) or in a fresh state
    /// directory.
    pub(crate) fn new(trusted: bool, config: Config, log: Option<PathBuf>) -> World {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let registry = Registry::default();
        let rt = registry.register(&root, trusted).unwrap();
        let log = log.unwrap_or_else(|| state.path().join("audit.jsonl"));
        let approvals = log.with_file_name("approvals.json");
        let svc = Service::new(config, registry, &log, approvals);
        World {
            svc,
            rt,
            root,
            log,
            _dirs: (ws, state),
        }
    }

    /// A request of session `s1` that the transport allows nothing extra.
    pub(crate) fn ctx(&self) -> OpCtx {
        self.ctx_allowing(Allowances::NONE)
    }

    /// A request of session `s1` that the transport allows `allows`.
    pub(crate) fn ctx_allowing(&self, allows: Allowances) -> OpCtx {
        OpCtx {
            runtime: self.rt.clone(),
            session_id: Some("s1".into()),
            allows,
            route: "test",
            cancel: Arc::new(AtomicBool::new(false)),
            approver: None,
            client_root: false,
        }
    }

    /// Writes `content` to `<root>/<leaf>`.
    pub(crate) fn write(&self, leaf: &str, content: &str) -> Result<(), Failure> {
        self.svc
            .write_text_file(&self.ctx(), &write(&self.root.join(leaf), content))
            .map(|_| ())
    }

    /// Every line of the audit log as JSON (panics on a torn or glued
    /// line).
    pub(crate) fn events(&self) -> Vec<Value> {
        writegate_testkit::audit_lines(&self.log)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not one event ({e}): {l}")))
            .collect()
    }

    /// The names in the workspace's root, sorted (a temp file left behind
    /// shows).
    pub(crate) fn names(&self) -> Vec<OsString> {
        writegate_testkit::names(&self.root)
    }
}

/// A whole-file write of `content` to `path`, nothing else asked.
pub(crate) fn write(path: &Path, content: &str) -> WriteParams {
    WriteParams {
        path: path.to_path_buf(),
        content: content.into(),
        options: WriteOptions::default(),
        marker: None,
        convert_encoding: false,
    }
}
