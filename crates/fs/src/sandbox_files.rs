//! The small files `writegate run` keeps outside its sandbox: its private
//! TMPDIR and its entry in the sandbox registry (a file named after its pid
//! holding its start time). Kept here because only this crate writes to disk.

use std::io;
use std::path::{Path, PathBuf};

/// Creates the directory `dir` (mode 0700 before the umask); its parent must exist.
pub fn create_private_subdir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Writes `text` as the registry entry `dir/name` (the directory must be
/// private: see [`crate::prepare_private_dir`]); returns its path.
pub fn write_registry_entry(dir: &Path, name: &str, text: &str) -> io::Result<PathBuf> {
    let file = dir.join(name);
    std::fs::write(&file, text)?;
    Ok(file)
}

/// Removes a registry entry written by [`write_registry_entry`] (a missing
/// one is fine).
pub fn remove_registry_entry(file: &Path) {
    let _ = std::fs::remove_file(file);
}

/// Makes the file at `path` executable by its owner only (0700), never
/// through a symbolic link: for the launcher `writegate setup --sandbox`
/// writes (0600, as every file setup writes).
///
/// Errors: the file cannot be opened (a symlink, missing) or its mode set.
pub fn make_owner_executable(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o700))
}
