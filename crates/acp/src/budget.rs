//! The daemon-wide budget of request bytes in flight (`max_inflight_bytes`).

use std::sync::Arc;
use tokio::sync::Semaphore;

/// The daemon-wide budget of request bytes in flight (`max_inflight_bytes`),
/// counted in KiB: a request line longer than [`BUDGET_FREE_LINE`] holds
/// `ceil(len / 1 KiB)` units (at most the whole budget) from the moment it
/// is read until its answer is built. A connection whose line does not fit
/// waits before handling it and reads nothing more meanwhile, so all
/// connections together hold at most the budget plus one waiting line each.
/// Answers are not counted (a small `_writegate/read_lines` can have a large
/// answer); the per-connection [`MAX_OUTSTANDING`](crate::outbox::MAX_OUTSTANDING) bounds those.
pub struct Budget {
    pub(crate) units: Arc<Semaphore>,
    total: u32,
}

/// Lines at most this long (cancels, receipts, reads, edits' parameters,
/// small writes) never wait for the budget. The semaphore is fair, so a big
/// line queued for it would otherwise hold up every connection's small
/// lines, `$/cancel_request` included; small lines are bounded anyway by
/// [`MAX_OUTSTANDING`](crate::outbox::MAX_OUTSTANDING) per connection.
pub const BUDGET_FREE_LINE: usize = 4 * 1024;

impl Budget {
    /// A budget of `bytes`, rounded up to whole KiB, at least 1 KiB, at most
    /// what the semaphore can count (2^29 KiB on 32-bit targets).
    pub fn new(bytes: u64) -> Budget {
        let cap = u64::try_from(Semaphore::MAX_PERMITS)
            .unwrap_or(u64::MAX)
            .min(u64::from(u32::MAX));
        let total = u32::try_from(bytes.div_ceil(1024).clamp(1, cap)).unwrap_or(u32::MAX);
        Budget {
            units: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Units a line of `len` bytes costs: 0 up to [`BUDGET_FREE_LINE`],
    /// else whole KiB, at most the whole budget (so an oversized line waits
    /// for an idle daemon instead of forever).
    pub fn cost(&self, len: usize) -> u32 {
        if len <= BUDGET_FREE_LINE {
            return 0;
        }
        u32::try_from(len.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .min(self.total)
    }

    /// Units free right now (for tests and logs).
    pub fn available(&self) -> usize {
        self.units.available_permits()
    }
}
