//! The built-in protected-path rules: credential, repository-state and
//! start-up files, matched by whole case-folded components and their NTFS
//! readings.

use std::borrow::Cow;
use std::path::{Component, Path};

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
pub(super) const ENV_FILE: &str = "environment file: usually holds secrets";
const GIT: &str = "git repository state: its config and hooks can run commands";
const CRON: &str = "crontab: runs commands on a schedule";
const LAUNCHD: &str = "launchd unit: runs commands at login or boot";
const TOKENS: &str = "file holding login tokens or passwords";
const AGENT_SETTINGS: &str = "coding agent's settings: a change can turn the agent's own write tools back on or stop it using writegate";

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
    // The coding agents' settings `writegate setup` writes: an agent that
    // rewrites them can turn its own write tools back on or drop writegate.
    rule(Match::Seq(&[".qwen", "settings.json"]), AGENT_SETTINGS),
    rule(Match::Seq(&[".gemini", "settings.json"]), AGENT_SETTINGS),
    rule(Match::Seq(&[".gemini", "policies"]), AGENT_SETTINGS),
    rule(Match::Leaf(".claude.json"), AGENT_SETTINGS),
    rule(Match::Seq(&[".claude", "settings.json"]), AGENT_SETTINGS),
    rule(
        Match::Seq(&[".claude", "settings.local.json"]),
        AGENT_SETTINGS,
    ),
    rule(Match::Seq(&[".codex", "config.toml"]), AGENT_SETTINGS),
    rule(
        Match::Seq(&[".config", "zed", "settings.json"]),
        AGENT_SETTINGS,
    ),
    rule(Match::Seq(&[".zed", "settings.json"]), AGENT_SETTINGS),
];

/// `name` case-folded for comparison with the rules: ASCII lowercase for
/// ASCII names; otherwise upper- then lowercased, which also folds the
/// look-alikes case-insensitive filesystems treat as equal (`ſ` to `s`,
/// the Kelvin sign to `k`, dotless `ı` to `i`).
pub(super) fn fold(name: Cow<'_, str>) -> Cow<'_, str> {
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
/// (`Name`): `GIT~1/config`, `ENV~1`, `.git::$INDEX_ALLOCATION/config`,
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

/// Why a shell's or a tool's history is read-protected.
const HISTORY: &str = "shell or tool history: commands hold secrets";
/// Why an editor's or pager's saved state is read-protected.
const EDITOR_STATE: &str =
    "editor or pager history: searches, registers and command lines hold secrets";
/// Why a browser or mail profile is read-protected.
const PROFILE: &str = "browser or mail profile: cookies, saved passwords and mail";

/// What else holds secrets when read rather than written: other processes'
/// environments and memory, shell, editor and database histories, the
/// login tokens of coding agents, package registries and cloud tools,
/// keyrings, and browser and mail profiles. Checked on reads only (a write
/// there is judged like any other). docs/security.md lists this table row
/// for row (a test holds the two together): a rule added here goes there
/// too.
const READ_PROTECTED: &[Protected] = &[
    rule(
        Match::Seq(&["proc"]),
        "process information (/proc): environments and memory hold secrets",
    ),
    // Shell, REPL and tool histories.
    rule(Match::LeafSuffix("_history"), HISTORY),
    rule(Match::Leaf(".python_history"), HISTORY),
    rule(Match::Leaf(".histfile"), HISTORY),
    rule(Match::Leaf(".rhistory"), HISTORY),
    rule(Match::Leaf("history.sqlite"), HISTORY),
    rule(Match::Leaf(".lesshst"), EDITOR_STATE),
    rule(Match::Leaf(".viminfo"), EDITOR_STATE),
    // Coding agents' login tokens.
    rule(Match::Seq(&[".claude", ".credentials.json"]), TOKENS),
    rule(Match::Seq(&[".codex", "auth.json"]), TOKENS),
    rule(Match::Seq(&[".gemini", "oauth_creds.json"]), TOKENS),
    rule(Match::Seq(&[".gemini", "mcp-oauth-tokens.json"]), TOKENS),
    rule(Match::Seq(&[".gemini", "mcp-oauth-tokens-v2.json"]), TOKENS),
    rule(Match::Seq(&[".qwen", "oauth_creds.json"]), TOKENS),
    rule(Match::Seq(&[".qwen", "mcp-oauth-tokens.json"]), TOKENS),
    rule(Match::Seq(&["github-copilot", "hosts.json"]), TOKENS),
    rule(Match::Seq(&["github-copilot", "apps.json"]), TOKENS),
    rule(Match::Seq(&["opencode", "auth.json"]), TOKENS),
    // Package registries' and build tools' tokens.
    rule(Match::Seq(&[".cargo", "credentials.toml"]), TOKENS),
    rule(Match::Seq(&[".cargo", "credentials"]), TOKENS),
    rule(Match::Seq(&[".gem", "credentials"]), TOKENS),
    rule(Match::Seq(&["gem", "credentials"]), TOKENS),
    rule(Match::Leaf(".yarnrc.yml"), TOKENS),
    rule(Match::Seq(&[".m2", "settings.xml"]), TOKENS),
    rule(Match::Seq(&[".m2", "settings-security.xml"]), TOKENS),
    rule(Match::Leaf("gradle.properties"), TOKENS),
    rule(Match::Seq(&[".composer", "auth.json"]), TOKENS),
    rule(Match::Seq(&["composer", "auth.json"]), TOKENS),
    rule(Match::Leaf("credentials.tfrc.json"), TOKENS),
    rule(Match::Seq(&[".config", "gh", "hosts.yml"]), TOKENS),
    // Cloud storage tools' keys.
    rule(Match::Leaf("rclone.conf"), TOKENS),
    rule(Match::Leaf(".s3cfg"), TOKENS),
    rule(Match::Leaf(".boto"), TOKENS),
    // Keyrings, password stores, browser and mail profiles.
    rule(Match::Seq(&["keyrings"]), "keyring: holds passwords"),
    rule(Match::Seq(&[".password-store"]), "password store"),
    rule(Match::Seq(&[".mozilla"]), PROFILE),
    rule(Match::Seq(&[".thunderbird"]), PROFILE),
    rule(Match::Seq(&[".config", "google-chrome"]), PROFILE),
    rule(Match::Seq(&[".config", "chromium"]), PROFILE),
    rule(Match::Seq(&[".config", "bravesoftware"]), PROFILE),
    rule(Match::Seq(&[".config", "microsoft-edge"]), PROFILE),
    rule(Match::Seq(&[".config", "vivaldi"]), PROFILE),
];

/// Why reading `canonical` outside the user's workspaces needs a person's
/// approval: a [`protected_reason`] path, or one of the paths whose
/// contents are secrets only when read (`/proc`, histories, agents' and
/// registries' tokens, keyrings, browser profiles). The `/proc` rule holds
/// only for a path that starts there.
pub fn read_protected_reason(canonical: &Path) -> Option<&'static str> {
    if let Some(reason) = protected_reason(canonical) {
        return Some(reason);
    }
    let comps = names(canonical);
    let leaf = comps.last()?;
    READ_PROTECTED
        .iter()
        .find(|r| match r.matches {
            Match::Seq(&["proc"]) => canonical.starts_with("/proc"),
            Match::Seq(seq) => comps
                .windows(seq.len())
                .any(|w| w.iter().zip(seq).all(|(a, b)| a.is(b))),
            Match::Leaf(name) => leaf.is(name),
            Match::LeafPrefix(p) => leaf.starts_with(p),
            Match::LeafSuffix(s) => leaf.ends_with(s),
        })
        .map(|r| r.reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Level, PolicyConfig};
    use crate::policy::judge;
    use crate::policy::testing::cmd;

    /// Reads outside the workspace are refused for secrets as well as the
    /// write-protected paths: otherwise a model could read other processes'
    /// environments, shell histories and agents' login tokens.
    #[test]
    fn secrets_that_matter_when_read_are_read_protected() {
        for p in [
            "/proc/1234/environ",
            "/proc/self/cmdline",
            "/h/.bash_history",
            "/h/.zsh_history",
            "/h/.psql_history",
            "/h/.python_history",
            "/h/.claude/.credentials.json",
            "/h/.codex/auth.json",
            "/h/.cargo/credentials.toml",
            "/h/.terraform.d/credentials.tfrc.json",
            "/h/.config/gh/hosts.yml",
            "/h/.local/share/keyrings/login.keyring",
            "/h/.mozilla/firefox/x.default/logins.json",
            "/h/.config/google-chrome/Default/Cookies",
            // What writes protect, reads protect too.
            "/h/.ssh/id_rsa",
            "/r/.env",
        ] {
            assert!(
                read_protected_reason(Path::new(p)).is_some(),
                "{p} is readable"
            );
        }
        for p in [
            "/h/notes/proc/x.txt",
            "/h/src/history.rs",
            "/h/.cargo/config.toml",
            "/h/project/README.md",
        ] {
            assert_eq!(read_protected_reason(Path::new(p)), None, "{p}");
        }
    }

    /// Agents' OAuth tokens, Copilot's and opencode's logins, package
    /// registries' and cloud storage tools' keys, Thunderbird and Brave
    /// profiles and editor, pager and REPL histories were missing from the
    /// read list, so an outside read served them with no question. Each
    /// entry holds the paths its tool really uses, in any case, and names
    /// that only resemble them stay readable.
    #[test]
    fn credentials_and_histories_the_read_list_missed_are_held() {
        let history = "shell or tool history: commands hold secrets";
        let editor = "editor or pager history: searches, registers and command lines hold secrets";
        let profile = "browser or mail profile: cookies, saved passwords and mail";
        for (p, reason) in [
            // Coding agents' logins.
            ("/h/.gemini/oauth_creds.json", TOKENS),
            ("/h/.gemini/mcp-oauth-tokens.json", TOKENS),
            ("/h/.gemini/mcp-oauth-tokens-v2.json", TOKENS),
            ("/h/.qwen/oauth_creds.json", TOKENS),
            ("/h/.qwen/mcp-oauth-tokens.json", TOKENS),
            ("/h/.config/github-copilot/hosts.json", TOKENS),
            ("/h/.config/github-copilot/apps.json", TOKENS),
            ("/h/AppData/Local/github-copilot/apps.json", TOKENS),
            ("/h/.local/share/opencode/auth.json", TOKENS),
            // Package registries and build tools.
            ("/h/.gem/credentials", TOKENS),
            ("/h/.local/share/gem/credentials", TOKENS),
            ("/h/.yarnrc.yml", TOKENS),
            ("/h/src/app/.yarnrc.yml", TOKENS),
            ("/h/.m2/settings.xml", TOKENS),
            ("/h/.m2/settings-security.xml", TOKENS),
            ("/h/.gradle/gradle.properties", TOKENS),
            ("/h/src/app/gradle.properties", TOKENS),
            ("/h/.composer/auth.json", TOKENS),
            ("/h/.config/composer/auth.json", TOKENS),
            // Cloud storage tools.
            ("/h/.config/rclone/rclone.conf", TOKENS),
            ("/h/.s3cfg", TOKENS),
            ("/h/.boto", TOKENS),
            // Mail and browser profiles.
            ("/h/.thunderbird/abc.default-release/logins.json", profile),
            ("/h/.thunderbird/profiles.ini", profile),
            (
                "/h/.config/BraveSoftware/Brave-Browser/Default/Cookies",
                profile,
            ),
            ("/h/.config/microsoft-edge/Default/Login Data", profile),
            ("/h/.config/vivaldi/Default/Cookies", profile),
            // Histories.
            ("/h/.histfile", history),
            ("/h/.Rhistory", history),
            ("/h/src/analysis/.Rhistory", history),
            ("/h/.ipython/profile_default/history.sqlite", history),
            ("/h/.lesshst", editor),
            ("/h/.viminfo", editor),
            // Case folded like every protected name.
            ("/h/.GEMINI/OAuth_Creds.json", TOKENS),
            ("/h/.config/bravesoftware/x", profile),
            ("/h/.VIMINFO", editor),
        ] {
            assert_eq!(read_protected_reason(Path::new(p)), Some(reason), "{p}");
        }
        // (The agents' settings, `.gemini/settings.json` and the like, are
        // protected paths, so a read of them is held too.)
        for p in [
            "/h/.gemini/GEMINI.md",
            "/h/.qwen/QWEN.md",
            "/h/.config/github-copilot/versions.json",
            "/h/.local/share/opencode/log/x.log",
            "/h/.gem/specs/x",
            "/h/.m2/repository/a/b.pom",
            "/h/src/app/gradle.properties.md",
            "/h/src/app/build.gradle",
            "/h/.composer/composer.json",
            "/h/src/app/auth.json",
            "/h/rclone.conf.example",
            "/h/src/history.sqlite.rs",
            "/h/.vimrc",
            "/h/.lesskey",
            "/h/src/thunderbird/x.rs",
        ] {
            assert_eq!(read_protected_reason(Path::new(p)), None, "{p}");
        }
    }

    /// How docs/security.md writes a read-list rule: `a/b` for components
    /// in a row, the bare name for a leaf, `*` for the open end, `/proc/`
    /// for the one rule anchored at the root.
    fn shown(m: &Match) -> String {
        match *m {
            Match::Seq(&["proc"]) => "/proc/".to_string(),
            Match::Seq(seq) => seq.join("/"),
            Match::Leaf(name) => name.to_string(),
            Match::LeafPrefix(p) => format!("{p}*"),
            Match::LeafSuffix(s) => format!("*{s}"),
        }
    }

    /// docs/security.md's table of what is held when read is this table:
    /// the same rules, in the same order, with the same reasons (names
    /// compared case folded: the docs spell `.config/BraveSoftware` and
    /// `.Rhistory` as the tools do).
    #[test]
    fn the_read_list_in_the_security_docs_is_the_one_in_code() {
        let page = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/security.md"),
        )
        .expect("docs/security.md");
        let start = page
            .find("*What is held when read.*")
            .expect("docs/security.md has the section *What is held when read.*");
        let rows: Vec<(String, String)> = page[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
                assert_eq!(cells.len(), 2, "a row is a path and a reason: {l}");
                let path = cells[0]
                    .strip_prefix('`')
                    .and_then(|c| c.strip_suffix('`'))
                    .unwrap_or_else(|| panic!("the path is in backticks: {l}"));
                (fold(Cow::Borrowed(path)).into_owned(), cells[1].to_string())
            })
            .collect();
        let code: Vec<(String, String)> = READ_PROTECTED
            .iter()
            .map(|r| (shown(&r.matches), r.reason.to_string()))
            .collect();
        for (i, (doc, rule)) in rows.iter().zip(&code).enumerate() {
            assert_eq!(
                doc,
                rule,
                "row {} of the docs' table differs from the code's",
                i + 1
            );
        }
        assert_eq!(
            rows.len(),
            code.len(),
            "the docs list {} rules, the code {}: {:?}",
            rows.len(),
            code.len(),
            if rows.len() > code.len() {
                &rows[code.len()..]
            } else {
                &code[rows.len()..]
            }
        );
        for r in READ_PROTECTED {
            assert!(
                r.reason.len() > 10 && r.reason.contains(' '),
                "{}",
                r.reason
            );
            if let Match::Seq(seq) = r.matches {
                for name in seq {
                    assert_eq!(fold(Cow::Borrowed(name)), *name, "rule names are folded");
                }
            } else if let Match::Leaf(name) | Match::LeafPrefix(name) | Match::LeafSuffix(name) =
                r.matches
            {
                assert_eq!(fold(Cow::Borrowed(name)), name, "rule names are folded");
            }
        }
    }

    /// Table of protected and ordinary paths.
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
            // The coding agents' settings `writegate setup` writes.
            "/h/.qwen/settings.json",
            "/h/.gemini/settings.json",
            "/h/.gemini/policies/writegate.toml",
            "/h/.claude.json",
            "/h/.claude/settings.json",
            "/h/proj/.claude/settings.local.json",
            "/h/.codex/config.toml",
            "/h/.config/zed/settings.json",
            "/h/proj/.zed/settings.json",
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
            "/r/settings.json",
            "/r/.claude/commands/review.md",
            "/r/.gemini/GEMINI.md",
        ];
        for p in ordinary {
            assert_eq!(protected_reason(Path::new(p)), None, "{p} is ordinary");
        }
    }

    /// Defect pinned: protected names were matched only as spelled, so NTFS
    /// spellings of them (git's `is_ntfs_dotgit` forms) were ordinary: an
    /// 8.3 short name (`GIT~1`, `ENV~1`), an alternate data stream
    /// (`.git::$INDEX_ALLOCATION`, `.env::$DATA`, `.env:stream`) and
    /// trailing dots or spaces. Every protected name is now matched in
    /// those readings too.
    #[test]
    fn ntfs_short_names_and_streams_of_protected_names_are_protected() {
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
}
