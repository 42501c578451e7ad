//! Minting: the IDs a poll writes, and what the caller does next.

use crate::error::Error;
use crate::rand::RandSource;
use crate::snowflake::Wait;

use super::{HolderConfig, LeaseAsk, Phase, Renewal, SnowflakeHolder, SAVE_POLL_MS};

/// What the caller does after a [`SnowflakeHolder::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum HolderNext {
    /// The buffer is full.
    Done,
    /// No lease: send this request, report the answer with
    /// [`SnowflakeHolder::granted`] or [`SnowflakeHolder::lease_failed`],
    /// and poll again.
    Lease(LeaseAsk),
    /// A lease request is in flight: poll again shortly.
    LeaseInFlight,
    /// Poll again after `ms` milliseconds.
    RetryAfter {
        /// Milliseconds, at least 1.
        ms: u64,
        /// Why.
        reason: Wait,
    },
}

/// The answer of [`SnowflakeHolder::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct HolderPoll {
    /// IDs written to the front of the buffer.
    pub filled: usize,
    /// Start this renewal now, in the background, and report its answer with
    /// [`SnowflakeHolder::renewed`] or [`SnowflakeHolder::renewal_failed`].
    pub renew: Option<Renewal>,
    /// What to do next.
    pub next: HolderNext,
}

impl<R: RandSource + Clone> SnowflakeHolder<R> {
    /// Up to `out.len()` IDs at clock reading `now_ms`, and what to do next.
    ///
    /// # Errors
    /// [`Error::LeaseExpired`] once the lease lapsed and [`Error::LeaseLost`]
    /// once a renewal was refused or the holder closed (unless it leases
    /// again); the generator's errors ([`Error::ClockMovedBackwards`], ...)
    /// when no ID was written.
    pub fn poll(&mut self, now_ms: u64, out: &mut [u64]) -> Result<HolderPoll, Error> {
        self.lose_if_lapsed(now_ms);
        // A holder that only lends mints nothing: see `HolderConfig::lends_only`.
        let out = if self.config.lends_only {
            &mut out[..0]
        } else {
            out
        };
        let take_over_ms = self.config.take_over_ms;
        match &mut self.phase {
            Phase::Stopped(e) => Err(e.clone()),
            Phase::Idle => {
                let next = if self.leasing.claim(now_ms, take_over_ms) {
                    HolderNext::Lease(LeaseAsk {
                        node_now_ms: now_ms,
                        previous: self.saved.map(|s| s.claim()),
                    })
                } else {
                    HolderNext::LeaseInFlight
                };
                Ok(HolderPoll {
                    filled: 0,
                    renew: None,
                    next,
                })
            }
            Phase::Holding {
                gen,
                first_ms,
                granted_wait_ms,
                grant,
                ..
            } => {
                let wait = Self::wait_to_mint(
                    &self.config,
                    self.reserved_ms,
                    now_ms,
                    *first_ms,
                    *granted_wait_ms,
                    grant.layout.unit_ms(),
                );
                if let Some((ms, reason)) = wait {
                    let renew = self.renewal(now_ms);
                    return Ok(HolderPoll {
                        filled: 0,
                        renew,
                        next: if out.is_empty() {
                            HolderNext::Done
                        } else {
                            HolderNext::RetryAfter { ms, reason }
                        },
                    });
                }
                let fill = gen.fill(now_ms, out)?;
                let next = match fill.retry_after {
                    Some((ms, reason)) if fill.filled < out.len() => {
                        HolderNext::RetryAfter { ms, reason }
                    }
                    _ => HolderNext::Done,
                };
                Ok(HolderPoll {
                    filled: fill.filled,
                    renew: self.renewal(now_ms),
                    next,
                })
            }
        }
    }

    /// Ends a lease that lapsed by `now_ms` (less what the holder may
    /// borrow).
    fn lose_if_lapsed(&mut self, now_ms: u64) {
        if let Phase::Holding { grant, .. } = &self.phase {
            // Borrowing mints up to `max_borrow_ms` ahead of the clock, so a
            // holder that borrows stops that much earlier: no ID at or past
            // the lease's end, where the next holder's floor may lie.
            if now_ms.saturating_add(self.config.max_borrow_ms) >= grant.expires_at_ms {
                // Never mint under a lapsed lease, whatever a late answer says.
                let why = Error::LeaseExpired {
                    worker_id: grant.worker_id,
                    expired_at_ms: grant.expires_at_ms,
                    now_ms,
                };
                self.lose(why);
            }
        }
    }

    /// How long a holder under a grant waits before it mints, and why
    /// (`None`: mint now). An associated function over the fields it reads,
    /// so that `poll` may hold the generator borrowed meanwhile.
    fn wait_to_mint(
        config: &HolderConfig,
        reserved_ms: u64,
        now_ms: u64,
        first_ms: u64,
        granted_wait_ms: u64,
        unit_ms: u64,
    ) -> Option<(u64, Wait)> {
        let reserve_ms = config.reserve_ms;
        // The first unit starts after the one holding the floor, so a
        // floor `reserve_ms` ahead is up to one unit more away.
        let patience = reserve_ms.max(config.max_backward_ms).max(granted_wait_ms) + unit_ms;
        if now_ms < first_ms && first_ms - now_ms <= patience {
            // Resuming after a timestamp a little ahead of the clock
            // (a saved reservation, or the floor the grant named):
            // wait for it.
            Some((first_ms - now_ms, Wait::ClockBehind))
        } else if reserve_ms > 0 && now_ms.saturating_add(config.max_borrow_ms) > reserved_ms {
            Some((SAVE_POLL_MS, Wait::Saving))
        } else {
            None
        }
    }
}
