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
//! - A call to a store (a Durable Object) is raced against what is left of
//!   the request's budget; when it fails, [`after_call_failed`] says whether
//!   to call again and after how long: a store that says it is overloaded is
//!   never asked again at once (that adds to its load), a failure the
//!   platform marks retryable is, within the budget, after a jittered
//!   backoff, and the request answers 503 with `Retry-After` otherwise.

/// The longest one request waits in all (for the sequence, a clock a little
/// behind, another request's load or fetch) before it answers 503 with
/// `Retry-After`.
pub const MAX_WAIT_MS: u64 = 1_000;

/// How often a request waiting on something another request sent (a
/// segment load, a batch fetch, a lease), or told to ask again after a
/// moment (a minter's time unit used up), looks again.
pub const POLL_MS: u64 = 2;

/// The longest a call made outside any request to the service waits (an
/// object's own call to another, a background load): nobody is waiting on
/// it within a second, and cutting it short would lose what the callee did
/// (a minter's lease from the registry), so it is given longer — still a
/// bound.
pub const MAX_BACKGROUND_WAIT_MS: u64 = 10_000;

/// A request marked in flight this long is presumed lost and may be sent again.
pub const DEFAULT_TAKE_OVER_MS: u64 = 3_000;

/// How long a request that could not be answered in time, or whose store
/// failed, tells its caller to wait before asking again (`Retry-After`).
pub const RETRY_AFTER_MS: u64 = 1_000;

/// A request calls a store at most this many times for one answer.
pub const MAX_CALL_ATTEMPTS: u32 = 4;

/// The backoff before the first retry is 1/2 to 1 times this; it doubles
/// with each retry.
pub const RETRY_BACKOFF_MS: u64 = 25;

/// A call is sent again only if at least this much of the budget is left
/// once its backoff is waited: less would end in a 503 anyway.
pub const MIN_CALL_MS: u64 = 50;

/// One request's waiting so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitBudget {
    started_ms: u64,
    waited_ms: u64,
    max_ms: u64,
}

impl WaitBudget {
    /// The budget of one request to the service, started at `now_ms`:
    /// [`MAX_WAIT_MS`] in all, for everything it waits for (its stores'
    /// answers included).
    pub const fn for_request(now_ms: u64) -> Self {
        Self::new(now_ms, MAX_WAIT_MS)
    }

    /// The budget of a call made outside any request to the service (an
    /// object's own call to another, a background load), started at
    /// `now_ms`: [`MAX_BACKGROUND_WAIT_MS`].
    pub const fn for_background(now_ms: u64) -> Self {
        Self::new(now_ms, MAX_BACKGROUND_WAIT_MS)
    }

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

    /// The most this request may wait in all.
    pub fn max_ms(&self) -> u64 {
        self.max_ms
    }
}

/// How a call to a store failed, as far as calling again goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    /// The store is overloaded (Cloudflare's `overloaded` error property):
    /// calling again would add to the load that made it fail.
    Overloaded,
    /// A failure the platform marks `retryable` (the call did not reach the
    /// store, or its connection dropped): calling again may work.
    Retryable,
    /// Anything else: not known to mend by calling again at once.
    Other,
}

/// What a request does after a call to a store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum AfterFailure {
    /// Wait `after_ms` (counted in the budget), then call again.
    Retry {
        /// The backoff, ms.
        after_ms: u64,
    },
    /// Answer now: 503 with this `Retry-After`.
    GiveUp {
        /// When asking again may help, ms.
        retry_after_ms: u64,
    },
}

/// After the `attempts`-th call (1 for the first) to a store failed with
/// `failure`, with `remaining_ms` of the request's budget left and `rand`
/// random bits: call again, or answer now. `repeatable`: whether the call
/// may be made twice — a failure the platform marks retryable may still
/// have run it, so a call whose second run would lose or undo what the
/// first did (a lease whose secret only its answer carries, a key made, a
/// conditional write, a release) is never made again.
///
/// - [`CallFailure::Overloaded`]: never called again; the request answers at
///   once, with a `Retry-After` of 1 to 3 × [`RETRY_AFTER_MS`] (drawn from
///   `rand`, so that the callers turned away do not all come back at once).
/// - [`CallFailure::Retryable`]: called again after a backoff of 1/2 to 1
///   times `RETRY_BACKOFF_MS · 2^(attempts−1)` (drawn from `rand`), if fewer
///   than [`MAX_CALL_ATTEMPTS`] calls were made and at least [`MIN_CALL_MS`]
///   of the budget is left after the backoff; else the request answers.
/// - [`CallFailure::Other`]: the request answers at once.
pub fn after_call_failed(
    failure: CallFailure,
    repeatable: bool,
    attempts: u32,
    remaining_ms: u64,
    rand: u64,
) -> AfterFailure {
    let give_up = |retry_after_ms| AfterFailure::GiveUp { retry_after_ms };
    match failure {
        CallFailure::Overloaded => give_up(RETRY_AFTER_MS + rand % (2 * RETRY_AFTER_MS + 1)),
        CallFailure::Other => give_up(RETRY_AFTER_MS),
        CallFailure::Retryable => {
            if !repeatable || attempts >= MAX_CALL_ATTEMPTS {
                return give_up(RETRY_AFTER_MS);
            }
            let ceiling = retry_backoff_ceiling_ms(attempts);
            let floor = ceiling / 2;
            let after_ms = floor + rand % (ceiling - floor + 1);
            if after_ms.saturating_add(MIN_CALL_MS) > remaining_ms {
                give_up(RETRY_AFTER_MS)
            } else {
                AfterFailure::Retry { after_ms }
            }
        }
    }
}

/// After the `attempts`-th call (1 for the first) to the service was
/// answered "not now, ask again in `retry_after_ms`" (a 503 with
/// `Retry-After`), with `remaining_ms` of the caller's budget left: wait what
/// the service asked — never less, so that callers turned away do not come
/// back sooner than the service can take them — and call again, if fewer
/// than [`MAX_CALL_ATTEMPTS`] calls were made and at least [`MIN_CALL_MS`] of
/// the budget is left after the wait; else give up, passing the service's
/// `Retry-After` on.
pub fn after_told_to_wait(retry_after_ms: u64, attempts: u32, remaining_ms: u64) -> AfterFailure {
    if attempts < MAX_CALL_ATTEMPTS && retry_after_ms.saturating_add(MIN_CALL_MS) <= remaining_ms {
        AfterFailure::Retry {
            after_ms: retry_after_ms,
        }
    } else {
        AfterFailure::GiveUp { retry_after_ms }
    }
}

/// The longest backoff after the `attempts`-th call failed (1 for the
/// first): `RETRY_BACKOFF_MS · 2^(attempts−1)`.
pub fn retry_backoff_ceiling_ms(attempts: u32) -> u64 {
    RETRY_BACKOFF_MS << attempts.clamp(1, MAX_CALL_ATTEMPTS).saturating_sub(1)
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
    fn an_overloaded_store_is_never_called_again_and_a_retryable_failure_is_within_the_budget() {
        use AfterFailure::{GiveUp, Retry};
        // Overloaded: at once, whatever is left, with 1 to 3 s.
        assert_eq!(
            after_call_failed(CallFailure::Overloaded, true, 1, 1_000, 0),
            GiveUp {
                retry_after_ms: 1_000
            }
        );
        assert_eq!(
            after_call_failed(CallFailure::Overloaded, true, 1, 1_000, 2_000),
            GiveUp {
                retry_after_ms: 3_000
            }
        );
        // Retryable: 12..=25 ms, then 25..=50, 50..=100; not a 4th retry.
        assert_eq!(
            after_call_failed(CallFailure::Retryable, true, 1, 1_000, 0),
            Retry { after_ms: 12 }
        );
        assert_eq!(
            after_call_failed(CallFailure::Retryable, true, 1, 1_000, 13),
            Retry { after_ms: 25 }
        );
        assert_eq!(
            after_call_failed(CallFailure::Retryable, true, 3, 1_000, 50),
            Retry { after_ms: 100 }
        );
        assert_eq!(
            after_call_failed(CallFailure::Retryable, true, 4, 1_000, 0),
            GiveUp {
                retry_after_ms: 1_000
            }
        );
        // Not when the budget could not also hold the call.
        assert_eq!(
            after_call_failed(CallFailure::Retryable, true, 1, 12 + MIN_CALL_MS, 0),
            Retry { after_ms: 12 }
        );
        assert_eq!(
            after_call_failed(CallFailure::Retryable, true, 1, 11 + MIN_CALL_MS, 0),
            GiveUp {
                retry_after_ms: 1_000
            }
        );
        assert_eq!(
            after_call_failed(CallFailure::Other, true, 1, 1_000, 0),
            GiveUp {
                retry_after_ms: 1_000
            }
        );
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
