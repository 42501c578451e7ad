//! How long a request may wait, and for what: the one rule every wait loop at
//! the edges follows (the Worker's isolates, its minters, the npm client).
//!
//! - A request waits at most [`MAX_WAIT_MS`] in all ([`WaitBudget`]), counted
//!   as the larger of the waits it asked for and the time its clock shows
//!   passed: a clock that stands still (a Worker's, while code runs) or steps
//!   back cannot stretch it. Past that it answers at once, with how long to
//!   wait before asking again.
//! - Something sent and not yet answered (a lease, a segment load, a batch
//!   fetch, a save) is [`InFlight`]: after `take_over_ms` it is presumed lost
//!   and may be sent again — also when the clock stepped back further than
//!   that since it was sent, because then the clock cannot say how long it
//!   has been.

/// The longest one request waits in all (for the sequence, a clock a little
/// behind, another request's load or fetch) before it answers 503 with
/// `Retry-After`.
pub const MAX_WAIT_MS: u64 = 1_000;

/// A request marked in flight this long is presumed lost and may be sent again.
pub const DEFAULT_TAKE_OVER_MS: u64 = 3_000;

/// One request's waiting so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitBudget {
    started_ms: u64,
    waited_ms: u64,
    max_ms: u64,
}

impl WaitBudget {
    /// A request that started at `now_ms` and may wait `max_ms` in all.
    pub const fn new(now_ms: u64, max_ms: u64) -> Self {
        WaitBudget {
            started_ms: now_ms,
            waited_ms: 0,
            max_ms,
        }
    }

    /// What the request has spent at `now_ms`: the waits it asked for, or the
    /// time its clock shows passed, whichever is more.
    pub fn spent_ms(&self, now_ms: u64) -> u64 {
        self.waited_ms.max(now_ms.saturating_sub(self.started_ms))
    }

    /// Milliseconds it may still wait at `now_ms` (0: answer now).
    pub fn remaining_ms(&self, now_ms: u64) -> u64 {
        self.max_ms.saturating_sub(self.spent_ms(now_ms))
    }

    /// Before waiting `ms` more at `now_ms`: `true` (and the wait is counted)
    /// if it fits, `false` when the request must answer now.
    pub fn wait(&mut self, now_ms: u64, ms: u64) -> bool {
        if self.spent_ms(now_ms).saturating_add(ms) > self.max_ms {
            return false;
        }
        self.waited_ms = self.spent_ms(now_ms) + ms;
        true
    }
}

/// Something sent and not yet answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct InFlight {
    since: Option<u64>,
}

impl InFlight {
    /// Claims the right to send at `now_ms`: `true` unless a claim younger
    /// than `take_over_ms` holds it (a claim older than that, or one the clock
    /// stepped back more than that from, is presumed lost).
    pub fn claim(&mut self, now_ms: u64, take_over_ms: u64) -> bool {
        match self.since {
            Some(t) if now_ms.abs_diff(t) < take_over_ms => false,
            _ => {
                self.since = Some(now_ms);
                true
            }
        }
    }

    /// Marks it sent at `now_ms` whatever was in flight.
    pub fn start(&mut self, now_ms: u64) {
        self.since = Some(now_ms);
    }

    /// Its answer (or failure) arrived.
    pub fn done(&mut self) {
        self.since = None;
    }

    /// Whether something is in flight.
    pub fn is_busy(&self) -> bool {
        self.since.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_735_689_600_000;

    #[test]
    fn a_budget_counts_asked_waits_when_the_clock_stands_still_or_steps_back() {
        let mut b = WaitBudget::new(T, 1_000);
        // The clock never moves (a Worker while code runs): asked waits count.
        for _ in 0..500 {
            assert!(b.wait(T, 2));
        }
        assert!(!b.wait(T, 1));
        assert_eq!(b.remaining_ms(T), 0);
        // The clock stepped back 60 s: still only what was asked.
        let mut b = WaitBudget::new(T, 1_000);
        assert!(b.wait(T - 60_000, 600));
        assert!(!b.wait(T - 60_000, 401));
        // The clock moves faster than the waits asked (slow timers): it counts.
        let mut b = WaitBudget::new(T, 1_000);
        assert!(b.wait(T, 1));
        assert!(!b.wait(T + 999, 2));
        assert_eq!(b.remaining_ms(T + 999), 1);
    }

    #[test]
    fn in_flight_is_taken_over_after_its_time_or_a_large_clock_step() {
        let mut f = InFlight::default();
        assert!(f.claim(T, 3_000));
        assert!(!f.claim(T + 2_999, 3_000));
        assert!(
            !f.claim(T - 5, 3_000),
            "a small step back keeps it in flight"
        );
        assert!(
            f.claim(T - 60_000, 3_000),
            "a large step back presumes it lost"
        );
        assert!(!f.claim(T - 59_000, 3_000));
        assert!(f.claim(T - 57_000, 3_000));
        f.done();
        assert!(!f.is_busy());
        assert!(f.claim(T, 3_000));
    }
}
