//! Configuration (SPEC 13): TOML file, then `WRITEGATE_*` environment
//! variables, then flags (applied by the binary). Every key and its default is
//! documented in `config/writegate.toml`; a test keeps the two equal.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One `[[workspace]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Root directory (canonicalised at registration).
    pub root: PathBuf,
    /// Whether writes are allowed (SPEC 2). Default false for config entries.
    #[serde(default)]
    pub trusted: bool,
}

/// Mode of files the daemon creates (SPEC 7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum NewFileMode {
    /// 0600.
    #[default]
    Owner,
    /// 0666 & !umask.
    System,
}

/// Risk level of the approval gate (SPEC 12), ordered `safe < moderate < dangerous`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Allowed unless `auto_approve` is below it (it never is: `safe` is the lowest).
    Safe,
    /// Every write and edit by default.
    #[default]
    Moderate,
    /// Protected and system paths (see `policy::judge`).
    Dangerous,
}

impl Level {
    /// The config and wire spelling: `"safe"`, `"moderate"` or `"dangerous"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Safe => "safe",
            Level::Moderate => "moderate",
            Level::Dangerous => "dangerous",
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One policy rule: a glob over the synthetic command `edit_file <mode> <canonical path>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    /// Glob over the synthetic command (`policy::Glob`: `*`, `?`, `\` escapes).
    pub pattern: String,
    /// The level a matching operation gets.
    pub level: Level,
}

/// `[audit]` (SPEC 10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Audit log path; empty means `$XDG_STATE_HOME/writegate/audit.jsonl`
    /// (falling back to `~/.local/state/writegate/audit.jsonl`).
    pub path: String,
    /// Record raw paths and messages in events.
    pub raw_paths: bool,
    /// Default true: the daemon does not start when the log cannot be
    /// opened and written, refuses every write, edit and approval whose
    /// event could not be written, and refuses them all while the log is
    /// failing (an append or a flush failed). `false` keeps serving with
    /// the log failing (logged loudly at start and at every failure).
    pub required: bool,
    /// When events reach the disk (`fdatasync`): `interval` (default) or
    /// `sync`. See [`FlushMode`].
    pub flush: FlushMode,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            path: String::new(),
            raw_paths: false,
            required: true,
            flush: FlushMode::Interval,
        }
    }
}

/// `audit.flush`: when appended events are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FlushMode {
    /// Every event is written (`write(2)`) before the response; a
    /// background flusher `fdatasync`s the log at most every
    /// [`crate::audit::FLUSH_INTERVAL`] (20 ms) after the first event it
    /// has not synced yet, and once more at shutdown. A power cut can lose
    /// the events of about the last 20 ms; a killed process loses none.
    #[default]
    Interval,
    /// The event is on disk before the response (and the operation's
    /// intent before its commit): concurrent operations share one
    /// `fdatasync` (group commit).
    Sync,
}

impl FlushMode {
    /// The config spelling: `"interval"` or `"sync"`.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushMode::Interval => "interval",
            FlushMode::Sync => "sync",
        }
    }
}

/// `[policy]` (SPEC 12).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// Highest level allowed without an approval.
    pub auto_approve: Level,
    /// Ordered rules; the first match wins.
    pub rules: Vec<PolicyRule>,
}

/// `[proxy]`: `writegate proxy` (docs/behaviour.md, "The proxy").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProxyConfig {
    /// Directories a session's `cwd` must be inside (or equal to), each
    /// canonicalised when a session starts; empty (the default): any
    /// directory.
    pub roots: Vec<PathBuf>,
    /// Whether a session's workspace is trusted (writes allowed). A
    /// `[[workspace]]` entry with the same canonical root decides for that
    /// root instead. Default true: the person opened that directory in the
    /// editor and launched the agent there.
    pub trusted: bool,
    /// Milliseconds the agent gets to exit after its stdin was closed (the
    /// editor closed the proxy's stdin) or after a SIGTERM the proxy passed
    /// on, before it is killed (SIGKILL). Default 5000.
    pub agent_exit_grace_ms: u64,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            roots: Vec::new(),
            trusted: true,
            agent_exit_grace_ms: 5000,
        }
    }
}

/// `[sandbox]`: `writegate run` (docs/security.md, "The sandbox").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Paths the agent inside `writegate run` may write directly, beside
    /// its `--allow-write` paths (a leading `~/` is the home directory).
    /// Empty by default.
    pub writable: Vec<PathBuf>,
}

/// Whether an MCP client's roots (`roots/list`) become workspaces, and
/// with what trust (`[mcp] client_roots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClientRoots {
    /// Client roots are not used; only `--workspace` and `[[workspace]]`.
    Ignore,
    /// Registered untrusted: readable, writes refused (`untrusted_workspace`).
    #[default]
    Untrusted,
    /// Registered trusted: readable and writable.
    Trusted,
}

impl ClientRoots {
    /// The config spelling: `"ignore"`, `"untrusted"` or `"trusted"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientRoots::Ignore => "ignore",
            ClientRoots::Untrusted => "untrusted",
            ClientRoots::Trusted => "trusted",
        }
    }
}

/// `[mcp]`: the MCP front end (`writegate mcp`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// What the client's MCP roots become. A root equal to a `--workspace`
    /// or `[[workspace]]` root keeps that workspace's trust.
    pub client_roots: ClientRoots,
    /// Offer the `undo` tool. Default false: an agent taking
    /// back its own writes is the person's choice.
    pub undo_tool: bool,
    /// `writegate serve` only: serve MCP over Streamable HTTP on this
    /// loopback address (`127.0.0.1:PORT`, `[::1]:PORT`, `localhost:PORT`);
    /// empty (the default) serves none. `--mcp-http` overrides it. Read at
    /// start-up only.
    pub http: String,
}

/// `[history]`: the before-images undo puts back (ADR 0020). `history =
/// false` is short for `[history] enabled = false`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryConfig {
    /// Keep a before-image of every committed write and edit. Default true.
    pub enabled: bool,
    /// The store; empty means `<state dir>/history`. Read at start-up only.
    pub path: String,
    /// Bytes of images kept at most; the oldest go first. Default 1 GiB.
    /// A hard limit: a write whose image would not fit beside the images
    /// younger than `min_age_minutes` is refused.
    pub max_bytes: u64,
    /// Days an image is kept at most. Default 7.
    pub max_age_days: u64,
    /// Minutes an image is kept at least: no eviction takes an image
    /// younger than this, whatever `max_bytes` and `max_age_days` say.
    /// Default 60.
    pub min_age_minutes: u64,
}

impl HistoryConfig {
    /// `min_age_minutes` as a duration.
    pub fn min_age(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.min_age_minutes.saturating_mul(60))
    }
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            enabled: true,
            path: String::new(),
            max_bytes: 1 << 30,
            max_age_days: 7,
            min_age_minutes: 60,
        }
    }
}

/// `[history]` as written: a table, or `history = false`/`true`.
#[derive(Deserialize)]
#[serde(untagged)]
enum HistoryForm {
    Switch(bool),
    Table(HistoryTable),
}

/// The keys of the `[history]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct HistoryTable {
    enabled: bool,
    path: String,
    max_bytes: u64,
    max_age_days: u64,
    min_age_minutes: u64,
}

impl Default for HistoryTable {
    fn default() -> Self {
        let d = HistoryConfig::default();
        HistoryTable {
            enabled: d.enabled,
            path: d.path,
            max_bytes: d.max_bytes,
            max_age_days: d.max_age_days,
            min_age_minutes: d.min_age_minutes,
        }
    }
}

impl<'de> Deserialize<'de> for HistoryConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match HistoryForm::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "`history` is `false`, `true` or a table with the keys enabled, path, max_bytes, max_age_days, min_age_minutes",
            )
        })? {
            HistoryForm::Switch(enabled) => HistoryConfig {
                enabled,
                ..HistoryConfig::default()
            },
            HistoryForm::Table(t) => HistoryConfig {
                enabled: t.enabled,
                path: t.path,
                max_bytes: t.max_bytes,
                max_age_days: t.max_age_days,
                min_age_minutes: t.min_age_minutes,
            },
        })
    }
}

/// The whole configuration, defaults as in `config/writegate.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[[workspace]]` entries.
    pub workspace: Vec<WorkspaceConfig>,
    /// Let a socket client register a workspace in `initialize`.
    pub allow_dynamic_workspaces: bool,
    /// Strictly marked tool writes outside the workspace (SPEC 4). A
    /// tri-state: `None` (the key absent, the default) means on, except
    /// when the daemon runs as root (euid 0), where it means off;
    /// `Some(_)` is an explicit choice from the file, the environment
    /// (`WRITEGATE_EXTERNAL_TOOL_WRITES`) or a flag, and wins in both cases.
    /// Read it through [`Config::external_writes_enabled`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_tool_writes: Option<bool>,
    /// Serve `fs/read_text_file`.
    pub read_text_file: bool,
    /// Bytes; default 5 MiB.
    pub max_write_bytes: u64,
    /// Bytes; default 5 MiB.
    pub max_edit_bytes: u64,
    /// Bytes per JSON-RPC line; default 16 MiB.
    pub max_frame_bytes: u64,
    /// Bytes of request lines the whole daemon handles at once (being read,
    /// or read and not yet answered); default 32 MiB (a 5 MiB write holds
    /// about twice its line at its peak: its content and the file it
    /// replaces). Read at start-up only. Not a SPEC 13 key: writegate's own
    /// bound on memory (docs/behaviour.md).
    pub max_inflight_bytes: u64,
    /// Milliseconds a connection reading a line longer than 64 KiB (and so
    /// holding room for the longest line in the in-flight budget) may go
    /// without a byte arriving; then the room is released and the
    /// connection closed. Default 5 000. Read at start-up only. Not a SPEC
    /// 13 key (docs/behaviour.md).
    pub line_stall_timeout_ms: u64,
    /// The slowest a long line may arrive, in bytes a second, once it holds
    /// room in the in-flight budget: after a one-second grace, a line
    /// whose bytes since it got the room fall behind this rate loses the
    /// room and its connection, so peers trickling a byte at a time cannot
    /// keep other clients' long writes waiting. Default 8 192 (a local
    /// client sends megabytes a second). Read at start-up only. Not a SPEC
    /// 13 key (docs/behaviour.md).
    pub line_min_bytes_per_sec: u64,
    /// Mode of files the daemon creates.
    pub new_file_mode: NewFileMode,
    /// Permission bits of the missing parent directories a workspace write
    /// creates, before the umask; default `0o755`. The external
    /// writer never creates directories.
    pub new_dir_mode: u32,
    /// Milliseconds in-flight operations get at shutdown.
    pub shutdown_grace_ms: u64,
    /// Milliseconds a question to the person about a held operation (the
    /// proxy's `session/request_permission`, an MCP `elicitation/create`)
    /// waits for an answer; then the question is withdrawn and the
    /// operation refused `approval_required`, answered `unanswered`.
    /// Default 60 000; must be greater than 0.
    pub approval_timeout_ms: u64,
    /// `[audit]`.
    pub audit: AuditConfig,
    /// `[policy]`: the approval gate.
    pub policy: PolicyConfig,
    /// `[proxy]`: `writegate proxy`'s session workspaces and agent process.
    pub proxy: ProxyConfig,
    /// `[mcp]`: the MCP front end.
    pub mcp: McpConfig,
    /// `[history]`: before-images and undo.
    pub history: HistoryConfig,
    /// `[sandbox]`: what `writegate run` leaves writable.
    pub sandbox: SandboxConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workspace: Vec::new(),
            allow_dynamic_workspaces: false,
            external_tool_writes: None,
            read_text_file: false,
            max_write_bytes: 5 * 1024 * 1024,
            max_edit_bytes: 5 * 1024 * 1024,
            max_frame_bytes: 16 * 1024 * 1024,
            max_inflight_bytes: 32 * 1024 * 1024,
            line_stall_timeout_ms: 5_000,
            line_min_bytes_per_sec: 8_192,
            new_file_mode: NewFileMode::Owner,
            new_dir_mode: 0o755,
            shutdown_grace_ms: 10_000,
            approval_timeout_ms: 60_000,
            audit: AuditConfig::default(),
            policy: PolicyConfig::default(),
            proxy: ProxyConfig::default(),
            mcp: McpConfig::default(),
            history: HistoryConfig::default(),
            sandbox: SandboxConfig::default(),
        }
    }
}

/// A config that cannot be used, naming the file and the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The named config file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid config.
    #[error("invalid config {origin}: {message}")]
    Invalid {
        /// The file path, or `defaults` when no file was read.
        origin: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A `WRITEGATE_<KEY>` variable holds a value its key does not take.
    /// The file (if any) was valid without it.
    #[error("invalid environment variable {var}=`{value}`: {message}")]
    InvalidEnv {
        /// The variable, e.g. `WRITEGATE_MAX_WRITE_BYTES`.
        var: String,
        /// Its value as set.
        value: String,
        /// What is wrong with it.
        message: String,
    },
    /// A `WRITEGATE_*` variable that writegate does not read: most likely a
    /// typo, which would otherwise be silently ignored.
    #[error("unknown environment variable {var}: {advice}")]
    UnknownEnv {
        /// The variable.
        var: String,
        /// The closest known name, if one is close, and the list of known ones.
        advice: String,
    },
}

/// Scalar keys an environment variable `WRITEGATE_<KEY>` may override
/// (dots become underscores: `WRITEGATE_AUDIT_PATH`).
pub const ENV_KEYS: &[&str] = &[
    "allow_dynamic_workspaces",
    "external_tool_writes",
    "read_text_file",
    "max_write_bytes",
    "max_edit_bytes",
    "max_frame_bytes",
    "max_inflight_bytes",
    "line_stall_timeout_ms",
    "line_min_bytes_per_sec",
    "new_file_mode",
    "new_dir_mode",
    "shutdown_grace_ms",
    "approval_timeout_ms",
    "audit.path",
    "audit.raw_paths",
    "audit.required",
    "audit.flush",
    "policy.auto_approve",
    "proxy.trusted",
    "proxy.agent_exit_grace_ms",
    "mcp.client_roots",
    "mcp.undo_tool",
    "mcp.http",
    "history.enabled",
    "history.path",
    "history.max_bytes",
    "history.max_age_days",
    "history.min_age_minutes",
];

/// `WRITEGATE_*` variables the binary reads itself, besides the config keys
/// of [`ENV_KEYS`]: `WRITEGATE_LOG` (the log filter) and
/// `WRITEGATE_RUN_SOCKET` (set by `writegate run` inside its sandbox: the
/// socket `writegate mcp` relays to). A variable a new
/// part of writegate reads must be added here, or [`check_env_names`]
/// refuses it.
pub const OTHER_ENV_VARS: &[&str] = &["WRITEGATE_LOG", "WRITEGATE_RUN_SOCKET"];

/// The environment variable of a config key: `WRITEGATE_` and the key in
/// upper case, dots as underscores (`audit.path` -> `WRITEGATE_AUDIT_PATH`).
pub fn env_var_of(key: &str) -> String {
    format!("WRITEGATE_{}", key.replace('.', "_").to_uppercase())
}

/// Every `WRITEGATE_*` variable writegate reads: one per key of
/// [`ENV_KEYS`], then [`OTHER_ENV_VARS`].
pub fn known_env_vars() -> Vec<String> {
    ENV_KEYS
        .iter()
        .map(|k| env_var_of(k))
        .chain(OTHER_ENV_VARS.iter().map(|v| (*v).to_string()))
        .collect()
}

/// Refuses the first variable in `names` that starts with `WRITEGATE_` but
/// is not one writegate reads ([`known_env_vars`]), naming it and the
/// closest known name (a typo such as
/// `WRITEGATE_MAX_WRITE_BYTE` must not be silently ignored). Other
/// variables are not looked at. Call it with the names of the process
/// environment (`std::env::vars_os().map(|(k, _)| k)`) before
/// [`Config::load`].
pub fn check_env_names<I, S>(names: I) -> Result<(), ConfigError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let known = known_env_vars();
    for name in names {
        let name = name.as_ref().to_string_lossy();
        if !name.starts_with("WRITEGATE_") || known.iter().any(|k| *k == name) {
            continue;
        }
        // A suggestion only for a near miss: at most 2 edits, and fewer
        // than half of the part after `WRITEGATE_` (not `FOO` -> `LOG`).
        let tail = name.len() - "WRITEGATE_".len();
        let closest = known
            .iter()
            .map(|k| (edit_distance(k, &name), k))
            .min()
            .filter(|(d, _)| *d <= 2 && 2 * d < tail)
            .map(|(_, k)| format!("did you mean {k}? "))
            .unwrap_or_default();
        return Err(ConfigError::UnknownEnv {
            var: name.into_owned(),
            advice: format!(
                "{closest}writegate reads only {} (unset the variable, or fix its name)",
                known.join(", ")
            ),
        });
    }
    Ok(())
}

/// Levenshtein distance of two short ASCII-ish names (by `char`).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

impl Config {
    /// Parses TOML text (no environment).
    ///
    /// Errors: `ConfigError::Invalid` naming the offending key (unknown keys
    /// are refused too, so a typo is not silently ignored).
    pub fn from_toml(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let value: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        Self::from_table(value, origin)
    }

    fn from_table(table: toml::Table, origin: &str) -> Result<Config, ConfigError> {
        let cfg: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid {
                origin: origin.to_string(),
                message: e.to_string(),
            })?;
        cfg.validate(origin)?;
        Ok(cfg)
    }

    fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, why: &str| ConfigError::Invalid {
            origin: origin.to_string(),
            message: format!("key `{key}`: {why}"),
        };
        if self.max_write_bytes == 0 {
            return Err(bad("max_write_bytes", "must be greater than 0"));
        }
        if self.max_edit_bytes == 0 {
            return Err(bad("max_edit_bytes", "must be greater than 0"));
        }
        if self.max_frame_bytes < 1024 {
            return Err(bad("max_frame_bytes", "must be at least 1024"));
        }
        if self.max_inflight_bytes < 1024 {
            return Err(bad("max_inflight_bytes", "must be at least 1024"));
        }
        if self.line_stall_timeout_ms == 0 {
            return Err(bad("line_stall_timeout_ms", "must be greater than 0"));
        }
        if self.line_min_bytes_per_sec == 0 {
            return Err(bad("line_min_bytes_per_sec", "must be greater than 0"));
        }
        if self.approval_timeout_ms == 0 {
            return Err(bad("approval_timeout_ms", "must be greater than 0"));
        }
        for (i, r) in self.proxy.roots.iter().enumerate() {
            if !r.is_absolute() {
                return Err(bad(
                    &format!("proxy.roots[{i}]"),
                    "must be an absolute path",
                ));
            }
        }
        for (i, w) in self.workspace.iter().enumerate() {
            if !w.root.is_absolute() {
                return Err(bad(
                    &format!("workspace[{i}].root"),
                    "must be an absolute path",
                ));
            }
        }
        Ok(())
    }

    /// Loads the config: the file at `path` (a missing file is fine only when
    /// `required` is false, i.e. the default location), then `WRITEGATE_*`
    /// variables from `env` (one per key of [`ENV_KEYS`], see
    /// [`env_var_of`]; a value is read as a TOML value, else as a string).
    ///
    /// Errors: the file cannot be read ([`ConfigError::Read`]) or is invalid
    /// on its own ([`ConfigError::Invalid`], naming the file and the key); a
    /// variable's value is invalid ([`ConfigError::InvalidEnv`], naming the
    /// variable, never the file). Unknown `WRITEGATE_*` names are refused by
    /// [`check_env_names`], which needs the list of names.
    pub fn load(
        path: Option<&Path>,
        required: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let (mut table, origin) = match path {
            Some(p) => match std::fs::read_to_string(p) {
                Ok(text) => (
                    toml::from_str::<toml::Table>(&text).map_err(|e| ConfigError::Invalid {
                        origin: p.display().to_string(),
                        message: e.to_string(),
                    })?,
                    p.display().to_string(),
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                    (toml::Table::new(), "defaults".to_string())
                }
                Err(source) => {
                    return Err(ConfigError::Read {
                        path: p.to_path_buf(),
                        source,
                    });
                }
            },
            None => (toml::Table::new(), "defaults".to_string()),
        };
        let set: Vec<(&str, String, String)> = ENV_KEYS
            .iter()
            .filter_map(|key| {
                let var = env_var_of(key);
                env(&var).map(|raw| (*key, var, raw))
            })
            .collect();
        // The file on its own first, so that its errors name the file and
        // each variable's error names the variable.
        let mut cfg = Self::from_table(table.clone(), &origin)?;
        for (key, var, raw) in set {
            let blame = |message: String| ConfigError::InvalidEnv {
                var: var.clone(),
                value: raw.clone(),
                message,
            };
            let (section, leaf) = match key.split_once('.') {
                Some((s, l)) => (Some(s), l),
                None => (None, key),
            };
            let target = match section {
                Some(s) => table
                    .entry(s.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                    .as_table_mut()
                    .ok_or_else(|| blame(format!("the config key `{s}` must be a table")))?,
                None => &mut table,
            };
            target.insert(leaf.to_string(), parse_env_value(&raw));
            cfg = Self::from_table(table.clone(), &origin).map_err(|e| match e {
                ConfigError::Invalid { message, .. } => blame(message.trim().replace('\n', " ")),
                other => other,
            })?;
        }
        Ok(cfg)
    }

    /// How long a question to the person waits for an answer
    /// (`approval_timeout_ms`), for every front end that asks one.
    pub fn approval_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.approval_timeout_ms)
    }

    /// Whether external tool writes are on for this config in this process
    /// ([`external_writes_for`] with the daemon's effective uid).
    pub fn external_writes_enabled(&self) -> bool {
        external_writes_for(self.external_tool_writes, euid())
    }

    /// For the binary at start-up: whether external tool writes are on, and
    /// a sentence to log saying so and why (see [`external_writes_notice`]).
    pub fn external_writes_at_start(&self) -> (bool, String) {
        external_writes_notice(self.external_tool_writes, euid())
    }

    /// The audit log path: `audit.path`, else `$XDG_STATE_HOME/writegate/audit.jsonl`,
    /// else `$HOME/.local/state/writegate/audit.jsonl` (SPEC 10).
    pub fn audit_path(&self, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
        if !self.audit.path.is_empty() {
            return PathBuf::from(&self.audit.path);
        }
        state_dir(env).join("audit.jsonl")
    }

    /// The history store: `history.path`, else `<state dir>/history`.
    pub fn history_path(&self, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
        if !self.history.path.is_empty() {
            return PathBuf::from(&self.history.path);
        }
        state_dir(env).join("history")
    }
}

/// The daemon's effective uid (read once; it never changes while running).
fn euid() -> u32 {
    static EUID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *EUID.get_or_init(writegate_fs::current_uid)
}

/// The effective `external_tool_writes` (safe defaults as root):
/// an explicit setting wins; unset means on for a user and off for root
/// (euid 0), where a marked write could otherwise replace any system file.
pub fn external_writes_for(setting: Option<bool>, euid: u32) -> bool {
    setting.unwrap_or(euid != 0)
}

/// [`external_writes_for`] plus the start-up log sentence for it.
pub fn external_writes_notice(setting: Option<bool>, euid: u32) -> (bool, String) {
    let on = external_writes_for(setting, euid);
    let sentence = match (setting, euid == 0) {
        (None, true) => {
            "running as root: external tool writes are off; set external_tool_writes = true to allow them"
        }
        (None, false) => {
            "external tool writes are on (the default for a non-root user); set external_tool_writes = false or pass --no-external-writes to turn them off"
        }
        (Some(true), true) => {
            "running as root with external tool writes on (set explicitly): a marked write may replace any file outside the workspace that the approval gate lets through"
        }
        (Some(true), false) => "external tool writes are on (set explicitly)",
        (Some(false), _) => "external tool writes are off (set explicitly)",
    };
    (on, sentence.to_string())
}

/// `$XDG_STATE_HOME/writegate`, else `$HOME/.local/state/writegate`, else
/// `/tmp/writegate-<uid>/state`.
pub fn state_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(x) = env("XDG_STATE_HOME").filter(|s| s.starts_with('/')) {
        return PathBuf::from(x).join("writegate");
    }
    if let Some(h) = env("HOME").filter(|s| s.starts_with('/')) {
        return PathBuf::from(h).join(".local/state/writegate");
    }
    PathBuf::from(format!(
        "/tmp/writegate-{}/state",
        writegate_fs::current_uid()
    ))
}

/// An environment value as TOML (`true`, `42`, `"moderate"`); anything that
/// does not parse as a TOML value is taken as a string.
fn parse_env_value(raw: &str) -> toml::Value {
    let doc = format!("v = {raw}");
    match toml::from_str::<toml::Table>(&doc) {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or(toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn documented_config_file_equals_builtin_defaults() {
        let text = include_str!("../../../config/writegate.toml");
        let parsed = Config::from_toml(text, "config/writegate.toml").unwrap();
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn documented_config_file_mentions_every_key() {
        let text = include_str!("../../../config/writegate.toml");
        for key in ENV_KEYS {
            let leaf = key.rsplit('.').next().unwrap();
            assert!(
                text.contains(leaf),
                "config/writegate.toml does not document `{key}`"
            );
        }
        for key in [
            "[[workspace]]",
            "root",
            "trusted",
            "rules",
            "[audit]",
            "[policy]",
            "[proxy]",
            "roots",
            "[mcp]",
            "[history]",
            "[sandbox]",
            "writable",
        ] {
            assert!(
                text.contains(key),
                "config/writegate.toml does not document `{key}`"
            );
        }
    }

    #[test]
    fn history_is_a_table_or_a_switch() {
        let off = Config::from_toml("history = false\n", "t").unwrap();
        assert!(!off.history.enabled);
        assert_eq!(off.history.max_bytes, HistoryConfig::default().max_bytes);
        let t = Config::from_toml("[history]\nmax_bytes = 4096\n", "t").unwrap();
        assert!(t.history.enabled);
        assert_eq!(t.history.max_bytes, 4096);
        let bad = Config::from_toml("[history]\nmax_byte = 1\n", "t").unwrap_err();
        assert!(bad.to_string().contains("history"), "{bad}");
        let env = |k: &str| (k == "WRITEGATE_HISTORY_ENABLED").then(|| "false".to_string());
        assert!(!Config::load(None, false, &env).unwrap().history.enabled);
    }

    #[test]
    fn an_approval_timeout_of_zero_is_refused() {
        let err = Config::from_toml("approval_timeout_ms = 0\n", "t").unwrap_err();
        assert!(err.to_string().contains("approval_timeout_ms"), "{err}");
        let ok = Config::from_toml("approval_timeout_ms = 500\n", "t").unwrap();
        assert_eq!(ok.approval_timeout_ms, 500);
        assert_eq!(ok.approval_timeout(), std::time::Duration::from_millis(500));
    }

    #[test]
    fn a_line_stall_timeout_of_zero_is_refused() {
        let err = Config::from_toml("line_stall_timeout_ms = 0\n", "t").unwrap_err();
        assert!(err.to_string().contains("line_stall_timeout_ms"), "{err}");
        let ok = Config::from_toml("line_stall_timeout_ms = 1000\n", "t").unwrap();
        assert_eq!(ok.line_stall_timeout_ms, 1000);
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let err = Config::from_toml("max_write_byts = 3\n", "t").unwrap_err();
        assert!(err.to_string().contains("max_write_byts"), "{err}");
    }

    #[test]
    fn wrong_type_names_the_key() {
        let err = Config::from_toml("max_write_bytes = \"big\"\n", "t").unwrap_err();
        assert!(err.to_string().contains("max_write_bytes"), "{err}");
    }

    #[test]
    fn environment_overrides_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "max_write_bytes = 10\n[audit]\nraw_paths = false\n").unwrap();
        let env = |k: &str| match k {
            "WRITEGATE_MAX_WRITE_BYTES" => Some("20".to_string()),
            "WRITEGATE_AUDIT_RAW_PATHS" => Some("true".to_string()),
            "WRITEGATE_AUDIT_PATH" => Some("/tmp/a.jsonl".to_string()),
            _ => None,
        };
        let c = Config::load(Some(&p), true, &env).unwrap();
        assert_eq!(c.max_write_bytes, 20);
        assert!(c.audit.raw_paths);
        assert_eq!(c.audit.path, "/tmp/a.jsonl");
    }

    /// As root, external writes are off unless explicitly on.
    #[test]
    fn external_tool_writes_is_a_tri_state_defaulting_by_euid() {
        assert_eq!(Config::default().external_tool_writes, None);
        assert!(external_writes_for(None, 1000));
        assert!(!external_writes_for(None, 0), "root: off by default");
        assert!(external_writes_for(Some(true), 0), "root: explicitly on");
        assert!(!external_writes_for(Some(false), 1000));
        let (on, line) = external_writes_notice(None, 0);
        assert!(!on);
        assert_eq!(
            line,
            "running as root: external tool writes are off; set external_tool_writes = true to allow them"
        );
        for (setting, euid) in [
            (Some(true), 0),
            (Some(false), 0),
            (None, 1000),
            (Some(true), 1000),
        ] {
            let (on, line) = external_writes_notice(setting, euid);
            assert_eq!(on, external_writes_for(setting, euid));
            assert!(line.contains(if on { " on" } else { " off" }), "{line}");
        }
        // Explicit from the file, or from the environment over the file.
        let c = Config::from_toml("external_tool_writes = true\n", "t").unwrap();
        assert_eq!(c.external_tool_writes, Some(true));
        assert!(c.external_writes_enabled());
        let c = Config::from_toml("external_tool_writes = false\n", "t").unwrap();
        assert!(!c.external_writes_enabled());
        let env = |k: &str| (k == "WRITEGATE_EXTERNAL_TOOL_WRITES").then(|| "true".to_string());
        let c = Config::load(None, false, &env).unwrap();
        assert_eq!(c.external_tool_writes, Some(true));
        // Unset follows this process's euid.
        assert_eq!(
            Config::default().external_writes_enabled(),
            writegate_fs::current_uid() != 0
        );
    }

    /// A bad value is blamed on the variable, not on the file.
    #[test]
    fn an_invalid_variable_is_blamed_on_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "max_write_bytes = 10\n").unwrap();
        for (var, value) in [
            ("WRITEGATE_MAX_WRITE_BYTES", "big"),
            ("WRITEGATE_MAX_WRITE_BYTES", "0"),
            ("WRITEGATE_NEW_FILE_MODE", "world"),
            ("WRITEGATE_AUDIT_REQUIRED", "maybe"),
        ] {
            let env = |k: &str| (k == var).then(|| value.to_string());
            let err = Config::load(Some(&p), true, &env).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(&err, ConfigError::InvalidEnv { var: v, .. } if v == var),
                "{text}"
            );
            assert!(
                text.starts_with(&format!("invalid environment variable {var}=`{value}`: ")),
                "{text}"
            );
            assert!(!text.contains("c.toml"), "the file is not to blame: {text}");
        }
        // A bad file is still blamed on the file, even with good variables.
        std::fs::write(&p, "max_write_bytes = \"big\"\n").unwrap();
        let env = |k: &str| (k == "WRITEGATE_READ_TEXT_FILE").then(|| "true".to_string());
        let err = Config::load(Some(&p), true, &env).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
        assert!(err.to_string().contains("c.toml"), "{err}");
    }

    /// Unknown `WRITEGATE_*` names are refused, naming the
    /// variable and the closest known one; known ones and other variables
    /// pass.
    #[test]
    fn unknown_writegate_variables_are_refused_by_name() {
        let known = known_env_vars();
        assert!(known.contains(&"WRITEGATE_LOG".to_string()));
        assert!(known.contains(&"WRITEGATE_AUDIT_RAW_PATHS".to_string()));
        assert_eq!(known.len(), ENV_KEYS.len() + OTHER_ENV_VARS.len());
        check_env_names(
            known
                .iter()
                .map(String::as_str)
                .chain(["PATH", "RUST_LOG", "WRITEGATE"]),
        )
        .unwrap();
        let err = check_env_names(["HOME", "WRITEGATE_MAX_WRITE_BYTE"]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "unknown environment variable WRITEGATE_MAX_WRITE_BYTE: did you mean WRITEGATE_MAX_WRITE_BYTES? "
            ),
            "{text}"
        );
        assert!(text.contains("WRITEGATE_LOG"), "{text}");
        for far in ["WRITEGATE_FROBNICATE", "WRITEGATE_FOO"] {
            let err = check_env_names([far]).unwrap_err();
            assert!(!err.to_string().contains("did you mean"), "{err}");
        }
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn missing_default_file_is_fine_but_missing_named_file_is_not() {
        let p = Path::new("/nonexistent/writegate.toml");
        assert_eq!(
            Config::load(Some(p), false, &no_env).unwrap(),
            Config::default()
        );
        assert!(Config::load(Some(p), true, &no_env).is_err());
    }
}
