//! Renewing the lease in the background, and giving it back.

use crate::code::ErrorCode;
use crate::error::Error;
use crate::rand::RandSource;
use crate::snowflake::MAX_TOLERANCE_MS;

use super::{Grant, Phase, Renewal, SnowflakeHolder, RENEW_RETRY_MS};

impl<R: RandSource + Clone> SnowflakeHolder<R> {
    /// The renewal to send now, if one is due and none is in flight (for
    /// callers that renew on a timer; [`SnowflakeHolder::poll`] calls it too).
    pub fn renewal(&mut self, now_ms: u64) -> Option<Renewal> {
        self.claim_renewal(now_ms, true)
    }

    /// A renewal to send now even if it is not due yet (an owner's "renew
    /// now"), unless one is in flight.
    pub fn renewal_now(&mut self, now_ms: u64) -> Option<Renewal> {
        self.claim_renewal(now_ms, false)
    }

    fn claim_renewal(&mut self, now_ms: u64, only_when_due: bool) -> Option<Renewal> {
        let mut last_timestamp_ms = self.last_timestamp_ms();
        if self.config.lends_only {
            // What it lent may lie minutes ahead, past what any registry
            // accepts as reported; every right ends by the lease's expiry,
            // which a lender's registry records as the worker ID's floor
            // (`HolderConfig::lends_only`).
            last_timestamp_ms = last_timestamp_ms.min(now_ms.saturating_add(MAX_TOLERANCE_MS));
        }
        let take_over_ms = self.config.take_over_ms;
        let Phase::Holding {
            grant,
            renew_not_before,
            renewing,
            ..
        } = &mut self.phase
        else {
            return None;
        };
        let due = now_ms >= grant.renew_at_ms().max(*renew_not_before);
        if (only_when_due && !due)
            || now_ms >= grant.expires_at_ms
            || !renewing.claim(now_ms, take_over_ms)
        {
            return None;
        }
        Some(Renewal {
            claim: grant.claim(),
            node_now_ms: now_ms,
            last_timestamp_ms,
        })
    }

    /// Milliseconds until the next renewal is due (0: now), or `None` when
    /// there is no lease to renew.
    pub fn renew_due_in(&self, now_ms: u64) -> Option<u64> {
        match &self.phase {
            Phase::Holding {
                grant,
                renew_not_before,
                ..
            } => Some(
                grant
                    .renew_at_ms()
                    .max(*renew_not_before)
                    .saturating_sub(now_ms),
            ),
            _ => None,
        }
    }

    /// The registry renewed the lease.
    pub fn renewed(&mut self, renewed: Grant, _now_ms: u64) {
        if let Phase::Holding {
            grant,
            renewing,
            renew_not_before,
            ..
        } = &mut self.phase
        {
            if grant.generation == renewed.generation && grant.worker_id == renewed.worker_id {
                // The layout stays the one minted under.
                grant.expires_at_ms = renewed.expires_at_ms.max(grant.expires_at_ms);
                grant.ttl_ms = renewed.ttl_ms;
                renewing.done();
                *renew_not_before = 0;
                if let Some(s) = &mut self.saved {
                    s.expires_at_ms = grant.expires_at_ms;
                    s.ttl_ms = grant.ttl_ms;
                }
            }
        }
    }

    /// A renewal of `generation` failed: `cause` is the registry's answer, or
    /// `None` when it did not answer. A refusal (the lease is held by a newer
    /// grant, lapsed, or the node's clock was refused) ends the lease at once;
    /// anything else is retried after [`RENEW_RETRY_MS`], and the lease still
    /// lapses on time if no renewal ever gets through.
    pub fn renewal_failed(&mut self, generation: u64, cause: Option<ErrorCode>, now_ms: u64) {
        let Phase::Holding {
            grant,
            renewing,
            renew_not_before,
            ..
        } = &mut self.phase
        else {
            return;
        };
        if grant.generation != generation {
            return;
        }
        renewing.done();
        let refused = matches!(
            cause,
            Some(
                ErrorCode::LeaseNotHeld
                    | ErrorCode::LeaseExpired
                    | ErrorCode::ClockSkew
                    | ErrorCode::ClockBehindLastReport
            )
        );
        if refused {
            let why = Error::LeaseLost {
                worker_id: grant.worker_id,
                generation,
                cause,
            };
            self.lose(why);
        } else {
            *renew_not_before = now_ms.saturating_add(RENEW_RETRY_MS);
        }
    }

    /// Stops for good: the release to send (if a lease was held), after
    /// which every poll answers [`Error::LeaseLost`]. Save
    /// [`SnowflakeHolder::state`] first.
    pub fn close(&mut self, now_ms: u64) -> Option<Renewal> {
        let release = self.lease().map(|g| Renewal {
            claim: g.claim(),
            node_now_ms: now_ms,
            last_timestamp_ms: self.last_timestamp_ms(),
        });
        let (worker_id, generation) = self.saved.map_or((0, 0), |s| (s.worker_id, s.generation));
        self.floor_ms = self.last_timestamp_ms();
        // Closed: nothing more will be minted, so the exact last timestamp
        // is saved and a restart need not wait out the reservation.
        self.reserved_ms = 0;
        self.phase = Phase::Stopped(Error::LeaseLost {
            worker_id,
            generation,
            cause: None,
        });
        release
    }
}
