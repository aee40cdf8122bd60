//! What `writegate setup` writes for each agent: the files, the entries in
//! them, and what it tells the person afterwards (the tool names the model
//! sees, what still writes files without writegate, the one step left).
//! Checked by `scripts/check-agents.sh` against qwen-code 0.24.4, Gemini
//! CLI 0.61.0, Claude Code 2.1.332 and Codex 0.171.0, and against Zed's
//! documented `context_servers` and `agent_servers`.

use super::edit::JsonEdit;
use serde_json::json;
use std::path::PathBuf;

/// The agents and editors `writegate setup` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Agent {
    /// qwen-code (`qwen`): ~/.qwen/settings.json.
    QwenCode,
    /// Gemini CLI (`gemini`): ~/.gemini/settings.json and a policy file.
    GeminiCli,
    /// Claude Code (`claude`): ~/.claude.json and ~/.claude/settings.json.
    ClaudeCode,
    /// Codex CLI (`codex`): ~/.codex/config.toml.
    Codex,
    /// Zed: its settings.json (a context server and agent servers).
    Zed,
}

impl Agent {
    /// Every agent, in `--list` order.
    pub(crate) const ALL: [Agent; 5] = [
        Agent::QwenCode,
        Agent::GeminiCli,
        Agent::ClaudeCode,
        Agent::Codex,
        Agent::Zed,
    ];

    /// The name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Agent::QwenCode => "qwen-code",
            Agent::GeminiCli => "gemini-cli",
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::Zed => "zed",
        }
    }
}

/// Where the files are and what to run: from the environment of the
/// person running `writegate setup`.
pub(crate) struct Env {
    /// `$HOME`.
    pub(crate) home: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub(crate) config_home: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub(crate) codex_home: PathBuf,
    /// `$XDG_DATA_HOME`, else `~/.local/share` (writegate's launchers).
    pub(crate) data_home: PathBuf,
    /// The writegate command the agents run: this binary's own path.
    pub(crate) writegate: String,
    /// Looks up a command on `PATH` (the agents an editor launches).
    pub(crate) which: fn(&str) -> Option<PathBuf>,
}

/// How a file changes.
pub(crate) enum Content {
    /// JSON or JSONC settings: these entries.
    Json(Vec<JsonEdit>),
    /// Codex's TOML: `[mcp_servers.writegate]` with these args and keys.
    CodexToml(Vec<&'static str>, Vec<(&'static str, &'static str)>),
    /// A file that is writegate's alone (created, or removed by `--remove`).
    Owned(String),
    /// A launcher script that is writegate's alone (`--sandbox`): as
    /// `Owned`, and executable.
    Launcher(String),
}

/// One file to change.
pub(crate) struct Target {
    /// The file.
    pub(crate) path: PathBuf,
    /// The change.
    pub(crate) content: Content,
}

/// The arguments of Zed's MCP entry: the workspaces are the session's
/// directories, which Zed hands over as MCP roots; writegate trusts them
/// (they are the directories the person opened).
const MCP_ARGS: [&str; 3] = ["mcp", "--client-roots", "trusted"];

/// The arguments of a command-line agent's MCP entry: its MCP roots, and
/// when it shares none (MCP 2026-07-28 has no roots to ask for) the
/// directory it starts writegate in, which is the directory it runs in:
/// never `/`, the home directory or above it (`--cwd-workspace`).
const AGENT_MCP_ARGS: [&str; 4] = ["mcp", "--client-roots", "trusted", "--cwd-workspace"];

fn mcp_entry(env: &Env) -> serde_json::Value {
    json!({ "command": env.writegate, "args": AGENT_MCP_ARGS })
}

/// qwen-code's own file-writing tools (`tools.disabled` unregisters them).
const QWEN_WRITE_TOOLS: [&str; 3] = ["write_file", "edit", "notebook_edit"];

/// Claude Code's own file-writing tools (permission deny rules).
/// (Claude Code 2.1.332 has no `MultiEdit` and warns about a rule naming it.)
const CLAUDE_WRITE_TOOLS: [&str; 3] = ["Write", "Edit", "NotebookEdit"];

/// writegate's tools in Claude Code's permission rules: allowed, because
/// writegate's approval gate is the one that asks (Claude asking too would
/// ask twice, and `claude -p` would refuse every call).
const CLAUDE_WRITEGATE_TOOLS: [&str; 1] = ["mcp__writegate__*"];

/// Gemini CLI's own file-writing tools, by class name (`tools.exclude`).
/// Gemini hides a tool whose name, class name or, for an MCP tool, bare
/// name (without `mcp_<server>_`) is excluded; an exclusion by tool name
/// (`write_file`, which is what a policy deny rule adds) hides writegate's
/// `mcp_writegate_write_file` too. The class names are only the built-in
/// tools': `WriteFileTool` is `write_file`, `EditTool` is `replace`.
const GEMINI_WRITE_TOOL_CLASSES: [&str; 2] = ["WriteFileTool", "EditTool"];

/// Gemini CLI's policy file. writegate's tools are allowed: its gate is
/// the one that asks, and without a rule `gemini -p` hides every tool that
/// would ask. Gemini's own `write_file` and `replace` are asked about, not
/// denied: Gemini hides a tool when a name it goes by is denied, and an MCP
/// tool goes by its bare name too, so a deny (or, under `gemini -p`, no
/// rule at all) for `write_file` hides `mcp_writegate_write_file` as well.
/// Those two are off through `tools.exclude` by class name instead.
const GEMINI_POLICY: &str = "\
# Written by `writegate setup gemini-cli`; `writegate setup gemini-cli --remove` deletes it.
# writegate's tools run without Gemini asking: writegate's approval gate asks before a
# sensitive write (.env, .git/, keys).
[[rule]]
mcpName = \"writegate\"
toolName = \"*\"
decision = \"allow\"
priority = 910

# Gemini's own write_file and replace are off through tools.exclude in settings.json (by
# class name). They must not be denied here, nor left without a rule under `gemini -p`:
# Gemini hides a tool whose bare name is denied, and that hides mcp_writegate_write_file too.
[[rule]]
toolName = [\"write_file\", \"replace\"]
decision = \"ask_user\"
priority = 900
";

/// The files `agent` needs and what goes in them.
pub(crate) fn targets(agent: Agent, env: &Env) -> Vec<Target> {
    let home = &env.home;
    match agent {
        Agent::QwenCode => vec![Target {
            path: home.join(".qwen/settings.json"),
            content: Content::Json(vec![
                // `trust`: qwen-code runs writegate's tools without asking
                // (writegate's gate asks; `qwen -p` refuses a tool that would).
                JsonEdit::Set(
                    vec!["mcpServers", "writegate"],
                    json!({ "command": env.writegate, "args": AGENT_MCP_ARGS, "trust": true }),
                ),
                JsonEdit::Contains(vec!["tools", "disabled"], QWEN_WRITE_TOOLS.to_vec()),
            ]),
        }],
        Agent::GeminiCli => vec![
            Target {
                path: home.join(".gemini/settings.json"),
                content: Content::Json(vec![
                    JsonEdit::Set(vec!["mcpServers", "writegate"], mcp_entry(env)),
                    JsonEdit::Contains(
                        vec!["tools", "exclude"],
                        GEMINI_WRITE_TOOL_CLASSES.to_vec(),
                    ),
                ]),
            },
            Target {
                path: home.join(".gemini/policies/writegate.toml"),
                content: Content::Owned(GEMINI_POLICY.to_string()),
            },
        ],
        Agent::ClaudeCode => vec![
            Target {
                path: home.join(".claude.json"),
                content: Content::Json(vec![JsonEdit::Set(
                    vec!["mcpServers", "writegate"],
                    json!({"type": "stdio", "command": env.writegate, "args": AGENT_MCP_ARGS, "env": {}}),
                )]),
            },
            Target {
                path: home.join(".claude/settings.json"),
                content: Content::Json(vec![
                    JsonEdit::Contains(vec!["permissions", "deny"], CLAUDE_WRITE_TOOLS.to_vec()),
                    JsonEdit::Contains(
                        vec!["permissions", "allow"],
                        CLAUDE_WRITEGATE_TOOLS.to_vec(),
                    ),
                ]),
            },
        ],
        Agent::Codex => vec![Target {
            path: env.codex_home.join("config.toml"),
            // Codex may not share MCP roots: its own directory (the
            // project it was started in) is the workspace then.
            // `default_tools_approval_mode = "approve"`: Codex runs
            // writegate's tools without asking (writegate's gate asks;
            // `codex exec` refuses a tool that would).
            content: Content::CodexToml(
                AGENT_MCP_ARGS.to_vec(),
                vec![("default_tools_approval_mode", "approve")],
            ),
        }],
        Agent::Zed => vec![zed_target(env, false)],
    }
}

/// Zed's settings file with writegate's entries; `sandboxed`: its agent
/// servers behind `writegate proxy --sandbox`.
pub(crate) fn zed_target(env: &Env, sandboxed: bool) -> Target {
    Target {
        path: env.config_home.join("zed/settings.json"),
        content: Content::Json(zed_edits(env, sandboxed)),
    }
}

/// Zed: writegate as a context server (Zed hands it to every agent it
/// runs) and the agents that route their file tools through the editor's
/// `fs/*`, behind `writegate proxy`, with their own edit prompts off (the
/// editor asks once, when writegate's gate holds a write).
fn zed_edits(env: &Env, sandboxed: bool) -> Vec<JsonEdit> {
    let agent =
        |cmd: &str| (env.which)(cmd).map_or_else(|| cmd.to_string(), |p| p.display().to_string());
    let proxy: &[&str] = if sandboxed {
        &["proxy", "--sandbox", "--"]
    } else {
        &["proxy", "--"]
    };
    let args = |cmd: &str, mode: &str| {
        let mut v: Vec<String> = proxy.iter().map(ToString::to_string).collect();
        v.extend([
            agent(cmd),
            "--acp".into(),
            "--approval-mode".into(),
            mode.into(),
        ]);
        v
    };
    vec![
        JsonEdit::Set(
            vec!["context_servers", "writegate"],
            json!({"source": "custom", "command": env.writegate, "args": MCP_ARGS, "env": {}}),
        ),
        JsonEdit::Set(
            vec!["agent_servers", "qwen-code (writegate)"],
            json!({"type": "custom", "command": env.writegate,
                   "args": args("qwen", "auto-edit"),
                   "env": {}}),
        ),
        JsonEdit::Set(
            vec!["agent_servers", "gemini-cli (writegate)"],
            json!({"type": "custom", "command": env.writegate,
                   "args": args("gemini", "auto_edit"),
                   "env": {}}),
        ),
    ]
}

/// What to tell the person after a set-up: the tools the model sees, what
/// is retired, what still writes without writegate, and the step left.
pub(crate) fn notes(agent: Agent) -> &'static str {
    match agent {
        Agent::QwenCode => "\
qwen-code: the model sees writegate's tools as mcp__writegate__read_file, mcp__writegate__write_file
  and mcp__writegate__edit_file; qwen-code's own write_file, edit and notebook_edit are unregistered
  (tools.disabled). writegate's server is trusted (`trust`): qwen runs its tools without asking,
  since writegate's gate asks before sensitive writes. Its shell tool (run_shell_command) can
  still write files.
  The workspace is the directory qwen runs in (its MCP roots, else the directory it starts
  writegate in; never your home directory or /).
next: in a project, `qwen mcp list` shows `writegate ... Connected`; start `qwen` there.
",
        Agent::GeminiCli => "\
gemini-cli: the model sees writegate's tools as mcp_writegate_read_file, mcp_writegate_write_file
  and mcp_writegate_edit_file, allowed by the policy file ~/.gemini/policies/writegate.toml
  (writegate's gate asks before sensitive writes). Gemini's own write_file and replace are off:
  tools.exclude in ~/.gemini/settings.json names their classes (WriteFileTool, EditTool), because
  a policy rule that denies write_file would hide writegate's write_file too; Gemini warns that
  tools.exclude is deprecated. Its shell tool (run_shell_command) can still write files.
  The workspace is the directory gemini runs in (never your home directory or /).
next: Gemini CLI starts MCP servers only in trusted folders: run `gemini` once in each project and
  choose \"Trust folder\", or, without asking (gemini -p, Zed's ACP mode, scripts), add the project
  to ~/.gemini/trustedFolders.json: {\"/path/to/project\": \"TRUST_FOLDER\"}.
  Then `gemini mcp list` there shows `writegate ... Connected`.
",
        Agent::ClaudeCode => "\
claude-code: the model sees writegate's tools as mcp__writegate__read_file, mcp__writegate__write_file
  and mcp__writegate__edit_file (user scope, ~/.claude.json); permission rules in
  ~/.claude/settings.json deny Claude Code's own Write, Edit and NotebookEdit and
  allow mcp__writegate__* (writegate's gate asks before sensitive writes, so Claude does not ask
  too). Its Bash tool can still write files. The workspace is the directory claude runs in
  (never your home directory or /).
next: restart claude; `claude mcp list` shows writegate as connected.
",
        Agent::Codex => "\
codex: writegate's tools are listed under the server `writegate` in `/mcp` (read_file, write_file,
  edit_file). Codex has no setting that turns off its own apply_patch tool, and its shell can write
  files too: nothing of Codex's is retired. With sandbox_mode = \"read-only\" in config.toml, Codex
  asks you before its own patches and shell writes, while writegate's tools write without asking.
  writegate's tools run without Codex asking (default_tools_approval_mode = \"approve\"): writegate's
  gate asks before sensitive writes. The workspace is the directory codex runs in (never your home
  directory or /).
next: `codex mcp list` shows writegate; start `codex` in a project.
",
        Agent::Zed => "\
zed: writegate is a context server (MCP) that Zed hands to every agent it runs, and the agent panel
  has \"qwen-code (writegate)\" and \"gemini-cli (writegate)\": those run behind `writegate proxy`, which
  answers their file writes (fs/write_text_file), with their own edit prompts off
  (--approval-mode auto-edit / auto_edit): Zed asks you once, only for a write writegate's approval
  gate holds (.env, .git/, keys). Zed's Claude and Codex agents write to disk themselves, which the
  proxy cannot see: they get writegate's tools from the context server, and their own tools stay.
  The agent servers start qwen and gemini by the full path found on your PATH now; one not found
  is written as its bare name, which Zed must find on its own PATH (run setup again once it is
  installed).
next: restart Zed's agent panel and start a thread with \"qwen-code (writegate)\" or
  \"gemini-cli (writegate)\". Gemini needs the project folder trusted first (run `gemini` there once,
  or add it to ~/.gemini/trustedFolders.json: {\"/path/to/project\": \"TRUST_FOLDER\"}).
",
    }
}
