//! What a holder saves to restart safely, its reservations, and the restart.

use crate::error::Error;
use crate::layout::Layout;
use crate::rand::RandSource;
use crate::secret::{Claim, LeaseSecret};

use super::{HolderConfig, SnowflakeHolder};

/// The pause before a failed save is asked again (doubling with each
/// failure in a row).
pub const SAVE_RETRY_MIN_MS: u64 = 50;

/// The longest pause between attempts to save to a failing store.
pub const SAVE_RETRY_MAX_MS: u64 = 1_000;

/// While waiting for a save, poll again after this long.
pub const SAVE_POLL_MS: u64 = 5;

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

impl<R: RandSource + Clone> SnowflakeHolder<R> {
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
}
