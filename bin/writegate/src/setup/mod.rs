//! `writegate setup AGENT`: writes the user-level configuration that makes
//! an agent (or Zed) use writegate: the MCP server entry, the settings that
//! retire the agent's own write tools where it has them, and for Zed the
//! agent servers behind `writegate proxy`. It merges into what is there
//! (every other key and comment kept), backs the old file up, changes
//! nothing on a second run, shows the change as a diff with `--dry-run`
//! and takes it out again with `--remove`. Every file is written through
//! writegate's own publisher (`disk.rs`), never through a symbolic link.
//! A file it cannot edit (not valid JSON/TOML, a key twice in one object,
//! another shape where the entry goes, a symbolic link) stops it before
//! anything is written. `--remove` takes out only what the set-up writes,
//! exactly as it writes it: an entry or a file of writegate's name that
//! holds something else stays, and the output says so.

mod agents;
pub(crate) mod disk;
mod edit;
mod sandbox;

pub(crate) use agents::Agent;
use agents::{Content, Env, Target};

use crate::{Status, env_var, out};
use clap::Args;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `writegate setup`.
// Its flags are bools.
#[allow(clippy::struct_excessive_bools)]
#[derive(Args)]
pub(crate) struct SetupArgs {
    /// The agent or editor to configure.
    #[arg(value_enum, required_unless_present = "list")]
    pub(crate) agent: Option<Agent>,
    /// List the agents, their settings files and whether writegate is set up in them.
    #[arg(long, conflicts_with_all = ["agent", "dry_run", "remove", "sandbox"])]
    pub(crate) list: bool,
    /// Print the change as a unified diff; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Take writegate's entries out again (the agent's own tools come back).
    #[arg(long)]
    pub(crate) remove: bool,
    /// Also start the agent under `writegate run` (its own writes to a project fail): a launcher in
    /// ~/.local/share/writegate/bin for a command-line agent, `writegate proxy --sandbox` for Zed.
    #[arg(long)]
    pub(crate) sandbox: bool,
}

/// One file's planned change.
struct Planned {
    cur: disk::Current,
    /// The new text; `None`: remove the file (a writegate-owned file).
    new: Option<String>,
    /// What a removal leaves in place, in words (not written as it is now
    /// by writegate).
    left: Vec<String>,
    /// A launcher: made executable once written.
    executable: bool,
}

impl Planned {
    fn changes(&self) -> bool {
        match &self.new {
            Some(t) if self.cur.exists() => *t != self.cur.text,
            Some(t) => !t.is_empty(),
            None => self.cur.exists(),
        }
    }
}

/// What a planned change is: the new text (`None`: remove the file) and
/// what a removal leaves.
struct Plan {
    new: Option<String>,
    left: Vec<String>,
}

/// How the first line of every file writegate owns starts: a file that
/// starts so is writegate's (of this or another version) and may be
/// replaced on a set-up (it is backed up first); anything else of that
/// name is the person's.
const OWNED_MARK: &str = "# Written by `writegate setup ";

/// The environment `writegate setup` works in; `None` without `$HOME`.
fn env() -> Option<Env> {
    let home = PathBuf::from(env_var("HOME").filter(|h| h.starts_with('/'))?);
    let config_home = env_var("XDG_CONFIG_HOME")
        .filter(|h| h.starts_with('/'))
        .map_or_else(|| home.join(".config"), PathBuf::from);
    let data_home = env_var("XDG_DATA_HOME")
        .filter(|h| h.starts_with('/'))
        .map_or_else(|| home.join(".local/share"), PathBuf::from);
    let codex_home = env_var("CODEX_HOME")
        .filter(|h| h.starts_with('/'))
        .map_or_else(|| home.join(".codex"), PathBuf::from);
    let writegate = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .map_or_else(|| "writegate".to_string(), |p| p.display().to_string());
    Some(Env {
        home,
        config_home,
        codex_home,
        data_home,
        writegate,
        which,
    })
}

/// The first executable `cmd` on `PATH`.
fn which(cmd: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = env_var("PATH")?;
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(cmd))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The new text of `target` (or `None` to remove it), from what it holds.
/// A file writegate owns is removed only when it holds exactly what the
/// set-up writes, and replaced only when it is writegate's.
fn plan(target: &Target, cur: &disk::Current, env: &Env, remove: bool) -> Result<Plan, String> {
    let edited = |e: edit::Edited| Plan {
        new: Some(e.text),
        left: e.left,
    };
    match &target.content {
        Content::Json(edits) => edit::edit_json(&cur.text, edits, remove).map(edited),
        Content::CodexToml(args, keys) => {
            edit::edit_codex_toml(&cur.text, "writegate", &env.writegate, args, keys, remove)
                .map(edited)
        }
        Content::Owned(text) | Content::Launcher(text) if remove => {
            if !cur.exists() || cur.text == *text {
                Ok(Plan {
                    new: None,
                    left: Vec::new(),
                })
            } else {
                Ok(Plan {
                    new: Some(cur.text.clone()),
                    left: vec![
                        "it is not the file writegate setup writes (it was changed since, or is a file of your own with that name), so it stays; delete it yourself if it should go"
                            .to_string(),
                    ],
                })
            }
        }
        Content::Owned(text) | Content::Launcher(text) => {
            if cur.exists() && cur.text != *text && !owned_by_writegate(&cur.text) {
                return Err(
                    "a file of that name is there that writegate setup did not write, and it does not replace it; move it away (or rename it), then run this again"
                        .to_string(),
                );
            }
            Ok(Plan {
                new: Some(text.clone()),
                left: Vec::new(),
            })
        }
    }
}

/// Whether a file of writegate's name is writegate's: its first line (a
/// launcher's second, after `#!`) starts with [`OWNED_MARK`].
fn owned_by_writegate(text: &str) -> bool {
    let text = match text.strip_prefix("#!") {
        Some(rest) => rest.split_once('\n').map_or("", |(_, r)| r),
        None => text,
    };
    text.starts_with(OWNED_MARK)
}

/// The files of `agent` for this set-up, and whether it is sandboxed:
/// with `--sandbox`, or for `--remove` when the set-up there was (its
/// launcher is there; Zed's agent servers are the sandboxed ones).
fn targets_of(agent: Agent, env: &Env, a: &SetupArgs) -> (Vec<agents::Target>, bool) {
    let sandboxed = a.sandbox
        || (a.remove
            && sandbox::installed(agent, env, || {
                let t = agents::zed_target(env, true);
                disk::read(&t.path)
                    .ok()
                    .and_then(|cur| {
                        let p = plan(&t, &cur, env, true).ok()?;
                        Some(p.left.is_empty() && p.new.as_deref() != Some(cur.text.as_str()))
                    })
                    .unwrap_or(false)
            }));
    let mut targets = agents::targets(agent, env);
    if sandboxed {
        match sandbox::launcher(agent, env) {
            Some(l) => targets.push(l),
            None => targets = vec![agents::zed_target(env, true)],
        }
    }
    (targets, sandboxed)
}

/// `writegate setup`.
pub(crate) fn run(a: &SetupArgs) -> Status {
    let Some(env) = env() else {
        eprintln!(
            "writegate: setup: $HOME is not set (or not absolute): it says where the agents' settings are"
        );
        return Status::Usage;
    };
    let Some(agent) = a.agent else {
        return list(&env);
    };
    let mut planned = Vec::new();
    // Files writegate owns that `--remove` leaves, with why.
    let mut kept = String::new();
    let (targets, sandboxed) = targets_of(agent, &env, a);
    for target in targets {
        let executable = matches!(target.content, Content::Launcher(_));
        let cur = match disk::read(&target.path) {
            Ok(c) => c,
            // A file of writegate's name that cannot be read as writegate's
            // (a symbolic link, a fifo, not text) is not writegate's: a
            // removal leaves it.
            Err(e)
                if a.remove
                    && matches!(target.content, Content::Owned(_) | Content::Launcher(_)) =>
            {
                let _ = writeln!(
                    kept,
                    "{}: left as it is: {e}; delete it yourself if it should go",
                    target.path.display()
                );
                continue;
            }
            Err(e) => {
                let advice = match std::fs::read_link(&target.path)
                    .map(|to| std::fs::canonicalize(&target.path).unwrap_or(to))
                {
                    Ok(to) => format!(
                        "; to have writegate setup change it, put the file itself in its place (`cp --remove-destination '{}' '{}'`), then run this again",
                        to.display(),
                        target.path.display()
                    ),
                    Err(_) => String::new(),
                };
                return cannot(agent, &target.path, &format!("{e}{advice}"));
            }
        };
        match plan(&target, &cur, &env, a.remove) {
            Ok(Plan { new, left }) => planned.push(Planned {
                cur,
                new,
                left,
                executable,
            }),
            Err(e) => return cannot(agent, &target.path, &e),
        }
    }
    for p in &planned {
        for why in &p.left {
            let _ = writeln!(kept, "{}: left as it is: {why}", p.cur.shown.display());
        }
    }
    if a.dry_run {
        return dry_run(agent, &planned, &kept, a.remove);
    }
    let mut text = String::new();
    for p in &planned {
        let shown = p.cur.shown.display();
        if !p.changes() && !p.left.is_empty() {
            continue;
        }
        if !p.changes() {
            let _ = writeln!(
                text,
                "{shown}: already {}",
                if a.remove {
                    "without writegate"
                } else {
                    "set up"
                }
            );
            continue;
        }
        let backup = if p.cur.exists() && p.new.is_some() {
            match disk::backup(&p.cur) {
                Ok(b) => Some(b),
                Err(e) => return failed(&text, &p.cur.shown, &format!("cannot back it up: {e}")),
            }
        } else {
            None
        };
        let done = match &p.new {
            Some(t) => disk::write(&p.cur, t),
            None => disk::remove(&p.cur),
        };
        if let Err(e) = done {
            return failed(&text, &p.cur.shown, &e);
        }
        if p.executable
            && p.new.is_some()
            && let Err(e) = sandbox::make_executable(&p.cur.shown)
        {
            return failed(
                &text,
                &p.cur.shown,
                &format!("cannot make it executable: {e}"),
            );
        }
        if p.new.is_none() {
            // A directory the file was alone in (gemini's policies/) goes too.
            disk::remove_dir_if_empty(&p.cur);
        }
        let verb = match (&p.new, p.cur.exists()) {
            (None, _) => "removed".to_string(),
            (Some(_), false) => "created".to_string(),
            (Some(_), true) => format!(
                "updated (the old file is {}; the {} newest backups are kept, older ones removed)",
                backup
                    .as_deref()
                    .map_or_else(String::new, |b| b.display().to_string()),
                disk::BACKUPS_KEPT
            ),
        };
        let _ = writeln!(text, "{shown}: {verb}");
    }
    text.push_str(&kept);
    if a.remove && !kept.is_empty() {
        let _ = writeln!(
            text,
            "{}: writegate's entries are out again, but for what is left as it is above.",
            agent.name()
        );
    } else if a.remove {
        let _ = writeln!(
            text,
            "{}: writegate's entries are out again; the agent's own tools are back.",
            agent.name()
        );
    } else {
        text.push_str(agents::notes(agent));
        if sandboxed {
            text.push_str(&sandbox::notes(agent, &env));
        }
    }
    out(&text);
    Status::Ok
}

/// `--dry-run`: the change as a unified diff per file; nothing written.
fn dry_run(agent: Agent, planned: &[Planned], kept: &str, remove: bool) -> Status {
    let mut text = String::new();
    for p in planned {
        let shown = p.cur.shown.display().to_string();
        if !p.changes() && !p.left.is_empty() {
            continue;
        }
        if !p.changes() {
            let _ = writeln!(text, "{shown}: no change");
            continue;
        }
        let new = p.new.as_deref().unwrap_or("");
        let old_name = if p.cur.exists() {
            shown.clone()
        } else {
            "/dev/null".to_string()
        };
        let new_name = if p.new.is_some() {
            shown.clone()
        } else {
            "/dev/null".to_string()
        };
        let diff = similar::TextDiff::from_lines(p.cur.text.as_str(), new);
        text.push_str(&diff.unified_diff().header(&old_name, &new_name).to_string());
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text.push_str(kept);
    let _ = writeln!(
        text,
        "dry run: nothing was written (run `writegate setup {}{}` without --dry-run to apply)",
        agent.name(),
        if remove { " --remove" } else { "" }
    );
    out(&text);
    Status::Ok
}

/// `--list`: the agents, their files and whether writegate is set up there.
fn list(env: &Env) -> Status {
    let mut text = String::from("agents writegate setup knows (writegate setup AGENT):\n");
    for agent in Agent::ALL {
        let mut state = "set up";
        let mut files = Vec::new();
        for target in agents::targets(agent, env) {
            files.push(target.path.display().to_string());
            let done = disk::read(&target.path)
                .ok()
                .and_then(|cur| plan(&target, &cur, env, false).ok().map(|p| (cur, p)))
                .is_some_and(|(cur, p)| {
                    cur.exists() && p.new.as_deref() == Some(cur.text.as_str())
                });
            if !done {
                state = "not set up";
            }
        }
        let _ = writeln!(
            text,
            "  {:<12} {:<11} {}",
            agent.name(),
            state,
            files.join(", ")
        );
    }
    out(&text);
    Status::Ok
}

/// A file that cannot be edited: nothing was written.
fn cannot(agent: Agent, path: &Path, problem: &str) -> Status {
    eprintln!(
        "writegate: setup {}: cannot change {}: {problem}; nothing was changed",
        agent.name(),
        path.display()
    );
    Status::Refused
}

/// A write that failed after others succeeded: say what was done.
fn failed(done: &str, path: &Path, problem: &str) -> Status {
    if !done.is_empty() {
        out(done);
    }
    eprintln!(
        "writegate: setup: cannot write {}: {problem}",
        path.display()
    );
    Status::Refused
}
