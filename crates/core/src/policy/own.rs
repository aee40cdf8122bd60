//! writegate's own files: its config, approvals, state (audit log, intent
//! journals, history store), runtime directory, service units and binary.
//!
//! An agent that could write one of them through writegate could turn the
//! gate off for good (a config rule rating every write `safe`, a standing
//! approval of `edit_file *`), plant an undo record, or read a
//! before-image of a secret it may not read directly. So no route of an
//! agent reaches them, approval or not: they are refused with
//! `writegate_file` before the gate is asked (see `docs/security.md`,
//! "writegate's own files"). Only the person changes them, with the CLI
//! (`writegate approve`, `setup`, `service install`) or an editor.
//!
//! Matching is by whole components of the canonical path against each
//! entry in two forms: as configured (absolute) and as it resolves on disk
//! at start-up (the deepest existing ancestor canonicalised, the rest
//! appended), so `~/.config` reached through a symlink is caught either
//! way. Components are compared case-folded: on a case-insensitive
//! filesystem `~/.config/WRITEGATE/config.toml` is the same file, and
//! refusing that spelling on a case-sensitive one costs nothing.

use super::protected::fold;
use std::path::{Component, Path, PathBuf};

/// What an entry is, for the refusal's hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnKind {
    /// The config file in use, or the directory of the default one.
    Config,
    /// The state directory: approvals, audit log, intent journals, history.
    State,
    /// The audit log (and its intent journals) where `audit.path` puts it.
    AuditLog,
    /// The before-image store where `history.path` puts it.
    History,
    /// The runtime directory (the daemon's socket).
    Runtime,
    /// The systemd user units `writegate service install` writes.
    ServiceUnit,
    /// The writegate binary itself.
    Binary,
}

impl OwnKind {
    /// The words the refusal uses.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Config => "writegate's config (its rules decide which writes need the user)",
            Self::State => {
                "writegate's state directory (approvals, audit log, intent journals, before-images)"
            }
            Self::AuditLog => "writegate's audit log",
            Self::History => "writegate's history store (before-images and undo records)",
            Self::Runtime => "writegate's runtime directory (its socket)",
            Self::ServiceUnit => "writegate's service unit",
            Self::Binary => "the writegate program",
        }
    }
}

/// One protected path: every form it is matched in (each a list of
/// case-folded components) and what it is.
#[derive(Debug, Clone)]
struct Entry {
    forms: Vec<Vec<String>>,
    kind: OwnKind,
}

/// writegate's own files and directories (see the module docs). Empty by
/// default; the binary fills it at start-up ([`OwnFiles::add`]).
#[derive(Debug, Clone, Default)]
pub struct OwnFiles {
    entries: Vec<Entry>,
}

/// The case-folded normal components of an absolute path (`None` for a
/// relative one, which names nothing the daemon could check).
fn folded(path: &Path) -> Option<Vec<String>> {
    if !path.has_root() {
        return None;
    }
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(s) => out.push(fold(s.to_string_lossy()).into_owned()),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

/// Where `path` is on disk as far as it exists: its deepest existing
/// ancestor canonicalised, the rest appended (`None` when nothing of it
/// resolves, or the result is the path as given).
fn on_disk(path: &Path) -> Option<PathBuf> {
    for ancestor in path.ancestors().skip_while(|a| a.as_os_str().is_empty()) {
        if let Ok(c) = std::fs::canonicalize(ancestor) {
            let full = match path.strip_prefix(ancestor) {
                Ok(rest) if !rest.as_os_str().is_empty() => c.join(rest),
                _ => c,
            };
            return (full != path).then_some(full);
        }
    }
    None
}

impl OwnFiles {
    /// Protects `path` (a file, or a directory and everything below it)
    /// as `kind`: its absolute form and where it resolves on disk now. A
    /// relative path, or `/` itself, adds nothing.
    pub fn add(&mut self, path: &Path, kind: OwnKind) {
        if !path.has_root() {
            return;
        }
        let mut forms = Vec::new();
        for p in std::iter::once(path.to_path_buf()).chain(on_disk(path)) {
            if let Some(f) = folded(&p).filter(|f| !f.is_empty())
                && !forms.contains(&f)
            {
                forms.push(f);
            }
        }
        if !forms.is_empty() {
            self.entries.push(Entry { forms, kind });
        }
    }

    /// What `canonical` is, when it is one of writegate's own files or
    /// lies below one of its directories; else `None`.
    pub fn reason(&self, canonical: &Path) -> Option<OwnKind> {
        if self.entries.is_empty() {
            return None;
        }
        let target = folded(canonical)?;
        self.entries
            .iter()
            .find(|e| {
                e.forms
                    .iter()
                    .any(|f| target.len() >= f.len() && target[..f.len()] == f[..])
            })
            .map(|e| e.kind)
    }

    /// Whether nothing is protected (a service built without the binary's
    /// start-up, in tests).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_a_protected_directory_in_any_case_is_refused() {
        let mut own = OwnFiles::default();
        own.add(Path::new("/h/.config/writegate"), OwnKind::Config);
        own.add(Path::new("/h/.local/state/writegate"), OwnKind::State);
        for (path, kind) in [
            ("/h/.config/writegate/config.toml", OwnKind::Config),
            ("/h/.config/writegate", OwnKind::Config),
            ("/h/.config/WriteGate/config.toml", OwnKind::Config),
            ("/h/.local/state/writegate/approvals.json", OwnKind::State),
            (
                "/h/.local/state/writegate/history/index.jsonl",
                OwnKind::State,
            ),
            ("/h/.local/state/x/../writegate/audit.jsonl", OwnKind::State),
        ] {
            assert_eq!(own.reason(Path::new(path)), Some(kind), "{path}");
        }
        for path in [
            "/h/.config/writegate2/config.toml",
            "/h/.config",
            "/h/.local/state/writegate.bak",
            "/h/project/writegate/config.toml",
            "relative/.config/writegate/config.toml",
        ] {
            assert_eq!(own.reason(Path::new(path)), None, "{path}");
        }
    }

    #[test]
    fn a_symlinked_directory_is_matched_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles/config");
        std::fs::create_dir_all(real.join("writegate")).unwrap();
        let link = dir.path().join("home/.config");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut own = OwnFiles::default();
        own.add(&link.join("writegate/config.toml"), OwnKind::Config);
        let canonical = std::fs::canonicalize(&real)
            .unwrap()
            .join("writegate/config.toml");
        assert_eq!(own.reason(&canonical), Some(OwnKind::Config));
        assert_eq!(
            own.reason(&link.join("writegate/config.toml")),
            Some(OwnKind::Config)
        );
    }

    #[test]
    fn the_root_and_relative_paths_protect_nothing() {
        let mut own = OwnFiles::default();
        own.add(Path::new("/"), OwnKind::State);
        own.add(Path::new("state"), OwnKind::State);
        assert!(own.is_empty());
        assert_eq!(own.reason(Path::new("/etc/passwd")), None);
    }
}
