//! Reading and writing the agents' configuration files for `writegate
//! setup`, through writegate's own publisher (`writegate-fs`): the new text
//! goes to a temp file in the same directory, is fsynced and renamed over
//! the old one, which keeps its permission bits. A settings file that is a
//! symbolic link is never read, written or removed through: the link could
//! point at any file (the person's dotfiles, or what an agent planted), so
//! it is refused by name. The directories above it are followed. A file
//! that changed between the read and the write is not overwritten.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use writegate_fs::{Dir, LeafStat, NewFileMode, PublishOptions};

/// The largest settings file `writegate setup` reads (16 MiB): agents'
/// settings are a few kilobytes; a larger file is refused, not loaded.
const MAX_SETTINGS_BYTES: u64 = 16 * 1024 * 1024;

/// A configuration file as read: where it really is and what it held.
pub(crate) struct Current {
    /// The path as the agent names it (for messages).
    pub(crate) shown: PathBuf,
    /// Where it really is: symlinks followed, missing directories kept as
    /// they are named.
    real: PathBuf,
    /// The file's identity when read; `None`: it does not exist.
    stat: Option<LeafStat>,
    /// Its text (empty when it does not exist).
    pub(crate) text: String,
}

impl Current {
    /// Whether the file exists.
    pub(crate) fn exists(&self) -> bool {
        self.stat.is_some()
    }
}

/// The deepest existing ancestor of `p`, canonical, and the rest below it.
fn split_existing(p: &Path) -> (PathBuf, PathBuf) {
    for ancestor in p.ancestors() {
        if let Ok(c) = std::fs::canonicalize(ancestor) {
            let rest = p.strip_prefix(ancestor).unwrap_or(Path::new(""));
            return (c, rest.to_path_buf());
        }
    }
    (
        PathBuf::from("/"),
        p.strip_prefix("/").unwrap_or(p).to_path_buf(),
    )
}

fn leaf_of(p: &Path) -> Result<(PathBuf, OsString), String> {
    match (p.parent(), p.file_name()) {
        (Some(parent), Some(leaf)) => Ok((parent.to_path_buf(), leaf.to_os_string())),
        _ => Err(format!("{} is not a file path", p.display())),
    }
}

/// Reads the configuration file at `path` (absolute). A missing file is
/// empty text; a file that is not UTF-8 or cannot be read is an error, and
/// so is a symbolic link, which is never followed (its directories are).
pub(crate) fn read(path: &Path) -> Result<Current, String> {
    let (parent, leaf) = leaf_of(path)?;
    let (base, rest) = split_existing(&parent);
    let parent = if rest.as_os_str().is_empty() {
        base
    } else {
        base.join(&rest)
    };
    let real = parent.join(&leaf);
    if let Ok(m) = std::fs::symlink_metadata(&real)
        && m.file_type().is_symlink()
    {
        let to = std::fs::read_link(&real).map_or_else(
            |_| "somewhere unreadable".to_string(),
            |t| t.display().to_string(),
        );
        return Err(format!(
            "it is a symbolic link (to {to}), and writegate setup never writes or removes through one: a link can point at any file"
        ));
    }
    // Read through the directory handle, the leaf not followed and classified
    // before it is opened (a fifo put there is refused, never opened), and
    // at most `MAX_SETTINGS_BYTES` of it: the stat and the text are of one
    // open file.
    let existing = if parent.is_dir() {
        let dir = Dir::open_canonical(&parent).map_err(|e| e.to_string())?;
        writegate_fs::read_existing(
            &dir,
            &leaf,
            Some(MAX_SETTINGS_BYTES),
            writegate_fs::Atime::Update,
        )
        .map_err(|e| e.to_string())?
    } else {
        None
    };
    let (stat, text) = match existing {
        None => (None, String::new()),
        Some(e) => {
            let writegate_fs::Content::Whole(bytes) = e.content else {
                return Err(format!(
                    "it is larger than {} MiB ({} bytes), which no settings file is",
                    MAX_SETTINGS_BYTES >> 20,
                    e.stat.len
                ));
            };
            let text = String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())?;
            (Some(e.stat), text)
        }
    };
    Ok(Current {
        shown: path.to_path_buf(),
        real,
        stat,
        text,
    })
}

/// Opens the directory `dir` (canonical as far as it exists), creating the
/// missing part below its deepest existing ancestor.
fn open_dir(dir: &Path) -> Result<Dir, String> {
    let (base, rest) = split_existing(dir);
    if rest.as_os_str().is_empty() {
        return Dir::open_canonical(&base).map_err(|e| e.to_string());
    }
    writegate_fs::open_creating(&base, &base.join(rest), 0o755)
        .map(|(d, _)| d)
        .map_err(|e| e.to_string())
}

/// Replaces the file read as `cur` with `text` (atomic, durable; an
/// existing file keeps its mode, a new one is 0600). Refused when the file
/// was replaced since it was read.
pub(crate) fn write(cur: &Current, text: &str) -> Result<(), String> {
    let (parent, leaf) = leaf_of(&cur.real)?;
    let dir = open_dir(&parent)?;
    let now = writegate_fs::stat_leaf(&dir, &leaf).map_err(|e| e.to_string())?;
    if now.map(|s| (s.dev, s.ino)) != cur.stat.map(|s| (s.dev, s.ino)) {
        return Err(format!(
            "{} changed while writegate setup ran; nothing was written, run it again",
            cur.shown.display()
        ));
    }
    let opts = PublishOptions {
        new_file_mode: NewFileMode::Owner,
        expect_existing: cur.stat,
    };
    writegate_fs::Publish::new(&dir, &leaf, text.as_bytes(), &opts)
        .run()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Removes the file read as `cur` (a file writegate wrote and owns).
pub(crate) fn remove(cur: &Current) -> Result<(), String> {
    let (parent, leaf) = leaf_of(&cur.real)?;
    let dir = Dir::open_canonical(&parent).map_err(|e| e.to_string())?;
    writegate_fs::remove_leaf(&dir, &leaf, cur.stat.as_ref())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Copies the file read as `cur` to `<name>.writegate-backup-<UTC time>`
/// beside it (mode 0600: settings files hold tokens); returns its path.
pub(crate) fn backup(cur: &Current) -> Result<PathBuf, String> {
    let (parent, leaf) = leaf_of(&cur.real)?;
    let stamp = utc_stamp();
    let mut n = 1;
    let name = loop {
        let mut name = leaf.clone();
        name.push(format!(".writegate-backup-{stamp}"));
        if n > 1 {
            name.push(format!("-{n}"));
        }
        if std::fs::symlink_metadata(parent.join(&name)).is_err() {
            break name;
        }
        n += 1;
    };
    let dir = Dir::open_canonical(&parent).map_err(|e| e.to_string())?;
    writegate_fs::Publish::new(&dir, &name, cur.text.as_bytes(), &PublishOptions::default())
        .run()
        .map_err(|e| e.to_string())?;
    prune_backups(&parent, &leaf);
    Ok(parent.join(name))
}

/// How many backups of one settings file `setup` keeps.
pub(crate) const BACKUPS_KEPT: usize = 3;

/// Removes all but the [`BACKUPS_KEPT`] newest backups of `leaf` in
/// `parent` (their names sort by time: `<leaf>.writegate-backup-<UTC>[-n]`).
fn prune_backups(parent: &Path, leaf: &std::ffi::OsStr) {
    let mut prefix = leaf.to_os_string();
    prefix.push(".writegate-backup-");
    let prefix = prefix.as_encoded_bytes().to_vec();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let mut backups: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(&prefix))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            // `-n` after the stamp sorts after the stamp alone.
            let key = name[prefix.len().min(name.len())..].to_string();
            let key = match key.split_once('-') {
                Some((stamp, n)) => format!("{stamp}-{n:0>6}"),
                None => format!("{key}-000001"),
            };
            (key, e.path())
        })
        .collect();
    backups.sort();
    let extra = backups.len().saturating_sub(BACKUPS_KEPT);
    for (_, path) in backups.into_iter().take(extra) {
        let _ = writegate_fs::unlink_path(&path);
    }
}

/// Removes the directory of the file read as `cur` if it is a `policies`
/// directory (gemini's, made for writegate's policy file) and now empty.
pub(crate) fn remove_dir_if_empty(cur: &Current) {
    if let Some(parent) = cur.real.parent()
        && parent.file_name().is_some_and(|n| n == "policies")
    {
        let _ = writegate_fs::rmdir_empty(parent);
    }
}

/// The current UTC time as `YYYYMMDDTHHMMSSZ`.
fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_shape() {
        let s = utc_stamp();
        assert_eq!(s.len(), 16, "{s}");
        assert!(s.starts_with("20") && s.ends_with('Z') && s.as_bytes()[8] == b'T');
    }
}
