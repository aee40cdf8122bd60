//! Granted approvals: their forms, scopes, bounds and expiry, the persistent
//! file, and the gate that asks for one.

use super::{Glob, Verdict, glob_match, judge, read_protected_reason, synthetic_command};
use crate::api::OpMode;
use crate::config::{Level, PolicyConfig};
use crate::error::{Detail, ErrorKind, Failure, Refusal};
use crate::sync::lock;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest `command` or `pattern` an approval may hold, in bytes: a Linux
/// path is at most 4096 bytes (`PATH_MAX`), plus room for `edit_file <mode> `.
pub const MAX_APPROVAL_BYTES: usize = 4096 + 64;
/// Most `once` plus `session` grants one session holds; a new one beyond
/// this drops that session's oldest.
pub const MAX_APPROVALS_PER_SESSION: usize = 64;
/// Most `once`, `session` and `workspace` grants the daemon holds in all; a
/// new one beyond this drops the oldest.
pub const MAX_LIVE_APPROVALS: usize = 1024;
/// How many refused commands holding glob metacharacters the gate remembers
/// (see [`Approvals::grant`]).
pub const MAX_REMEMBERED_REFUSALS: usize = 256;
/// Most `persistent` approvals (commands plus patterns); one more is refused
/// (`-32602`) rather than silently dropping one a person kept on purpose.
pub const MAX_PERSISTENT_APPROVALS: usize = 256;
/// A `once` grant not used within this time is dropped: 15 minutes (the host
/// asks, the user answers, the write is retried).
// `Duration::from_mins`/`from_hours` are newer than the workspace's rust-version.
#[allow(clippy::duration_suboptimal_units)]
pub const ONCE_TTL: Duration = Duration::from_secs(15 * 60);
/// A `session` grant lasts this long: 12 hours (a working day), then the
/// host asks again. `workspace` and `persistent` grants do not expire.
#[allow(clippy::duration_suboptimal_units)]
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// Scope of an approval (SPEC 12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The next matching operation of this session only ([`ONCE_TTL`]).
    Once,
    /// Every matching operation of this session ([`SESSION_TTL`]).
    Session,
    /// Every matching operation in this workspace (runtime id).
    Workspace,
    /// Every matching operation, kept in the state directory across restarts.
    Persistent,
}

impl Scope {
    fn ttl(self) -> Option<Duration> {
        match self {
            Scope::Once => Some(ONCE_TTL),
            Scope::Session => Some(SESSION_TTL),
            Scope::Workspace | Scope::Persistent => None,
        }
    }
}

/// The form of a [`Grant`], as the audit log's `approval.grant` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantForm {
    /// One literal synthetic command (`command`).
    Command,
    /// A glob over synthetic commands (`pattern`).
    Pattern,
}

impl GrantForm {
    /// The wire name: `"command"` or `"pattern"`.
    pub fn name(self) -> &'static str {
        match self {
            GrantForm::Command => "command",
            GrantForm::Pattern => "pattern",
        }
    }
}

/// What an approval covers (`_writegate/approve` takes exactly one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// One exact synthetic command (`data.command` of `approval_required`),
    /// compared literally: no character in it is special.
    Command(String),
    /// A glob over synthetic commands written by a person ([`Glob`]).
    Pattern(String),
}

impl Grant {
    /// The grant of `_writegate/approve` params: exactly one of `command`
    /// and `pattern`. The error's text is a message for `-32602`.
    pub fn from_params(
        command: Option<String>,
        pattern: Option<String>,
    ) -> Result<Grant, GrantParamsError> {
        match (command, pattern) {
            (Some(c), None) => Ok(Grant::Command(c)),
            (None, Some(p)) => Ok(Grant::Pattern(p)),
            (Some(_), Some(_)) => Err(GrantParamsError::Both),
            (None, None) => Err(GrantParamsError::Neither),
        }
    }

    /// The form: a command or a pattern.
    pub fn form(&self) -> GrantForm {
        match self {
            Grant::Command(_) => GrantForm::Command,
            Grant::Pattern(_) => GrantForm::Pattern,
        }
    }

    /// The command or pattern text.
    pub fn text(&self) -> &str {
        match self {
            Grant::Command(s) | Grant::Pattern(s) => s,
        }
    }

    /// Checks the text: not empty, at most [`MAX_APPROVAL_BYTES`], and for a
    /// command the shape `edit_file <mode> /<path>`.
    fn validate(&self) -> Result<(), GrantError> {
        let text = self.text();
        if text.is_empty() {
            return Err(GrantError::Invalid(format!(
                "`{}` must not be empty",
                self.form().name()
            )));
        }
        if text.len() > MAX_APPROVAL_BYTES {
            return Err(GrantError::Invalid(format!(
                "`{}` is {} bytes; at most {MAX_APPROVAL_BYTES} are accepted",
                self.form().name(),
                text.len()
            )));
        }
        if let Grant::Command(c) = self {
            let shaped = c
                .strip_prefix("edit_file ")
                .and_then(|rest| rest.split_once(' '))
                .is_some_and(|(mode, path)| !mode.is_empty() && path.starts_with('/'));
            if !shaped {
                return Err(GrantError::Invalid(
                    "`command` must be a synthetic command `edit_file <mode> <absolute path>`, exactly as in the refusal's data.command"
                        .to_string(),
                ));
            }
        }
        Ok(())
    }
}

/// `_writegate/approve` params that name no grant ([`Grant::from_params`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GrantParamsError {
    /// Both `command` and `pattern`.
    #[error(
        "give either `command` (one exact synthetic command, as in the refusal's data.command) or `pattern` (a glob), not both"
    )]
    Both,
    /// Neither.
    #[error(
        "missing `command` (the exact synthetic command from the refusal's data.command) or `pattern` (a glob)"
    )]
    Neither,
}

impl From<GrantParamsError> for Failure {
    fn from(e: GrantParamsError) -> Failure {
        Failure::InvalidParams(e.to_string())
    }
}

/// Why a grant was not stored.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// A `once` or `session` grant without a session id (it could never
    /// match anything).
    #[error(
        "scope `{0}` needs the sessionId of the session that will retry; without one use scope `workspace` or `persistent`"
    )]
    MissingSession(&'static str),
    /// Malformed or oversized `command` / `pattern`.
    #[error("{0}")]
    Invalid(String),
    /// [`MAX_PERSISTENT_APPROVALS`] already stored.
    #[error(
        "at most {MAX_PERSISTENT_APPROVALS} persistent approvals are kept; remove some from {0} or use a narrower scope"
    )]
    PersistentFull(String),
    /// The persistent approvals file could not be written.
    #[error("cannot store approval: {0}")]
    Io(#[from] std::io::Error),
}

impl From<GrantError> for Failure {
    /// Malformed, session-less or over-the-cap requests are `-32602`; a
    /// failed persistent write is `io_error`.
    fn from(e: GrantError) -> Self {
        match e {
            GrantError::Io(_) => Refusal::new(ErrorKind::IoError, e.to_string()).into(),
            _ => Failure::InvalidParams(e.to_string()),
        }
    }
}

/// The gate's question for one operation.
#[derive(Debug, Clone, Copy)]
pub struct GateRequest<'a> {
    /// `write` for `fs/write_text_file`, else the edit mode, or `read`.
    pub mode: OpMode,
    /// Where the write really goes.
    pub canonical: &'a Path,
    /// Canonical root of the operation's workspace (for
    /// [`system_reason`](super::system_reason)).
    pub root: &'a Path,
    /// Session id (empty when the request had none).
    pub session: &'a str,
    /// Runtime id of the workspace.
    pub workspace: &'a str,
    /// Permission bits of the existing file (`None`: no file there yet),
    /// for [`read_only_reason`](super::read_only_reason).
    pub file_mode: Option<u32>,
}

/// Whom a grant covers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    Session(String),
    Workspace(String),
    Persistent,
}

/// One grant of a command or glob.
#[derive(Debug, Clone)]
struct Holder {
    owner: Owner,
    /// Consumed by the first operation it lets through.
    once: bool,
    /// `None`: does not expire.
    expires: Option<Instant>,
    /// Grant order (oldest first is dropped at a cap).
    seq: u64,
}

impl Holder {
    fn covers(&self, session: &str, workspace: &str, now: Instant) -> bool {
        let live = self.expires.is_none_or(|t| now < t);
        live && match &self.owner {
            Owner::Session(s) => s == session,
            Owner::Workspace(w) => w == workspace,
            Owner::Persistent => true,
        }
    }

    fn expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|t| now >= t)
    }
}

#[derive(Debug)]
struct GlobGrant {
    glob: Glob,
    holder: Holder,
}

/// The persistent approvals file. `v: 2` keeps each entry's form; a `v: 1`
/// file (only `patterns`, which people wrote as globs) loads as patterns.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct PersistentFile {
    v: u32,
    #[serde(default)]
    commands: Vec<String>,
    #[serde(default)]
    patterns: Vec<String>,
}

impl PersistentFile {
    fn len(&self) -> usize {
        self.commands.len() + self.patterns.len()
    }

    fn contains(&self, grant: &Grant) -> bool {
        match grant {
            Grant::Command(c) => self.commands.contains(c),
            Grant::Pattern(p) => self.patterns.contains(p),
        }
    }

    fn push(&mut self, grant: &Grant) {
        match grant {
            Grant::Command(c) => self.commands.push(c.clone()),
            Grant::Pattern(p) => self.patterns.push(p.clone()),
        }
    }
}

/// Granted approvals (see the module docs for forms, bounds and expiry).
pub struct Approvals {
    file: PathBuf,
    inner: Mutex<Granted>,
}

#[derive(Default)]
struct Granted {
    /// Exact command (or a pattern without wildcards) -> its holders.
    literal: HashMap<String, Vec<Holder>>,
    /// Patterns with `*` or `?`.
    globs: Vec<GlobGrant>,
    /// What the persistent file holds, each in its form.
    persistent: PersistentFile,
    seq: u64,
    /// Commands holding `*`, `?` or `\` that the gate refused lately (at
    /// most [`MAX_REMEMBERED_REFUSALS`], oldest dropped): a `pattern` equal
    /// to one of them is a host copying `data.command` into the old field,
    /// and is taken literally.
    refused: VecDeque<String>,
}

impl Granted {
    /// Adds `grant` for `holder` (merging with an equal grant of the same
    /// owner: a standing grant is never downgraded to `once`, expiry only
    /// moves later).
    fn insert(&mut self, grant: &Grant, holder: Holder) {
        let merge = |h: &mut Holder| {
            h.once = h.once && holder.once;
            h.expires = match (h.expires, holder.expires) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
            h.seq = holder.seq;
        };
        match Key::of(grant) {
            Key::Literal(key) => {
                let holders = self.literal.entry(key).or_default();
                match holders.iter_mut().find(|h| h.owner == holder.owner) {
                    Some(h) => merge(h),
                    None => holders.push(holder),
                }
            }
            Key::Glob(glob) => {
                match self
                    .globs
                    .iter_mut()
                    .find(|g| g.glob == glob && g.holder.owner == holder.owner)
                {
                    Some(g) => merge(&mut g.holder),
                    None => self.globs.push(GlobGrant { glob, holder }),
                }
            }
        }
    }

    /// Number of grants whose holder satisfies `pred`.
    fn count(&self, pred: &dyn Fn(&Holder) -> bool) -> usize {
        self.literal.values().flatten().filter(|h| pred(h)).count()
            + self.globs.iter().filter(|g| pred(&g.holder)).count()
    }

    /// Removes every grant whose holder satisfies `pred`.
    fn remove_all(&mut self, pred: &dyn Fn(&Holder) -> bool) {
        self.literal.retain(|_, hs| {
            hs.retain(|h| !pred(h));
            !hs.is_empty()
        });
        self.globs.retain(|g| !pred(&g.holder));
    }

    /// Removes the oldest grant whose holder satisfies `pred`.
    fn remove_oldest(&mut self, pred: &dyn Fn(&Holder) -> bool) {
        let oldest = self
            .literal
            .values()
            .flatten()
            .chain(self.globs.iter().map(|g| &g.holder))
            .filter(|h| pred(h))
            .map(|h| h.seq)
            .min();
        if let Some(seq) = oldest {
            self.remove_all(&|h: &Holder| h.seq == seq);
        }
    }

    /// Whether a standing (not `once`) grant covers `command`.
    fn standing(&self, command: &str, chars: &mut Option<Vec<char>>, who: &Who<'_>) -> bool {
        let ok = |h: &Holder| !h.once && h.covers(who.session, who.workspace, who.now);
        if self
            .literal
            .get(command)
            .is_some_and(|hs| hs.iter().any(ok))
        {
            return true;
        }
        if self.globs.is_empty() {
            return false;
        }
        let t = chars.get_or_insert_with(|| command.chars().collect());
        self.globs
            .iter()
            .any(|g| ok(&g.holder) && g.glob.matches_chars(t))
    }

    /// Consumes one `once` grant covering `command`, if any.
    fn consume_once(
        &mut self,
        command: &str,
        chars: &mut Option<Vec<char>>,
        who: &Who<'_>,
    ) -> bool {
        let ok = |h: &Holder| h.once && h.covers(who.session, who.workspace, who.now);
        if let Some(hs) = self.literal.get_mut(command)
            && let Some(i) = hs.iter().position(ok)
        {
            hs.swap_remove(i);
            if hs.is_empty() {
                self.literal.remove(command);
            }
            return true;
        }
        if self.globs.is_empty() {
            return false;
        }
        let t = chars.get_or_insert_with(|| command.chars().collect());
        if let Some(i) = self
            .globs
            .iter()
            .position(|g| ok(&g.holder) && g.glob.matches_chars(t))
        {
            self.globs.swap_remove(i);
            return true;
        }
        false
    }
}

/// Where a grant is kept: a command, or a pattern without `*`/`?` (its
/// escapes removed), is a literal key; any other pattern is a glob.
enum Key {
    Literal(String),
    Glob(Glob),
}

impl Key {
    fn of(grant: &Grant) -> Key {
        match grant {
            Grant::Command(c) => Key::Literal(c.clone()),
            Grant::Pattern(p) => {
                let glob = Glob::new(p);
                match glob.literal() {
                    Some(l) => Key::Literal(l),
                    None => Key::Glob(glob),
                }
            }
        }
    }
}

/// Who asks, and when.
struct Who<'a> {
    session: &'a str,
    workspace: &'a str,
    now: Instant,
}

impl Approvals {
    /// Loads persistent approvals from `file` (missing is fine; an unreadable
    /// or invalid file, or one of an unknown version, is logged and ignored:
    /// nothing is approved from it). Entries over [`MAX_APPROVAL_BYTES`] or
    /// beyond [`MAX_PERSISTENT_APPROVALS`] are skipped with a warning.
    pub fn load(file: PathBuf) -> Approvals {
        let mut granted = Granted::default();
        match std::fs::read(&file) {
            Ok(bytes) => match serde_json::from_slice::<PersistentFile>(&bytes) {
                Ok(p) if p.v == 1 || p.v == 2 => {
                    let entries = p
                        .commands
                        .into_iter()
                        .map(Grant::Command)
                        .chain(p.patterns.into_iter().map(Grant::Pattern));
                    for grant in entries {
                        if granted.persistent.len() >= MAX_PERSISTENT_APPROVALS {
                            tracing::warn!(file = %file.display(), "more than {MAX_PERSISTENT_APPROVALS} persistent approvals; ignoring the rest");
                            break;
                        }
                        if let Err(e) = grant.validate() {
                            tracing::warn!(file = %file.display(), error = %e, "ignoring a persistent approval");
                            continue;
                        }
                        if granted.persistent.contains(&grant) {
                            continue;
                        }
                        granted.persistent.push(&grant);
                        let seq = granted.seq;
                        granted.seq += 1;
                        granted.insert(
                            &grant,
                            Holder {
                                owner: Owner::Persistent,
                                once: false,
                                expires: None,
                                seq,
                            },
                        );
                    }
                    granted.persistent.v = 2;
                }
                Ok(p) => {
                    tracing::warn!(file = %file.display(), version = p.v, "ignoring approvals file of an unknown version");
                }
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "ignoring invalid approvals file");
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "cannot read approvals file");
            }
        }
        granted.persistent.v = 2;
        Approvals {
            file,
            inner: Mutex::new(granted),
        }
    }

    /// Grants `grant` in `scope` for `session` / `workspace` (runtime id)
    /// and returns the `_writegate/approve` result: `{command|pattern,
    /// scope}` plus `expiresInSecs` for `once` and `session`.
    ///
    /// A `pattern` that is exactly a command the gate refused lately and
    /// that holds `*`, `?` or `\\` is stored as a `command` (and the result
    /// says `command`): that is a host copying the refusal's `data.command`
    /// into `pattern`, and the path in it must stay literal.
    ///
    /// Errors: [`GrantError::MissingSession`] for `once`/`session` with an
    /// empty `session`; [`GrantError::Invalid`] for an empty or oversized
    /// text or a `command` not shaped `edit_file <mode> /<path>`;
    /// [`GrantError::PersistentFull`]; [`GrantError::Io`] when the
    /// persistent file (written atomically, 0600, before the grant counts)
    /// cannot be written.
    pub fn grant(
        &self,
        grant: &Grant,
        scope: Scope,
        session: &str,
        workspace: &str,
    ) -> Result<GrantOutcome, GrantError> {
        self.grant_at(grant, scope, session, workspace, Instant::now())
    }

    fn grant_at(
        &self,
        grant: &Grant,
        scope: Scope,
        session: &str,
        workspace: &str,
        now: Instant,
    ) -> Result<GrantOutcome, GrantError> {
        grant.validate()?;
        let owner = match scope {
            Scope::Once | Scope::Session if session.is_empty() => {
                return Err(GrantError::MissingSession(match scope {
                    Scope::Once => "once",
                    _ => "session",
                }));
            }
            Scope::Once | Scope::Session => Owner::Session(session.to_string()),
            Scope::Workspace => Owner::Workspace(workspace.to_string()),
            Scope::Persistent => Owner::Persistent,
        };
        let mut g = lock(&self.inner);
        let copied;
        let grant = match grant {
            Grant::Pattern(p) if g.refused.contains(p) => {
                copied = Grant::Command(p.clone());
                &copied
            }
            _ => grant,
        };
        g.remove_all(&|h: &Holder| h.expired(now));
        if scope == Scope::Persistent {
            if !g.persistent.contains(grant) {
                if g.persistent.len() >= MAX_PERSISTENT_APPROVALS {
                    return Err(GrantError::PersistentFull(self.file.display().to_string()));
                }
                let mut next = g.persistent.clone();
                next.push(grant);
                let body = serde_json::to_vec_pretty(&next).map_err(std::io::Error::other)?;
                writegate_fs::write_private_file(&self.file, &body)
                    .map_err(std::io::Error::other)?;
                g.persistent = next;
            }
        } else {
            if let Owner::Session(s) = &owner {
                let mine = |h: &Holder| matches!(&h.owner, Owner::Session(x) if x == s);
                if g.count(&mine) >= MAX_APPROVALS_PER_SESSION {
                    g.remove_oldest(&mine);
                }
            }
            let live = |h: &Holder| h.owner != Owner::Persistent;
            if g.count(&live) >= MAX_LIVE_APPROVALS {
                g.remove_oldest(&live);
            }
        }
        let seq = g.seq;
        g.seq += 1;
        let expires = scope.ttl().map(|d| now + d);
        g.insert(
            grant,
            Holder {
                owner,
                once: scope == Scope::Once,
                expires,
                seq,
            },
        );
        Ok(GrantOutcome {
            grant: grant.clone(),
            scope,
            expires_in_secs: scope.ttl().map(|d| d.as_secs()),
        })
    }

    /// Whether an approval covers `command` for `session` in `workspace`.
    /// Standing grants (`session`, `workspace`, `persistent`) are looked at
    /// first; otherwise a matching `once` grant is consumed. Expired grants
    /// cover nothing.
    pub fn take(&self, command: &str, session: &str, workspace: &str) -> bool {
        self.take_at(command, session, workspace, Instant::now())
    }

    fn take_at(&self, command: &str, session: &str, workspace: &str, now: Instant) -> bool {
        let who = Who {
            session,
            workspace,
            now,
        };
        let mut g = lock(&self.inner);
        let mut chars = None;
        g.standing(command, &mut chars, &who) || g.consume_once(command, &mut chars, &who)
    }

    /// The gate (SPEC 12): judges `req` ([`judge`]); above
    /// `policy.auto_approve` it needs an approval ([`Approvals::take`]).
    ///
    /// Errors: `approval_required`, whose `data` carries `command` (the
    /// exact synthetic command to approve literally), `level`, `reason` and
    /// `approve` (ready-made `_writegate/approve` params for scope `once`);
    /// the hint says how to approve.
    pub fn check(&self, policy: &PolicyConfig, req: &GateRequest<'_>) -> Result<(), Refusal> {
        let command = synthetic_command(req.mode.as_str(), req.canonical);
        let verdict = judge(
            policy,
            &command,
            req.canonical,
            Some(req.root),
            req.file_mode,
        );
        if verdict.level <= policy.auto_approve || self.take(&command, req.session, req.workspace) {
            return Ok(());
        }
        if command.contains(['*', '?', '\\']) {
            let mut g = lock(&self.inner);
            if !g.refused.contains(&command) {
                if g.refused.len() >= MAX_REMEMBERED_REFUSALS {
                    g.refused.pop_front();
                }
                g.refused.push_back(command.clone());
            }
        }
        Err(approval_required(&command, &verdict, req.session))
    }
}

impl Approvals {
    /// The gate for a read (`mode` `read`) of a file the connection may read
    /// only because of where the request came from: outside the workspace
    /// (a marked flow's read), or in a workspace that only an MCP client's
    /// roots named. There a credential path (the [`read_protected_reason`] list:
    /// `.ssh/`, keys, `.env`, `.netrc`, cloud credentials ...) is held, as a
    /// write would be, until a person approves the literal command
    /// `edit_file read <path>`; every other file reads freely. A config
    /// rule written for reads (its pattern starts `edit_file read `) that
    /// matches the command rates it instead (so a rule can allow one such
    /// read for good); a rule for writes, even `edit_file * ...`, does not
    /// lower a read, and system paths do not apply to reads.
    pub fn check_read(&self, policy: &PolicyConfig, req: &GateRequest<'_>) -> Result<(), Refusal> {
        let command = synthetic_command(req.mode.as_str(), req.canonical);
        let verdict = if let Some(rule) = policy
            .rules
            .iter()
            .filter(|r| r.pattern.starts_with("edit_file read "))
            .find(|r| glob_match(&r.pattern, &command))
        {
            Verdict {
                level: rule.level,
                reason: format!("config rule `{}`", rule.pattern).into(),
            }
        } else if let Some(reason) = read_protected_reason(req.canonical) {
            Verdict {
                level: Level::Dangerous,
                reason: Cow::Borrowed(reason),
            }
        } else {
            return Ok(());
        };
        if verdict.level <= policy.auto_approve || self.take(&command, req.session, req.workspace) {
            return Ok(());
        }
        Err(approval_required(&command, &verdict, req.session))
    }
}

/// The `approval_required` refusal for `command`, with the facts a front
/// end needs to offer the approval ([`Detail::Approval`]).
fn approval_required(command: &str, verdict: &Verdict, session: &str) -> Refusal {
    let how = if session.is_empty() {
        "this request has no sessionId, so only scope `workspace` or `persistent` can approve it"
    } else {
        "scope `once`, `session`, `workspace` or `persistent`"
    };
    Refusal::new(
        ErrorKind::ApprovalRequired,
        format!(
            "`{command}` is rated {} ({}); ask the user, then call _writegate/approve with `command` set to data.command (matched literally; {how}) and retry",
            verdict.level.as_str(),
            verdict.reason
        ),
    )
    .with_detail(Detail::Approval {
        command: command.to_string(),
        level: verdict.level,
        reason: verdict.reason.to_string(),
        session: (!session.is_empty()).then(|| session.to_string()),
        asked: false,
    })
}

/// What [`Approvals::grant`] stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantOutcome {
    /// The grant as stored: a pattern that was a refused command copied
    /// into `pattern` is stored as that literal command.
    pub grant: Grant,
    /// Its scope.
    pub scope: Scope,
    /// Seconds until it expires (`once` and `session`).
    pub expires_in_secs: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::escape_glob;
    use crate::policy::testing::{METACHARS, approvals, cmd};
    use writegate_text::EditMode;

    fn command(s: &str) -> Grant {
        Grant::Command(s.to_string())
    }

    fn pattern(s: &str) -> Grant {
        Grant::Pattern(s.to_string())
    }

    #[test]
    fn scopes() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("state/approvals.json");
        let a = Approvals::load(file.clone());
        let c = "edit_file write /h/.ssh/config";
        assert!(!a.take(c, "s1", "w1"));
        a.grant(
            &pattern("edit_file write /h/.ssh/*"),
            Scope::Once,
            "s1",
            "w1",
        )
        .unwrap();
        assert!(!a.take(c, "s2", "w1"));
        assert!(a.take(c, "s1", "w1"));
        assert!(!a.take(c, "s1", "w1"), "once is consumed");
        a.grant(
            &pattern("edit_file * /h/.ssh/*"),
            Scope::Session,
            "s1",
            "w1",
        )
        .unwrap();
        assert!(a.take(c, "s1", "w1") && a.take(c, "s1", "w1"));
        assert!(!a.take(c, "s2", "w1"));
        a.grant(&pattern("edit_file *"), Scope::Workspace, "s1", "w1")
            .unwrap();
        assert!(a.take(c, "s9", "w1"));
        assert!(!a.take(c, "s9", "w2"));
        a.grant(
            &pattern("edit_file * /h/.ssh/config"),
            Scope::Persistent,
            "s1",
            "w1",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let reloaded = Approvals::load(file);
        assert!(reloaded.take(c, "other", "w9"));
    }

    #[test]
    fn literal_commands_scopes() {
        let (_d, a) = approvals();
        let c = cmd("/h/.ssh/config");
        a.grant(&command(&c), Scope::Once, "s1", "w1").unwrap();
        assert!(!a.take(&c, "s2", "w1"), "another session");
        assert!(!a.take(&cmd("/h/.ssh/config2"), "s1", "w1"), "another path");
        assert!(a.take(&c, "s1", "w1"));
        assert!(!a.take(&c, "s1", "w1"), "once is consumed");
        a.grant(&command(&c), Scope::Session, "s1", "w1").unwrap();
        assert!(a.take(&c, "s1", "w1") && a.take(&c, "s1", "w1"));
        assert!(!a.take(&c, "s2", "w1"));
        a.grant(&command(&c), Scope::Workspace, "s1", "w1").unwrap();
        assert!(a.take(&c, "s2", "w1"));
        assert!(!a.take(&c, "s2", "w2"));
    }

    /// Approving the literal command of a file named with
    /// glob metacharacters approves that file only.
    #[test]
    fn approving_the_literal_command_of_a_metachar_name_approves_that_file_only() {
        for scope in [
            Scope::Once,
            Scope::Session,
            Scope::Workspace,
            Scope::Persistent,
        ] {
            for c in METACHARS {
                let (_d, a) = approvals();
                let named = cmd(&format!("/h/.ssh/a{c}"));
                a.grant(&command(&named), scope, "s", "w").unwrap();
                for other in ["/h/.ssh/abc", "/h/.ssh/a", "/h/.ssh/ab", "/h/.ssh/a/b"] {
                    assert!(
                        !a.take(&cmd(other), "s", "w"),
                        "{scope:?} a{c} approved {other}"
                    );
                }
                if c == '[' || c == '{' {
                    // Would-be classes and alternatives are not expanded.
                    assert!(!a.take(&cmd(&format!("/h/.ssh/a{c}b]")), "s", "w"));
                }
                assert!(a.take(&named, "s", "w"), "{scope:?}: {named}");
            }
        }
        // The campaign's names.
        let (_d, a) = approvals();
        for (name, victims) in [
            (
                "/h/.ssh/*",
                &["/h/.ssh/authorized_keys", "/h/.ssh/config"][..],
            ),
            ("/r/*.pem", &["/r/key.pem"][..]),
            ("/h/id_rsa*", &["/h/id_rsa", "/h/id_rsa.pub"][..]),
            (
                "/r/.git/*",
                &["/r/.git/config", "/r/.git/hooks/pre-commit"][..],
            ),
            ("/r/.git/?onfig", &["/r/.git/config"][..]),
            (r"/r/x\*", &[r"/r/x\abc", "/r/x*"][..]),
        ] {
            a.grant(&command(&cmd(name)), Scope::Session, "s", "w")
                .unwrap();
            for v in victims {
                assert!(!a.take(&cmd(v), "s", "w"), "approving {name} approved {v}");
            }
            assert!(a.take(&cmd(name), "s", "w"));
        }
    }

    /// A host that copies `data.command` into `pattern` (the only form
    /// older hosts send) still approves one file only.
    #[test]
    fn a_refused_command_copied_into_pattern_is_taken_literally() {
        let (_d, a) = approvals();
        let policy = PolicyConfig::default();
        let req = GateRequest {
            mode: OpMode::Edit(EditMode::Write),
            canonical: Path::new("/h/.ssh/*"),
            root: Path::new("/r"),
            session: "s",
            workspace: "w",
            file_mode: None,
        };
        let r = a.check(&policy, &req).unwrap_err();
        let Some(Detail::Approval { command: shown, .. }) = r.detail else {
            panic!("no detail")
        };
        let out = a.grant(&pattern(&shown), Scope::Session, "s", "w").unwrap();
        assert_eq!(
            out,
            GrantOutcome {
                grant: Grant::Command(shown.clone()),
                scope: Scope::Session,
                expires_in_secs: Some(SESSION_TTL.as_secs()),
            }
        );
        for victim in ["/h/.ssh/authorized_keys", "/h/.ssh/config"] {
            let v = GateRequest {
                canonical: Path::new(victim),
                ..req
            };
            assert!(a.check(&policy, &v).is_err(), "{victim} got through");
        }
        assert!(a.check(&policy, &req).is_ok());
        // A glob that was never a refused command stays a glob.
        a.grant(
            &pattern("edit_file * /h/.ssh/co*"),
            Scope::Session,
            "s",
            "w",
        )
        .unwrap();
        let config = GateRequest {
            canonical: Path::new("/h/.ssh/config"),
            ..req
        };
        assert!(a.check(&policy, &config).is_ok());
        // The memory of refusals is bounded.
        for i in 0..MAX_REMEMBERED_REFUSALS + 5 {
            let name = format!("/h/.ssh/{i}*");
            let v = GateRequest {
                canonical: Path::new(&name),
                ..req
            };
            assert!(a.check(&policy, &v).is_err());
        }
        assert_eq!(
            a.inner.lock().unwrap().refused.len(),
            MAX_REMEMBERED_REFUSALS
        );
    }

    #[test]
    fn a_pattern_is_a_glob_and_a_pattern_without_wildcards_is_literal() {
        let (_d, a) = approvals();
        a.grant(&pattern("edit_file * /r/*.pem"), Scope::Session, "s", "w")
            .unwrap();
        assert!(a.take(&cmd("/r/key.pem"), "s", "w"));
        assert!(a.take(&cmd("/r/sub/x.pem"), "s", "w"));
        assert!(!a.take(&cmd("/r/key.pem.bak"), "s", "w"));
        // An escaped pattern: only the file named with a star.
        let (_d, a) = approvals();
        let star = cmd("/h/id_rsa*");
        a.grant(&pattern(&escape_glob(&star)), Scope::Session, "s", "w")
            .unwrap();
        assert!(a.take(&star, "s", "w"));
        assert!(!a.take(&cmd("/h/id_rsa"), "s", "w"));
        assert!(!a.take(&cmd("/h/id_rsa.pub"), "s", "w"));
        // A pattern with no `*`/`?` is stored as a literal key.
        let (_d, a) = approvals();
        let plain = cmd("/r/.env");
        a.grant(&pattern(&plain), Scope::Workspace, "s", "w")
            .unwrap();
        {
            let g = a.inner.lock().unwrap();
            assert!(g.globs.is_empty());
            assert!(g.literal.contains_key(&plain));
        }
        assert!(a.take(&plain, "t", "w"));
    }

    #[test]
    fn standing_grants_are_used_before_a_once_grant_is_spent() {
        let (_d, a) = approvals();
        let c = cmd("/r/.env");
        a.grant(&command(&c), Scope::Once, "s", "w").unwrap();
        a.grant(&pattern("edit_file * /r/*"), Scope::Workspace, "s", "w")
            .unwrap();
        assert!(a.take(&c, "s", "w"));
        assert!(a.take(&c, "s", "w"));
        assert_eq!(
            a.inner.lock().unwrap().literal[&c].len(),
            1,
            "the once grant was not spent while the workspace grant covered the write"
        );
        let (_d, a) = approvals();
        a.grant(&command(&c), Scope::Once, "s", "w").unwrap();
        a.grant(&command(&c), Scope::Session, "s", "w").unwrap();
        assert!(
            a.take(&c, "s", "w") && a.take(&c, "s", "w"),
            "upgraded to session"
        );
        a.grant(&command(&c), Scope::Once, "s", "w").unwrap();
        assert!(
            a.take(&c, "s", "w") && a.take(&c, "s", "w"),
            "never downgraded to once"
        );
    }

    /// A session-scoped grant needs a session.
    #[test]
    fn once_or_session_without_a_session_is_an_error() {
        let (_d, a) = approvals();
        let c = cmd("/r/.env");
        for scope in [Scope::Once, Scope::Session] {
            let err = a.grant(&command(&c), scope, "", "w").unwrap_err();
            assert!(matches!(err, GrantError::MissingSession(_)), "{err}");
            assert!(err.to_string().contains("sessionId"), "{err}");
            assert!(matches!(Failure::from(err), Failure::InvalidParams(_)));
        }
        assert!(!a.take(&c, "", "w"), "nothing was stored");
        a.grant(&command(&c), Scope::Workspace, "", "w").unwrap();
        assert!(a.take(&c, "", "w"));
    }

    #[test]
    fn malformed_grants_are_invalid_params() {
        let (_d, a) = approvals();
        for g in [
            command(""),
            pattern(""),
            command("/h/.ssh/config"),
            command("edit_file write relative/path"),
            command("edit_file  /x"),
            command(&format!(
                "edit_file write /{}",
                "a".repeat(MAX_APPROVAL_BYTES)
            )),
            pattern(&"*".repeat(MAX_APPROVAL_BYTES + 1)),
        ] {
            let err = a.grant(&g, Scope::Workspace, "s", "w").unwrap_err();
            assert!(matches!(err, GrantError::Invalid(_)), "{g:?}: {err}");
            assert!(matches!(Failure::from(err), Failure::InvalidParams(_)));
        }
        assert_eq!(Grant::from_params(Some("a".into()), None), Ok(command("a")));
        assert_eq!(Grant::from_params(None, Some("a".into())), Ok(pattern("a")));
        assert_eq!(
            Grant::from_params(Some("a".into()), Some("b".into())),
            Err(GrantParamsError::Both)
        );
        assert_eq!(
            Grant::from_params(None, None),
            Err(GrantParamsError::Neither)
        );
    }

    #[test]
    fn once_and_session_grants_expire() {
        let (_d, a) = approvals();
        let c = cmd("/r/.env");
        let t0 = Instant::now();
        a.grant_at(&command(&c), Scope::Once, "s", "w", t0).unwrap();
        a.grant_at(
            &pattern("edit_file * /r/*.pem"),
            Scope::Session,
            "s",
            "w",
            t0,
        )
        .unwrap();
        a.grant_at(&command(&cmd("/r/id_rsa")), Scope::Workspace, "s", "w", t0)
            .unwrap();
        let late = t0 + ONCE_TTL + Duration::from_secs(1);
        assert!(!a.take_at(&c, "s", "w", late), "once expired");
        assert!(
            a.take_at(&cmd("/r/k.pem"), "s", "w", late),
            "session still on"
        );
        let later = t0 + SESSION_TTL + Duration::from_secs(1);
        assert!(
            !a.take_at(&cmd("/r/k.pem"), "s", "w", later),
            "session expired"
        );
        assert!(
            a.take_at(&cmd("/r/id_rsa"), "s", "w", later),
            "workspace stays"
        );
        // Expired grants are dropped at the next grant.
        a.grant_at(&command(&cmd("/r/x")), Scope::Once, "s", "w", later)
            .unwrap();
        let g = a.inner.lock().unwrap();
        assert_eq!(g.count(&|_| true), 2, "the workspace grant and the new one");
    }

    #[test]
    fn approvals_are_capped_and_the_oldest_is_dropped() {
        let (_d, a) = approvals();
        // One session: at most MAX_APPROVALS_PER_SESSION.
        for i in 0..=MAX_APPROVALS_PER_SESSION {
            a.grant(
                &command(&cmd(&format!("/r/{i}.env"))),
                Scope::Session,
                "s",
                "w",
            )
            .unwrap();
        }
        assert!(
            !a.take(&cmd("/r/0.env"), "s", "w"),
            "the oldest was dropped"
        );
        assert!(a.take(&cmd("/r/1.env"), "s", "w"));
        let last = format!("/r/{MAX_APPROVALS_PER_SESSION}.env");
        assert!(a.take(&cmd(&last), "s", "w"));
        // All live grants: at most MAX_LIVE_APPROVALS.
        let (_d, a) = approvals();
        for i in 0..MAX_LIVE_APPROVALS + 10 {
            let session = format!("s{}", i % 100);
            a.grant(
                &command(&cmd(&format!("/r/{i}.env"))),
                Scope::Session,
                &session,
                "w",
            )
            .unwrap();
        }
        assert_eq!(a.inner.lock().unwrap().count(&|_| true), MAX_LIVE_APPROVALS);
        assert!(!a.take(&cmd("/r/0.env"), "s0", "w"));
        let last = MAX_LIVE_APPROVALS + 9;
        assert!(a.take(
            &cmd(&format!("/r/{last}.env")),
            &format!("s{}", last % 100),
            "w"
        ));
    }

    #[test]
    fn persistent_approvals_are_capped_with_an_error() {
        let (_d, a) = approvals();
        for i in 0..MAX_PERSISTENT_APPROVALS {
            a.grant(
                &command(&cmd(&format!("/r/{i}.env"))),
                Scope::Persistent,
                "",
                "w",
            )
            .unwrap();
        }
        let err = a
            .grant(
                &command(&cmd("/r/one-more.env")),
                Scope::Persistent,
                "",
                "w",
            )
            .unwrap_err();
        assert!(matches!(err, GrantError::PersistentFull(_)), "{err}");
        assert!(!a.take(&cmd("/r/one-more.env"), "s", "w"));
        // Granting an existing one again is fine.
        a.grant(&command(&cmd("/r/0.env")), Scope::Persistent, "", "w")
            .unwrap();
    }

    #[test]
    fn persistent_file_keeps_each_form_and_a_v1_file_loads_as_patterns() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("approvals.json");
        let a = Approvals::load(file.clone());
        let star = cmd("/h/id_rsa*");
        a.grant(&command(&star), Scope::Persistent, "", "w")
            .unwrap();
        a.grant(&pattern("edit_file * /r/*.pem"), Scope::Persistent, "", "w")
            .unwrap();
        let stored: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(
            stored,
            serde_json::json!({"v": 2, "commands": [star], "patterns": ["edit_file * /r/*.pem"]})
        );
        let b = Approvals::load(file.clone());
        assert!(b.take(&star, "x", "y"));
        assert!(
            !b.take(&cmd("/h/id_rsa"), "x", "y"),
            "a command stays literal"
        );
        assert!(b.take(&cmd("/r/a.pem"), "x", "y"), "a pattern stays a glob");
        // Version 1 (people wrote globs there): loaded as patterns.
        std::fs::write(&file, r#"{"v":1,"patterns":["edit_file * /h/.ssh/*"]}"#).unwrap();
        let c = Approvals::load(file.clone());
        assert!(c.take(&cmd("/h/.ssh/config"), "x", "y"));
        // Unknown versions and garbage approve nothing.
        std::fs::write(&file, r#"{"v":3,"commands":["edit_file write /h/.env"]}"#).unwrap();
        assert!(!Approvals::load(file.clone()).take(&cmd("/h/.env"), "x", "y"));
        std::fs::write(&file, "not json").unwrap();
        assert!(!Approvals::load(file).take(&cmd("/h/.env"), "x", "y"));
    }

    #[test]
    fn the_gate_refuses_with_the_literal_command_and_how_to_approve() {
        let (_d, a) = approvals();
        let policy = PolicyConfig::default();
        let canonical = Path::new("/r/.ssh/id_rsa*");
        let req = GateRequest {
            mode: OpMode::Edit(EditMode::Append),
            canonical,
            root: Path::new("/r"),
            session: "s1",
            workspace: "w",
            file_mode: None,
        };
        let r = a.check(&policy, &req).unwrap_err();
        assert_eq!(r.kind, ErrorKind::ApprovalRequired);
        let c = "edit_file append /r/.ssh/id_rsa*";
        let Some(Detail::Approval {
            command,
            level,
            session,
            ..
        }) = r.detail.clone()
        else {
            panic!("no detail")
        };
        assert_eq!((command.as_str(), level.as_str()), (c, "dangerous"));
        assert_eq!(session.as_deref(), Some("s1"));
        assert!(r.hint.contains("SSH directory"), "{}", r.hint);
        assert!(r.hint.contains("`command`"), "{}", r.hint);
        // Approving what the refusal offers lets exactly that through.
        let g = Grant::from_params(Some(command), None).unwrap();
        a.grant(&g, Scope::Once, "s1", "w").unwrap();
        let sibling = GateRequest {
            canonical: Path::new("/r/.ssh/id_rsa"),
            ..req
        };
        assert!(a.check(&policy, &sibling).is_err());
        assert!(a.check(&policy, &req).is_ok());
        assert!(a.check(&policy, &req).is_err(), "once is spent");
        // Without a session the offer is a workspace grant.
        let r = a
            .check(&policy, &GateRequest { session: "", ..req })
            .unwrap_err();
        assert!(matches!(
            r.detail,
            Some(Detail::Approval { session: None, .. })
        ));
        // An ordinary path passes; auto_approve = dangerous passes everything.
        let ok = GateRequest {
            canonical: Path::new("/r/src/a.rs"),
            ..req
        };
        assert!(a.check(&policy, &ok).is_ok());
        let lax = PolicyConfig {
            auto_approve: Level::Dangerous,
            rules: vec![],
        };
        assert!(a.check(&lax, &req).is_ok());
    }
}
