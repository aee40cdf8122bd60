//! The SHA-256 a read answers, taken once per version of a file: an agent
//! reads the same file again and again, and at 1 MiB the hash was a third
//! of a read's CPU (docs/decisions/0034-reads-ahead-of-the-peers.md). A
//! large whole-file write records the file it published here, and the next
//! whole-file write of that file takes its `hashBefore` from here when the
//! bytes it skimmed are still those (docs/decisions/0036-large-writes-the-plain-way.md):
//! SHA-256 of the old 5 MiB was 2.6 ms of CPU racing the fsync. Such a
//! write also records the format a skim gives for the bytes it published,
//! and the next whole-file write of the file encodes for that format
//! without looking at the file first; it publishes nothing unless the
//! file's bytes, read on a helper during its fsync, have the recorded check
//! (docs/decisions/0037-the-format-a-write-left.md).
//!
//! An entry is keyed by the file's device and inode and holds its size,
//! the XXH3-64 of its bytes under a secret of this process, and their
//! SHA-256. A read of a file of at
//! least [`CACHED_MIN`] bytes takes the XXH3-64 of the bytes it is about to
//! answer (about 20 times faster than SHA-256); only when the file's
//! identity, its size and that check all equal an entry's is the entry's
//! SHA-256 the answer's, otherwise the bytes are hashed and the entry
//! replaced. No timestamp is trusted: a write through a shared mapping
//! changes bytes without moving `mtime` or `ctime`, `utimensat` sets
//! `mtime` back, and `ctime` is only as fine as the kernel's coarse clock.
//! What is compared is the bytes being answered, so an entry can be wrong
//! only for bytes that collide with the hashed ones under XXH3-64: a 2^-64
//! chance for a change not made to collide. A change made to collide needs
//! someone who can write the file and who finds a collision of a function
//! whose secret (192 random bytes per process) they do not know; XXH3 is
//! not a MAC and carries no proof of that, but its long-input loop mixes
//! every stripe with the secret before multiplying. Only a read's answer
//! and a whole-file write's `hashBefore`
//! take their hash from here; an edit's `expectedHash` check hashes the
//! bytes it has, and so does a write of a file the skim cannot tell or
//! whose entry does not match.

use std::collections::HashMap;
use std::sync::Mutex;
use writegate_text::Format;

/// Files smaller than this are hashed every time: SHA-256 of 64 KiB costs
/// about what a lookup and its check do.
pub(crate) const CACHED_MIN: usize = 64 * 1024;

/// Files remembered; past it, the least recently used entry goes.
const ENTRIES: usize = 256;

/// The size of an XXH3 secret [`xxhash_rust::xxh3::Xxh3::with_secret`]
/// takes (the crate's default secret size, which it does not export).
const SECRET_SIZE: usize = 192;

/// The cache (one per [`crate::Service`]).
pub(crate) struct ReadHashes {
    entries: Mutex<Table>,
    /// The XXH3 secret of this process: 192 bytes from the system's random
    /// source. Without it (XXH3's public default secret) a change made to
    /// collide could be computed offline, and a write's `hashBefore` would
    /// then hide it with no race to win; with it, a collision has to be
    /// found without knowing the function.
    secret: Box<[u8; SECRET_SIZE]>,
}

impl Default for ReadHashes {
    fn default() -> Self {
        let mut secret = Box::new([0u8; SECRET_SIZE]);
        getrandom::fill(&mut secret[..]).expect("the operating system's random source");
        ReadHashes {
            entries: Mutex::default(),
            secret,
        }
    }
}

#[derive(Default)]
struct Table {
    map: HashMap<(u64, u64), Entry>,
    /// A counter, for least recently used.
    clock: u64,
}

struct Entry {
    len: u64,
    check: u64,
    hash: String,
    /// The format a skim gives for the bytes, recorded by a write that
    /// published them (`None` from a read, and for bytes a skim cannot
    /// tell): see [`ReadHashes::format_of`].
    format: Option<Format>,
    used: u64,
}

/// A file as a read found it: identity and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileKey {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) len: u64,
}

impl ReadHashes {
    /// The SHA-256 recorded for `bytes`, read from the file `key`, when
    /// the entry of that file matches them (see the module docs), with the
    /// check to [`ReadHashes::record`] it under if not.
    pub(crate) fn lookup(&self, key: FileKey, bytes: &[u8]) -> Result<String, u64> {
        let check = self.check(bytes);
        if bytes.len() as u64 != key.len {
            return Err(check);
        }
        self.lookup_check(key, check).ok_or(check)
    }

    /// The check of `bytes`: their XXH3-64 under this process's secret.
    pub(crate) fn check(&self, bytes: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64_with_secret(bytes, &self.secret[..])
    }

    /// [`ReadHashes::check`] of bytes that arrive a piece at a time.
    pub(crate) fn checker(&self) -> xxhash_rust::xxh3::Xxh3 {
        xxhash_rust::xxh3::Xxh3::with_secret(*self.secret)
    }

    /// The SHA-256 recorded for the file `key` when its entry has that
    /// size and the XXH3-64 `check` of the bytes just read from it.
    pub(crate) fn lookup_check(&self, key: FileKey, check: u64) -> Option<String> {
        let mut t = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.clock += 1;
        let now = t.clock;
        match t.map.get_mut(&(key.dev, key.ino)) {
            Some(e) if e.len == key.len && e.check == check => {
                e.used = now;
                Some(e.hash.clone())
            }
            _ => None,
        }
    }

    /// The format recorded for the file `key` when its entry has that size
    /// and a format, with the check of the bytes the format is theirs.
    /// Until the file's bytes are read and found to have that check, the
    /// format is only what the file had when writegate wrote it: a whole-file
    /// write that uses it checks the bytes before its rename
    /// (docs/decisions/0037-the-format-a-write-left.md).
    pub(crate) fn format_of(&self, key: FileKey) -> Option<(u64, Format)> {
        let t = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let e = t.map.get(&(key.dev, key.ino))?;
        (e.len == key.len).then_some((e.check, e.format?))
    }

    /// Drops the entry of the file `key` (its bytes were found not to be
    /// the recorded ones).
    pub(crate) fn forget(&self, key: FileKey) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .map
            .remove(&(key.dev, key.ino));
    }

    /// Records `hash`, the SHA-256 of the bytes whose XXH3-64 is `check`,
    /// read from the file `key`, and `format`, the format a skim gives for
    /// them when a write knows it ([`ReadHashes::format_of`]).
    pub(crate) fn record(&self, key: FileKey, check: u64, hash: &str, format: Option<Format>) {
        let mut t = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.clock += 1;
        let used = t.clock;
        if t.map.len() >= ENTRIES && !t.map.contains_key(&(key.dev, key.ino)) {
            let oldest = t.map.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| *k);
            if let Some(k) = oldest {
                t.map.remove(&k);
            }
        }
        t.map.insert(
            (key.dev, key.ino),
            Entry {
                len: key.len,
                check,
                hash: hash.to_string(),
                format,
                used,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: FileKey = FileKey {
        dev: 1,
        ino: 2,
        len: 4,
    };

    /// A write records the one-shot check of its bytes; the next write
    /// checks the file a piece at a time: the two must agree, and differ
    /// from XXH3's public default.
    #[test]
    fn the_check_a_piece_at_a_time_is_the_check_at_once() {
        let h = ReadHashes::default();
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut pieces = h.checker();
        for piece in bytes.chunks(256 * 1024 + 3) {
            pieces.update(piece);
        }
        assert_eq!(pieces.digest(), h.check(&bytes));
        assert_ne!(h.check(&bytes), xxhash_rust::xxh3::xxh3_64(&bytes));
        assert_ne!(h.check(&bytes), ReadHashes::default().check(&bytes));
    }

    #[test]
    fn an_entry_answers_only_for_the_bytes_it_was_recorded_for() {
        let h = ReadHashes::default();
        let check = h.lookup(KEY, b"abcd").unwrap_err();
        h.record(KEY, check, "sha256:one", None);
        assert_eq!(h.lookup(KEY, b"abcd"), Ok("sha256:one".to_string()));
        // Same file, same size, other bytes (a write through a mapping,
        // timestamps set back): not the recorded hash.
        assert!(h.lookup(KEY, b"abce").is_err());
        // Another inode with the same bytes, or the same inode grown.
        assert!(h.lookup(FileKey { ino: 3, ..KEY }, b"abcd").is_err());
        assert!(h.lookup(FileKey { len: 5, ..KEY }, b"abcde").is_err());
    }

    /// The format a write recorded is given for the file's identity and
    /// size only, with the check the bytes must have; a read of other bytes
    /// replaces the entry, and a forgotten file has none.
    #[test]
    fn a_recorded_format_is_given_with_its_check_for_that_size_only() {
        let h = ReadHashes::default();
        let lf = Format {
            dominant: Some(writegate_text::Ending::Lf),
            ..Format::NEW_FILE
        };
        let check = h.check(b"abcd");
        h.record(KEY, check, "sha256:one", Some(lf));
        assert_eq!(h.format_of(KEY), Some((check, lf)));
        assert_eq!(h.format_of(FileKey { len: 5, ..KEY }), None);
        assert_eq!(h.format_of(FileKey { ino: 3, ..KEY }), None);
        h.forget(KEY);
        assert_eq!(h.format_of(KEY), None);
        h.record(KEY, check, "sha256:one", Some(lf));
        let read = h.lookup(KEY, b"abce").unwrap_err();
        h.record(KEY, read, "sha256:read", None);
        assert_eq!(h.format_of(KEY), None, "a read records no format");
    }

    #[test]
    fn the_least_recently_used_file_goes_first() {
        let h = ReadHashes::default();
        for ino in 0..ENTRIES as u64 {
            let key = FileKey { ino, ..KEY };
            let check = h.lookup(key, b"abcd").unwrap_err();
            h.record(key, check, &format!("sha256:{ino}"), None);
        }
        // File 0 is used again; file 1 is now the oldest.
        assert!(h.lookup(FileKey { ino: 0, ..KEY }, b"abcd").is_ok());
        let new = FileKey { ino: 999, ..KEY };
        let check = h.lookup(new, b"abcd").unwrap_err();
        h.record(new, check, "sha256:new", None);
        assert!(h.lookup(FileKey { ino: 0, ..KEY }, b"abcd").is_ok());
        assert!(h.lookup(FileKey { ino: 1, ..KEY }, b"abcd").is_err());
        assert!(h.lookup(new, b"abcd").is_ok());
    }
}
