//! Real mounts for one test (root only, as in CI): a small tmpfs that fills
//! up, and a bind mount. Each is unmounted when dropped, also when the test
//! fails; without root (or where mounting is not allowed) the constructor
//! says why on stderr and returns `None`, and the test skips.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::process::is_root;

/// Serialises the mounting tests of a test binary (see [`Tmpfs`]).
static SERIAL: Mutex<()> = Mutex::new(());

/// The running test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string()
}

/// A small tmpfs mounted for one test, unmounted when dropped: a real
/// filesystem that fills up.
///
/// One mounting test of a test binary ([`Tmpfs`], [`BindMount`]) runs at
/// a time: such tests start processes (`mount`, `umount`), and a child
/// between `fork` and `exec` holds a copy of every descriptor, so a filler
/// file another test removed to free space would stay allocated until that
/// child execs (seen as a rare `ENOSPC` right after the space was freed).
pub struct Tmpfs {
    path: PathBuf,
    _dir: Option<tempfile::TempDir>,
    /// Held from before the mount until after the umount.
    _serial: MutexGuard<'static, ()>,
}

impl Tmpfs {
    /// A tmpfs of `size` (`64k`, `8m`) on a new temp directory.
    pub fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        Tmpfs::mount_on(path, Some(dir), size)
    }

    /// A tmpfs of `size` on the new directory `dir` (created here).
    pub fn mount_at(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir(dir).unwrap();
        Tmpfs::mount_on(dir.to_path_buf(), None, size)
    }

    fn mount_on(path: PathBuf, dir: Option<tempfile::TempDir>, size: &str) -> Option<Tmpfs> {
        if !is_root() {
            eprintln!(
                "skipped {}: mounting a tmpfs needs root (CI runs as root)",
                test_name()
            );
            return None;
        }
        let serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&path)
            .stderr(Stdio::null())
            .status();
        match st {
            Ok(s) if s.success() => Some(Tmpfs {
                path,
                _dir: dir,
                _serial: serial,
            }),
            other => {
                eprintln!("skipped {}: cannot mount a tmpfs ({other:?})", test_name());
                None
            }
        }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fills the tmpfs with a file `filler` until it is full, then gives
    /// `leave` bytes of it back; returns the filler's size when full.
    pub fn fill(&self, leave: u64) -> u64 {
        let mut f = std::fs::File::create(self.path.join("filler")).unwrap();
        let mut n = 0u64;
        while let Ok(k) = f.write(&[b'f'; 512]) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        if leave > 0 {
            f.set_len(n.saturating_sub(leave)).unwrap();
        }
        n
    }

    /// Removes the filler of [`Tmpfs::fill`]: the space comes back.
    pub fn unfill(&self) {
        std::fs::remove_file(self.path.join("filler")).unwrap();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

/// `mount --bind` of one directory on another, unmounted when dropped. It
/// takes turns with the other mounting tests, as [`Tmpfs`] says.
pub struct BindMount {
    target: PathBuf,
    /// Held from before the mount until after the umount.
    _serial: MutexGuard<'static, ()>,
}

impl BindMount {
    /// Mounts `source` on `target` (both existing directories).
    pub fn new(source: &Path, target: &Path) -> Option<BindMount> {
        if !is_root() {
            eprintln!("skipped {}: a bind mount needs root", test_name());
            return None;
        }
        let serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        let ok = Command::new("mount")
            .arg("--bind")
            .arg(source)
            .arg(target)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped {}: mount --bind is not allowed here", test_name());
            return None;
        }
        Some(BindMount {
            target: target.to_path_buf(),
            _serial: serial,
        })
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        // Detached even while a descriptor the test still holds (a
        // directory a service opened through it) keeps it busy: a plain
        // umount would fail, and the mount would outlive the test run.
        let _ = Command::new("umount")
            .arg("--lazy")
            .arg(&self.target)
            .status();
    }
}

/// The mount that holds a path, as `/proc/self/mountinfo` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// The filesystem type (`ext4`, `tmpfs`).
    pub fstype: String,
    /// The mount source (`/dev/vda`, `tmpfs`).
    pub source: String,
    /// The mount point.
    pub point: PathBuf,
}

impl MountInfo {
    /// The mount holding `path`: the longest mount point it starts with in
    /// `/proc/self/mountinfo` (`None` when that cannot be read).
    pub fn of(path: &Path) -> Option<MountInfo> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mut best: Option<MountInfo> = None;
        for line in info.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let Some(sep) = f.iter().position(|x| *x == "-") else {
                continue;
            };
            if f.len() < sep + 3 || f.len() < 5 {
                continue;
            }
            let point = PathBuf::from(f[4].replace("\\040", " "));
            if path.starts_with(&point)
                && best
                    .as_ref()
                    .is_none_or(|b| point.as_os_str().len() > b.point.as_os_str().len())
            {
                best = Some(MountInfo {
                    fstype: f[sep + 1].to_string(),
                    source: f[sep + 2].to_string(),
                    point,
                });
            }
        }
        best
    }
}
