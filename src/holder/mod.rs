//! The lease holder's side of snowflake mode: a node that mints IDs under a
//! worker ID leased from a [`Registry`](crate::registry::Registry). Every rule such a
//! node follows lives here, once; the Worker's isolates and the npm package's
//! `EdgeleafClient.snowflake()` only carry its requests and answers.
//!
//! The rules:
//! - lease on first use, offering the last grant as proof, so a restarted
//!   node gets its worker ID back;
//! - renew once half the TTL has passed (again at most every second while the
//!   registry does not answer); a late answer for an older grant is ignored;
//! - never mint once the lease lapsed by the node's clock (less
//!   `max_borrow_ms`, so no borrowed ID reaches its end), or once a renewal
//!   was refused; then either lease again or stay stopped (configuration);
//! - mint only after `max(issue_after_ms, everything this holder issued, the
//!   epoch)`, so no ID repeats one of an earlier holder or of this one;
//! - a holder restored from saved state refuses a clock behind the saved last
//!   timestamp, and issues only after the moment it was restored (its previous
//!   incarnation may have issued past what it saved);
//! - a holder that saves its state (`reserve_ms` > 0) mints only below a
//!   reserved timestamp its store has saved, and asks for a later one about
//!   every third of `reserve_ms`: a restart resumes after the reservation, so
//!   a store written a while ago cannot let it repeat IDs even under a clock
//!   that went back across the restart;
//! - mint only under a grant the registry answered: a saved lease is proof
//!   to offer, never a lease to mint under (another process started from
//!   the same store may hold it).
//!
//! Like the generator, the holder reads no clock and does no I/O: `now_ms`
//! comes in, and what to do next goes out as a value.

mod config;
mod grant;
mod poll;
mod renew;
mod save;
#[cfg(test)]
mod tests;

pub use crate::lease::{LeaseAsk, Renewal};
pub use config::{HolderConfig, DEFAULT_RESERVE_MS, MAX_RESERVE_MS, RENEW_RETRY_MS};
pub use grant::Grant;
pub use poll::{HolderNext, HolderPoll};
pub use save::{HolderState, SavedLease, SAVE_POLL_MS, SAVE_RETRY_MAX_MS, SAVE_RETRY_MIN_MS};

use crate::error::{check_range, Error};
use crate::rand::{NoRandom, RandSource};
use crate::snowflake::{SnowflakeGenerator, MAX_TOLERANCE_MS};
use crate::wait::InFlight;

/// What a holder may lend ([`SnowflakeHolder::lendable`]): IDs of
/// `worker_id` in time units starting in `from_ms..until_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lendable {
    /// The worker ID.
    pub worker_id: u32,
    /// The first unit's start, Unix ms.
    pub from_ms: u64,
    /// Units starting at or after this are not lendable, Unix ms.
    pub until_ms: u64,
}

#[derive(Debug, Clone)]
enum Phase<R: RandSource> {
    Idle,
    Holding {
        grant: Grant,
        gen: SnowflakeGenerator<R>,
        /// The first instant an ID may be minted at (Unix ms).
        first_ms: u64,
        /// How far ahead of the clock `first_ms` was when the grant came:
        /// the registry may ask a node to wait for another node's floor a
        /// little ahead of its clock (within the skew bound).
        granted_wait_ms: u64,
        /// A renewal is in flight since, or failed and may be retried after.
        renew_not_before: u64,
        renewing: InFlight,
    },
    Stopped(Error),
}

/// A snowflake generator under a leased worker ID.
///
/// ```
/// use edgeleaf::holder::{Grant, HolderConfig, HolderNext, SnowflakeHolder};
/// use edgeleaf::Layout;
///
/// let now = 1_700_000_000_000;
/// let mut holder = SnowflakeHolder::new(HolderConfig::default())?;
/// let mut out = [0u64; 2];
/// let HolderNext::Lease(ask) = holder.poll(now, &mut out)?.next else { unreachable!() };
/// // ... send `ask` to the registry; it answers:
/// let grant = Grant { worker_id: 3, generation: 1, expires_at_ms: now + 60_000,
///                     issue_after_ms: 0, ttl_ms: 60_000, layout: Layout::LEAF,
///                     secret: None };
/// holder.granted(grant, now)?;
/// assert_eq!(holder.poll(now, &mut out)?.filled, 2);
/// assert_eq!(Layout::LEAF.decompose(out[0])?.worker_id, 3);
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SnowflakeHolder<R: RandSource + Clone = NoRandom> {
    config: HolderConfig,
    phase: Phase<R>,
    /// Each grant's generator starts from a copy of this; it is stepped
    /// after each copy so that no two grants share a stream.
    rand: R,
    /// Every ID this holder (and, once restored, its previous incarnations)
    /// issued lies in a time unit starting at or before this.
    floor_ms: u64,
    saved: Option<SavedLease>,
    leasing: InFlight,
    /// The reservation the store has saved: mint below it (with `reserve_ms`).
    reserved_ms: u64,
    saving: InFlight,
    /// When the latest save was asked for, and how many failed in a row
    /// since the last that succeeded: a store that keeps failing is asked
    /// again after a growing pause, not on every timer.
    save_asked_ms: u64,
    save_failures: u32,
}

impl SnowflakeHolder<NoRandom> {
    /// A holder whose sequences start at 0.
    ///
    /// # Errors
    /// As [`SnowflakeHolder::with_rand`].
    pub fn new(config: HolderConfig) -> Result<Self, Error> {
        Self::with_rand(config, NoRandom)
    }
}

impl<R: RandSource + Clone> SnowflakeHolder<R> {
    /// A holder with no lease yet.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a `max_backward_ms` or `max_borrow_ms` above
    /// 60,000, a `take_over_ms` outside 1..=60,000, or a `reserve_ms` above
    /// 60,000 ([`MAX_RESERVE_MS`] for a holder that only lends).
    pub fn with_rand(config: HolderConfig, rand: R) -> Result<Self, Error> {
        check_range(
            "max_backward_ms",
            config.max_backward_ms,
            0,
            MAX_TOLERANCE_MS,
        )?;
        check_range("max_borrow_ms", config.max_borrow_ms, 0, MAX_TOLERANCE_MS)?;
        check_range("take_over_ms", config.take_over_ms, 1, MAX_TOLERANCE_MS)?;
        let most_ahead = if config.lends_only {
            MAX_RESERVE_MS
        } else {
            MAX_TOLERANCE_MS
        };
        check_range("reserve_ms", config.reserve_ms, 0, most_ahead)?;
        Ok(SnowflakeHolder {
            config,
            phase: Phase::Idle,
            rand,
            floor_ms: 0,
            saved: None,
            leasing: InFlight::default(),
            reserved_ms: 0,
            saving: InFlight::default(),
            save_asked_ms: 0,
            save_failures: 0,
        })
    }

    /// The start of the latest time unit issued, Unix ms (0: none).
    pub fn last_timestamp_ms(&self) -> u64 {
        match &self.phase {
            Phase::Holding { gen, .. } => self.floor_ms.max(gen.state().last_ms),
            _ => self.floor_ms,
        }
    }

    /// What this holder may lend to others at `now_ms` (a minter's rights
    /// holder, [`RightLedger`](crate::minted::RightLedger)): its worker ID,
    /// for time units starting at or after its first mintable instant and
    /// before both its lease's expiry and (with `reserve_ms`) the
    /// reservation its store has saved — what it could mint itself. `None`
    /// without a lease, or once it lapsed by `now_ms`.
    pub fn lendable(&self, now_ms: u64) -> Option<Lendable> {
        let Phase::Holding {
            grant, first_ms, ..
        } = &self.phase
        else {
            return None;
        };
        if now_ms >= grant.expires_at_ms {
            return None;
        }
        let until_ms = if self.config.reserve_ms > 0 {
            grant.expires_at_ms.min(self.reserved_ms)
        } else {
            grant.expires_at_ms
        };
        Some(Lendable {
            worker_id: grant.worker_id,
            from_ms: *first_ms,
            until_ms,
        })
    }

    /// Records that time units before `until_ms` were lent (as if issued):
    /// the holder's last timestamp, what its renewals report and what it
    /// saves, covers them, so a later lease of this holder, and the
    /// registry's floor for the next holder, start after them. (A holder
    /// that only lends, [`HolderConfig::lends_only`], reports at most its
    /// clock + [`MAX_TOLERANCE_MS`] in renewals: what it lent past that
    /// lies before an expiry the registry recorded as the ID's floor.)
    pub fn lent_until(&mut self, until_ms: u64) {
        self.floor_ms = self.floor_ms.max(until_ms);
    }

    /// The lease minted under now, if any.
    pub fn lease(&self) -> Option<&Grant> {
        match &self.phase {
            Phase::Holding { grant, .. } => Some(grant),
            _ => None,
        }
    }

    /// Why the holder stopped, once it has.
    pub fn stopped(&self) -> Option<&Error> {
        match &self.phase {
            Phase::Stopped(e) => Some(e),
            _ => None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &HolderConfig {
        &self.config
    }

    /// Ends the current lease: lease again, or stop with `why`.
    fn lose(&mut self, why: Error) {
        self.floor_ms = self.last_timestamp_ms();
        self.phase = if self.config.lease_again {
            Phase::Idle
        } else {
            Phase::Stopped(why)
        };
    }
}
