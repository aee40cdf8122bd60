//! A global allocator that counts live heap bytes and their peak.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Forwards every call to [`System`] and counts the live heap bytes and
/// their peak: deterministic (bytes asked of the allocator, not RSS).
/// Install it in a test or bench binary and measure a closure:
///
/// ```
/// use writegate_testkit::CountingAlloc;
///
/// #[global_allocator]
/// static ALLOC: CountingAlloc = CountingAlloc::new();
///
/// fn main() {
///     let (v, peak) = ALLOC.peak_during(|| vec![0u8; 4096]);
///     assert_eq!(v.len(), 4096);
///     assert!(peak >= 4096);
/// }
/// ```
///
/// The counters are process-wide: a test binary whose tests run in
/// parallel serialises the ones that measure.
pub struct CountingAlloc {
    live: AtomicUsize,
    peak: AtomicUsize,
}

impl CountingAlloc {
    /// Counters at zero.
    pub const fn new() -> CountingAlloc {
        CountingAlloc {
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Heap bytes live now.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Runs `f`; returns its result and the peak of live heap bytes above
    /// what was live when it started.
    pub fn peak_during<T>(&self, f: impl FnOnce() -> T) -> (T, usize) {
        let base = self.live.load(Ordering::Relaxed);
        self.peak.store(base, Ordering::Relaxed);
        let out = f();
        (out, self.peak.load(Ordering::Relaxed) - base)
    }

    fn grew(&self, by: usize) {
        let now = self.live.fetch_add(by, Ordering::Relaxed) + by;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn shrank(&self, by: usize) {
        self.live.fetch_sub(by, Ordering::Relaxed);
    }
}

impl Default for CountingAlloc {
    fn default() -> CountingAlloc {
        CountingAlloc::new()
    }
}

// SAFETY: every call is forwarded to `System` unchanged; only counters are
// updated.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            self.grew(l.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() {
            self.grew(l.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(p, l) };
        self.shrank(l.size());
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let q = unsafe { System.realloc(p, l, new_size) };
        if !q.is_null() {
            if new_size >= l.size() {
                self.grew(new_size - l.size());
            } else {
                self.shrank(l.size() - new_size);
            }
        }
        q
    }
}
