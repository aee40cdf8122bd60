//! `writegate-fs` is the only crate of writegate that writes to disk. It opens a
//! target's directory by walking a canonical path one component at a time
//! without following symlinks, reads and stats the leaf relative to that
//! directory handle, publishes new bytes atomically and durably (temp file in
//! the same directory, fsync, recheck, `renameat`, directory fsync; SPEC 7.3),
//! serialises writers per canonical target with a daemon-wide FIFO path lock
//! (SPEC 7.4), closes the descriptors of replaced files on a background thread
//! so their blocks are freed off the request's critical path, removes temp
//! files left by dead processes, appends whole lines
//! to the audit log (SPEC 10) under a lock that lets no fragment of a line
//! stay behind, keeps each process's intent journal and writes small private state files atomically
//! (persistent approvals, SPEC 12), and removes one regular file relative to a directory handle
//! (`writegate setup --remove`). It must never decide policy: it knows
//! nothing about workspaces, containment, suspicious names, encodings, sizes
//! or approvals. Callers hand it canonical paths and finished bytes; it only
//! refuses what it cannot do safely (a symlink where the canonical path said
//! there was none, a leaf that is not a regular file, a refused precommit) and
//! reports every failure as an [`FsError`] naming the path involved, with the
//! operating system's error as its source (the daemon maps it to a wire
//! `errorKind`); a [`Publish`] hands its caller's precommit refusal
//! back typed as the caller made it, and its own failures converted into that
//! type. Everything here is synchronous and blocking: async callers run
//! it on blocking threads.

mod cleanup;
mod dir;
mod error;
mod history;
mod journal;
mod lock;
mod log;
mod mkdir;
mod process;
mod publish;
mod release;
mod remove;
mod sandbox_files;
mod socket;

pub use cleanup::remove_stale_temps;
pub use dir::{
    Atime, Content, Dir, Existing, LeafStat, open_existing, read_existing, read_prefix, stat_leaf,
};
pub use error::{FsError, FsOp, PrivateDirProblem, Swap};
pub use history::{
    DirRemoval, ImageKind, ImageStore, Kept, is_image_temp, remove_empty_dir_below, replace_whole,
    unlink_leaf,
};
pub use journal::{JOURNAL_SUFFIX, Journal, Orphan, orphan_journals};
pub use lock::{LockKey, PathGuard, PathLocks};
pub use log::{AppendLog, LogLock, Reserved};
pub use mkdir::{CreatedDirs, open_creating};
pub use publish::{
    NewFileMode, Publish, PublishOptions, Published, WRITE_CHUNK, temp_file_name,
    write_private_file,
};
pub use release::{RELEASE_LINGER, RELEASE_QUEUE, Releaser};
pub use remove::{remove_leaf, rmdir_empty, unlink_path};
pub use sandbox_files::{
    create_private_subdir, make_owner_executable, remove_registry_entry, write_registry_entry,
};
pub use socket::{current_uid, prepare_private_dir, remove_socket_file, set_socket_mode};
