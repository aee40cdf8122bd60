//! The allocator's settings for a long-lived process: two glibc arenas
//! that keep large buffers for the next request, and free memory given
//! back to the kernel once the process goes idle.

/// Limits glibc's allocator to two arenas, unless the environment already
/// chose (`MALLOC_ARENA_MAX`, or an arena tunable in `GLIBC_TUNABLES`),
/// and keeps buffers of up to 32 MiB in those arenas, unless it chose
/// those thresholds (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, or
/// a threshold tunable).
///
/// glibc gives each thread that allocates an arena of its own (up to 8 per
/// CPU) and keeps a large request's freed buffers in it, so after
/// concurrent connections a run of sequential 5 MiB writes stayed at 65-70
/// MiB, over issue 12's bound (3x the payload plus 16 MiB); with two arenas
/// it stays at about 25 MiB, and small writes on 8 connections got no
/// slower (docs/decisions/0008-request-memory.md).
///
/// A 5 MiB read or write needs a few buffers of its size. By default glibc
/// maps each one afresh or gives the freed top of its arena back to the
/// kernel, and every 4 KiB page of a fresh buffer is a page fault on first
/// touch: about 3 µs each on the project's VM, 4 ms per 5 MiB buffer, most
/// of a 5 MiB `fs/read_text_file`'s 20 ms of CPU. Kept in the arena (an mmap
/// threshold and a trim threshold of 32 MiB), the same read takes 7.6 ms
/// (docs/decisions/0023-large-answers-and-kept-buffers.md).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn tune_malloc() {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    let arenas_chosen =
        std::env::var_os("MALLOC_ARENA_MAX").is_some() || tunables.contains("arena");
    let thresholds_chosen = std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
        || std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_some()
        || tunables.contains("threshold");
    /// Largest buffer kept in an arena, and the free top an arena keeps.
    const KEPT: libc::c_int = 32 << 20;
    // SAFETY: mallopt(3) only sets an allocator parameter; it is called
    // first thing in `main`, before any other thread exists, and its
    // result (1 on success) needs no handling: on failure glibc keeps
    // its default.
    unsafe {
        if !arenas_chosen {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
        if !thresholds_chosen {
            libc::mallopt(libc::M_MMAP_THRESHOLD, KEPT);
            libc::mallopt(libc::M_TRIM_THRESHOLD, KEPT);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn tune_malloc() {}

/// Every [`IDLE_CHECK`], when the process used less than [`IDLE_CPU`] of
/// CPU since the last check, was busy at some check since the last trim,
/// and its allocator holds more than [`TRIM_ABOVE`] free, gives the free
/// memory back to the kernel (`malloc_trim`): the buffers [`tune_malloc`]
/// keeps serve a busy spell of large requests, and an idle daemon does not
/// sit on them. The process's CPU time is the sign of work: the
/// allocator's bytes in use come back to the same count after every
/// request, busy or not. Runs on a thread of its own for the life of the
/// process.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn trim_when_idle() {
    let cpu = || rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let spawned = std::thread::Builder::new()
        .name("writegate-trim".to_string())
        .spawn(move || {
            let mut last = cpu();
            let mut busy_since_trim = true;
            loop {
                std::thread::sleep(IDLE_CHECK);
                let now = cpu();
                let used = std::time::Duration::new(
                    u64::try_from(now.tv_sec).unwrap_or(0),
                    u32::try_from(now.tv_nsec).unwrap_or(0),
                )
                .saturating_sub(std::time::Duration::new(
                    u64::try_from(last.tv_sec).unwrap_or(0),
                    u32::try_from(last.tv_nsec).unwrap_or(0),
                ));
                last = now;
                if used >= IDLE_CPU {
                    busy_since_trim = true;
                    continue;
                }
                if !busy_since_trim {
                    continue;
                }
                // SAFETY: mallinfo2(3) only reads the allocator's counters
                // (under its arena locks); it takes no pointer.
                let free = unsafe { libc::mallinfo2() }.fordblks;
                if free > TRIM_ABOVE {
                    // SAFETY: malloc_trim(3) returns free memory to the
                    // kernel; it takes no pointer and is thread-safe.
                    unsafe {
                        libc::malloc_trim(0);
                    }
                }
                busy_since_trim = false;
            }
        });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "free memory is not given back when idle");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn trim_when_idle() {}

/// How often [`trim_when_idle`] looks.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const IDLE_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// CPU used in one [`IDLE_CHECK`] below which the process is idle (its
/// timers and this thread use a few microseconds).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const IDLE_CPU: std::time::Duration = std::time::Duration::from_millis(10);

/// Free bytes below which nothing is trimmed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_ABOVE: usize = 4 << 20;
