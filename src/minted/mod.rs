//! Snowflake IDs at edge scale, the serving side. A bounded set of minters —
//! each a [`SnowflakeHolder`](crate::holder::SnowflakeHolder) under one worker ID
//! reserved for it ([`Registry::lease_minter`](crate::registry::Registry::lease_minter))
//! — mint batches; any number of isolates serve them from memory. The worker
//! IDs in use are bounded by the number of minters, not of isolates.
//!
//! A batch is a list of ranges `[start, end)`: IDs of one time unit and one
//! worker ID are consecutive integers, so a batch of thousands of IDs is a few
//! ranges. The buffer here is the segment double buffer's idea applied to
//! them:
//! - serve from the ranges held, oldest first; each ID at most once;
//! - never serve an ID whose time unit started more than `staleness_ms`
//!   before the serving clock: such IDs are dropped, so a snowflake ID still
//!   says "about when" it was handed out;
//! - fetch the next batch in the background once fewer than 90% of a batch
//!   remain (one fetch in flight at a time; one presumed lost after
//!   `take_over_ms` is sent again);
//! - size batches to the rate served: a batch should last a quarter of the
//!   staleness bound at the rate measured over the last window (at least an
//!   eighth of the bound), shrinking at most by half per window; halve it
//!   when IDs went stale;
//! - a failed fetch moves to the next minter; a request tries at most
//!   [`MINTERS_PER_REQUEST`] of them (more when the isolate's region hosts
//!   more: [`MintConfig::tries_per_request`]);
//! - a fetch still unanswered when the request that sent it runs out of
//!   its budget is awaited on in the background
//!   ([`MintedBuffer::fetch_unanswered`]) and stays in flight: its answer
//!   fills the buffer for the requests after it, which wait for it rather
//!   than ask the next minter, cold again (a colo whose minters are further
//!   than a request's budget is served from its first answer, not never);
//! - each fetch has a ticket ([`BatchAsk::ticket`]): an answer that comes
//!   after a later fetch took over from its (presumed lost) one is dropped
//!   ([`Fetched::Late`]), so it never closes the later fetch — which would
//!   let a third go out while that one is still in flight, or move past a
//!   minter twice;
//! - minters are placed per region ([`MinterPools`]: the reserved worker IDs
//!   split so that two regions never share one); an isolate asks its own
//!   region's pool first and the others on failure, and comes back to its
//!   own after [`RETURN_HOME_MS`]. A batch whose IDs are all stale on
//!   arrival is a failed fetch ([`Fetched::Stale`]): its minter's clock lags
//!   this one by more than the bound, and asking it again would starve the
//!   isolate.
//!
//! Like the rest of the core it reads no clock and does no I/O.

mod config;
mod fetch;
mod histogram;
mod minter;
mod placement;
mod right;
#[cfg(test)]
mod tests;

pub use config::{
    MintConfig, DEFAULT_STALENESS_MS, FIRST_MINT_BATCH, MAX_MINT_BATCH,
    MAX_MINT_BATCH_BEFORE_BORROW, MINTERS_PER_REQUEST, MINTER_BORROW_MS, MIN_MINT_BATCH,
    RETURN_HOME_MS,
};
pub use fetch::{Fetched, MintTries, Refused, Unanswered};
pub use histogram::StalenessHistogram;
pub use minter::{
    batch_ranges, minter_holder_config, minter_lease_refused, minter_restore_refused, minter_step,
    MinterStep,
};
pub use placement::{
    MinterPools, MAX_MINTER_REGIONS, MINTER_REGIONS, MINTER_REGION_COUNT, MINTER_SHARES,
};
pub use right::{
    batch_beside_right, lends_rights, rights_holder_config, rights_worker_index, MintRight,
    RightLedger, MAX_RIGHT_MS, MIN_RIGHT_MS, RIGHT_RETRY_MS, RIGHT_SEQUENCES,
};

use crate::error::Error;
use crate::layout::Layout;
use crate::wait::InFlight;
use alloc::collections::VecDeque;

/// Ask minter `minter` for a batch of `count` IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchAsk {
    /// Which minter.
    pub minter: u32,
    /// How many IDs (1..=[`MAX_MINT_BATCH`]).
    pub count: u32,
    /// Which fetch this is, to hand back with its answer
    /// ([`MintedBuffer::fetched`], [`MintedBuffer::fetch_refused`],
    /// [`MintedBuffer::fetch_unanswered`]): an answer that comes after a
    /// later fetch took over is not taken for that one's.
    pub ticket: u64,
    /// Ask for a right to mint too ([`MintRight`]; answered with
    /// [`MintedBuffer::fetched_with_right`]). A minter that lends none (or
    /// of a release before rights) answers the batch alone.
    pub right: bool,
}

/// What the caller does after a [`MintedBuffer::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum MintStep {
    /// The buffer is full. With `Some(ask)`: fetch it now, in the background.
    Done {
        /// The background fetch to start, if one is due.
        prefetch: Option<BatchAsk>,
    },
    /// Nothing left to serve: fetch this now, report it with
    /// [`MintedBuffer::fetched`] or [`MintedBuffer::fetch_failed`], and poll
    /// again.
    FetchNow(BatchAsk),
    /// Nothing left and a fetch is in flight: wait for it, poll again.
    Wait,
}

/// The answer of [`MintedBuffer::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct MintPoll {
    /// IDs written to the front of the buffer.
    pub filled: usize,
    /// What to do next.
    pub next: MintStep,
}

/// A minted range as held: `[start, end)`, and its time unit's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    start: u64,
    end: u64,
    unit_ms: u64,
}

/// An isolate's buffer of minted IDs.
///
/// ```
/// use edgeleaf::layout::Parts;
/// use edgeleaf::minted::{MintConfig, MintStep, MintedBuffer};
/// use edgeleaf::Layout;
///
/// let now = 1_700_000_000_000;
/// let mut buf = MintedBuffer::new(Layout::LEAF, MintConfig::new(16, 7))?;
/// let mut out = [0u64; 2];
/// let MintStep::FetchNow(ask) = buf.poll(now, &mut out).next else { unreachable!() };
/// assert_eq!(ask.minter, 7);
/// // ... minter 7 mints `ask.count` IDs and answers ranges:
/// let first = Layout::LEAF.compose(Parts { timestamp_ms: now, worker_id: 7, sequence: 0 })?.get();
/// buf.fetched(ask.ticket, &[(first, first + 100)], now)?;
/// assert_eq!(buf.poll(now, &mut out).filled, 2);
/// assert_eq!(out, [first, first + 1]);
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MintedBuffer {
    layout: Layout,
    config: MintConfig,
    held: VecDeque<Held>,
    available: u64,
    batch: u32,
    /// The largest batch it asks for: [`MAX_MINT_BATCH`], or
    /// [`MAX_MINT_BATCH_BEFORE_BORROW`] once a minter refused more.
    max_batch: u32,
    /// The position of the minter asked next in the isolate's order
    /// ([`MintConfig::minter_at`]).
    pos: u32,
    /// Since when it asks other regions' minters (it failed over), if so.
    away_since_ms: Option<u64>,
    fetching: InFlight,
    /// When the fetch in flight (if any) was sent.
    sent_ms: u64,
    /// The latest fetch's ticket ([`BatchAsk::ticket`]): only its answer
    /// closes the fetch in flight.
    ticket: u64,
    /// The ticket whose answer was kept last: a copy of it is late.
    answered_ticket: Option<u64>,
    /// The start of the latest time unit of any batch fetched (Unix ms): the
    /// minters' clocks had reached it, less [`MINTER_BORROW_MS`].
    minted_up_to_ms: u64,
    /// The rate window: since when, and IDs served in it.
    window_start_ms: Option<u64>,
    window_served: u64,
    dropped_since_fetch: bool,
    dropped: u64,
    fetches: u64,
    staleness: StalenessHistogram,
    /// The right to mint held, if any, and where in it the next ID is:
    /// the time unit (tick) and the sequence offset within it.
    right: Option<MintRight>,
    right_tick: u64,
    right_seq: u32,
    /// No right is asked for before this (the last ask got none).
    rights_paused_until_ms: u64,
    /// The latest fetch asked for a right.
    asked_right: bool,
    /// IDs minted under rights, and rights received.
    right_minted: u64,
    rights: u64,
}

impl MintedBuffer {
    /// An empty buffer.
    ///
    /// # Errors
    /// As [`MintConfig::validate`].
    pub fn new(layout: Layout, config: MintConfig) -> Result<MintedBuffer, Error> {
        config.validate(&layout)?;
        Ok(MintedBuffer {
            layout,
            config,
            held: VecDeque::new(),
            available: 0,
            batch: FIRST_MINT_BATCH,
            max_batch: MAX_MINT_BATCH,
            pos: 0,
            away_since_ms: None,
            fetching: InFlight::default(),
            sent_ms: 0,
            ticket: 0,
            answered_ticket: None,
            minted_up_to_ms: 0,
            window_start_ms: None,
            window_served: 0,
            dropped_since_fetch: false,
            dropped: 0,
            fetches: 0,
            staleness: StalenessHistogram::default(),
            right: None,
            right_tick: 0,
            right_seq: 0,
            rights_paused_until_ms: 0,
            asked_right: false,
            right_minted: 0,
            rights: 0,
        })
    }

    /// Up to `out.len()` IDs at clock reading `now_ms`, and what to do next.
    pub fn poll(&mut self, now_ms: u64, out: &mut [u64]) -> MintPoll {
        self.drop_stale(now_ms);
        let mut filled = 0;
        while filled < out.len() {
            let Some(h) = self.held.front_mut() else {
                break;
            };
            let left = usize::try_from(h.end - h.start).unwrap_or(usize::MAX);
            let n = left.min(out.len() - filled);
            for (slot, id) in out[filled..filled + n].iter_mut().zip(h.start..) {
                *slot = id;
            }
            filled += n;
            let n = n as u64;
            self.window_served += n;
            self.staleness.record(now_ms.saturating_sub(h.unit_ms), n);
            h.start += n;
            self.available -= n;
            if h.start == h.end {
                self.held.pop_front();
            }
        }
        filled += self.mint_under_right(now_ms, &mut out[filled..]);
        let next = if filled == out.len() {
            let want_right = self.wants_right(now_ms);
            // Under a right, batches are only for bursts beyond it: no
            // batch is fetched ahead.
            let low = self.right.is_none() && self.available * 10 < u64::from(self.batch) * 9;
            let prefetch = ((low || want_right) && self.claim(now_ms)).then(|| self.ask(0, now_ms));
            MintStep::Done { prefetch }
        } else if self.claim(now_ms) {
            MintStep::FetchNow(self.ask(out.len() - filled, now_ms))
        } else {
            MintStep::Wait
        };
        MintPoll { filled, next }
    }

    fn drop_stale(&mut self, now_ms: u64) {
        let bound = self.config.staleness_ms;
        let before = self.available;
        self.held
            .retain(|h| now_ms.saturating_sub(h.unit_ms) <= bound);
        self.available = self.held.iter().map(|h| h.end - h.start).sum();
        if self.available < before {
            self.dropped += before - self.available;
            self.dropped_since_fetch = true;
        }
    }

    fn claim(&mut self, now_ms: u64) -> bool {
        let lost = self.fetching.is_busy();
        let claimed = self.fetching.claim(now_ms, self.config.take_over_ms);
        if claimed && lost {
            // The fetch in flight is presumed lost: its minter may be stuck,
            // so the next one goes elsewhere.
            self.pos = (self.pos + 1) % self.config.minters;
        }
        if claimed {
            self.sent_ms = now_ms;
            self.ticket += 1;
            // Away from its region's pool: back to it after a while (its
            // minters may be back), never stuck on another region's.
            // (The whole order's position: the early other region's minter
            // of a large pool is away too.)
            let at = self.config.minter_at(self.pos);
            if self.config.pool_len == 0 || self.config.in_own_pool(at) {
                self.away_since_ms = None;
            } else {
                let since = *self.away_since_ms.get_or_insert(now_ms);
                if now_ms.saturating_sub(since) >= RETURN_HOME_MS {
                    self.pos = 0;
                    self.away_since_ms = None;
                }
            }
        }
        claimed
    }

    fn ask(&mut self, need: usize, now_ms: u64) -> BatchAsk {
        let need = u32::try_from(need).unwrap_or(MAX_MINT_BATCH);
        let right = self.wants_right(now_ms);
        self.asked_right = right;
        // With a right asked for, a batch is only what this request needs:
        // the right serves the rest.
        let batch = if right { MIN_MINT_BATCH } else { self.batch };
        BatchAsk {
            minter: self.config.minter_at(self.pos),
            count: batch.max(need).min(self.max_batch),
            ticket: self.ticket,
            right,
        }
    }

    /// The latest fetch's ticket ([`BatchAsk::ticket`]), for a caller
    /// that never has more than one fetch outstanding.
    pub fn ticket(&self) -> u64 {
        self.ticket
    }

    /// IDs held and still fresh as of the last poll.
    pub fn available(&self) -> u64 {
        self.available
    }

    /// The batch size asked for next.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// Its settings.
    pub fn config(&self) -> &MintConfig {
        &self.config
    }

    /// The minter asked next.
    pub fn minter(&self) -> u32 {
        self.config.minter_at(self.pos)
    }

    /// IDs dropped unserved because they went stale.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Batches received.
    pub fn fetches(&self) -> u64 {
        self.fetches
    }

    /// The right to mint held, if any.
    pub fn right(&self) -> Option<&MintRight> {
        self.right.as_ref()
    }

    /// IDs minted under rights.
    pub fn right_minted(&self) -> u64 {
        self.right_minted
    }

    /// Rights received.
    pub fn rights(&self) -> u64 {
        self.rights
    }

    /// The staleness of every ID served.
    pub fn staleness(&self) -> &StalenessHistogram {
        &self.staleness
    }
}
