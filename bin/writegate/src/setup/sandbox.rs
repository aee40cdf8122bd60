//! `writegate setup AGENT --sandbox`: the agent starts under `writegate
//! run`, so that its own writes to a project fail and writegate's tools are
//! its only way in (docs/security.md, "The sandbox").
//!
//! - A command-line agent gets a launcher of its command's name (`qwen`,
//!   `gemini`, `claude`, `codex`) in writegate's own bin directory,
//!   `$XDG_DATA_HOME/writegate/bin` (`~/.local/share/writegate/bin`), which
//!   runs `writegate run -- AGENT "$@"`. The person puts that directory
//!   first on `PATH`; writegate edits no shell start-up file. The launcher
//!   finds the agent on `PATH` without its own directory, so it never
//!   starts itself, and the sandbox cannot rewrite it (the rest of HOME is
//!   read-only inside).
//! - Zed's agent servers run `writegate proxy --sandbox -- AGENT`: the proxy
//!   stays outside and answers the agent's `fs/*`, the agent is inside.
//!   (`writegate run -- writegate proxy` would put the proxy inside too,
//!   and its writes would fail.)
//!
//! The MCP entry is the same as without `--sandbox`: `writegate mcp`
//! started inside a run relays to the run's own writegate.

use super::agents::{Agent, Content, Env, Target};
use std::path::{Path, PathBuf};

/// writegate's own bin directory (launchers).
pub(crate) fn bin_dir(env: &Env) -> PathBuf {
    env.data_home.join("writegate/bin")
}

/// The command a command-line agent is started by; `None` for Zed.
fn command(agent: Agent) -> Option<&'static str> {
    match agent {
        Agent::QwenCode => Some("qwen"),
        Agent::GeminiCli => Some("gemini"),
        Agent::ClaudeCode => Some("claude"),
        Agent::Codex => Some("codex"),
        Agent::Zed => None,
    }
}

/// `s` in single quotes for `sh`.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The launcher of `agent`: its path and text; `None` for Zed.
pub(crate) fn launcher(agent: Agent, env: &Env) -> Option<Target> {
    let cmd = command(agent)?;
    let dir = bin_dir(env);
    let name = agent.name();
    let text = format!(
        "#!/bin/sh\n\
         # Written by `writegate setup {name} --sandbox`; `writegate setup {name} --remove` deletes it.\n\
         # Starts {cmd} under `writegate run`: in the directory it starts in, {cmd}'s own writes fail\n\
         # and files change only through writegate's tools. Put this directory first on PATH.\n\
         # {cmd} is looked up on PATH without this directory, so this never starts itself.\n\
         self={dir}\n\
         set -f\n\
         old=$PATH\n\
         PATH=\n\
         IFS=:\n\
         for d in $old; do\n\
         \x20   [ \"$d\" = \"$self\" ] || [ \"$d\" = \"$self/\" ] || PATH=${{PATH:+$PATH:}}$d\n\
         done\n\
         unset IFS\n\
         set +f\n\
         export PATH\n\
         exec {writegate} run -- {cmd} \"$@\"\n",
        dir = quoted(&dir.display().to_string()),
        writegate = quoted(&env.writegate),
    );
    Some(Target {
        path: dir.join(cmd),
        content: Content::Launcher(text),
    })
}

/// Whether `agent` was set up with `--sandbox`: its launcher is there (for
/// Zed: its settings hold the sandboxed agent servers), so that a plain
/// `--remove` takes that out too.
pub(crate) fn installed(agent: Agent, env: &Env, zed_sandboxed: impl Fn() -> bool) -> bool {
    match launcher(agent, env) {
        Some(t) => std::fs::symlink_metadata(&t.path).is_ok(),
        None => zed_sandboxed(),
    }
}

/// Makes the launcher just written executable by its owner (it is
/// written 0600, as every file setup writes); never through a symbolic
/// link.
pub(crate) fn make_executable(path: &Path) -> Result<(), String> {
    writegate_fs::make_owner_executable(path).map_err(|e| e.to_string())
}

/// What to tell the person after `--sandbox`.
pub(crate) fn notes(agent: Agent, env: &Env) -> String {
    let Some(cmd) = command(agent) else {
        return "\
sandbox: the agent servers run behind `writegate proxy --sandbox`: the agent and everything it starts
  run under `writegate run` in the directory Zed starts it in (the project), where its own writes
  (its shell, a patch tool) fail with \"Permission denied\"; its file writes through Zed (fs/*) are
  answered by writegate outside, and each session tells the model so.
"
        .to_string();
    };
    let dir = bin_dir(env);
    format!(
        "\
sandbox: {launcher} starts {cmd} under `writegate run`: in the directory it starts in, {cmd}'s own
  writes (its shell, any tool of its own) fail with \"Permission denied\" and files change only
  through writegate's tools. writegate does not edit your shell's start-up files: put the directory
  first on PATH yourself, for example in ~/.profile or ~/.bashrc:
    export PATH=\"{dir}:$PATH\"
  then `command -v {cmd}` shows the launcher. To start {cmd} unsandboxed once: `command -p {cmd}` or its
  full path. See `writegate run --help` for what stays writable.
",
        launcher = dir.join(cmd).display(),
        dir = dir.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env {
            home: "/home/u".into(),
            config_home: "/home/u/.config".into(),
            codex_home: "/home/u/.codex".into(),
            data_home: "/home/u/.local/share".into(),
            writegate: "/opt/it's/writegate".into(),
            which: |_| None,
        }
    }

    #[test]
    fn the_launcher_runs_the_agent_under_writegate_run_and_quotes_paths() {
        let t = launcher(Agent::QwenCode, &env()).unwrap();
        assert_eq!(t.path, Path::new("/home/u/.local/share/writegate/bin/qwen"));
        let Content::Launcher(text) = t.content else {
            panic!("not a launcher")
        };
        assert!(text.starts_with("#!/bin/sh\n# Written by `writegate setup "));
        assert!(text.contains("self='/home/u/.local/share/writegate/bin'\n"));
        assert!(text.ends_with("exec '/opt/it'\\''s/writegate' run -- qwen \"$@\"\n"));
        assert!(launcher(Agent::Zed, &env()).is_none());
    }
}
