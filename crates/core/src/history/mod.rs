//! History (ADR 0020): the before-image of every committed write and edit,
//! kept by `opId`, and what undo needs to put it back.
//!
//! The store is a directory of the user's state directory (0700):
//!
//! ```text
//! <store>/images/<opId>   the replaced file: its inode hard-linked (same
//!                         filesystem) or a 0600 copy (another filesystem)
//! <store>/index.jsonl     one line per event of the store, appended whole
//!                         under a lock every daemon sharing the store takes
//! ```
//!
//! Index lines: `keep` (a record: what the operation replaced and left,
//! written after the image is kept and **before the rename** that publishes
//! the new file, so a kill -9 at any point leaves every acknowledged write
//! undoable), `done` (the old file's hash when it was computed beside the
//! publish), `void` (the commit did not happen: refused after the keep, or
//! found not committed by the audit recovery at start-up) and `evict` (the
//! image is gone: over `history.max_bytes` or `history.max_age_days`,
//! oldest first, never one younger than `history.min_age_minutes`). A
//! write whose image would not fit within `history.max_bytes` beside the
//! images too young to evict is refused before anything is published. Images are created whole or not at all (a link, or a
//! copy renamed into place after its fsync), and the index holds whole
//! lines only (`writegate_fs::AppendLog`).

mod dirs;
mod undo;

pub use dirs::SkippedDir;
pub use undo::{UndoAction, UndoOutcome, UndoParams};
/// `writegate diff`: two versions of a file as a unified diff of their text.
pub use writegate_text::diff_versions;

use crate::audit::{Intent, Writer, now_rfc3339};
use crate::config::HistoryConfig;
use crate::error::{ErrorKind, Refusal};
use crate::sync::lock;
use crate::{hex, path_text};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use writegate_fs::{AppendLog, Dir, FsError, ImageStore, Kept, LeafStat};

/// One operation the store knows: what it replaced and what it left.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The operation's `opId` (the image's name).
    pub op_id: String,
    /// When it was kept (RFC 3339).
    pub ts: String,
    /// The same in milliseconds since the epoch (for the age bound).
    #[serde(default)]
    pub kept_ms: u64,
    /// The canonical path, as text.
    pub path: String,
    /// The canonical path's bytes in hex (exact, also when not UTF-8).
    pub target: String,
    /// The operation's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The runtime id of its workspace.
    pub workspace: String,
    /// `write`, `edit` or `undo`.
    pub intent: Intent,
    /// Which writer committed it.
    pub writer: Writer,
    /// The file did not exist before (undoing removes it).
    pub created: bool,
    /// The operation removed the file (an undo of a creation).
    #[serde(default)]
    pub removed: bool,
    /// The directories the operation created, outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<String>,
    /// Permission bits, owner and group of the file before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<(u32, u32, u32)>,
    /// Size of the file before (0 when created).
    pub bytes_before: u64,
    /// `sha256:<hex>` of the file before, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_before: Option<String>,
    /// Size of the file after (0 when removed).
    pub bytes_after: u64,
    /// `sha256:<hex>` of the file after (`None` when removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_after: Option<String>,
    /// `link`, `copy`, or absent when there was no file before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The image's size and modification time when kept (checked when
    /// there is no `hashBefore`).
    #[serde(default)]
    pub image_len: u64,
    /// See `image_len`.
    #[serde(default)]
    pub image_mtime_ns: i64,
    /// For an undo: the `opId` it took back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<String>,
}

impl Record {
    /// The canonical path: the file its `target` names (what an undo
    /// writes). Only meaningful for a record [`Record::disagreement`]
    /// finds consistent, whose `path` then shows that same file.
    pub fn canonical(&self) -> PathBuf {
        match crate::audit::unhex(&self.target) {
            Some(b) => PathBuf::from(OsStr::from_bytes(&b)),
            None => PathBuf::from(&self.path),
        }
    }

    /// Why the record's fields disagree with each other, or `None` when
    /// they agree as a record writegate wrote does. The index is a file
    /// any process of the user can rewrite; a record that fails this is
    /// listed as not undoable, and neither undone nor diffed, so what
    /// `history`, `undo --dry-run`, `diff` and an undo's result show is
    /// what an undo does (the file shown is the file written, the sizes
    /// shown are the image's).
    pub fn disagreement(&self) -> Option<String> {
        let Some(bytes) = crate::audit::unhex(&self.target) else {
            return Some("its `target` is not the hex of a path".to_string());
        };
        let file = PathBuf::from(OsStr::from_bytes(&bytes));
        if hex(&bytes) != self.target {
            return Some("its `target` is not written as writegate writes it".to_string());
        }
        if path_text(&file) != self.path {
            return Some(format!(
                "its `path` ({}) is not the file its `target` names ({})",
                self.path,
                path_text(&file)
            ));
        }
        let plain = file.is_absolute()
            && file.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::RootDir | std::path::Component::Normal(_)
                )
            })
            && file.components().collect::<PathBuf>().as_os_str() == file.as_os_str();
        if !plain {
            return Some(format!(
                "its path {} is not an absolute canonical path",
                self.path
            ));
        }
        if self.created && self.removed {
            return Some("it says the operation both created and removed the file".to_string());
        }
        if self.created && (self.image.is_some() || self.mode.is_some() || self.bytes_before != 0) {
            return Some(
                "it says the operation created the file, yet records a file before it".to_string(),
            );
        }
        if !self.created && (self.image.is_none() || self.mode.is_none()) {
            return Some(
                "it says the operation replaced a file, yet records no image or mode of it"
                    .to_string(),
            );
        }
        if let Some(kind) = &self.image {
            if kind != "link" && kind != "copy" {
                return Some(format!("its image kind `{kind}` is neither link nor copy"));
            }
            if self.image_len != self.bytes_before {
                return Some(format!(
                    "its image size ({} bytes) is not the size of the file before ({} bytes)",
                    self.image_len, self.bytes_before
                ));
            }
        }
        if let Some((mode, _, _)) = self.mode
            && mode & !0o7777 != 0
        {
            return Some(format!("its mode {mode:o} holds more than permission bits"));
        }
        if self.removed
            && (self.bytes_after != 0 || self.hash_after.is_some() || self.intent != Intent::Undo)
        {
            return Some(
                "it says the operation removed the file, yet records a file after it, or is not an undo"
                    .to_string(),
            );
        }
        if !self.removed && self.hash_after.is_none() {
            return Some("it records no hash of the file after the operation".to_string());
        }
        if (self.intent == Intent::Undo) != self.undoes.is_some() {
            return Some("its intent and `undoes` disagree".to_string());
        }
        None
    }

    /// Whether the record's fields agree ([`Record::disagreement`]).
    fn consistent(&self) -> bool {
        self.disagreement().is_none()
    }

    /// What the file holds after the operation: its hash, `None` when the
    /// operation removed it.
    fn after(&self) -> Option<&str> {
        if self.removed {
            None
        } else {
            self.hash_after.as_deref()
        }
    }
}

/// The most `writegate diff` reads of each side of an operation; a larger
/// side is refused `file_too_large` by its size, before it is read. With
/// [`DIFF_MAX_LINES`] this keeps the two sides, their decoded text, the
/// diff's line tables and its output within 64 MiB together
/// (`tests/e2e/history/store.rs` measures the worst case).
pub const DIFF_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// The most lines (line breaks, `\n` or `\r`) `writegate diff` compares
/// on each side: the diff's tables take memory per line, so 4 MiB of
/// empty lines costs several times 4 MiB of ordinary text.
pub const DIFF_MAX_LINES: usize = 128 * 1024;

/// An operation with its bytes before and after (see [`History::versions`]).
pub type Versions = (Record, Option<Vec<u8>>, Option<Vec<u8>>);

/// One line of the index.
#[derive(Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "camelCase")]
enum Line {
    Keep(Box<Record>),
    #[serde(rename_all = "camelCase")]
    Done {
        op_id: String,
        hash_before: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Void {
        op_id: String,
    },
    #[serde(rename_all = "camelCase")]
    Evict {
        op_id: String,
    },
}

/// Where an operation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Live,
    Evicted,
    Void,
}

/// What the store holds in memory (the index read so far).
#[derive(Default)]
struct State {
    /// Bytes of the index read.
    scanned: u64,
    records: HashMap<String, (Record, Status)>,
    /// `opId`s in index order (oldest first).
    order: Vec<String>,
    /// Bytes of live images.
    bytes: u64,
    /// Index into `order` before which nothing is live any more.
    first_live: usize,
    /// `(dev, ino)` of the index file read (a compaction replaces it).
    log_id: (u64, u64),
    /// Lines read, and how many of them a compaction would drop (`done`,
    /// `void` and `evict` lines and the records they end).
    lines: u64,
    dead: u64,
}

impl State {
    fn apply(&mut self, line: Line) {
        self.lines += 1;
        match line {
            Line::Keep(r) => {
                let id = r.op_id.clone();
                if !plain_op_id(&id) {
                    // Not an id this store ever wrote: the image name would
                    // reach out of the store (`../x`). Dropped (and by the
                    // next compaction).
                    self.dead += 1;
                    return;
                }
                if self.records.contains_key(&id) {
                    return;
                }
                if r.image.is_some() {
                    self.bytes += r.image_len;
                }
                self.records.insert(id.clone(), (*r, Status::Live));
                self.order.push(id);
            }
            Line::Done { op_id, hash_before } => {
                self.dead += 1;
                if let Some((r, _)) = self.records.get_mut(&op_id)
                    && r.hash_before.is_none()
                {
                    r.hash_before = hash_before;
                }
            }
            Line::Void { op_id } => self.end(&op_id, Status::Void),
            Line::Evict { op_id } => self.end(&op_id, Status::Evicted),
        }
    }

    fn end(&mut self, op_id: &str, to: Status) {
        // The `void` or `evict` line, and the record it ends.
        self.dead += 1;
        if let Some((r, status)) = self.records.get_mut(op_id)
            && *status == Status::Live
        {
            self.dead += 1;
            *status = to;
            if r.image.is_some() {
                self.bytes = self.bytes.saturating_sub(r.image_len);
            }
        }
    }
}

/// No room in the store for an image: the images no eviction may take
/// yet and the one to keep would pass `history.max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Full {
    /// Bytes of the live images younger than `history.min_age_minutes`.
    pub young: u64,
    /// Bytes of the image to keep.
    pub need: u64,
}

/// A clock step between daemons sharing a store that is still read as
/// "now": a record kept further in the future than this is not trusted to
/// be young (a planted `keptMs` cannot make an image unevictable).
const SKEW_MS: u64 = 60_000;

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Whether an image kept at `kept_ms` is younger than `window_ms` at
/// `now`: no eviction takes it.
fn young(kept_ms: u64, now: u64, window_ms: u64) -> bool {
    kept_ms <= now.saturating_add(SKEW_MS) && kept_ms.saturating_add(window_ms) > now
}

impl State {
    /// Bytes of the live images younger than `window_ms`: the newest
    /// records, read from the end until one is older than the window (and
    /// the clock step between daemons).
    fn young_bytes(&self, window_ms: u64) -> u64 {
        let now = now_ms();
        let mut sum = 0u64;
        for id in self.order[self.first_live..].iter().rev() {
            let Some((r, status)) = self.records.get(id) else {
                continue;
            };
            if r.kept_ms.saturating_add(window_ms).saturating_add(SKEW_MS) < now {
                break;
            }
            if *status == Status::Live && r.image.is_some() && young(r.kept_ms, now, window_ms) {
                sum = sum.saturating_add(r.image_len);
            }
        }
        sum
    }

    /// Whether an image of `len` bytes fits within `cfg.max_bytes` beside
    /// the images younger than `cfg.min_age_minutes` (the older ones are
    /// evicted after the commit to make room).
    fn room(&self, cfg: &HistoryConfig, len: u64) -> Result<(), Full> {
        // Every live image together leaves room: which are young does not
        // matter, and the images of the last hour are not walked (a walk
        // a commit made history cost a 1 KiB write 17 % after a few
        // thousand writes).
        if self.bytes.saturating_add(len) <= cfg.max_bytes {
            return Ok(());
        }
        let window = u64::try_from(cfg.min_age().as_millis()).unwrap_or(u64::MAX);
        let young = self.young_bytes(window);
        if young.saturating_add(len) > cfg.max_bytes {
            return Err(Full { young, need: len });
        }
        Ok(())
    }
}

/// Which operations a caller may see and take back: all of them (the
/// default), or only those of one session, of one workspace (a runtime
/// id), or both. An operation out of reach is answered as an unknown one,
/// and no answer names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach<'a> {
    /// Only this session's operations.
    pub session: Option<&'a str>,
    /// Only the operations recorded in this workspace (runtime id).
    pub workspace: Option<&'a str>,
}

impl Reach<'_> {
    /// Whether `r` is within reach.
    pub fn sees(&self, r: &Record) -> bool {
        self.session
            .is_none_or(|s| r.session_id.as_deref() == Some(s))
            && self.workspace.is_none_or(|w| r.workspace == w)
    }
}

/// An entry of `writegate history`: a record and whether it can be undone
/// now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// The record.
    pub record: Record,
    /// Whether `undo` would put it back now (without `--force`).
    pub undoable: bool,
    /// Why not, when not.
    pub reason: Option<String>,
}

/// The store. One per daemon; several daemons may share one store.
pub struct History {
    root: PathBuf,
    images: ImageStore,
    /// The index as last opened: a compaction (by any daemon sharing the
    /// store) renames a new file over it, and every use under its lock
    /// reopens it then (see [`History::with_index`]).
    index: Mutex<Arc<AppendLog>>,
    state: Mutex<State>,
}

/// An index shorter than this is never compacted.
const COMPACT_MIN_BYTES: u64 = 64 * 1024;

impl History {
    /// Opens (creating) the store at `root`: `images/` (0700) and the
    /// index (0600), and reads the index.
    ///
    /// Errors: the store cannot be created or read.
    pub fn open(root: &Path) -> Result<History, FsError> {
        let images = ImageStore::open(&root.join("images"))?;
        let index = AppendLog::open(&root.join(INDEX))?;
        let h = History {
            root: root.to_path_buf(),
            images,
            index: Mutex::new(Arc::new(index)),
            state: Mutex::new(State::default()),
        };
        drop(h.refresh()?);
        Ok(h)
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs `f` under the index's lock, on the file the index's path
    /// names now: when a compaction replaced it since it was opened, the
    /// lock taken on the old file is dropped and the new one opened and
    /// locked instead (the compaction renames under the old file's lock,
    /// so a lock on the file the path still names excludes it).
    fn with_index<T>(
        &self,
        f: impl FnOnce(&AppendLog, &mut writegate_fs::LogLock<'_>) -> Result<T, FsError>,
    ) -> Result<T, FsError> {
        let path = self.root.join(INDEX);
        loop {
            let log = lock(&self.index).clone();
            let mut guard = log.lock()?;
            let now = std::fs::symlink_metadata(&path)
                .ok()
                .map(|m| (m.dev(), m.ino()));
            if now == Some(log.identity()) {
                return f(&log, &mut guard);
            }
            drop(guard);
            let fresh = Arc::new(AppendLog::open(&path)?);
            *lock(&self.index) = fresh;
        }
    }

    /// Reads the index lines appended since the last look (by this daemon
    /// or another one sharing the store); reads it again from the start
    /// when a compaction replaced it.
    fn refresh(&self) -> Result<MutexGuard<'_, State>, FsError> {
        let mut st = lock(&self.state);
        self.with_index(|log, guard| {
            scan(&mut st, log, guard)?;
            Ok(())
        })?;
        Ok(st)
    }

    fn append(&self, line: &Line) -> Result<(), FsError> {
        let bytes = serde_json::to_vec(line).unwrap_or_default();
        self.with_index(|_, guard| guard.append(&bytes).map(drop))
    }

    /// Compacts the index when most of its lines are dead (see
    /// [`compact`]); a failure leaves the index as it was and is logged.
    pub(crate) fn compact_if_due(&self) {
        let mut st = lock(&self.state);
        let res = self.with_index(|log, guard| {
            scan(&mut st, log, guard)?;
            if st.scanned < COMPACT_MIN_BYTES || st.dead * 2 < st.lines {
                return Ok(false);
            }
            compact(&self.root, &st).map(|()| true)
        });
        match res {
            // Read the new file from its start at the next look.
            Ok(true) => *st = State::default(),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %crate::error::with_causes(&e),
                "cannot compact the history index; it stays as it is"),
        }
    }

    /// Keeps the file at `leaf` in `dir` (the inode `expect`) as the image
    /// of `op_id`.
    pub(crate) fn keep_image(
        &self,
        dir: &Dir,
        leaf: &OsStr,
        expect: &LeafStat,
        op_id: &str,
    ) -> Result<Kept, FsError> {
        self.images.keep(dir, leaf, expect, op_id)
    }

    /// Records an operation (its image, if any, already kept). With
    /// `limit`, under the index's lock (so two daemons sharing the store
    /// cannot both take the last room): an image that would not fit within
    /// `limit.max_bytes` beside the images no eviction may take yet
    /// (younger than `limit.min_age_minutes`) is not recorded, and
    /// `Ok(Err(full))` says so. On failure or no room the image is removed
    /// again.
    pub(crate) fn record(
        &self,
        r: &Record,
        limit: Option<&HistoryConfig>,
    ) -> Result<Result<(), Full>, FsError> {
        let bytes = serde_json::to_vec(&Line::Keep(Box::new(r.clone()))).unwrap_or_default();
        let res = {
            let mut st = lock(&self.state);
            self.with_index(|log, guard| {
                scan(&mut st, log, guard)?;
                if let Some(cfg) = limit
                    && r.image.is_some()
                    && let Err(full) = st.room(cfg, r.image_len)
                {
                    return Ok(Err(full));
                }
                guard.append(&bytes).map(|_| Ok(()))
            })
        };
        if !matches!(res, Ok(Ok(()))) && r.image.is_some() {
            let _ = self.images.remove(&r.op_id);
        }
        res
    }

    /// Whether an image of `len` bytes would fit now (see
    /// [`History::record`]): checked before an image is kept, so a write
    /// that will be refused copies nothing.
    pub(crate) fn room(&self, cfg: &HistoryConfig, len: u64) -> Result<(), Full> {
        match self.refresh() {
            Ok(st) => st.room(cfg, len),
            // The record's own check, under the lock, decides.
            Err(_) => Ok(()),
        }
    }

    /// The old file's hash, learned after the record was written.
    pub(crate) fn done(&self, op_id: &str, hash_before: Option<String>) {
        let line = Line::Done {
            op_id: op_id.to_string(),
            hash_before,
        };
        if let Err(e) = self.append(&line) {
            tracing::warn!(error = %crate::error::with_causes(&e),
                "cannot record the hash of a before-image; its undo will need --force");
        }
    }

    /// The operation did not commit: its record is void and its image
    /// removed.
    pub(crate) fn void(&self, op_id: &str) {
        let _ = self.append(&Line::Void {
            op_id: op_id.to_string(),
        });
        let _ = self.images.remove(op_id);
    }

    /// Makes void the records of operations the audit recovery found not
    /// committed (`op_ids`) and removes leftover temp files.
    pub fn settle(&self, op_ids: &[String]) {
        let live: Vec<String> = match self.refresh() {
            Ok(st) => op_ids
                .iter()
                .filter(|id| st.records.get(*id).is_some_and(|(_, s)| *s == Status::Live))
                .cloned()
                .collect(),
            Err(_) => return,
        };
        for id in live {
            self.void(&id);
        }
        if let Ok(names) = self.images.names() {
            for n in names {
                if writegate_fs::is_image_temp(&n)
                    && let Some(name) = n.to_str()
                {
                    let _ = self.images.remove(name);
                }
            }
        }
        self.compact_if_due();
    }

    /// Evicts the oldest images while the store is over `cfg`'s bounds
    /// (never `spare`, the operation in progress, nor an image younger
    /// than `cfg.min_age_minutes`). Returns a descriptor of
    /// each image unlinked: its blocks are freed when it closes, off the
    /// request's path when the caller hands it to the releaser.
    pub(crate) fn evict(&self, cfg: &HistoryConfig, spare: &str) -> Vec<OwnedFd> {
        let Ok(mut st) = self.refresh() else {
            return Vec::new();
        };
        let max_age = std::time::Duration::from_secs(cfg.max_age_days.saturating_mul(86_400));
        let window = u64::try_from(cfg.min_age().as_millis()).unwrap_or(u64::MAX);
        let now = std::time::SystemTime::now();
        let now_ms = now_ms();
        let mut gone = Vec::new();
        let mut i = st.first_live;
        while i < st.order.len() {
            let id = st.order[i].clone();
            let Some((r, status)) = st.records.get(&id) else {
                i += 1;
                continue;
            };
            if *status != Status::Live {
                if i == st.first_live {
                    st.first_live += 1;
                }
                i += 1;
                continue;
            }
            // Never an image younger than `min_age_minutes`, nor the one
            // just kept: they are passed over, and older ones after them
            // still go when the store is over `max_bytes`. Within it, only
            // age evicts, and the images after a young one are younger
            // still: the walk ends there, so a commit does not visit every
            // image of the last hour (it did, and a 1 KiB write cost 1.28x
            // with history on against off after a few thousand writes).
            if id == spare || young(r.kept_ms, now_ms, window) {
                if st.bytes <= cfg.max_bytes {
                    break;
                }
                i += 1;
                continue;
            }
            let kept = std::time::UNIX_EPOCH + std::time::Duration::from_millis(r.kept_ms);
            let old = now.duration_since(kept).is_ok_and(|age| age > max_age);
            if !old && st.bytes <= cfg.max_bytes {
                break;
            }
            st.end(&id, Status::Evicted);
            gone.push(id);
            i += 1;
        }
        drop(st);
        let evicted = !gone.is_empty();
        let mut held = Vec::new();
        for id in gone {
            let _ = self.append(&Line::Evict { op_id: id.clone() });
            if let Ok(Some(fd)) = self.images.remove_held(&id) {
                held.push(fd);
            }
        }
        if evicted {
            self.compact_if_due();
        }
        held
    }

    /// A record by `opId` and its status.
    pub(crate) fn find(&self, op_id: &str) -> Result<Option<(Record, Status)>, FsError> {
        Ok(self.refresh()?.records.get(op_id).cloned())
    }

    /// Opens the image of `op_id`.
    pub(crate) fn image(
        &self,
        op_id: &str,
    ) -> Result<Option<(std::fs::File, LeafStat, i128)>, FsError> {
        self.images.open_image(op_id)
    }

    /// The newest live record of `canonical` other than `op_id`, newer than it.
    pub(crate) fn later_on(&self, r: &Record) -> Option<Record> {
        let st = self.refresh().ok()?;
        let pos = st.order.iter().position(|id| *id == r.op_id)?;
        st.order[pos + 1..]
            .iter()
            .rev()
            .filter_map(|id| st.records.get(id))
            .find(|(o, s)| *s == Status::Live && o.target == r.target && o.consistent())
            .map(|(o, _)| o.clone())
    }

    /// The bytes before and after operation `op_id`: its before-image
    /// (`None` when it created the file), and its result: the before-image
    /// of the next operation on the file when that one started from it,
    /// else the file itself while it still holds it (`None`: gone, or a
    /// removal). Neither side is read when it is over `max` bytes (its size
    /// is looked at first, so a huge or sparse image costs nothing), so the
    /// memory this takes is bounded by `max` whatever the store holds.
    ///
    /// Errors: no such operation, its record inconsistent, or its image
    /// gone (`not_undoable`); a side over `max` (`file_too_large`).
    pub fn versions(&self, op_id: &str, max: u64) -> Result<Versions, Refusal> {
        let gone = |why: String| Refusal::new(ErrorKind::NotUndoable, why);
        let too_large = |what: &str, len: u64| {
            Refusal::new(
                ErrorKind::FileTooLarge,
                format!(
                    "{what} of {op_id} is {len} bytes, over the {max} bytes `writegate diff` shows; `writegate undo {op_id} --dry-run` says what an undo would put back"
                ),
            )
        };
        // `Ok(None)`: no such image.
        let lines_within = |b: &[u8], what: &str| -> Result<(), Refusal> {
            let lines = b.iter().filter(|&&c| c == b'\n' || c == b'\r').count();
            if lines > DIFF_MAX_LINES {
                return Err(Refusal::new(
                    ErrorKind::FileTooLarge,
                    format!(
                        "{what} of {op_id} has {lines} line breaks, over the {DIFF_MAX_LINES} `writegate diff` compares; `writegate undo {op_id} --dry-run` says what an undo would put back"
                    ),
                ));
            }
            Ok(())
        };
        let read = |id: &str, what: &str| -> Result<Option<Vec<u8>>, Refusal> {
            let Some((f, stat, _)) = self.images.open_image(id).map_err(Refusal::from)? else {
                return Ok(None);
            };
            if stat.len > max {
                return Err(too_large(what, stat.len));
            }
            let mut b = Vec::with_capacity(usize::try_from(stat.len).unwrap_or(0));
            std::io::Read::read_to_end(&mut std::io::Read::take(f, max + 1), &mut b).map_err(
                |e| {
                    Refusal::new(
                        ErrorKind::IoError,
                        format!("cannot read the before-image: {e}"),
                    )
                },
            )?;
            if b.len() as u64 > max {
                return Err(too_large(what, b.len() as u64));
            }
            lines_within(&b, what)?;
            Ok(Some(b))
        };
        let (rec, next) = {
            let st = self.refresh().map_err(Refusal::from)?;
            let Some((rec, status)) = st.records.get(op_id) else {
                return Err(gone(format!("no operation {op_id} in the history")));
            };
            if *status == Status::Void {
                return Err(gone(format!("operation {op_id} never committed")));
            }
            if let Some(why) = rec.disagreement() {
                return Err(gone(inconsistent(op_id, &why)));
            }
            let pos = st.order.iter().position(|id| id == op_id).unwrap_or(0);
            let next = st.order[pos + 1..]
                .iter()
                .filter_map(|id| st.records.get(id))
                .find(|(o, s)| *s == Status::Live && o.target == rec.target && o.consistent())
                .map(|(o, _)| o.clone());
            (rec.clone(), next)
        };
        let before =
            if rec.created {
                None
            } else {
                Some(read(op_id, "the before-image")?.ok_or_else(|| {
                    gone(format!("the before-image of {op_id} is gone (evicted)"))
                })?)
            };
        if rec.removed {
            return Ok((rec, before, Some(Vec::new())));
        }
        let want = rec.hash_after.clone();
        let from_next = match next.filter(|n| n.hash_before.is_some() && n.hash_before == want) {
            Some(n) => read(&n.op_id, "the result")?,
            None => None,
        };
        let after = match from_next {
            Some(b) => Some(b),
            None if rec.bytes_after > max => return Err(too_large("the result", rec.bytes_after)),
            None => read_result(&rec.canonical(), rec.bytes_after)
                .filter(|now| Some(crate::sha256_tagged(now)) == want),
        };
        if let Some(b) = &after {
            lines_within(b, "the result")?;
        }
        Ok((rec, before, after))
    }

    /// Every operation of the store within `reach`, newest first, with
    /// whether it can be undone now: not when its image was evicted, its
    /// record is inconsistent, its image is larger than an undo may write
    /// (`max_write_bytes`, as [`Service::undo`](crate::Service::undo)
    /// checks it), nor
    /// when a later operation left the file in another state than this one
    /// did (undo that one first, or `--force`; named only when it is
    /// within `reach` too).
    ///
    /// Errors: the index cannot be read.
    pub fn entries(
        &self,
        enabled: bool,
        max_write_bytes: u64,
        reach: Reach<'_>,
    ) -> Result<Vec<HistoryEntry>, FsError> {
        let st = self.refresh()?;
        // The state each file was left in by its newest operation.
        let mut latest: HashMap<&str, &Record> = HashMap::new();
        for id in &st.order {
            if let Some((r, Status::Live | Status::Evicted)) = st.records.get(id)
                && r.consistent()
            {
                latest.insert(r.target.as_str(), r);
            }
        }
        let mut out = Vec::new();
        for id in st.order.iter().rev() {
            let Some((r, status)) = st.records.get(id) else {
                continue;
            };
            if !reach.sees(r) {
                continue;
            }
            let reason = match status {
                Status::Void => continue,
                Status::Evicted => Some("evicted: its before-image is no longer kept (history.max_bytes, history.max_age_days)".to_string()),
                Status::Live if !enabled => Some("history is off (history.enabled = false)".to_string()),
                Status::Live if !r.consistent() => {
                    r.disagreement().map(|why| inconsistent(&r.op_id, &why))
                }
                // What `undo` refuses as too large is not listed undoable.
                Status::Live if r.image.is_some() && r.image_len > undo::max_bytes(max_write_bytes, r) => {
                    Some(undo::too_large_words(max_write_bytes, r))
                }
                Status::Live => match latest.get(r.target.as_str()) {
                    Some(l) if l.op_id != r.op_id && l.after() != r.after() && reach.sees(l) => {
                        Some(format!(
                            "a later operation ({}) changed the file since: undo it first, or use --force",
                            l.op_id
                        ))
                    }
                    Some(l) if l.op_id != r.op_id && l.after() != r.after() => Some(
                        "a later operation changed the file since: use --force to put the before-image back anyway"
                            .to_string(),
                    ),
                    _ => None,
                },
            };
            out.push(HistoryEntry {
                record: r.clone(),
                undoable: reason.is_none(),
                reason,
            });
        }
        Ok(out)
    }
}

/// The reason a record whose fields disagree is not undone: `why` from
/// [`Record::disagreement`].
pub(crate) fn inconsistent(op_id: &str, why: &str) -> String {
    format!(
        "the history index's record of {op_id} is inconsistent ({why}); it was changed outside writegate, so it is neither undone nor shown as a change"
    )
}

/// Whether `id` has the shape of an `opId` (`<tag>-<n>`: ASCII letters,
/// digits and `-`), so it is one plain name in the image directory. The
/// index is a file a same-UID process can rewrite; a record with any other
/// id is ignored.
fn plain_op_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The index's name in the store.
const INDEX: &str = "index.jsonl";

/// Reads into `st` the lines of the locked index `log` it has not read;
/// from the start when `log` is another file than the one `st` was read
/// from.
fn scan(st: &mut State, log: &AppendLog, guard: &writegate_fs::LogLock<'_>) -> Result<(), FsError> {
    if st.log_id != log.identity() {
        *st = State {
            log_id: log.identity(),
            ..State::default()
        };
    }
    let len = log.len()?;
    if len > st.scanned {
        let mut lines = Vec::new();
        guard.lines_from(st.scanned, &mut |l| {
            if let Ok(line) = serde_json::from_slice::<Line>(l) {
                lines.push(line);
            }
        })?;
        for l in lines {
            st.apply(l);
        }
        st.scanned = len;
    }
    Ok(())
}

/// Writes the live records of `st` (each with the `hashBefore` a `done`
/// line added) to a new index, oldest first, and renames it over the
/// index, under the index's lock (the caller's): a temp file (0600),
/// written whole, fsynced, renamed, the directory fsynced. A reader sees
/// the old index or the new one, never a part; a crash leaves at most the
/// temp file, which the next compaction replaces
/// ([`writegate_fs::replace_whole`]). Void and evicted
/// records are dropped (their images are gone already).
fn compact(root: &Path, st: &State) -> Result<(), FsError> {
    let mut body = Vec::new();
    for id in &st.order[st.first_live..] {
        if let Some((r, Status::Live)) = st.records.get(id) {
            let line = Line::Keep(Box::new(r.clone()));
            body.extend_from_slice(&serde_json::to_vec(&line).unwrap_or_default());
            body.push(b'\n');
        }
    }
    writegate_fs::replace_whole(root, INDEX, &body)
}

/// The file at `canonical` when it may still hold an operation's result
/// of `len` bytes: a regular file of exactly that size, opened through its
/// canonical directory without following a symlink anywhere (a fifo,
/// device, symlink or directory put there since is not opened, and a file
/// of another size is not read: nothing a same-UID process plants at the
/// path can block the reader or make it load more than `len` bytes).
fn read_result(canonical: &Path, len: u64) -> Option<Vec<u8>> {
    let (parent, leaf) = (canonical.parent()?, canonical.file_name()?);
    let dir = Dir::open_canonical(parent).ok()?;
    let existing =
        writegate_fs::read_existing(&dir, leaf, Some(len), writegate_fs::Atime::Keep).ok()??;
    match existing.content {
        writegate_fs::Content::Whole(b) if b.len() as u64 == len => Some(b),
        _ => None,
    }
}

/// A new record for an operation on `canonical` (the caller fills in the
/// rest).
pub(crate) fn new_record(op_id: &str, canonical: &Path, intent: Intent, writer: Writer) -> Record {
    Record {
        op_id: op_id.to_string(),
        ts: now_rfc3339(),
        kept_ms: now_ms(),
        path: path_text(canonical),
        target: hex(canonical.as_os_str().as_bytes()),
        session_id: None,
        workspace: String::new(),
        intent,
        writer,
        created: false,
        removed: false,
        created_dirs: Vec::new(),
        mode: None,
        bytes_before: 0,
        hash_before: None,
        bytes_after: 0,
        hash_after: None,
        image: None,
        image_len: 0,
        image_mtime_ns: 0,
        undoes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change a forger makes to a record.
    type Change = fn(&mut Record);

    /// A record as a write over an existing file leaves it.
    fn replaced(path: &str) -> Record {
        let mut r = new_record(
            "0123456789ab-1",
            Path::new(path),
            Intent::Write,
            Writer::Workspace,
        );
        r.mode = Some((0o644, 1000, 1000));
        r.bytes_before = 4;
        r.image = Some("link".into());
        r.image_len = 4;
        r.bytes_after = 5;
        r.hash_after = Some("sha256:00".into());
        r
    }

    #[test]
    fn a_record_as_writegate_writes_it_agrees() {
        assert_eq!(replaced("/ws/notes.txt").disagreement(), None);
        let mut created = new_record(
            "x-2",
            Path::new("/ws/new.txt"),
            Intent::Write,
            Writer::Workspace,
        );
        created.created = true;
        created.hash_after = Some("sha256:00".into());
        assert_eq!(created.disagreement(), None);
        let mut removal = replaced("/ws/new.txt");
        removal.intent = Intent::Undo;
        removal.undoes = Some("x-2".into());
        removal.removed = true;
        removal.bytes_after = 0;
        removal.hash_after = None;
        assert_eq!(removal.disagreement(), None);
    }

    /// Every way a planted record's fields can disagree is caught: the
    /// shown path naming another file than the one written, a target
    /// written other than as writegate writes it, a path that is not
    /// canonical, sizes that are not the image's, a mode with more than
    /// permission bits, a creation with an image, an undo without its
    /// operation.
    #[test]
    fn a_record_whose_fields_disagree_is_caught() {
        let cases: [(&str, Change); 12] = [
            ("path", |r| r.path = "/ws/notes.txt".into()),
            ("target", |r| r.target = "zz".into()),
            ("target", |r| r.target = r.target.to_uppercase()),
            (
                "canonical",
                (|r| {
                    *r = replaced("/ws/../etc/build.sh");
                }),
            ),
            ("image size", |r| r.bytes_before = 1),
            ("permission bits", (|r| r.mode = Some((0o100_644, 0, 0)))),
            ("created", |r| r.created = true),
            ("no image", |r| r.image = None),
            ("link nor copy", |r| r.image = Some("../x".into())),
            ("removed", |r| r.removed = true),
            ("undoes", |r| r.intent = Intent::Undo),
            ("no hash", |r| r.hash_after = None),
        ];
        for (want, change) in cases {
            let mut r = replaced("/ws/build.sh");
            change(&mut r);
            let why = r.disagreement().unwrap_or_else(|| panic!("{want}: {r:?}"));
            assert!(why.contains(want), "{want}: {why}");
        }
    }
}
