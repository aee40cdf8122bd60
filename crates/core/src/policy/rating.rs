//! Rating a synthetic command: the first matching config rule, else the
//! built-in reasons (a protected path, a read-only file, a system path),
//! else `moderate`.

use super::protected::fold;
use super::{glob_match, protected_reason};
use crate::config::{Level, PolicyConfig};
use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Component, Path};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PolicyRule;
    use crate::error::{Detail, ErrorKind};
    use crate::policy::protected::ENV_FILE;
    use crate::policy::testing::{approvals, cmd};
    use crate::policy::{GateRequest, Grant, Scope};

    #[test]
    fn synthetic_command_escapes_non_utf8_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let a = Path::new(std::ffi::OsStr::from_bytes(b"/r/\xff"));
        let b = Path::new(std::ffi::OsStr::from_bytes(b"/r/\xfe"));
        assert_eq!(synthetic_command("write", a), r"edit_file write /r/\xff");
        assert_ne!(synthetic_command("write", a), synthetic_command("write", b));
        assert_eq!(cmd("/r/é*"), "edit_file write /r/é*");
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

    /// Defect pinned: a write over a file whose owner write bit is off replaced
    /// it silently (the rename needs only the directory's permission). It
    /// is held now, like a protected path, and a config rule can still
    /// lower it.
    #[test]
    fn a_read_only_file_is_held() {
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
            mode: crate::api::OpMode::Edit(writegate_text::EditMode::Append),
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
}
