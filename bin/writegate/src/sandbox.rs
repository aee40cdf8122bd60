//! What `writegate run` leaves writable, and the Landlock ruleset that
//! enforces it (docs/security.md, "The sandbox").
//!
//! The ruleset handles every write right the kernel knows (write, truncate,
//! create, remove, rename, link; not device ioctls) and no read right, so
//! reads stay as they are. A write right is granted only beneath the
//! writable paths; everything else, the workspaces first, is read-only.
//! Landlock rules only add: a writable path that contains a workspace or one
//! of writegate's own directories would open it, so such a path is refused
//! (named on the command line or in the config) or skipped (a default).

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Build outputs writable when they exist as directories in a workspace.
pub(crate) const BUILD_OUTPUTS: &[&str] = &["target", "node_modules", ".venv", "build", "dist"];

/// The agents' own state and cache directories in HOME, writable when they
/// exist.
pub(crate) const AGENT_DIRS: &[&str] = &[
    ".cache",
    ".npm",
    ".claude",
    ".codex",
    ".gemini",
    ".qwen",
    ".cargo/registry",
    ".cargo/git",
];

/// Device files an agent writes as it always did.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
];

/// Device directories: terminals and POSIX shared memory.
const DEVICE_DIRS: &[&str] = &["/dev/pts", "/dev/shm"];

/// Why a path may not be writable.
#[derive(Debug, Clone)]
pub(crate) struct Protected {
    /// Canonical path.
    pub(crate) path: PathBuf,
    /// What it is, for the message ("the workspace", "writegate's state directory").
    pub(crate) what: String,
}

/// A writable path, canonical, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Writable {
    pub(crate) path: PathBuf,
    pub(crate) from: &'static str,
}

/// The kernel's Landlock ABI version, 0 without Landlock.
pub(crate) fn landlock_abi() -> i32 {
    // landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // SAFETY: the documented version query; no pointer is dereferenced.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    i32::try_from(v).unwrap_or(0).max(0)
}

/// `p` with a leading `~/` put in HOME.
pub(crate) fn expand_home(p: &Path, home: Option<&Path>) -> PathBuf {
    match (p.strip_prefix("~"), home) {
        (Ok(rest), Some(h)) => h.join(rest),
        _ => crate::absolutize(p),
    }
}

/// Whether `outer` is `inner` or one of its ancestors.
fn contains(outer: &Path, inner: &Path) -> bool {
    inner.starts_with(outer)
}

/// Checks one writable path against the protected ones: `Err` names the
/// conflict in CLI words.
pub(crate) fn check(w: &Path, protected: &[Protected]) -> Result<(), String> {
    for p in protected {
        if contains(w, &p.path) {
            return Err(format!(
                "{} contains {} ({}): the sandbox would let the agent write it",
                w.display(),
                p.what,
                p.path.display()
            ));
        }
        // Inside a workspace or HOME is allowed (a build output, an agent's
        // state directory); inside writegate's own paths never.
        if p.what != "the workspace" && p.what != "the home directory" && contains(&p.path, w) {
            return Err(format!(
                "{} is inside {} ({}), which the agent must never write",
                w.display(),
                p.what,
                p.path.display()
            ));
        }
    }
    Ok(())
}

/// The writable set: `explicit` paths (`--allow-write`, `[sandbox]
/// writable`) must exist and pass [`check`] (else `Err` with the message);
/// the defaults are added when they exist and pass (a skipped one is
/// returned in the second list, with why).
pub(crate) fn writable_set(
    explicit: &[(PathBuf, &'static str)],
    workspaces: &[PathBuf],
    home: Option<&Path>,
    protected: &[Protected],
) -> Result<(Vec<Writable>, Vec<String>), String> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (p, from) in explicit {
        let c = std::fs::canonicalize(p).map_err(|e| {
            format!(
                "{from} {}: {e}; a writable path must exist when the sandbox starts (create it first)",
                p.display()
            )
        })?;
        check(&c, protected).map_err(|e| format!("{from} {e}"))?;
        out.push(Writable { path: c, from });
    }
    let mut defaults: Vec<(PathBuf, &'static str)> = Vec::new();
    for ws in workspaces {
        for name in BUILD_OUTPUTS {
            defaults.push((ws.join(name), "build output"));
        }
    }
    if let Some(h) = home {
        for d in AGENT_DIRS {
            defaults.push((h.join(d), "agent directory"));
        }
    }
    for (p, from) in defaults {
        // A real directory only: a symlink named `target` could point anywhere.
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let Ok(c) = std::fs::canonicalize(&p) else {
            continue;
        };
        match check(&c, protected) {
            Ok(()) => out.push(Writable { path: c, from }),
            Err(e) => skipped.push(format!("{from} {e}; left read-only")),
        }
    }
    Ok((out, skipped))
}

/// The devices and terminals an agent writes: [`DEVICES`], [`DEVICE_DIRS`]
/// and the terminals its stdin, stdout and stderr are, where they exist.
fn device_paths() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = DEVICES
        .iter()
        .chain(DEVICE_DIRS)
        .map(PathBuf::from)
        .collect();
    for fd in 0..3 {
        // SAFETY: isatty on a descriptor number only reads its state.
        if unsafe { libc::isatty(fd) } == 1
            && let Ok(t) = std::fs::read_link(format!("/proc/self/fd/{fd}"))
        {
            v.push(t);
        }
    }
    v.retain(|p| p.exists());
    v
}

/// The write rights the ruleset handles on a kernel of `abi`: every write
/// right but device ioctls (a terminal's, not a file's).
fn handled(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_write(abi) & !AccessFs::IoctlDev & !AccessFs::ResolveUnix
}

/// A ruleset ready to be enforced: its descriptor (close-on-exec).
pub(crate) struct Prepared {
    fd: Option<OwnedFd>,
}

/// Builds the ruleset: `writable` (and the devices) get every handled
/// right; with `abi >= 6`, abstract UNIX sockets and signals are scoped to
/// the sandbox.
pub(crate) fn prepare(writable: &[Writable], abi: i32) -> Result<Prepared, String> {
    let target = ABI::V8;
    let all = handled(target);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| format!("cannot build the Landlock ruleset: {e}"))?;
    if abi >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(target))
            .map_err(|e| format!("cannot build the Landlock ruleset: {e}"))?;
    }
    let mut created = ruleset
        .create()
        .map_err(|e| format!("cannot create the Landlock ruleset: {e}"))?;
    let file_rights = all & AccessFs::from_file(target);
    for w in writable
        .iter()
        .map(|w| w.path.clone())
        .chain(device_paths())
    {
        let fd = PathFd::new(&w).map_err(|e| format!("cannot open {}: {e}", w.display()))?;
        let rights = if w.is_dir() { all } else { file_rights };
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| format!("cannot add {} to the Landlock ruleset: {e}", w.display()))?;
    }
    let fd: Option<OwnedFd> = created.into();
    Ok(Prepared { fd })
}

impl Prepared {
    /// The enforcing half, for the child between `fork` and `exec`: only
    /// two system calls (`prctl(PR_SET_NO_NEW_PRIVS)`,
    /// `landlock_restrict_self`), nothing that allocates.
    pub(crate) fn restrict_fn(&self) -> impl Fn() -> std::io::Result<()> + Send + Sync + 'static {
        let raw = self.fd.as_ref().map(AsRawFd::as_raw_fd);
        move || {
            let Some(fd) = raw else {
                return Err(std::io::Error::other("no Landlock ruleset"));
            };
            // SAFETY: plain system calls on integers.
            unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prot(p: &str, what: &str) -> Protected {
        Protected {
            path: PathBuf::from(p),
            what: what.into(),
        }
    }

    #[test]
    fn a_writable_path_may_not_open_a_workspace_or_writegates_own_files() {
        let p = [
            prot("/h/src/app", "the workspace"),
            prot("/h/.config/writegate", "writegate's config directory"),
        ];
        assert!(check(Path::new("/h/src/app/target"), &p).is_ok());
        assert!(check(Path::new("/h/.cache"), &p).is_ok());
        let e = check(Path::new("/h/src"), &p).unwrap_err();
        assert!(e.contains("contains the workspace"), "{e}");
        let e = check(Path::new("/h/.config"), &p).unwrap_err();
        assert!(e.contains("writegate's config directory"), "{e}");
        let e = check(Path::new("/h/.config/writegate/x"), &p).unwrap_err();
        assert!(e.contains("is inside"), "{e}");
    }

    #[test]
    fn home_paths_expand() {
        let h = Path::new("/home/me");
        assert_eq!(
            expand_home(Path::new("~/.cargo"), Some(h)),
            PathBuf::from("/home/me/.cargo")
        );
        assert_eq!(expand_home(Path::new("/x"), Some(h)), PathBuf::from("/x"));
    }
}
