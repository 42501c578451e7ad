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

use crate::code::ErrorCode;
use crate::error::{check_range, Error};
use crate::layout::Layout;
pub use crate::lease::{LeaseAsk, Renewal};
use crate::rand::{NoRandom, RandSource};
use crate::secret::{Claim, LeaseSecret};
use crate::snowflake::{SnowflakeConfig, SnowflakeGenerator, Wait, MAX_TOLERANCE_MS};
use crate::wait::{InFlight, DEFAULT_TAKE_OVER_MS};

/// The pause before a failed save is asked again (doubling with each
/// failure in a row).
pub const SAVE_RETRY_MIN_MS: u64 = 50;
/// The longest pause between attempts to save to a failing store.
pub const SAVE_RETRY_MAX_MS: u64 = 1_000;

/// After a renewal that got no answer, the next try waits this long.
pub const RENEW_RETRY_MS: u64 = 1_000;
/// How far ahead a holder with a store reserves (a restart waits at most this).
pub const DEFAULT_RESERVE_MS: u64 = 3_000;
/// While waiting for a save, poll again after this long.
pub const SAVE_POLL_MS: u64 = 5;

/// A lease as the holder needs it: the registry's grant or renewal, and the
/// layout to mint under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct Grant {
    /// The worker ID to stamp into IDs.
    pub worker_id: u32,
    /// The fencing token of the grant.
    pub generation: u64,
    /// Stop minting at this instant (node clock) unless renewed.
    pub expires_at_ms: u64,
    /// Mint only IDs whose time unit starts after this (Unix ms).
    pub issue_after_ms: u64,
    /// The lease's time to live.
    pub ttl_ms: u64,
    /// The layout of the IDs.
    pub layout: Layout,
    /// The grant's secret, which renewals, the release and a restart's
    /// reclaim present (`None`: a grant from before secrets).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub secret: Option<LeaseSecret>,
}

impl Grant {
    /// A registry [`Lease`](crate::lease::Lease) under `layout`, with the secret
    /// the registry's host answered with it (a renewal's answer has none:
    /// the holder keeps the one it has).
    #[cfg(feature = "alloc")]
    pub fn from_lease(
        lease: &crate::lease::Lease,
        secret: Option<LeaseSecret>,
        layout: Layout,
    ) -> Grant {
        Grant {
            worker_id: lease.worker_id,
            generation: lease.generation,
            expires_at_ms: lease.expires_at_ms,
            issue_after_ms: lease.issue_after_ms,
            ttl_ms: lease.ttl_ms,
            layout,
            secret,
        }
    }

    /// What this grant's holder presents to the registry.
    pub fn claim(&self) -> Claim {
        Claim {
            worker_id: self.worker_id,
            generation: self.generation,
            secret: self.secret,
        }
    }

    /// When to renew: half the TTL before the lease ends.
    pub fn renew_at_ms(&self) -> u64 {
        self.expires_at_ms.saturating_sub(self.ttl_ms / 2)
    }
}

/// What a holder saves to restart safely (Leaf's local cache, with the fix:
/// the last timestamp is kept and checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct HolderState {
    /// The start of the latest time unit issued (or reserved), Unix ms.
    pub last_timestamp_ms: u64,
    /// The last grant: proof for the registry (never minted under without
    /// the registry's answer).
    pub lease: Option<SavedLease>,
}

/// The last grant, as saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct SavedLease {
    /// The worker ID.
    pub worker_id: u32,
    /// The grant's generation.
    pub generation: u64,
    /// When it lapses, Unix ms.
    pub expires_at_ms: u64,
    /// Its TTL.
    pub ttl_ms: u64,
    /// Its layout (kept for stores written when a saved lease could be
    /// minted under while the registry was unreachable; it no longer is).
    pub layout: Option<Layout>,
    /// Its secret: what proves the node holds it (`None`: saved before
    /// grants had secrets; it proves nothing then).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub secret: Option<LeaseSecret>,
}

impl SavedLease {
    /// What the node presents for it.
    pub fn claim(&self) -> Claim {
        Claim {
            worker_id: self.worker_id,
            generation: self.generation,
            secret: self.secret,
        }
    }
}

/// How a holder mints and what it does after losing its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct HolderConfig {
    /// As [`SnowflakeConfig::max_backward_ms`].
    pub max_backward_ms: u64,
    /// As [`SnowflakeConfig::sequence_start_bound`]; `None`: the layout's default.
    pub sequence_start_bound: Option<u32>,
    /// As [`SnowflakeConfig::max_borrow_ms`].
    pub max_borrow_ms: u64,
    /// After a lapse or a refused renewal: ask for a new lease (true), or stay
    /// stopped and answer the error to every call (false).
    pub lease_again: bool,
    /// A lease or renewal in flight longer than this is presumed lost.
    pub take_over_ms: u64,
    /// For holders whose state is saved (a store): mint only below a
    /// timestamp reserved this far ahead and saved first (0: no reservation,
    /// for holders that never restore). A restart waits at most this long.
    pub reserve_ms: u64,
}

impl Default for HolderConfig {
    fn default() -> Self {
        HolderConfig {
            max_backward_ms: crate::snowflake::DEFAULT_MAX_BACKWARD_MS,
            sequence_start_bound: None,
            max_borrow_ms: 0,
            lease_again: false,
            take_over_ms: DEFAULT_TAKE_OVER_MS,
            reserve_ms: 0,
        }
    }
}

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
    /// 60,000, or a `take_over_ms` outside 1..=60,000.
    pub fn with_rand(config: HolderConfig, rand: R) -> Result<Self, Error> {
        check_range(
            "max_backward_ms",
            config.max_backward_ms,
            0,
            MAX_TOLERANCE_MS,
        )?;
        check_range("max_borrow_ms", config.max_borrow_ms, 0, MAX_TOLERANCE_MS)?;
        check_range("take_over_ms", config.take_over_ms, 1, MAX_TOLERANCE_MS)?;
        check_range("reserve_ms", config.reserve_ms, 0, MAX_TOLERANCE_MS)?;
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

    /// A holder restarted from saved state at clock reading `now_ms`. It
    /// offers the saved grant as proof when it leases, and issues only after
    /// `now_ms`: its previous incarnation may have issued up to the moment it
    /// died, past what it saved.
    ///
    /// A saved reservation up to `reserve_ms` ahead of the clock is waited
    /// for, not refused.
    ///
    /// # Errors
    /// As [`SnowflakeHolder::with_rand`]; [`Error::ClockBehindLastReport`]
    /// when the clock is behind the saved last timestamp by more than
    /// `reserve_ms` (it went back: minting now could repeat IDs issued before).
    pub fn restore(
        config: HolderConfig,
        rand: R,
        state: HolderState,
        now_ms: u64,
    ) -> Result<Self, Error> {
        if now_ms.saturating_add(config.reserve_ms) < state.last_timestamp_ms {
            return Err(Error::ClockBehindLastReport {
                worker_id: state.lease.map(|l| l.worker_id),
                last_timestamp_ms: state.last_timestamp_ms,
                node_now_ms: now_ms,
            });
        }
        let mut holder = Self::with_rand(config, rand)?;
        holder.floor_ms = now_ms.max(state.last_timestamp_ms);
        holder.saved = state.lease;
        Ok(holder)
    }

    /// What to save: the last timestamp (or the saved reservation, if later)
    /// and the last grant. Holders with `reserve_ms` save what
    /// [`SnowflakeHolder::save_request`] gives instead.
    pub fn state(&self) -> HolderState {
        HolderState {
            last_timestamp_ms: self.last_timestamp_ms().max(self.reserved_ms),
            lease: self.saved,
        }
    }

    /// The state to save now, with a reservation `reserve_ms` ahead, while
    /// holding a lease; `None` while another save is in flight. Report the
    /// outcome with [`SnowflakeHolder::saved`] or
    /// [`SnowflakeHolder::save_failed`].
    pub fn save_request(&mut self, now_ms: u64) -> Option<HolderState> {
        if !self.saving.claim(now_ms, self.config.take_over_ms) {
            return None;
        }
        self.save_asked_ms = now_ms;
        let mut state = self.state();
        if self.config.reserve_ms > 0 && self.lease().is_some() {
            // `reserve_ms` ahead of the clock, and never below what is already
            // reserved (a restart's floor included): the timer extends it
            // before the clock gets there, and two quick restarts in a row
            // each find a reservation at most `reserve_ms` ahead.
            state.last_timestamp_ms = state
                .last_timestamp_ms
                .max(now_ms.saturating_add(self.config.reserve_ms));
        }
        Some(state)
    }

    /// The store saved `state` (from [`SnowflakeHolder::save_request`]).
    pub fn saved(&mut self, state: &HolderState) {
        self.saving.done();
        self.save_failures = 0;
        if self.config.reserve_ms > 0 && self.stopped().is_none() {
            self.reserved_ms = self.reserved_ms.max(state.last_timestamp_ms);
        }
    }

    /// The store failed to save; [`SnowflakeHolder::save_due_in`] asks
    /// again after [`SAVE_RETRY_MIN_MS`], doubling with each failure in a row
    /// up to [`SAVE_RETRY_MAX_MS`].
    pub fn save_failed(&mut self) {
        self.saving.done();
        self.save_failures = self.save_failures.saturating_add(1);
    }

    /// Milliseconds until the reservation should be extended (0: now), or
    /// `None` without a reservation to keep.
    pub fn save_due_in(&self, now_ms: u64) -> Option<u64> {
        if self.config.reserve_ms == 0 || self.lease().is_none() {
            return None;
        }
        let mut due = self
            .reserved_ms
            .saturating_sub(self.config.reserve_ms * 2 / 3);
        if self.save_failures > 0 {
            let pause = SAVE_RETRY_MIN_MS
                .saturating_mul(1 << (self.save_failures - 1).min(16))
                .min(SAVE_RETRY_MAX_MS);
            due = due.max(self.save_asked_ms.saturating_add(pause));
        }
        Some(due.saturating_sub(now_ms))
    }

    /// The start of the latest time unit issued, Unix ms (0: none).
    pub fn last_timestamp_ms(&self) -> u64 {
        match &self.phase {
            Phase::Holding { gen, .. } => self.floor_ms.max(gen.state().last_ms),
            _ => self.floor_ms,
        }
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

    /// Up to `out.len()` IDs at clock reading `now_ms`, and what to do next.
    ///
    /// # Errors
    /// [`Error::LeaseExpired`] once the lease lapsed and [`Error::LeaseLost`]
    /// once a renewal was refused or the holder closed (unless it leases
    /// again); the generator's errors ([`Error::ClockMovedBackwards`], ...)
    /// when no ID was written.
    pub fn poll(&mut self, now_ms: u64, out: &mut [u64]) -> Result<HolderPoll, Error> {
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
                let reserve_ms = self.config.reserve_ms;
                // The first unit starts after the one holding the floor, so a
                // floor `reserve_ms` ahead is up to one unit more away.
                let patience = reserve_ms
                    .max(self.config.max_backward_ms)
                    .max(*granted_wait_ms)
                    + grant.layout.unit_ms();
                let wait = if now_ms < *first_ms && *first_ms - now_ms <= patience {
                    // Resuming after a timestamp a little ahead of the clock
                    // (a saved reservation, or the floor the grant named):
                    // wait for it.
                    Some((*first_ms - now_ms, Wait::ClockBehind))
                } else if reserve_ms > 0
                    && now_ms.saturating_add(self.config.max_borrow_ms) > self.reserved_ms
                {
                    Some((SAVE_POLL_MS, Wait::Saving))
                } else {
                    None
                };
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
        let last_timestamp_ms = self.last_timestamp_ms();
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

    /// The registry granted a lease (answer to [`HolderNext::Lease`]).
    ///
    /// # Errors
    /// As [`SnowflakeGenerator::resume_after`] for a grant the layout cannot
    /// mint under (a worker ID outside it, a time past its end);
    /// [`Error::LeaseExpired`] for a grant that lapsed before it arrived.
    /// The holder then has no lease, and the next poll asks for one.
    pub fn granted(&mut self, grant: Grant, now_ms: u64) -> Result<(), Error> {
        self.leasing.done();
        if !matches!(self.phase, Phase::Idle) {
            // Already holding (a taken-over request answered late), or
            // stopped: the extra grant lapses unused.
            return Ok(());
        }
        if now_ms >= grant.expires_at_ms {
            return Err(Error::LeaseExpired {
                worker_id: grant.worker_id,
                expired_at_ms: grant.expires_at_ms,
                now_ms,
            });
        }
        let mut cfg = SnowflakeConfig::new(grant.layout, grant.worker_id);
        cfg.max_backward_ms = self.config.max_backward_ms;
        cfg.max_borrow_ms = self.config.max_borrow_ms;
        if let Some(bound) = self.config.sequence_start_bound {
            cfg.sequence_start_bound = bound;
        }
        let after = grant
            .issue_after_ms
            .max(self.floor_ms)
            .max(grant.layout.epoch_ms());
        let gen = SnowflakeGenerator::resume_after(cfg, self.rand.clone(), after)?;
        self.rand.next_u32();
        let layout = grant.layout;
        let first_ms = layout
            .tick(after)
            .map_or(after, |t| layout.tick_start_ms(t.saturating_add(1)));
        self.saved = Some(SavedLease {
            worker_id: grant.worker_id,
            generation: grant.generation,
            expires_at_ms: grant.expires_at_ms,
            ttl_ms: grant.ttl_ms,
            layout: Some(grant.layout),
            secret: grant.secret,
        });
        self.phase = Phase::Holding {
            grant,
            gen,
            first_ms,
            granted_wait_ms: first_ms.saturating_sub(now_ms),
            renew_not_before: 0,
            renewing: InFlight::default(),
        };
        Ok(())
    }

    /// A lease request failed: `cause` is the registry's refusal, or `None`
    /// when it did not answer. Either way the holder holds no lease, and the
    /// next poll asks again. A saved lease is never minted under without
    /// the registry's answer: a store may be shared by two processes (one
    /// config, one file), and the other one may hold that lease now.
    pub fn lease_failed(&mut self, cause: Option<ErrorCode>, now_ms: u64) {
        let _ = (cause, now_ms);
        self.leasing.done();
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

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_735_689_600_000;

    fn grant(generation: u64, now: u64) -> Grant {
        Grant {
            worker_id: 7,
            generation,
            expires_at_ms: now + 10_000,
            issue_after_ms: 0,
            ttl_ms: 10_000,
            layout: Layout::LEAF,
            secret: Some(LeaseSecret::from_random([9; 16])),
        }
    }

    fn holding(config: HolderConfig) -> SnowflakeHolder {
        let mut h = SnowflakeHolder::new(config).unwrap();
        assert!(matches!(
            h.poll(T, &mut []).unwrap().next,
            HolderNext::Lease(_)
        ));
        h.granted(grant(1, T), T).unwrap();
        h
    }

    fn one(h: &mut SnowflakeHolder, now: u64) -> Result<HolderPoll, Error> {
        h.poll(now, &mut [0u64; 1])
    }

    #[test]
    fn leases_once_on_first_use_and_waits_for_the_answer() {
        let mut h = SnowflakeHolder::new(HolderConfig::default()).unwrap();
        let p = one(&mut h, T).unwrap();
        assert_eq!(
            p.next,
            HolderNext::Lease(LeaseAsk {
                node_now_ms: T,
                previous: None
            })
        );
        assert_eq!(one(&mut h, T + 1).unwrap().next, HolderNext::LeaseInFlight);
        // The answer never came: after the take-over time, ask again.
        assert!(matches!(
            one(&mut h, T + DEFAULT_TAKE_OVER_MS).unwrap().next,
            HolderNext::Lease(_)
        ));
    }

    #[test]
    fn renews_at_half_the_ttl_and_stops_at_the_lapse() {
        let mut h = holding(HolderConfig::default());
        assert_eq!(one(&mut h, T).unwrap().renew, None);
        // Asked for before it is due, it is sent; its answer clears it.
        let early = h.renewal_now(T + 1).unwrap();
        h.renewed(grant(early.claim.generation, T), T + 2);
        let r = one(&mut h, T + 5_000).unwrap().renew.unwrap();
        assert_eq!((r.claim.worker_id, r.claim.generation), (7, 1));
        // One renewal in flight at a time, even when asked for.
        assert_eq!(one(&mut h, T + 5_001).unwrap().renew, None);
        assert_eq!(h.renewal_now(T + 5_002), None);
        // No answer, no renewal: at the lapse minting stops, for good.
        assert_eq!(one(&mut h, T + 9_999).unwrap().filled, 1);
        let lapsed = Error::LeaseExpired {
            worker_id: 7,
            expired_at_ms: T + 10_000,
            now_ms: T + 10_000,
        };
        assert_eq!(one(&mut h, T + 10_000), Err(lapsed.clone()));
        assert_eq!(one(&mut h, T + 20_000), Err(lapsed));
        // A late renewal answer does not bring it back.
        h.renewed(grant(1, T + 9_000), T + 10_001);
        assert!(one(&mut h, T + 10_002).is_err());
    }

    #[test]
    fn a_refused_renewal_stops_minting_and_a_transient_failure_retries() {
        let mut h = holding(HolderConfig::default());
        let r = one(&mut h, T + 5_000).unwrap().renew.unwrap();
        h.renewal_failed(
            r.claim.generation,
            Some(ErrorCode::StoreUnavailable),
            T + 5_010,
        );
        assert_eq!(one(&mut h, T + 5_020).unwrap().renew, None, "backs off");
        let r = one(&mut h, T + 5_010 + RENEW_RETRY_MS)
            .unwrap()
            .renew
            .unwrap();
        // A late refusal of another generation is ignored ...
        h.renewal_failed(99, Some(ErrorCode::LeaseNotHeld), T + 6_100);
        assert_eq!(one(&mut h, T + 6_100).unwrap().filled, 1);
        // ... its own is not.
        h.renewal_failed(r.claim.generation, Some(ErrorCode::LeaseNotHeld), T + 6_200);
        assert!(matches!(
            one(&mut h, T + 6_200),
            Err(Error::LeaseLost {
                cause: Some(ErrorCode::LeaseNotHeld),
                ..
            })
        ));
    }

    #[test]
    fn leasing_again_resumes_after_everything_issued() {
        let config = HolderConfig {
            lease_again: true,
            ..HolderConfig::default()
        };
        let mut h = holding(config);
        let mut out = [0u64; 4096];
        assert_eq!(h.poll(T + 9_999, &mut out).unwrap().filled, 4096);
        let last = out[4095];
        let HolderNext::Lease(ask) = one(&mut h, T + 10_000).unwrap().next else {
            panic!("expected a new lease")
        };
        assert_eq!(
            ask.previous.map(|c| (c.worker_id, c.generation)),
            Some((7, 1))
        );
        // The registry answers with an issue_after in the past: the holder's
        // own last timestamp still bounds the first ID.
        h.granted(grant(2, T + 9_000), T + 9_999).unwrap();
        assert!(matches!(
            one(&mut h, T + 9_999).unwrap().next,
            HolderNext::RetryAfter { .. }
        ));
        let mut next = [0u64; 1];
        assert_eq!(h.poll(T + 10_000, &mut next).unwrap().filled, 1);
        assert!(next[0] > last);
    }

    #[test]
    fn restore_refuses_a_clock_behind_and_resumes_after_the_restart() {
        let mut h = holding(HolderConfig::default());
        assert_eq!(one(&mut h, T + 100).unwrap().filled, 1);
        let saved = h.state();
        assert_eq!(saved.last_timestamp_ms, T + 100);
        assert_eq!(
            SnowflakeHolder::restore(HolderConfig::default(), NoRandom, saved, T + 99).err(),
            Some(Error::ClockBehindLastReport {
                worker_id: Some(7),
                last_timestamp_ms: T + 100,
                node_now_ms: T + 99
            })
        );
        let mut r =
            SnowflakeHolder::restore(HolderConfig::default(), NoRandom, saved, T + 500).unwrap();
        let HolderNext::Lease(ask) = one(&mut r, T + 500).unwrap().next else {
            panic!()
        };
        assert_eq!(
            ask.previous.map(|c| (c.worker_id, c.generation)),
            Some((7, 1))
        );
        // The registry does not answer: the saved lease, unexpired as it
        // is, is not minted under (another process may hold it); the holder
        // asks again.
        r.lease_failed(None, T + 500);
        assert_eq!(r.lease(), None);
        let mut out = [0u64; 1];
        assert!(matches!(
            r.poll(T + 501, &mut out).unwrap(),
            HolderPoll {
                filled: 0,
                next: HolderNext::Lease(_),
                ..
            }
        ));
        // Granted: it mints after the restart moment.
        r.granted(grant(2, T + 501), T + 501).unwrap();
        assert_eq!(r.poll(T + 501, &mut out).unwrap().filled, 1);
        assert_eq!(
            Layout::LEAF.decompose(out[0]).unwrap().timestamp_ms,
            T + 501
        );
        // A refusal does not start it either.
        let mut r =
            SnowflakeHolder::restore(HolderConfig::default(), NoRandom, saved, T + 500).unwrap();
        let _ = one(&mut r, T + 500);
        r.lease_failed(Some(ErrorCode::ClockSkew), T + 500);
        assert_eq!(r.lease(), None);
    }

    #[test]
    fn a_store_that_keeps_failing_is_asked_again_after_a_growing_pause() {
        let config = HolderConfig {
            reserve_ms: 3_000,
            ..HolderConfig::default()
        };
        let mut h = SnowflakeHolder::restore(config, NoRandom, HolderState::default(), T).unwrap();
        let _ = one(&mut h, T);
        h.granted(grant(1, T), T).unwrap();
        let mut now = T;
        let mut pauses = [0; 7];
        for p in &mut pauses {
            let _ = h.save_request(now).unwrap();
            h.save_failed();
            *p = h.save_due_in(now).unwrap();
            now += *p;
        }
        assert_eq!(pauses, [50, 100, 200, 400, 800, 1_000, 1_000]);
        // One save that succeeds ends the pauses: the reservation's own
        // schedule again.
        let s = h.save_request(now).unwrap();
        h.saved(&s);
        assert_eq!(h.save_due_in(now), Some(1_000));
    }

    #[test]
    fn a_restart_in_the_millisecond_of_its_last_save_waits_out_the_reservation() {
        let config = HolderConfig {
            reserve_ms: 3_000,
            ..HolderConfig::default()
        };
        let mut h = SnowflakeHolder::restore(config, NoRandom, HolderState::default(), T).unwrap();
        let _ = one(&mut h, T);
        h.granted(grant(1, T), T).unwrap();
        let saved = h.save_request(T).unwrap();
        h.saved(&saved);
        let mut r = SnowflakeHolder::restore(config, NoRandom, saved, T).unwrap();
        let _ = one(&mut r, T);
        r.granted(grant(2, T), T).unwrap();
        let s = r.save_request(T).unwrap();
        r.saved(&s);
        assert_eq!(
            one(&mut r, T).unwrap().next,
            HolderNext::RetryAfter {
                ms: 3_001,
                reason: Wait::ClockBehind
            }
        );
        // The save timer extends the reservation before the clock gets there.
        assert_eq!(r.save_due_in(T), Some(1_000));
        let s = r.save_request(T + 1_000).unwrap();
        r.saved(&s);
        assert_eq!(one(&mut r, T + 3_001).unwrap().filled, 1);
        // Restarting again at once finds a reservation at most 3 s ahead.
        assert!(SnowflakeHolder::restore(config, NoRandom, s, T + 1_001).is_ok());
    }

    #[test]
    fn a_grant_whose_floor_is_ahead_of_the_clock_is_waited_for() {
        // The registry may grant another node's freed ID whose floor is a
        // little ahead of this clock (within its skew bound): wait, do not
        // fail with the clock "moved backwards".
        let mut h = SnowflakeHolder::new(HolderConfig::default()).unwrap();
        let _ = one(&mut h, T);
        let g = Grant {
            issue_after_ms: T + 1_500,
            ..grant(1, T)
        };
        h.granted(g, T).unwrap();
        assert_eq!(
            one(&mut h, T).unwrap().next,
            HolderNext::RetryAfter {
                ms: 1_501,
                reason: Wait::ClockBehind
            }
        );
        let mut out = [0u64; 1];
        assert_eq!(h.poll(T + 1_501, &mut out).unwrap().filled, 1);
        assert_eq!(
            Layout::LEAF.decompose(out[0]).unwrap().timestamp_ms,
            T + 1_501
        );
    }

    #[test]
    fn a_holder_that_borrows_stops_before_its_borrowed_ids_pass_the_lapse() {
        // Borrowing mints up to `max_borrow_ms` ahead of the clock: such a
        // holder stops once now + borrow reaches the lease's end, so no ID
        // of it lies at or past the end (the next holder's floor).
        let config = HolderConfig {
            max_borrow_ms: 1_000,
            ..HolderConfig::default()
        };
        let mut h = holding(config);
        let end = T + 10_000;
        let mut out = [0u64; 4096 * 4];
        let mut last = 0;
        for now in [T + 8_990, T + 8_999, T + 9_998] {
            if let Ok(p) = h.poll(now, &mut out) {
                for &id in &out[..p.filled] {
                    last = last.max(Layout::LEAF.decompose(id).unwrap().timestamp_ms);
                }
            }
        }
        assert!(last > T, "it minted");
        assert!(last < end, "minted at {last}, the lease ends at {end}");
        assert!(matches!(
            one(&mut h, T + 9_000),
            Err(Error::LeaseExpired { .. })
        ));
    }

    #[test]
    fn close_releases_once_and_stops() {
        let mut h = holding(HolderConfig::default());
        assert_eq!(one(&mut h, T + 1).unwrap().filled, 1);
        let release = h.close(T + 2).unwrap();
        assert_eq!(
            (release.claim.worker_id, release.last_timestamp_ms),
            (7, T + 1)
        );
        assert_eq!(h.close(T + 3), None);
        assert!(matches!(
            one(&mut h, T + 3),
            Err(Error::LeaseLost { cause: None, .. })
        ));
        assert_eq!(h.state().lease.map(|l| l.generation), Some(1));
    }
}
