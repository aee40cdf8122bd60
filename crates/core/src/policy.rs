//! The approval gate (SPEC 12; seed 000 "approval as a synthetic command").
//!
//! Every write and edit is judged as `edit_file <mode> <canonical path>`.
//! The rating is pure ([`rate`]); approvals live in [`Approvals`], whose
//! persistent scope is written through `writegate-fs`.

use crate::config::{Level, PolicyConfig};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The synthetic command for an operation: `edit_file <mode> <canonical path>`.
pub fn synthetic_command(mode: &str, canonical: &Path) -> String {
    format!("edit_file {mode} {}", canonical.display())
}

/// Glob match over the whole string: `*` any run of characters (including
/// `/`), `?` exactly one character, everything else literal.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// The built-in credential and repository-state rule: a component `.ssh`,
/// `.gnupg`, `.aws` or `.git` above the leaf, or a leaf `.env`, `.env.*`,
/// `*.pem`, `id_rsa*`, `.netrc`, `.git-credentials`. Returns the reason.
pub fn credential_reason(canonical: &Path) -> Option<String> {
    let comps: Vec<String> = canonical
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let (leaf, dirs) = comps.split_last()?;
    for d in dirs {
        if [".ssh", ".gnupg", ".aws", ".git"].contains(&d.as_str()) {
            return Some(format!("path under {d}/"));
        }
    }
    let leaf_l = leaf.as_str();
    if leaf_l == ".env"
        || leaf_l.starts_with(".env.")
        || leaf_l.ends_with(".pem")
        || leaf_l.starts_with("id_rsa")
        || leaf_l == ".netrc"
        || leaf_l == ".git-credentials"
    {
        return Some(format!("credential file {leaf_l}"));
    }
    None
}

/// Rates a synthetic command: the first matching config rule decides;
/// otherwise the credential rule gives `dangerous`; otherwise `moderate`
/// (every write and edit is at least moderate).
pub fn rate(policy: &PolicyConfig, command: &str, canonical: &Path) -> Level {
    if let Some(rule) = policy
        .rules
        .iter()
        .find(|r| glob_match(&r.pattern, command))
    {
        return rule.level;
    }
    if credential_reason(canonical).is_some() {
        return Level::Dangerous;
    }
    Level::Moderate
}

/// Scope of an approval (SPEC 12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The next matching operation of this session only.
    Once,
    /// Every matching operation of this session.
    Session,
    /// Every matching operation in this workspace (runtime id).
    Workspace,
    /// Every matching operation, kept in the state directory across restarts.
    Persistent,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct PersistentFile {
    v: u32,
    patterns: Vec<String>,
}

/// Granted approvals. Patterns are globs over the synthetic command.
pub struct Approvals {
    file: PathBuf,
    inner: Mutex<Granted>,
}

#[derive(Default)]
struct Granted {
    once: Vec<(String, String)>,
    session: HashMap<String, HashSet<String>>,
    workspace: HashMap<String, HashSet<String>>,
    persistent: Vec<String>,
}

impl Approvals {
    /// Loads persistent approvals from `file` (missing is fine; an unreadable
    /// or invalid file is logged and ignored).
    pub fn load(file: PathBuf) -> Approvals {
        let mut granted = Granted::default();
        match std::fs::read(&file) {
            Ok(bytes) => match serde_json::from_slice::<PersistentFile>(&bytes) {
                Ok(p) => granted.persistent = p.patterns,
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "ignoring invalid approvals file")
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "cannot read approvals file")
            }
        }
        Approvals {
            file,
            inner: Mutex::new(granted),
        }
    }

    /// Grants `pattern` in `scope` for `session` / `workspace`. A persistent
    /// grant is written atomically (0600) before it counts.
    pub fn grant(
        &self,
        pattern: &str,
        scope: Scope,
        session: &str,
        workspace: &str,
    ) -> std::io::Result<()> {
        let mut g = self.inner.lock().unwrap();
        match scope {
            Scope::Once => g.once.push((session.to_string(), pattern.to_string())),
            Scope::Session => {
                g.session
                    .entry(session.to_string())
                    .or_default()
                    .insert(pattern.to_string());
            }
            Scope::Workspace => {
                g.workspace
                    .entry(workspace.to_string())
                    .or_default()
                    .insert(pattern.to_string());
            }
            Scope::Persistent => {
                let mut next = g.persistent.clone();
                if !next.iter().any(|p| p == pattern) {
                    next.push(pattern.to_string());
                }
                let body = serde_json::to_vec_pretty(&PersistentFile {
                    v: 1,
                    patterns: next.clone(),
                })
                .map_err(std::io::Error::other)?;
                writegate_fs::write_private_file(&self.file, &body)
                    .map_err(std::io::Error::other)?;
                g.persistent = next;
            }
        }
        Ok(())
    }

    /// Whether an approval covers `command`; a matching `once` approval is
    /// consumed.
    pub fn take(&self, command: &str, session: &str, workspace: &str) -> bool {
        let mut g = self.inner.lock().unwrap();
        if g.persistent.iter().any(|p| glob_match(p, command)) {
            return true;
        }
        if g.workspace
            .get(workspace)
            .is_some_and(|s| s.iter().any(|p| glob_match(p, command)))
        {
            return true;
        }
        if g.session
            .get(session)
            .is_some_and(|s| s.iter().any(|p| glob_match(p, command)))
        {
            return true;
        }
        if let Some(i) = g
            .once
            .iter()
            .position(|(s, p)| s == session && glob_match(p, command))
        {
            g.once.remove(i);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyRule;

    #[test]
    fn glob() {
        assert!(glob_match("edit_file *", "edit_file write /a/b"));
        assert!(glob_match("edit_file ? /a/*", "edit_file w /a/b/c"));
        assert!(!glob_match("edit_file write /a/*", "edit_file edit /a/b"));
        assert!(glob_match("*.pem", "x.pem"));
        assert!(!glob_match("*.pem", "x.pem.bak"));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "x"));
    }

    #[test]
    fn credential_paths_are_dangerous() {
        let p = PolicyConfig::default();
        for path in [
            "/h/.ssh/config",
            "/h/.gnupg/x",
            "/h/.aws/credentials",
            "/r/.git/config",
            "/r/.env",
            "/r/.env.local",
            "/r/key.pem",
            "/h/id_rsa.pub",
            "/h/.netrc",
            "/h/.git-credentials",
        ] {
            let path = Path::new(path);
            let cmd = synthetic_command("write", path);
            assert_eq!(rate(&p, &cmd, path), Level::Dangerous, "{cmd}");
        }
        let path = Path::new("/r/src/main.rs");
        assert_eq!(
            rate(&p, &synthetic_command("write", path), path),
            Level::Moderate
        );
        let path = Path::new("/r/.gitignore");
        assert_eq!(
            rate(&p, &synthetic_command("write", path), path),
            Level::Moderate
        );
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
        assert_eq!(
            rate(&p, &synthetic_command("write", other), other),
            Level::Dangerous
        );
    }

    #[test]
    fn scopes() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("state/approvals.json");
        let a = Approvals::load(file.clone());
        let cmd = "edit_file write /h/.ssh/config";
        assert!(!a.take(cmd, "s1", "w1"));
        a.grant("edit_file write /h/.ssh/*", Scope::Once, "s1", "w1")
            .unwrap();
        assert!(!a.take(cmd, "s2", "w1"));
        assert!(a.take(cmd, "s1", "w1"));
        assert!(!a.take(cmd, "s1", "w1"), "once is consumed");
        a.grant("edit_file * /h/.ssh/*", Scope::Session, "s1", "w1")
            .unwrap();
        assert!(a.take(cmd, "s1", "w1") && a.take(cmd, "s1", "w1"));
        assert!(!a.take(cmd, "s2", "w1"));
        a.grant("edit_file *", Scope::Workspace, "s1", "w1")
            .unwrap();
        assert!(a.take(cmd, "s9", "w1"));
        assert!(!a.take(cmd, "s9", "w2"));
        a.grant("edit_file * /h/.ssh/config", Scope::Persistent, "s1", "w1")
            .unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let reloaded = Approvals::load(file);
        assert!(reloaded.take(cmd, "other", "w9"));
    }
}
