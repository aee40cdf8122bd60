//! The daemon-wide budget of request bytes in flight (`max_inflight_bytes`),
//! lines still being read included.

use std::sync::Arc;
use tokio::sync::Semaphore;

/// The daemon-wide budget of request bytes in flight (`max_inflight_bytes`),
/// counted in KiB: a request line longer than [`BUDGET_FREE_LINE`] holds
/// `ceil(len / 1 KiB)` units (at most the whole budget) from the moment it
/// is read until its answer is built.
///
/// Lines still being read count too: a connection whose buffer holds
/// [`PARTIAL_FREE`] bytes of an incomplete line (its unbudgeted reads stop
/// there) reads no more until it holds a [`Budget::reservation`] (enough for the longest line allowed,
/// at most the whole budget), taken at once so that every connection that
/// holds one can finish its line (no two half-read lines can wait for each
/// other); when the line is complete the reservation shrinks to the line's
/// cost. A connection whose line does not fit waits before reading more or
/// handling it, holding no budget meanwhile. A connection holding a
/// reservation whose peer sends nothing for
/// [`Shared::line_stall`](crate::conn::Shared::line_stall)
/// (`line_stall_timeout_ms`) loses it and is closed (`conn`). So all
/// connections together hold at most the budget, plus less than
/// [`PARTIAL_FREE`] + `writegate_stdio::lines::READ_MAX` unbudgeted bytes
/// each. Answers are not counted (a small `_writegate/read_lines` can have a
/// large answer); the per-connection
/// `outbox::MAX_OUTSTANDING` bounds those.
pub struct Budget {
    pub(crate) units: Arc<Semaphore>,
    total: u32,
}

/// Lines at most this long (cancels, receipts, reads, edits' parameters,
/// small writes) never wait for the budget. The semaphore is fair, so a big
/// line queued for it would otherwise hold up every connection's small
/// lines, `$/cancel_request` included; small lines are bounded anyway by
/// `outbox::MAX_OUTSTANDING` per connection.
pub const BUDGET_FREE_LINE: usize = 4 * 1024;

/// Bytes of an incomplete line a connection may buffer without budget;
/// beyond this it reads on only while it holds a [`Budget::reservation`].
pub const PARTIAL_FREE: usize = 64 * 1024;

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

    /// Units a connection holds while it reads a line longer than
    /// [`PARTIAL_FREE`]: enough for a line of `max_line` bytes (the frame
    /// limit), in whole KiB, at most the whole budget. So two reservations
    /// fit a budget of twice the frame limit (the defaults: 16 MiB lines,
    /// 32 MiB): two long lines are read at a time. Its `\r` and what a read
    /// brings past the line are the connection's unbudgeted bytes (less
    /// than a `writegate_stdio::lines::READ_MAX`).
    pub fn reservation(&self, max_line: usize) -> u32 {
        u32::try_from(max_line.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .min(self.total)
    }

    /// Units free right now (for tests and logs).
    pub fn available(&self) -> usize {
        self.units.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use writegate_core::Config;

    /// docs/behaviour.md: with the defaults two long lines are read at a
    /// time. A reservation was `max_frame_bytes + 2` bytes (16 MiB and one
    /// KiB), so a second did not fit 32 MiB.
    #[test]
    fn two_reservations_for_the_longest_line_fit_the_default_budget() {
        let c = Config::default();
        let budget = Budget::new(c.max_inflight_bytes);
        let max = usize::try_from(c.max_frame_bytes).unwrap();
        let units = budget.reservation(max) as usize;
        assert!(2 * units <= budget.available(), "{units} units each");
        // A line of the longest length shrinks its reservation to its cost,
        // never grows it.
        assert!(budget.cost(max) as usize <= units);
        assert_eq!(budget.cost(max) as usize, units);
    }

    #[test]
    fn a_reservation_is_at_most_the_whole_budget() {
        let budget = Budget::new(48 * 1024);
        assert_eq!(budget.reservation(16 << 20), 48);
        assert_eq!(budget.reservation(1024), 1);
        assert_eq!(budget.reservation(1025), 2);
    }
}
