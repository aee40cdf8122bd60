//! What each session wrote (`_writegate/receipt`, SPEC 3), bounded so that
//! a client inventing session ids cannot grow the daemon's memory without
//! limit (unbounded, 5,000 unique session ids added 61 MiB).

use crate::api::Receipt;
use std::collections::{HashMap, VecDeque};

/// At most this many receipts are kept per session (its oldest dropped).
pub const MAX_RECEIPTS_PER_SESSION: usize = 1_000;

/// At most this many receipts are kept in all (about 250 bytes each): past
/// it, the receipts of the session written to least recently are dropped,
/// oldest first.
pub const MAX_RECEIPTS: usize = 20_000;

/// Receipts by session, with the caps above.
#[derive(Debug, Default)]
pub(crate) struct Receipts {
    by_session: HashMap<String, VecDeque<Receipt>>,
    /// Sessions, least recently written first (each once).
    order: VecDeque<String>,
    total: usize,
}

impl Receipts {
    /// Adds `r` to `session`'s list.
    pub(crate) fn add(&mut self, session: &str, r: Receipt) {
        // The common case, the same session as last time, costs nothing.
        if self.order.back().is_some_and(|s| s == session) {
        } else if let Some(i) = self.order.iter().position(|s| s == session) {
            if let Some(s) = self.order.remove(i) {
                self.order.push_back(s);
            }
        } else {
            self.order.push_back(session.to_string());
        }
        // The key is copied only for a session's first receipt.
        let list = if let Some(list) = self.by_session.get_mut(session) {
            list
        } else {
            self.by_session.entry(session.to_string()).or_default()
        };
        if list.len() >= MAX_RECEIPTS_PER_SESSION {
            list.pop_front();
            self.total -= 1;
        }
        list.push_back(r);
        self.total += 1;
        while self.total > MAX_RECEIPTS {
            let Some(oldest) = self.order.front().cloned() else {
                break;
            };
            let list = self.by_session.entry(oldest.clone()).or_default();
            list.pop_front();
            self.total -= 1;
            if list.is_empty() {
                self.by_session.remove(&oldest);
                self.order.pop_front();
            }
        }
    }

    /// `session`'s receipts, oldest first.
    pub(crate) fn of(&self, session: &str) -> Vec<Receipt> {
        self.by_session
            .get(session)
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Number of receipts kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(n: usize) -> Receipt {
        Receipt {
            path: format!("/w/{n}"),
            mode: writegate_text::EditMode::Write,
            created: true,
            bytes_before: 0,
            bytes_after: 1,
            hash_after: String::new(),
            time: String::new(),
        }
    }

    #[test]
    fn per_session_and_total_caps_hold() {
        let mut all = Receipts::default();
        for i in 0..MAX_RECEIPTS_PER_SESSION + 5 {
            all.add("a", r(i));
        }
        let a = all.of("a");
        assert_eq!(a.len(), MAX_RECEIPTS_PER_SESSION);
        assert_eq!(a[0].path, "/w/5", "the oldest are dropped");
        // Many sessions: the total stays bounded; the session written to
        // least recently loses first.
        for s in 0..(MAX_RECEIPTS / 10) {
            for i in 0..20 {
                all.add(&format!("s{s}"), r(i));
            }
        }
        assert_eq!(all.len(), MAX_RECEIPTS);
        assert!(all.of("a").is_empty(), "the oldest session went first");
        assert_eq!(all.of(&format!("s{}", MAX_RECEIPTS / 10 - 1)).len(), 20);
        assert!(all.by_session.len() <= MAX_RECEIPTS);
        assert_eq!(all.order.len(), all.by_session.len());
    }
}
