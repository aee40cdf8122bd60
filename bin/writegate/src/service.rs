//! `writegate service install`: the systemd user units of `deploy/`, with
//! `ExecStart` set to this binary's own path (wherever `cargo install` or a
//! package put it), into `$XDG_CONFIG_HOME/systemd/user/`, and a config
//! file with the `--workspace` directories when there is none yet. It
//! prints the two `systemctl`/`loginctl` commands left; it starts nothing
//! itself. Files are written as `writegate setup` writes them (atomic,
//! mode kept, nothing changed on a second run).

use crate::setup::disk;
use crate::{Status, absolutize, default_config_path, env_var, out};
use clap::{Args, Subcommand};
use std::fmt::Write as _;
use std::path::PathBuf;

/// `writegate service`.
#[derive(Args)]
pub(crate) struct ServiceArgs {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: ServiceCommand,
}

/// `writegate service <command>`.
#[derive(Subcommand)]
pub(crate) enum ServiceCommand {
    /// Write the systemd user units (and a config with the workspaces when there is none).
    Install(ServiceInstallArgs),
    /// Remove the systemd user units `install` wrote (the config file stays).
    Uninstall(ServiceUninstallArgs),
}

/// `writegate service install`.
#[derive(Args)]
pub(crate) struct ServiceInstallArgs {
    /// A directory agents may write in, registered trusted in a new config file (repeatable).
    #[arg(long = "workspace", value_name = "DIR")]
    pub(crate) workspaces: Vec<PathBuf>,
    /// Say what would be written; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// `writegate service uninstall`.
#[derive(Args)]
pub(crate) struct ServiceUninstallArgs {
    /// Say what would be removed; remove nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// The units, as in the repository's `deploy/`.
const SERVICE_UNIT: &str = include_str!("../../../deploy/writegate.service");
const SOCKET_UNIT: &str = include_str!("../../../deploy/writegate.socket");

/// The service unit with `ExecStart` running `exe`.
fn service_unit(exe: &str) -> String {
    SERVICE_UNIT.replace(
        "ExecStart=writegate serve",
        &format!("ExecStart={exe} serve"),
    )
}

/// A config file registering `roots` (trusted), with every other key at
/// its default (config/writegate.toml lists them).
fn config_text(roots: &[PathBuf]) -> String {
    let mut text = String::from(
        "# writegate config, written by `writegate service install`. Every key, with its\n\
         # default, is in config/writegate.toml of the writegate repository.\n\
         # `systemctl --user reload writegate` re-reads this file.\n",
    );
    for root in roots {
        let _ = writeln!(
            text,
            "\n[[workspace]]\nroot = {}\ntrusted = true",
            toml_string(root)
        );
    }
    text
}

/// `path` as a TOML string: every character a basic string may not hold
/// (newline, control characters) escaped, so a directory name cannot end
/// the string or break the file.
fn toml_string(path: &std::path::Path) -> String {
    toml_edit::Value::from(path.display().to_string())
        .decorated("", "")
        .to_string()
}

/// `$XDG_CONFIG_HOME`, else `$HOME/.config`.
fn config_home(home: &str) -> PathBuf {
    env_var("XDG_CONFIG_HOME")
        .filter(|h| h.starts_with('/'))
        .map_or_else(|| PathBuf::from(home).join(".config"), PathBuf::from)
}

/// The names of the units `writegate service install` writes.
pub(crate) const UNIT_NAMES: [&str; 2] = ["writegate.service", "writegate.socket"];

/// Where `writegate service install` writes its units:
/// `$XDG_CONFIG_HOME/systemd/user` (`None` without an absolute `$HOME`).
pub(crate) fn units_dir() -> Option<PathBuf> {
    let home = env_var("HOME").filter(|h| h.starts_with('/'))?;
    Some(config_home(&home).join("systemd/user"))
}

/// `writegate service install` or `uninstall`.
pub(crate) fn run(a: &ServiceArgs) -> Status {
    let i = match &a.command {
        ServiceCommand::Install(i) => i,
        ServiceCommand::Uninstall(u) => return uninstall(u.dry_run),
    };
    let Some(home) = env_var("HOME").filter(|h| h.starts_with('/')) else {
        eprintln!("writegate: service install: $HOME is not set (or not absolute)");
        return Status::Usage;
    };
    let config_home = config_home(&home);
    let units = config_home.join("systemd/user");
    let exe = match std::env::current_exe().and_then(std::fs::canonicalize) {
        Ok(p) => p.display().to_string(),
        Err(e) => {
            eprintln!("writegate: service install: cannot find this binary's path: {e}");
            return Status::Usage;
        }
    };
    let mut roots = Vec::new();
    for w in &i.workspaces {
        match std::fs::canonicalize(absolutize(w)) {
            Ok(p) if p.is_dir() && p.to_str().is_none() => {
                return crate::usage_error(
                    "service install",
                    &format!(
                        "--workspace {}: the path is not UTF-8, which the config file cannot hold",
                        w.display()
                    ),
                );
            }
            Ok(p) if p.is_dir() => roots.push(p),
            _ => {
                return crate::usage_error(
                    "service install",
                    &format!("--workspace {}: not an existing directory", w.display()),
                );
            }
        }
    }
    let config = default_config_path().unwrap_or_else(|| config_home.join("writegate/config.toml"));
    let mut files = vec![
        (units.join(UNIT_NAMES[0]), service_unit(&exe)),
        (units.join(UNIT_NAMES[1]), SOCKET_UNIT.to_string()),
    ];
    let config_exists = config.exists();
    if !config_exists && !roots.is_empty() {
        files.push((config.clone(), config_text(&roots)));
    }
    let mut text = String::new();
    for (path, content) in files {
        let cur = match disk::read(&path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!(
                    "writegate: service install: cannot read {}: {e}; nothing more was changed",
                    path.display()
                );
                return Status::Refused;
            }
        };
        if cur.exists() && cur.text == content {
            let _ = writeln!(text, "{}: up to date", path.display());
            continue;
        }
        if i.dry_run {
            let verb = if cur.exists() { "update" } else { "write" };
            let _ = writeln!(text, "{}: would {verb}", path.display());
            continue;
        }
        if let Err(e) = disk::write(&cur, &content) {
            if !text.is_empty() {
                out(&text);
            }
            eprintln!(
                "writegate: service install: cannot write {}: {e}",
                path.display()
            );
            return Status::Refused;
        }
        let verb = if cur.exists() { "updated" } else { "written" };
        let _ = writeln!(text, "{}: {verb}", path.display());
    }
    let held = std::fs::read_to_string(&config).unwrap_or_default();
    roots.retain(|r| !held.contains(&format!("root = {}", toml_string(r))));
    if config_exists && !roots.is_empty() {
        let _ = write!(
            text,
            "{}: exists and was left alone; add the workspaces to it yourself:\n{}",
            config.display(),
            config_text(&roots)
                .lines()
                .skip(3)
                .fold(String::new(), |mut acc, l| {
                    let _ = writeln!(acc, "  {l}");
                    acc
                })
        );
    } else if !config_exists && i.workspaces.is_empty() {
        let _ = writeln!(
            text,
            "no config at {}: the service needs a workspace; run this again with --workspace DIR",
            config.display()
        );
    }
    if i.dry_run {
        text.push_str("dry run: nothing was written\n");
        out(&text);
        return Status::Ok;
    }
    text.push_str(
        "next:\n  systemctl --user daemon-reload\n  systemctl --user enable --now writegate.socket   # writegate starts on the first connection\n  loginctl enable-linger \"$USER\"                   # keep it running when you are not logged in\n",
    );
    out(&text);
    Status::Ok
}

/// `writegate service uninstall`: removes the units `install` wrote;
/// the config file is left (it may hold more than the service's).
fn uninstall(dry_run: bool) -> Status {
    let Some(units) = units_dir() else {
        eprintln!("writegate: service uninstall: $HOME is not set (or not absolute)");
        return Status::Usage;
    };
    let mut text = String::from(
        "first, if the service runs:\n  systemctl --user disable --now writegate.socket writegate.service\n",
    );
    for name in UNIT_NAMES {
        let path = units.join(name);
        if !path.exists() {
            let _ = writeln!(text, "{}: not there", path.display());
            continue;
        }
        if dry_run {
            let _ = writeln!(text, "{}: would remove", path.display());
            continue;
        }
        if let Err(e) = writegate_fs::unlink_path(&path) {
            out(&text);
            eprintln!(
                "writegate: service uninstall: cannot remove {}: {e}",
                path.display()
            );
            return Status::Refused;
        }
        let _ = writeln!(text, "{}: removed", path.display());
    }
    if dry_run {
        text.push_str("dry run: nothing was removed\n");
    } else {
        text.push_str("then:\n  systemctl --user daemon-reload\n");
    }
    if let Some(config) = default_config_path() {
        let _ = writeln!(
            text,
            "{} is left as it is (remove it yourself if nothing else uses it)",
            config.display()
        );
    }
    out(&text);
    Status::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_this_binary_and_keeps_new_dirs_readable() {
        let unit = service_unit("/opt/wg/bin/writegate");
        assert!(
            unit.contains("\nExecStart=/opt/wg/bin/writegate serve\n"),
            "{unit}"
        );
        assert!(!unit.contains(".cargo/bin"), "{unit}");
        assert!(unit.contains("\nUMask=0022\n"), "{unit}");
    }

    #[test]
    fn config_registers_the_workspaces() {
        let text = config_text(&[PathBuf::from("/home/a/src"), PathBuf::from("/srv/b \"q\"")]);
        let cfg: toml_edit::DocumentMut = text.parse().unwrap();
        let ws = cfg["workspace"].as_array_of_tables().unwrap();
        assert_eq!(ws.len(), 2);
        assert_eq!(ws.get(1).unwrap()["root"].as_str(), Some("/srv/b \"q\""));
        assert_eq!(ws.get(0).unwrap()["trusted"].as_bool(), Some(true));
    }

    #[test]
    fn a_root_with_a_newline_or_control_character_stays_one_string() {
        let odd = "/srv/a\n[[workspace]]\nroot = \"/\"\u{1b}\\";
        let text = config_text(&[PathBuf::from(odd)]);
        let cfg: toml_edit::DocumentMut = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
        let ws = cfg["workspace"].as_array_of_tables().unwrap();
        assert_eq!(ws.len(), 1, "{text}");
        assert_eq!(ws.get(0).unwrap()["root"].as_str(), Some(odd));
    }
}
