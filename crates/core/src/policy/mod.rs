//! The approval gate (SPEC 12; seed 000 "approval as a synthetic command").
//!
//! Every write and edit is judged as `edit_file <mode> <canonical path>`
//! ([`synthetic_command`]). The rating is pure ([`judge`], [`rate`]): the
//! first matching config rule, else the built-in protected-path rules
//! ([`protected_reason`]), an existing read-only file
//! ([`read_only_reason`]) or a system path ([`system_reason`]), else
//! `moderate`. Approvals live
//! in [`Approvals`]; the persistent scope is written through `writegate-fs`.
//!
//! An approval names what it covers in one of two forms ([`Grant`]):
//!
//! - **`command`**: one exact synthetic command, compared byte for byte. This
//!   is what a host copies from the `approval_required` refusal
//!   (`data.command`). A path is never a pattern: a file literally named
//!   `id_rsa*` approved this way approves that file and nothing else.
//! - **`pattern`**: a glob a person wrote on purpose ([`Glob`]: `*` any run of
//!   characters, `/` included; `?` one character; `\` makes the next
//!   character literal; nothing else is special).
//!
//! Literal approvals are kept in a hash map keyed by the exact command, so a
//! lookup is O(1) however many there are; globs are tried only when some
//! exist. Grants are bounded ([`MAX_APPROVAL_BYTES`],
//! [`MAX_APPROVALS_PER_SESSION`], [`MAX_LIVE_APPROVALS`],
//! [`MAX_PERSISTENT_APPROVALS`]) and `once`/`session` grants expire
//! ([`ONCE_TTL`], [`SESSION_TTL`]). Dropping a grant can only make the gate
//! hold more writes, never fewer.

use crate::config::{Level, PolicyConfig};
use crate::error::{Detail, ErrorKind, Failure, Refusal};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The synthetic command for an operation: `edit_file <mode> <canonical path>`.
///
/// The path is written as it is; a path that is not valid UTF-8 (possible
/// only through a symlinked directory) has each byte that is not part of a
/// UTF-8 sequence written as `\xNN`, so two such paths never share a command.
pub fn synthetic_command(mode: &str, canonical: &Path) -> String {
    let bytes = canonical.as_os_str().as_encoded_bytes();
    let mut out = String::with_capacity("edit_file  ".len() + mode.len() + bytes.len());
    out.push_str("edit_file ");
    out.push_str(mode);
    out.push(' ');
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Globs.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    /// `*`: any run of characters (including none and including `/`).
    Star,
    /// `?`: exactly one character.
    One,
    /// A literal character (`\x` for any `x`, or any other character).
    Lit(char),
}

/// A compiled glob over a whole string: `*` matches any run of characters
/// (`/` included), `?` exactly one character, `\` makes the next character
/// literal (a trailing `\` is a literal backslash); every other character,
/// `[`, `]`, `{` and `}` included, matches only itself. Case-sensitive.
///
/// Matching costs at most O(pattern length x text length) (one backtrack
/// point, no recursion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    toks: Vec<Tok>,
}

impl Glob {
    /// Compiles `pattern` (never fails: every string is a glob).
    pub fn new(pattern: &str) -> Glob {
        let mut toks = Vec::with_capacity(pattern.len());
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            match c {
                // `**` means the same as `*`; one token keeps matching linear.
                '*' if toks.last() == Some(&Tok::Star) => {}
                '*' => toks.push(Tok::Star),
                '?' => toks.push(Tok::One),
                '\\' => toks.push(Tok::Lit(chars.next().unwrap_or('\\'))),
                c => toks.push(Tok::Lit(c)),
            }
        }
        Glob { toks }
    }

    /// The one string this glob matches, when it has no `*` or `?`
    /// (escapes removed), else `None`.
    pub fn literal(&self) -> Option<String> {
        self.toks
            .iter()
            .map(|t| match t {
                Tok::Lit(c) => Some(*c),
                Tok::Star | Tok::One => None,
            })
            .collect()
    }

    /// Whether the glob matches all of `text`.
    pub fn is_match(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        self.matches_chars(&t)
    }

    fn matches_chars(&self, t: &[char]) -> bool {
        let p = &self.toks;
        let (mut pi, mut ti) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            match p.get(pi) {
                Some(Tok::Star) => {
                    star = Some((pi, ti));
                    pi += 1;
                }
                Some(Tok::One) => {
                    pi += 1;
                    ti += 1;
                }
                Some(Tok::Lit(c)) if *c == t[ti] => {
                    pi += 1;
                    ti += 1;
                }
                _ => match star {
                    // Let the last `*` swallow one more character.
                    Some((sp, st)) => {
                        star = Some((sp, st + 1));
                        pi = sp + 1;
                        ti = st + 1;
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|t| *t == Tok::Star)
    }
}

/// Glob match of `pattern` over the whole of `text` (see [`Glob`]).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    Glob::new(pattern).is_match(text)
}

/// `text` as a glob that matches exactly `text`: `*`, `?` and `\` get a `\`
/// in front. For a person or host building a pattern around a path
/// (`escape_glob("/h/id_rsa*") + "*"`); approving one file needs no pattern
/// at all (approve its `command`).
pub fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------
// Protected paths.
// ---------------------------------------------------------------------------

/// How a built-in protected-path rule matches. Names are compared after
/// case folding ([`fold`]), so `.ENV`, `.GIT/` and `ID_RSA` are caught on
/// case-insensitive filesystems too.
enum Match {
    /// These components, consecutively, anywhere in the path (the leaf
    /// included): `[".git"]` is any `.git` file or directory at any depth.
    Seq(&'static [&'static str]),
    /// The leaf equals this name.
    Leaf(&'static str),
    /// The leaf starts with this.
    LeafPrefix(&'static str),
    /// The leaf ends with this.
    LeafSuffix(&'static str),
}

/// One built-in rule: how it matches and why it matters (shown in the
/// refusal's hint and `data.reason`).
struct Protected {
    matches: Match,
    reason: &'static str,
}

const fn rule(matches: Match, reason: &'static str) -> Protected {
    Protected { matches, reason }
}

const SHELL_RC: &str = "shell start-up file: it runs commands at every login or new shell";
const SSH_KEY: &str = "SSH private key";
const KEY_FILE: &str = "private key or certificate store";
const ENV_FILE: &str = "environment file: usually holds secrets";
const GIT: &str = "git repository state: its config and hooks can run commands";
const CRON: &str = "crontab: runs commands on a schedule";
const LAUNCHD: &str = "launchd unit: runs commands at login or boot";
const TOKENS: &str = "file holding login tokens or passwords";

/// The built-in protected-path rules, rated `dangerous` (SPEC 12 plus issue
/// 13). Order only decides which reason is shown.
const PROTECTED: &[Protected] = &[
    // Repository state: any `.git` file or directory at any depth (a `.git`
    // file can point git at a crafted directory whose config runs commands).
    rule(Match::Seq(&[".git"]), GIT),
    rule(
        Match::Leaf(".gitconfig"),
        "git configuration: it can run commands",
    ),
    rule(
        Match::Seq(&[".config", "git"]),
        "git configuration: it can run commands",
    ),
    rule(Match::Leaf(".git-credentials"), TOKENS),
    // Key and credential directories.
    rule(
        Match::Seq(&[".ssh"]),
        "SSH directory: keys, authorized logins and client settings",
    ),
    rule(Match::Seq(&[".gnupg"]), "GnuPG directory: private keys"),
    rule(Match::Seq(&[".aws"]), "AWS credentials directory"),
    rule(Match::Seq(&[".kube"]), "Kubernetes credentials directory"),
    rule(Match::Seq(&[".azure"]), "Azure credentials directory"),
    rule(
        Match::Seq(&[".config", "gcloud"]),
        "Google Cloud credentials directory",
    ),
    rule(Match::Seq(&[".config", "gh"]), "GitHub CLI tokens"),
    rule(Match::Seq(&[".password-store"]), "password store"),
    rule(
        Match::Seq(&[".docker", "config.json"]),
        "Docker registry credentials",
    ),
    // Key files anywhere.
    rule(Match::LeafPrefix("id_rsa"), SSH_KEY),
    rule(Match::LeafPrefix("id_dsa"), SSH_KEY),
    rule(Match::LeafPrefix("id_ecdsa"), SSH_KEY),
    rule(Match::LeafPrefix("id_ed25519"), SSH_KEY),
    rule(Match::LeafPrefix("id_xmss"), SSH_KEY),
    rule(
        Match::LeafPrefix("authorized_keys"),
        "SSH authorized keys: who may log in",
    ),
    rule(Match::LeafSuffix(".pem"), KEY_FILE),
    rule(Match::LeafSuffix(".key"), KEY_FILE),
    rule(Match::LeafSuffix(".p12"), KEY_FILE),
    rule(Match::LeafSuffix(".pfx"), KEY_FILE),
    rule(Match::LeafSuffix(".ppk"), KEY_FILE),
    // Secrets and tokens.
    rule(Match::Leaf(".env"), ENV_FILE),
    rule(Match::LeafPrefix(".env."), ENV_FILE),
    rule(Match::LeafSuffix(".env"), ENV_FILE),
    rule(Match::Leaf(".netrc"), TOKENS),
    rule(Match::Leaf("_netrc"), TOKENS),
    rule(Match::Leaf(".npmrc"), TOKENS),
    rule(Match::Leaf(".pypirc"), TOKENS),
    rule(Match::Leaf(".pgpass"), TOKENS),
    rule(Match::Leaf(".my.cnf"), TOKENS),
    rule(Match::Leaf(".vault-token"), TOKENS),
    // Files that run commands later.
    rule(Match::Leaf(".bashrc"), SHELL_RC),
    rule(Match::Leaf(".bash_profile"), SHELL_RC),
    rule(Match::Leaf(".bash_login"), SHELL_RC),
    rule(Match::Leaf(".bash_logout"), SHELL_RC),
    rule(Match::Leaf(".bash_aliases"), SHELL_RC),
    rule(Match::Leaf(".profile"), SHELL_RC),
    rule(Match::Leaf(".zshrc"), SHELL_RC),
    rule(Match::Leaf(".zshenv"), SHELL_RC),
    rule(Match::Leaf(".zprofile"), SHELL_RC),
    rule(Match::Leaf(".zlogin"), SHELL_RC),
    rule(Match::Leaf(".zlogout"), SHELL_RC),
    rule(Match::Leaf(".kshrc"), SHELL_RC),
    rule(Match::Leaf(".mkshrc"), SHELL_RC),
    rule(Match::Leaf(".cshrc"), SHELL_RC),
    rule(Match::Leaf(".tcshrc"), SHELL_RC),
    rule(Match::Leaf(".login"), SHELL_RC),
    rule(Match::Leaf(".logout"), SHELL_RC),
    rule(Match::Leaf(".xprofile"), SHELL_RC),
    rule(Match::Leaf(".xinitrc"), SHELL_RC),
    rule(Match::Leaf(".xsession"), SHELL_RC),
    rule(Match::Leaf(".xsessionrc"), SHELL_RC),
    rule(Match::Leaf(".pam_environment"), SHELL_RC),
    rule(
        Match::Leaf(".envrc"),
        "direnv file: runs commands on entering the directory",
    ),
    rule(Match::Seq(&[".config", "fish"]), SHELL_RC),
    rule(Match::Leaf("crontab"), CRON),
    rule(Match::Seq(&["crontabs"]), CRON),
    rule(Match::Seq(&["cron.d"]), CRON),
    rule(
        Match::Seq(&[".config", "systemd"]),
        "systemd user unit: runs commands",
    ),
    rule(
        Match::Seq(&[".local", "share", "systemd"]),
        "systemd user unit: runs commands",
    ),
    rule(
        Match::Seq(&[".config", "autostart"]),
        "desktop autostart entry: runs commands at login",
    ),
    rule(Match::Seq(&["library", "launchagents"]), LAUNCHD),
    rule(Match::Seq(&["library", "launchdaemons"]), LAUNCHD),
];

/// `name` case-folded for comparison with the rules: ASCII lowercase for
/// ASCII names; otherwise upper- then lowercased, which also folds the
/// look-alikes case-insensitive filesystems treat as equal (`ſ` to `s`,
/// the Kelvin sign to `k`, dotless `ı` to `i`).
fn fold(name: Cow<'_, str>) -> Cow<'_, str> {
    if name.is_ascii() {
        // Most names are lowercase already: no copy then.
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(name.to_ascii_lowercase())
        } else {
            name
        }
    } else {
        Cow::Owned(name.to_uppercase().to_lowercase())
    }
}

/// One path component as the protected-path rules see it: case folded
/// ([`fold`]), and also as NTFS would read it (git's `is_ntfs_dotgit` and
/// `verify_path` rules, for every protected name): an alternate data
/// stream suffix (`.git::$INDEX_ALLOCATION`, `.env:$DATA`, `.env:x`)
/// and trailing dots and spaces (`.git.`, `.env `) removed, and, when what
/// is left has the shape of an 8.3 short name (`git~1`, `env~1.loc`), its
/// short base and extension. A rule name matches the component in any of
/// these readings, so each only ever adds matches.
struct Name<'a> {
    /// The whole component, folded.
    folded: Cow<'a, str>,
    /// Length of the NTFS reading: the prefix of `folded` before its
    /// first `:`, trailing dots and spaces removed.
    plain: usize,
    /// When the NTFS reading is an 8.3 short name `BASE~N[.EXT]`: where
    /// the base ends (at the `~`) and where the extension starts (the end
    /// when there is none).
    short: Option<(usize, usize)>,
}

impl<'a> Name<'a> {
    fn of(folded: Cow<'a, str>) -> Name<'a> {
        let stream = folded.find(':').unwrap_or(folded.len());
        let plain = folded[..stream].trim_end_matches(['.', ' ']).len();
        let short = short_name_parts(&folded[..plain]);
        Name {
            folded,
            plain,
            short,
        }
    }

    /// The NTFS reading (see the type).
    fn plain(&self) -> &str {
        &self.folded[..self.plain]
    }

    /// The base and extension of an 8.3 short name, if it is shaped so.
    fn short(&self) -> Option<(&str, &str)> {
        self.short
            .map(|(base, ext)| (&self.folded[..base], &self.folded[ext..self.plain]))
    }

    /// Whether this component is (or, on NTFS, names) `name`.
    fn is(&self, name: &str) -> bool {
        *self.folded == *name
            || self.plain() == name
            || self.short().is_some_and(|(base, ext)| {
                let (long_base, long_ext) = long_name_parts(name);
                ext == ntfs_ext(long_ext) && short_base_fits(base, long_base, false)
            })
    }

    /// Whether this component (or, on NTFS, what it names) starts with
    /// `prefix`. The NTFS reading is a prefix of the whole component, so
    /// only the short name needs a look of its own (any extension).
    fn starts_with(&self, prefix: &str) -> bool {
        self.folded.starts_with(prefix)
            || self
                .short()
                .is_some_and(|(base, _)| short_base_fits(base, long_name_parts(prefix).0, true))
    }

    /// Whether this component (or, on NTFS, what it names) ends with
    /// `suffix` (`.pem`): a short name by its extension.
    fn ends_with(&self, suffix: &str) -> bool {
        self.folded.ends_with(suffix)
            || self.plain().ends_with(suffix)
            || self.short().is_some_and(|(_, ext)| {
                !ext.is_empty()
                    && suffix
                        .rsplit_once('.')
                        .is_some_and(|(_, e)| ext == ntfs_ext(e))
            })
    }
}

/// `(base end, extension start)` of `name` when it has the shape of an
/// NTFS 8.3 short name, `BASE~N[.EXT]`: an ASCII base of 1 to 6 characters
/// without a dot, `~`, one or more digits, and an optional extension of 1
/// to 3 characters (`git~1`, `env~1.loc`, `gi7eba~1`); else `None`.
fn short_name_parts(name: &str) -> Option<(usize, usize)> {
    let tilde = name.find('~')?;
    if !name.is_ascii() || !(1..=6).contains(&tilde) || name[..tilde].contains('.') {
        return None;
    }
    let rest = &name[tilde + 1..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let end = tilde + 1 + digits;
    match &name[end..] {
        "" => Some((tilde, end)),
        ext => ext
            .strip_prefix('.')
            .filter(|e| (1..=3).contains(&e.len()) && !e.contains(['.', '~']))
            .map(|_| (tilde, end + 1)),
    }
}

/// A long name's base and extension as NTFS shortens it: leading dots
/// dropped, the extension after the last dot (`.env.local` is `env` and
/// `local`, `.gitconfig` is `gitconfig` and nothing).
fn long_name_parts(name: &str) -> (&str, &str) {
    let n = name.trim_start_matches('.');
    n.rsplit_once('.').unwrap_or((n, ""))
}

/// The extension of a short name made from a long one's: its first three
/// characters.
fn ntfs_ext(long_ext: &str) -> &str {
    long_ext.get(..3).unwrap_or(long_ext)
}

/// Whether `base`, the part of an 8.3 short name before its `~`, can be
/// made from the long base `long` (its dots and spaces dropped, as NTFS
/// does): `base` starts it (`git` of `.git`, `gitcon` of `.gitconfig`), or
/// is its first two characters and four hex digits of a hash (the form
/// NTFS falls back to, git's `gi7eba~1`). With `open` (a prefix rule: the
/// long name may go on), `long` may also start `base`.
fn short_base_fits(base: &str, long: &str, open: bool) -> bool {
    let mut long_chars = long.bytes().filter(|c| *c != b'.' && *c != b' ');
    let (mut same, mut long_ended) = (0, false);
    for b in base.bytes() {
        match long_chars.next() {
            Some(l) if l == b => same += 1,
            Some(_) => break,
            None => {
                long_ended = true;
                break;
            }
        }
    }
    let starts = same == base.len() || (open && long_ended);
    let hashed = same >= 2 && base.len() == 6 && base[2..].bytes().all(|c| c.is_ascii_hexdigit());
    starts || hashed
}

/// The normal components of `path` (the root `/` left out) as the rules
/// see them ([`Name`]), borrowed from `path` where folding changes nothing.
fn names(path: &Path) -> Vec<Name<'_>> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(Name::of(fold(s.to_string_lossy()))),
            _ => None,
        })
        .collect()
}

/// The reason `canonical` is a protected (credential, repository-state or
/// start-up) path, or `None`. Matching is by whole components after case
/// folding, so `src/keyboard.rs`, `notes/environment.md`, `.gitignore` and
/// `my.env.example` are not protected while `.ENV`, `sub/.git`, `KEY.PEM`
/// and `ID_ED25519` are. A component also matches in its NTFS readings
/// ([`Name`]): `GIT~1/config`, `ENV~1`, `.git::$INDEX_ALLOCATION/config`,
/// `.env:$DATA` and `.env.` are protected as `.git` and `.env` are.
pub fn protected_reason(canonical: &Path) -> Option<&'static str> {
    let comps = names(canonical);
    let leaf = comps.last()?;
    // A sequence whose first name starts with `.` (most of them) needs a
    // component that does, or a short name: most paths have neither, and
    // skip them all.
    let dotted = comps
        .iter()
        .any(|c| c.folded.starts_with('.') || c.short.is_some());
    PROTECTED
        .iter()
        .find(|r| match r.matches {
            Match::Seq(seq) => {
                (dotted || !seq.first().is_some_and(|s| s.starts_with('.')))
                    && comps
                        .windows(seq.len())
                        .any(|w| w.iter().zip(seq).all(|(a, b)| a.is(b)))
            }
            Match::Leaf(name) => leaf.is(name),
            Match::LeafPrefix(p) => leaf.starts_with(p),
            Match::LeafSuffix(s) => leaf.ends_with(s),
        })
        .map(|r| r.reason)
}

/// Top-level directories of the operating system: a path under one is
/// `dangerous`, whatever the route.
const SYSTEM_DIRS: &[&str] = &[
    "etc", "usr", "boot", "efi", "bin", "sbin", "sys", "proc", "dev", "run",
];

/// Top-level directories that hold both system files and projects: a path
/// under one is `dangerous` unless it is inside the workspace of the
/// operation and that workspace itself lies in the same directory (a
/// project in `/srv/app` or `/root/src` stays an ordinary workspace; a write
/// from it to `/root/.config/...` or `/var/lib/...` does not).
const HOSTING_DIRS: &[&str] = &["var", "srv", "opt", "root"];

/// The reason `canonical` is a system path, or `None`. `root` is the
/// canonical root of the operation's workspace (`None`: no workspace
/// exemption). `/lib`, `/lib32`, `/lib64`, `/libx32` and any other
/// top-level `lib*` count as system directories; `/var/tmp` (a temp
/// directory like `/tmp`) does not.
pub fn system_reason(canonical: &Path, root: Option<&Path>) -> Option<String> {
    if !canonical.has_root() {
        return None;
    }
    let first = canonical.components().find_map(|c| match c {
        Component::Normal(s) => Some(fold(s.to_string_lossy())),
        _ => None,
    })?;
    // `/<first component>`, for the reason (built only when there is one).
    let top = || {
        Path::new("/").join(
            canonical
                .components()
                .nth(1)
                .map_or(std::ffi::OsStr::new(""), |c| c.as_os_str()),
        )
    };
    if SYSTEM_DIRS.contains(&&*first) || first.starts_with("lib") {
        return Some(format!("system path under {}/", top().display()));
    }
    if first == "var" && canonical.starts_with("/var/tmp") {
        return None;
    }
    if HOSTING_DIRS.contains(&&*first) {
        let top = top();
        let exempt = root.is_some_and(|r| r.starts_with(&top) && canonical.starts_with(r));
        if !exempt {
            return Some(format!(
                "system path under {}/ outside the workspace",
                top.display()
            ));
        }
    }
    None
}

/// Whether permission bits `mode` leave the owner without write
/// permission (`0o200` unset): the file is read-only.
pub fn is_read_only(mode: u32) -> bool {
    mode & 0o200 == 0
}

/// The reason an existing file with permission bits `file_mode` is held,
/// or `None` (no file yet, or its owner may write it). Someone took the
/// write bit away on purpose; the atomic rename would replace the file
/// anyway (it needs only the directory's permission), so a person decides.
pub fn read_only_reason(file_mode: Option<u32>) -> Option<String> {
    let mode = file_mode.filter(|m| is_read_only(*m))?;
    Some(format!(
        "read-only file (mode {:04o}): its owner write bit is off, so it is meant to stay as it is; an approved write keeps that mode",
        mode & 0o7777
    ))
}

/// The gate's judgement of one operation: its level and why, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The rated level.
    pub level: Level,
    /// Why: the config rule, the protected-path rule or the default.
    pub reason: Cow<'static, str>,
}

/// Judges a synthetic command (SPEC 12): the first matching config rule
/// decides (it may lower a built-in rule); otherwise a protected path
/// ([`protected_reason`]), an existing read-only file (`file_mode`, its
/// permission bits, [`read_only_reason`]) or a system path
/// ([`system_reason`], with the workspace `root` of the operation) is
/// `dangerous`; otherwise `moderate` (every write and edit is at least
/// moderate).
pub fn judge(
    policy: &PolicyConfig,
    command: &str,
    canonical: &Path,
    root: Option<&Path>,
    file_mode: Option<u32>,
) -> Verdict {
    if let Some(rule) = policy
        .rules
        .iter()
        .find(|r| glob_match(&r.pattern, command))
    {
        return Verdict {
            level: rule.level,
            reason: format!("config rule `{}`", rule.pattern).into(),
        };
    }
    if let Some(reason) = protected_reason(canonical) {
        return Verdict {
            level: Level::Dangerous,
            reason: reason.into(),
        };
    }
    if let Some(reason) = read_only_reason(file_mode) {
        return Verdict {
            level: Level::Dangerous,
            reason: reason.into(),
        };
    }
    if let Some(reason) = system_reason(canonical, root) {
        return Verdict {
            level: Level::Dangerous,
            reason: reason.into(),
        };
    }
    Verdict {
        level: Level::Moderate,
        reason: Cow::Borrowed("every write and edit is at least moderate"),
    }
}

/// The level of a synthetic command with no workspace exemption, for a
/// file that does not exist yet or is writable (see [`judge`]).
pub fn rate(policy: &PolicyConfig, command: &str, canonical: &Path) -> Level {
    judge(policy, command, canonical, None, None).level
}

// ---------------------------------------------------------------------------
// Approvals.
// ---------------------------------------------------------------------------

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
    /// and `pattern`. The error is a message for `-32602`.
    pub fn from_params(command: Option<String>, pattern: Option<String>) -> Result<Grant, String> {
        match (command, pattern) {
            (Some(c), None) => Ok(Grant::Command(c)),
            (None, Some(p)) => Ok(Grant::Pattern(p)),
            (Some(_), Some(_)) => Err(
                "give either `command` (one exact synthetic command, as in the refusal's data.command) or `pattern` (a glob), not both"
                    .to_string(),
            ),
            (None, None) => Err(
                "missing `command` (the exact synthetic command from the refusal's data.command) or `pattern` (a glob)"
                    .to_string(),
            ),
        }
    }

    /// The wire name of the form: `"command"` or `"pattern"`.
    pub fn form(&self) -> &'static str {
        match self {
            Grant::Command(_) => "command",
            Grant::Pattern(_) => "pattern",
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
                self.form()
            )));
        }
        if text.len() > MAX_APPROVAL_BYTES {
            return Err(GrantError::Invalid(format!(
                "`{}` is {} bytes; at most {MAX_APPROVAL_BYTES} are accepted",
                self.form(),
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
    /// `write` for `fs/write_text_file`, else the edit mode.
    pub mode: &'a str,
    /// Where the write really goes.
    pub canonical: &'a Path,
    /// Canonical root of the operation's workspace (for [`system_reason`]).
    pub root: &'a Path,
    /// Session id (empty when the request had none).
    pub session: &'a str,
    /// Runtime id of the workspace.
    pub workspace: &'a str,
    /// Permission bits of the existing file (`None`: no file there yet),
    /// for [`read_only_reason`].
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
        let mut g = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
        let mut g = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
        let command = synthetic_command(req.mode, req.canonical);
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
            let mut g = self
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    /// roots named. There a credential path (the [`protected_reason`] list:
    /// `.ssh/`, keys, `.env`, `.netrc`, cloud credentials ...) is held, as a
    /// write would be, until a person approves the literal command
    /// `edit_file read <path>`; every other file reads freely. A config
    /// rule that matches the command rates it instead (so a rule can allow
    /// one such read for good); system paths do not apply to reads.
    pub fn check_read(&self, policy: &PolicyConfig, req: &GateRequest<'_>) -> Result<(), Refusal> {
        let command = synthetic_command(req.mode, req.canonical);
        let verdict = if let Some(rule) = policy
            .rules
            .iter()
            .find(|r| glob_match(&r.pattern, &command))
        {
            Verdict {
                level: rule.level,
                reason: format!("config rule `{}`", rule.pattern).into(),
            }
        } else if let Some(reason) = protected_reason(req.canonical) {
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
        level: verdict.level.as_str(),
        reason: verdict.reason.to_string(),
        session: (!session.is_empty()).then(|| session.to_string()),
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
    use crate::config::PolicyRule;

    const METACHARS: [char; 7] = ['*', '?', '[', ']', '{', '}', '\\'];

    fn cmd(path: &str) -> String {
        synthetic_command("write", Path::new(path))
    }

    fn approvals() -> (tempfile::TempDir, Approvals) {
        let d = tempfile::tempdir().unwrap();
        let a = Approvals::load(d.path().join("state/approvals.json"));
        (d, a)
    }

    fn command(s: &str) -> Grant {
        Grant::Command(s.to_string())
    }

    fn pattern(s: &str) -> Grant {
        Grant::Pattern(s.to_string())
    }

    #[test]
    fn glob() {
        assert!(glob_match("edit_file *", "edit_file write /a/b"));
        assert!(glob_match("edit_file ? /a/*", "edit_file w /a/b/c"));
        assert!(!glob_match("edit_file write /a/*", "edit_file edit /a/b"));
        assert!(glob_match("*.pem", "x.pem"));
        assert!(!glob_match("*.pem", "x.pem.bak"));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "x"));
        assert!(glob_match("a**b", "axxb"));
        assert!(glob_match("*a*b*", "zzazzbzz"));
        assert!(!glob_match("*a*b*", "zzbzzazz"));
    }

    #[test]
    fn glob_escapes_and_literal_brackets() {
        // `\` makes the next character literal.
        assert!(glob_match(r"/h/a\*", "/h/a*"));
        assert!(!glob_match(r"/h/a\*", "/h/abc"));
        assert!(glob_match(r"/h/a\?", "/h/a?"));
        assert!(!glob_match(r"/h/a\?", "/h/ab"));
        assert!(glob_match(r"/h/a\\b", r"/h/a\b"));
        assert!(
            glob_match(r"/h/a\", r"/h/a\"),
            "a trailing backslash is literal"
        );
        // Brackets and braces are plain characters.
        assert!(glob_match("/h/[ab]", "/h/[ab]"));
        assert!(!glob_match("/h/[ab]", "/h/a"));
        assert!(glob_match("/h/{a,b}", "/h/{a,b}"));
        assert!(!glob_match("/h/{a,b}", "/h/a"));
        // escape_glob turns any text into a glob matching only that text.
        for c in METACHARS {
            let name = format!("/h/x{c}y{c}");
            let g = Glob::new(&escape_glob(&name));
            assert!(g.is_match(&name), "{name}");
            assert_eq!(g.literal().as_deref(), Some(name.as_str()), "{name}");
            assert!(!g.is_match("/h/xzyz"), "{name}");
        }
        assert_eq!(Glob::new("a*").literal(), None);
        assert_eq!(Glob::new(r"a\*").literal().as_deref(), Some("a*"));
    }

    #[test]
    fn glob_on_long_adversarial_text_stays_linear_enough() {
        // One backtrack point: a many-star pattern against a long text that
        // almost matches finishes (no exponential blow-up). Correctness only;
        // nothing is timed.
        let text = format!("edit_file write /{}", "a".repeat(4000));
        let pat = format!("{}b", "*a".repeat(50));
        assert!(!glob_match(&pat, &text));
        assert!(glob_match(&format!("{}*", "*a".repeat(50)), &text));
    }

    #[test]
    fn synthetic_command_escapes_non_utf8_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let a = Path::new(std::ffi::OsStr::from_bytes(b"/r/\xff"));
        let b = Path::new(std::ffi::OsStr::from_bytes(b"/r/\xfe"));
        assert_eq!(synthetic_command("write", a), r"edit_file write /r/\xff");
        assert_ne!(synthetic_command("write", a), synthetic_command("write", b));
        assert_eq!(cmd("/r/é*"), "edit_file write /r/é*");
    }

    /// Table of protected and ordinary paths (issue 13 item 5).
    #[test]
    fn protected_paths_table() {
        let protected = [
            // Repository state at any depth, a `.git` leaf file too.
            "/r/.git/config",
            "/r/.git/hooks/pre-commit",
            "/r/sub/.git",
            "/r/a/b/.git/HEAD",
            "/r/.GIT/config",
            "/r/sub/.Git",
            "/h/.gitconfig",
            "/h/.config/git/config",
            "/h/.git-credentials",
            // Credential directories and files.
            "/h/.ssh/config",
            "/h/.SSH/authorized_keys",
            "/r/x/authorized_keys",
            "/r/x/authorized_keys2",
            "/h/.gnupg/x",
            "/h/.aws/credentials",
            "/h/.AWS/config",
            "/h/.kube/config",
            "/h/.docker/config.json",
            "/h/.azure/x",
            "/h/.config/gcloud/credentials.db",
            "/h/.config/gh/hosts.yml",
            "/h/.password-store/x.gpg",
            "/r/.env",
            "/r/.ENV",
            "/r/.env.local",
            "/r/.env.example",
            "/r/prod.env",
            "/r/key.pem",
            "/r/KEY.PEM",
            "/r/server.key",
            "/r/cert.p12",
            "/r/cert.pfx",
            "/r/putty.ppk",
            "/h/id_rsa",
            "/h/id_rsa.pub",
            "/h/ID_RSA",
            "/h/id_dsa",
            "/h/id_ecdsa",
            "/h/id_ecdsa_sk",
            "/h/id_ed25519",
            "/h/id_ed25519.pub",
            "/h/ID_ED25519",
            "/h/.netrc",
            "/h/_netrc",
            "/h/.npmrc",
            "/h/.pypirc",
            "/h/.pgpass",
            "/h/.my.cnf",
            "/h/.vault-token",
            // Files that run commands later.
            "/h/.bashrc",
            "/h/.BASHRC",
            "/h/.bash_profile",
            "/h/.bash_login",
            "/h/.bash_logout",
            "/h/.profile",
            "/h/.zshrc",
            "/h/.zshenv",
            "/h/.zprofile",
            "/h/.zlogin",
            "/h/.cshrc",
            "/h/.tcshrc",
            "/h/.xinitrc",
            "/h/.xsession",
            "/r/.envrc",
            "/h/.config/fish/config.fish",
            "/h/crontab",
            "/h/x/crontabs/me",
            "/h/x/cron.d/job",
            "/h/.config/systemd/user/evil.service",
            "/h/.local/share/systemd/user/x.service",
            "/h/.config/autostart/x.desktop",
            "/Users/me/Library/LaunchAgents/x.plist",
            "/Users/me/library/launchagents/x.plist",
            "/Library/LaunchDaemons/x.plist",
            // Case folding beyond ASCII (long s, Kelvin sign).
            "/h/.ſſh/config",
            "/h/.\u{212a}ube/config",
        ];
        for p in protected {
            assert!(
                protected_reason(Path::new(p)).is_some(),
                "{p} must be protected"
            );
        }
        // Decided: only whole names count. `my.env.example`,
        // `environment.md`, `.gitignore`, `.github/` and `keyboard.rs` are
        // ordinary project files.
        let ordinary = [
            "/r/src/keyboard.rs",
            "/r/notes/environment.md",
            "/r/my.env.example",
            "/r/env.rs",
            "/r/.gitignore",
            "/r/.gitattributes",
            "/r/.github/workflows/ci.yml",
            "/r/.gitlab-ci.yml",
            "/r/src/key.rs",
            "/r/keys/README.md",
            "/r/monkey.ts",
            "/r/pem.txt",
            "/r/docs/ssh.md",
            "/r/profile.rs",
            "/r/.profile.d.md",
            "/r/bashrc.example",
            "/r/id.rs",
            "/r/config.json",
            "/r/.docker/daemon.json",
            "/r/systemd/unit.md",
            "/r/.config/nvim/init.lua",
            "/r/library/x.rs",
            "/r/src/cron.rs",
        ];
        for p in ordinary {
            assert_eq!(protected_reason(Path::new(p)), None, "{p} is ordinary");
        }
    }

    /// Issue 25: protected names were matched only as spelled, so NTFS
    /// spellings of them (git's `is_ntfs_dotgit` forms) were ordinary: an
    /// 8.3 short name (`GIT~1`, `ENV~1`), an alternate data stream
    /// (`.git::$INDEX_ALLOCATION`, `.env::$DATA`, `.env:stream`) and
    /// trailing dots or spaces. Every protected name is now matched in
    /// those readings too.
    #[test]
    fn issue_25_ntfs_short_names_and_streams_of_protected_names_are_protected() {
        for (p, reason) in [
            // The brief's examples.
            ("/r/GIT~1/config", GIT),
            ("/r/ENV~1", ENV_FILE),
            ("/r/.git::$INDEX_ALLOCATION/config", GIT),
            ("/r/.env::$DATA", ENV_FILE),
            ("/r/.env:stream", ENV_FILE),
            // Short names, any case, any number, trailing dots and spaces.
            ("/r/git~1/hooks/pre-commit", GIT),
            ("/r/Git~2", GIT),
            ("/r/GIT~12/config", GIT),
            ("/r/GIT~1./config", GIT),
            ("/r/GIT~1 /config", GIT),
            ("/r/GIT~1::$INDEX_ALLOCATION/config", GIT),
            // NTFS's hashed fallback: two letters and four hex digits.
            ("/r/GI7EBA~1/config", GIT),
            ("/r/sub/.GIT::$index_allocation/hooks/x", GIT),
            ("/r/.git:$DATA", GIT),
            ("/r/.git./config", GIT),
            ("/r/.git /config", GIT),
            ("/r/.git. . /config", GIT),
            ("/r/.env.", ENV_FILE),
            ("/r/.env ", ENV_FILE),
            ("/r/.ENV:$DATA", ENV_FILE),
            // Every protected name, not only `.git` and `.env`.
            ("/r/ENV~1.LOC", ENV_FILE),
            ("/r/PROD~1.ENV", ENV_FILE),
            // Could be `.env.iro.md` (as could `environment.md`): held.
            ("/r/ENVIRO~1.MD", ENV_FILE),
            ("/r/prod.env:x", ENV_FILE),
            (
                "/h/SSH~1/config",
                "SSH directory: keys, authorized logins and client settings",
            ),
            (
                "/h/.ssh::$INDEX_ALLOCATION/config",
                "SSH directory: keys, authorized logins and client settings",
            ),
            (
                "/h/CONFIG~1/git/config",
                "git configuration: it can run commands",
            ),
            ("/h/.config/GH~1/hosts.yml", "GitHub CLI tokens"),
            ("/h/GITCON~1", "git configuration: it can run commands"),
            ("/h/GIT-CR~1", TOKENS),
            ("/h/.docker/CONFIG~1.JSO", "Docker registry credentials"),
            ("/h/ID_RSA~1", SSH_KEY),
            ("/h/ID_RSA~1.PUB", SSH_KEY),
            ("/h/id_rsa:backup", SSH_KEY),
            ("/h/AUTHOR~1", "SSH authorized keys: who may log in"),
            ("/h/SERVER~1.PEM", KEY_FILE),
            ("/h/key.pem::$DATA", KEY_FILE),
            ("/h/BASHRC~1", SHELL_RC),
            ("/h/BASH_P~1", SHELL_RC),
            ("/h/.bashrc.", SHELL_RC),
            ("/h/MY~1.CNF", TOKENS),
            ("/h/x/CRON~1.D/job", CRON),
            ("/h/CRONTA~1", CRON),
            ("/Users/me/Library/LAUNCH~1/x.plist", LAUNCHD),
        ] {
            assert_eq!(protected_reason(Path::new(p)), Some(reason), "{p}");
        }
        // What no protected name can be shortened to stays ordinary, and a
        // colon in a Linux name does not drop what is after it.
        for p in [
            "/r/GITHUB~1/workflows/ci.yml",
            "/r/GITIGN~1",
            "/r/main~1.rs",
            "/r/notes~1.txt",
            "/r/KEYBOA~1.RS",
            "/r/PEM~1.TXT",
            "/r/CRON~1.RS",
            "/r/file.txt~",
            "/r/file.txt.~1~",
            "/r/a~b",
            "/r/~1",
            "/r/GIT~",
            "/r/GIT~X",
            "/r/GIT~1.ABCD",
            "/r/.gitignore:x",
            "/r/time:12.md",
            "/r/src/keyboard.rs",
            "/r/.github/workflows/ci.yml",
        ] {
            assert_eq!(protected_reason(Path::new(p)), None, "{p} is ordinary");
        }
        // A colon in a Linux name is an ordinary character too: the whole
        // name still counts.
        assert_eq!(protected_reason(Path::new("/r/a:b.pem")), Some(KEY_FILE));
        // The gate holds them like their long names.
        let p = PolicyConfig::default();
        for path in ["/r/GIT~1/config", "/r/.env::$DATA", "/r/ENV~1"] {
            let path = Path::new(path);
            let v = judge(&p, &cmd(path.to_str().unwrap()), path, None, None);
            assert_eq!(v.level, Level::Dangerous, "{}", path.display());
        }
    }

    #[test]
    fn each_rule_has_a_reason_in_words() {
        for r in PROTECTED {
            assert!(
                r.reason.len() > 10 && r.reason.contains(' '),
                "{}",
                r.reason
            );
        }
        assert_eq!(
            protected_reason(Path::new("/r/.git/config")),
            Some(GIT),
            "the reason says why"
        );
    }

    #[test]
    fn system_paths_are_dangerous_outside_a_workspace_there() {
        let p = PolicyConfig::default();
        let ws = Path::new("/home/me/proj");
        for path in [
            "/etc/passwd",
            "/ETC/passwd",
            "/usr/bin/ls",
            "/boot/grub/grub.cfg",
            "/var/spool/cron/root",
            "/root/.config/x",
            "/bin/sh",
            "/sbin/init",
            "/lib/x.so",
            "/lib64/ld.so",
            "/libx32/x",
            "/opt/tool/bin/x",
            "/srv/www/index.html",
            "/sys/kernel/x",
            "/proc/sys/kernel/core_pattern",
            "/dev/sda",
            "/run/systemd/system/x.service",
        ] {
            let path = Path::new(path);
            let v = judge(&p, &cmd(path.to_str().unwrap()), path, Some(ws), None);
            assert_eq!(v.level, Level::Dangerous, "{}", path.display());
            assert!(v.reason.starts_with("system path"), "{v:?}");
            assert_eq!(
                rate(&p, &cmd(path.to_str().unwrap()), path),
                Level::Dangerous
            );
        }
        for path in [
            "/home/me/proj/a.rs",
            "/tmp/x",
            "/var/tmp/x",
            "/home/other/x",
            "/mnt/d/x",
        ] {
            let path = Path::new(path);
            assert_eq!(
                judge(&p, &cmd(path.to_str().unwrap()), path, Some(ws), None).level,
                Level::Moderate,
                "{}",
                path.display()
            );
        }
    }

    #[test]
    fn a_workspace_in_srv_var_opt_or_root_is_ordinary_inside_only() {
        let p = PolicyConfig::default();
        for (root, inside, outside) in [
            ("/srv/app", "/srv/app/src/main.rs", "/srv/other/x"),
            ("/var/www/site", "/var/www/site/index.html", "/var/lib/x"),
            ("/opt/proj", "/opt/proj/a", "/opt/tool/bin/x"),
            ("/root/src", "/root/src/a.rs", "/root/notes.txt"),
        ] {
            let root = Path::new(root);
            let inside = Path::new(inside);
            let outside = Path::new(outside);
            assert_eq!(
                system_reason(inside, Some(root)),
                None,
                "{}",
                inside.display()
            );
            assert!(
                system_reason(outside, Some(root)).is_some(),
                "{}",
                outside.display()
            );
            assert!(
                system_reason(inside, None).is_some(),
                "no workspace, no exemption"
            );
        }
        // A protected name inside such a workspace is still dangerous.
        let root = Path::new("/root/src");
        let env = Path::new("/root/src/.env");
        assert_eq!(
            judge(&p, &cmd("/root/src/.env"), env, Some(root), None).level,
            Level::Dangerous
        );
        // A workspace of `/` or `/etc` exempts nothing in the hard system
        // directories.
        for root in ["/", "/etc", "/usr"] {
            assert!(system_reason(Path::new("/etc/passwd"), Some(Path::new(root))).is_some());
        }
    }

    /// Issue 25: a write over a file whose owner write bit is off replaced
    /// it silently (the rename needs only the directory's permission). It
    /// is held now, like a protected path, and a config rule can still
    /// lower it.
    #[test]
    fn issue_25_a_read_only_file_is_held() {
        let p = PolicyConfig::default();
        let f = Path::new("/r/notes.txt");
        let c = cmd("/r/notes.txt");
        for mode in [0o444, 0o400, 0o555, 0o440, 0o044, 0o000, 0o4444, 0o1555] {
            let v = judge(&p, &c, f, Some(Path::new("/r")), Some(mode));
            assert_eq!(v.level, Level::Dangerous, "{mode:o}");
            assert!(v.reason.starts_with("read-only file (mode "), "{v:?}");
            assert!(
                v.reason.contains(&format!("{:04o}", mode & 0o7777)),
                "{v:?}"
            );
        }
        for mode in [
            None,
            Some(0o644),
            Some(0o600),
            Some(0o200),
            Some(0o755),
            Some(0o4755),
        ] {
            let v = judge(&p, &c, f, Some(Path::new("/r")), mode);
            assert_eq!(v.level, Level::Moderate, "{mode:?}");
        }
        // A protected path keeps its own reason; a rule lowers both.
        let env = Path::new("/r/.env");
        let v = judge(&p, &cmd("/r/.env"), env, None, Some(0o444));
        assert_eq!(v.reason, ENV_FILE);
        let lax = PolicyConfig {
            auto_approve: Level::Moderate,
            rules: vec![PolicyRule {
                pattern: "edit_file * /r/*".into(),
                level: Level::Moderate,
            }],
        };
        assert_eq!(judge(&lax, &c, f, None, Some(0o444)).level, Level::Moderate);
        // The gate holds it until the refused command is approved.
        let (_d, a) = approvals();
        let req = GateRequest {
            mode: "append",
            canonical: f,
            root: Path::new("/r"),
            session: "s",
            workspace: "w",
            file_mode: Some(0o444),
        };
        let r = a.check(&p, &req).unwrap_err();
        assert_eq!(r.kind, ErrorKind::ApprovalRequired);
        assert!(r.hint.contains("read-only file"), "{}", r.hint);
        let Some(Detail::Approval {
            command, reason, ..
        }) = r.detail
        else {
            panic!("no detail")
        };
        assert!(reason.starts_with("read-only file"), "{reason}");
        assert!(
            a.check(
                &p,
                &GateRequest {
                    file_mode: Some(0o644),
                    ..req
                }
            )
            .is_ok()
        );
        a.grant(&Grant::Command(command), Scope::Once, "s", "w")
            .unwrap();
        assert!(a.check(&p, &req).is_ok());
        assert!(a.check(&p, &req).is_err(), "once is spent");
    }

    #[test]
    fn first_config_rule_wins_and_can_lower_or_raise() {
        let p = PolicyConfig {
            auto_approve: Level::Moderate,
            rules: vec![
                PolicyRule {
                    pattern: "edit_file * /r/.env".into(),
                    level: Level::Safe,
                },
                PolicyRule {
                    pattern: "edit_file * /r/*".into(),
                    level: Level::Dangerous,
                },
            ],
        };
        let env = Path::new("/r/.env");
        assert_eq!(rate(&p, &synthetic_command("write", env), env), Level::Safe);
        let other = Path::new("/r/a.txt");
        let v = judge(&p, &synthetic_command("write", other), other, None, None);
        assert_eq!(v.level, Level::Dangerous);
        assert_eq!(v.reason, "config rule `edit_file * /r/*`");
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

    /// Issue 13 item 1: approving the literal command of a file named with
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
    /// before issue 13) still approves one file only.
    #[test]
    fn a_refused_command_copied_into_pattern_is_taken_literally() {
        let (_d, a) = approvals();
        let policy = PolicyConfig::default();
        let req = GateRequest {
            mode: "write",
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

    /// Issue 13 item 7: a session-scoped grant needs a session.
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
        assert!(Grant::from_params(Some("a".into()), Some("b".into())).is_err());
        assert!(Grant::from_params(None, None).is_err());
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
            mode: "append",
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
        assert_eq!((command.as_str(), level), (c, "dangerous"));
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
