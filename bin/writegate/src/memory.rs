//! The allocator's settings: two glibc arenas.

/// Limits glibc's allocator to two arenas, unless the environment already
/// chose (`MALLOC_ARENA_MAX`, or an arena tunable in `GLIBC_TUNABLES`).
///
/// glibc gives each thread that allocates an arena of its own (up to 8 per
/// CPU) and keeps a large request's freed buffers in it, so after
/// concurrent connections a run of sequential 5 MiB writes stayed at 65-70
/// MiB, over the bound of ADR 0008 (3x the payload plus 16 MiB); with two arenas
/// it stays at about 25 MiB, and small writes on 8 connections got no
/// slower (docs/decisions/0008-request-memory.md). Keeping large buffers
/// for reuse (higher mmap and trim thresholds) was measured and left out:
/// docs/decisions/0023-large-answers-and-kept-buffers.md.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn tune_malloc() {
    let chosen = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena"));
    if !chosen {
        // SAFETY: mallopt(3) only sets an allocator parameter; it is called
        // first thing in `main`, before any other thread exists, and its
        // result (1 on success) needs no handling: on failure glibc keeps
        // its default.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn tune_malloc() {}
