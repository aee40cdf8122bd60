//! `writegate`: the daemon (`serve`) and a command line for people (`write`,
//! `edit`, `read`, `approve`, `audit`, `completions`, `man`). The client
//! subcommands talk to the running daemon over its socket; this binary
//! parses arguments, builds the service and hands over to `writegate-acp`.
//! It holds no policy and writes no files itself.
//!
//! Exit statuses (every subcommand documents its own in `--help`): 0 done,
//! 1 refused by the daemon, 2 usage error, 3 daemon unreachable.

mod args;
mod audit;
mod client;
mod commands;
mod history;
mod mcp;
mod mcp_http;
mod memory;
mod proxy;
mod queue;
mod relay;
mod run;
mod sandbox;
mod serve;
mod service;
mod setup;

use args::{Cli, Command};
use clap::{CommandFactory, Parser};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How a subcommand ended; the process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// 0: done.
    Ok,
    /// 1: the daemon refused (or, for `audit`, the log cannot be read).
    Refused,
    /// 2: bad arguments or input; nothing was sent. For `serve`: cannot start.
    Usage,
    /// 3: the daemon could not be reached.
    Unreachable,
}

impl From<Status> for ExitCode {
    fn from(s: Status) -> ExitCode {
        ExitCode::from(match s {
            Status::Ok => 0,
            Status::Refused => 1,
            Status::Usage => 2,
            Status::Unreachable => 3,
        })
    }
}

fn main() -> ExitCode {
    memory::tune_malloc();
    let cli = Cli::parse();
    let status = match cli.command {
        // The proxy ends with its agent's exit status, whatever it is.
        Command::Proxy(a) => return proxy::proxy(a),
        // So does the sandbox.
        Command::Run(a) => return run::run(&a),
        Command::Serve(a) => serve::serve(&a),
        Command::Mcp(a) => mcp::mcp(a),
        Command::Write(a) => commands::write(&a),
        Command::Edit(a) => commands::edit(&a),
        Command::Read(a) => commands::read(&a),
        Command::Approve(a) => commands::approve(&a),
        Command::Pending(a) => queue::pending(&a),
        Command::Answer(a) => queue::answer(&a),
        Command::Audit(a) => audit::run(&a),
        Command::History(a) => history::history(&a),
        Command::Undo(a) => history::undo(&a),
        Command::Rewind(a) => history::rewind(&a),
        Command::Diff(a) => history::diff(&a),
        Command::Setup(a) => setup::run(&a),
        Command::Service(a) => service::run(&a),
        Command::Completions(a) => completions(a.shell),
        Command::Man(a) => man(a.subcommand.as_deref()),
    };
    status.into()
}

/// `writegate completions SHELL`: the script on stdout.
fn completions(shell: clap_complete::aot::Shell) -> Status {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::aot::generate(shell, &mut cmd, "writegate", &mut buf);
    out_bytes(&buf);
    Status::Ok
}

/// `writegate man [SUBCOMMAND]`: the man page (section 1, roff) of
/// `writegate` or of `writegate-SUBCOMMAND` on stdout.
fn man(subcommand: Option<&str>) -> Status {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let page = match subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                return usage_error(
                    "man",
                    &format!("no subcommand `{name}`; pages: {}", man_pages().join(", ")),
                );
            }
        },
    };
    match render_man(page) {
        Ok(buf) => {
            out_bytes(&buf);
            Status::Ok
        }
        Err(e) => {
            eprintln!("writegate: cannot render the man page: {e}");
            Status::Usage
        }
    }
}

/// The names `writegate man` takes: every subcommand of the parser (so a
/// new subcommand has a page without anyone adding it to a list).
pub(crate) fn man_pages() -> Vec<String> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd.get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

/// A page in roff: `clap_mangen`'s sections, and the EXTRA section (the
/// `--help` text after the options: examples, exit statuses) kept line by
/// line as written (`.nf`), where `clap_mangen`'s would be refilled into
/// paragraphs that run the examples together.
fn render_man(page: clap::Command) -> std::io::Result<Vec<u8>> {
    let extra = page.get_after_help().map(ToString::to_string);
    let page = page.after_help(None::<&str>).after_long_help(None::<&str>);
    let man = clap_mangen::Man::new(page.clone()).source(format!("writegate {}", args::VERSION));
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    if page.has_subcommands() {
        man.render_subcommands_section(&mut buf)?;
    }
    if let Some(text) = extra {
        buf.extend_from_slice(b".SH EXTRA\n.nf\n");
        for line in text.lines() {
            buf.extend_from_slice(roff_line(line).as_bytes());
            buf.push(b'\n');
        }
        buf.extend_from_slice(b".fi\n");
    }
    if page.get_version().is_some() {
        man.render_version_section(&mut buf)?;
    }
    Ok(buf)
}

/// One line of text for roff: backslashes and hyphens escaped, and a line
/// that starts with `.` or `'` kept from being read as a request.
fn roff_line(line: &str) -> String {
    let escaped = line.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

/// Writes `bytes` to stdout. Returns false when stdout is closed (`| head`:
/// the caller stops quietly) or failing (reported on stderr).
pub(crate) fn out_bytes(bytes: &[u8]) -> bool {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => false,
        Err(e) => {
            eprintln!("writegate: cannot write to stdout: {e}");
            false
        }
    }
}

/// [`out_bytes`] for text.
pub(crate) fn out(text: &str) -> bool {
    out_bytes(text.as_bytes())
}

/// Prints a usage error the way clap prints its own (`error: ...`, the
/// subcommand's usage line, a pointer to `--help`) and returns
/// [`Status::Usage`].
pub(crate) fn usage_error(subcommand: &str, message: &str) -> Status {
    let mut cmd = Cli::command();
    cmd.build();
    // `subcommand` may name a nested one: "service install".
    let mut sub = cmd;
    for name in subcommand.split(' ') {
        match sub.find_subcommand(name) {
            Some(s) => sub = s.clone(),
            None => break,
        }
    }
    let err = sub.error(clap::error::ErrorKind::ValueValidation, message);
    let _ = err.print();
    Status::Usage
}

/// An environment variable, if set and valid Unicode.
pub(crate) fn env_var(k: &str) -> Option<String> {
    std::env::var(k).ok()
}

/// The config file at `path` (required: it must exist) and the `WRITEGATE_*`
/// variables of this process, as the daemon and `writegate audit` read them.
/// An unknown `WRITEGATE_*` variable is an error naming it; an invalid value
/// is blamed on its variable, not on the file.
pub(crate) fn load_config_file(
    path: Option<&Path>,
    required: bool,
) -> Result<writegate_core::Config, writegate_core::config::ConfigError> {
    writegate_core::config::check_env_names(std::env::vars_os().map(|(k, _)| k))?;
    writegate_core::Config::load(path, required, &env_var)
}

/// Makes a path absolute against the current directory (no symlink
/// resolution: the daemon's resolver decides where it really points).
pub(crate) fn absolutize(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| p.to_path_buf(), |d| d.join(p))
    }
}

/// Where `p` is on disk, as far as it exists: the deepest existing ancestor
/// (the path itself when it exists) canonicalised, with the rest appended.
/// Used to pick the workspace and to compute a `pathHash`; the daemon still
/// resolves the path itself.
pub(crate) fn canonical_target(p: &Path) -> PathBuf {
    let abs = absolutize(p);
    for ancestor in abs.ancestors() {
        if let Ok(c) = std::fs::canonicalize(ancestor) {
            return match abs.strip_prefix(ancestor) {
                Ok(rest) if !rest.as_os_str().is_empty() => c.join(rest),
                _ => c,
            };
        }
    }
    abs
}

/// The config file a subcommand reads without `--config`:
/// `$XDG_CONFIG_HOME/writegate/config.toml`, else `~/.config/writegate/config.toml`.
pub(crate) fn default_config_path() -> Option<PathBuf> {
    if let Some(x) = env_var("XDG_CONFIG_HOME").filter(|s| s.starts_with('/')) {
        return Some(PathBuf::from(x).join("writegate/config.toml"));
    }
    env_var("HOME")
        .filter(|s| s.starts_with('/'))
        .map(|h| PathBuf::from(h).join(".config/writegate/config.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand the parser has gets a page, its examples and exit
    /// statuses kept line by line.
    #[test]
    fn every_subcommand_has_a_man_page() {
        let names = man_pages();
        for must in ["serve", "proxy", "mcp", "setup", "write", "read", "man"] {
            assert!(
                names.iter().any(|n| n == must),
                "{must} missing from {names:?}"
            );
        }
        let mut cmd = Cli::command().disable_help_subcommand(true);
        cmd.build();
        for name in names {
            let page = cmd.find_subcommand(&name).unwrap().clone();
            let has_extra = page.get_after_help().is_some();
            let roff = String::from_utf8(render_man(page).unwrap()).unwrap();
            assert!(
                roff.contains(&format!("writegate\\-{name}")),
                "{name}:\n{roff}"
            );
            if has_extra {
                let extra = roff.split(".SH EXTRA\n").nth(1).unwrap();
                assert!(extra.starts_with(".nf\n"), "{name}: {extra}");
                assert!(extra.contains("\n.fi\n"), "{name}: {extra}");
            }
        }
    }

    #[test]
    fn roff_lines_are_escaped() {
        assert_eq!(roff_line("a --b \\n"), "a \\-\\-b \\en");
        assert_eq!(roff_line(".x"), "\\&.x");
        assert_eq!(roff_line("'x"), "\\&'x");
    }
}
