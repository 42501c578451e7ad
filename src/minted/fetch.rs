//! A batch's answer as the buffer takes it: fetched, refused, or failed.

use crate::code::ErrorCode;
use crate::error::Error;
use alloc::vec::Vec;

use super::{
    Held, MintRight, MintedBuffer, MAX_MINT_BATCH_BEFORE_BORROW, MINTER_BORROW_MS, MIN_MINT_BATCH,
};
use crate::wait::MAX_BACKGROUND_WAIT_MS;

/// What [`MintedBuffer::fetched`] made of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    /// Its IDs are held, to be served.
    Kept,
    /// Every ID was older than the staleness bound on arrival: dropped, and
    /// counted as a failed fetch (the next goes to the next minter).
    Stale,
    /// The answer of a fetch a later one took over from (its ticket is not
    /// the latest, [`BatchAsk::ticket`](super::BatchAsk::ticket)): dropped,
    /// nothing changed. Its fetch was already presumed lost and counted
    /// failed; taking its answer as the later fetch's would close that one
    /// while it is still in flight. (Its IDs would be safe to serve, as
    /// the overlap and staleness checks hold, but a late answer is rare —
    /// one past `take_over_ms` — and dropping it keeps one rule: only the
    /// latest fetch's answer counts.)
    Late,
}

/// What a request does after a minter answered that it has nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Refused {
    /// Wait a little and ask the same minter again.
    Again,
    /// Ask the next minter (this one failed).
    Next,
    /// Answer now: waiting cannot help within the request's budget.
    GiveUp {
        /// Why.
        code: ErrorCode,
        /// When asking again may help, ms.
        retry_after_ms: u64,
    },
}

/// What a fetch still unanswered at its request's bound becomes
/// ([`MintedBuffer::fetch_unanswered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Unanswered {
    /// Await it on in the background (the isolate's `waitUntil`) for at
    /// most `for_ms` more; its answer or failure is the buffer's as any
    /// other's ([`MintedBuffer::fetched`], [`MintedBuffer::fetch_refused`]).
    /// Until then it stays in flight, so the requests that follow wait for
    /// it.
    Await {
        /// How long it may still be awaited, ms.
        for_ms: u64,
    },
    /// Presumed lost (sent the buffer's `take_over_ms` ago or more):
    /// counted as failed, the next fetch goes to the next minter. Drop it.
    Failed,
    /// Its answer (or refusal) is already in: nothing to await, nothing
    /// failed.
    Answered,
    /// A later fetch took over from it (it was presumed lost, and counted
    /// failed then): nothing to await, nothing more to count. Drop it.
    TakenOver,
}

/// One request's account of the minters it asked that failed it
/// ([`Refused::Next`]): each failure is an answer, not a wait, and a request
/// asks at most [`MintConfig::tries_per_request`](super::MintConfig::tries_per_request)
/// minters before it answers 503, so that one request never fans out over
/// every minter (each may lease from the one registry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MintTries {
    failed: u32,
}

impl MintTries {
    /// A minter this request asked failed it: `true` if it asks the next
    /// one (the buffer's [`MintedBuffer::minter`]), `false` if it answers
    /// now.
    #[must_use]
    pub fn failed(&mut self, buffer: &MintedBuffer) -> bool {
        self.failed += 1;
        self.failed < buffer.config().tries_per_request()
    }

    /// How many failed it so far.
    pub fn count(&self) -> u32 {
        self.failed
    }
}

impl MintedBuffer {
    /// A minter answered `ranges` (`[start, end)` each) at `now_ms` to the
    /// fetch of `ticket` ([`BatchAsk::ticket`](super::BatchAsk::ticket)):
    /// dropped if a later fetch took over from it ([`Fetched::Late`]); kept,
    /// or, when every ID of a batch is already older than the staleness
    /// bound, dropped and counted as a failed fetch ([`Fetched::Stale`]: the
    /// next fetch goes to the next minter).
    ///
    /// # Errors
    /// [`Error::InvalidBatch`] for a range that is empty, beyond the layout,
    /// spans two time units or worker IDs, or overlaps IDs held; nothing of
    /// the batch is kept then.
    pub fn fetched(
        &mut self,
        ticket: u64,
        ranges: &[(u64, u64)],
        now_ms: u64,
    ) -> Result<Fetched, Error> {
        self.fetched_with_right(ticket, ranges, None, now_ms)
    }

    /// As [`MintedBuffer::fetched`], with the right to mint the minter lent
    /// along with its batch (`None`: it lent none). A right is held and
    /// minted under from the next poll, after the batches held; a batch all
    /// stale on arrival beside a right is dropped, but the fetch counts as
    /// kept.
    ///
    /// # Errors
    /// As [`MintedBuffer::fetched`]; [`Error::InvalidRight`] for a right
    /// outside the layout (nothing of the answer kept).
    pub fn fetched_with_right(
        &mut self,
        ticket: u64,
        ranges: &[(u64, u64)],
        right: Option<MintRight>,
        now_ms: u64,
    ) -> Result<Fetched, Error> {
        // A copy of an answer already taken is late too: under a right no
        // new fetch need follow it, so its ticket stays the latest, and its
        // ranges, served since, would overlap nothing held.
        if ticket != self.ticket || self.answered_ticket == Some(ticket) {
            return Ok(Fetched::Late);
        }
        self.fetching.done();
        if let Some(r) = &right {
            r.validate(&self.layout)?;
        }
        let mut add = Vec::with_capacity(ranges.len());
        for &(start, end) in ranges {
            let bad = Error::InvalidBatch { start, end };
            if start >= end {
                return Err(bad);
            }
            let first = self.layout.decompose(start).map_err(|_| bad.clone())?;
            let last = self.layout.decompose(end - 1).map_err(|_| bad.clone())?;
            let overlaps = |h: &Held| start < h.end && h.start < end;
            if (first.timestamp_ms, first.worker_id) != (last.timestamp_ms, last.worker_id)
                || self.held.iter().chain(&add).any(overlaps)
            {
                return Err(bad);
            }
            add.push(Held {
                start,
                end,
                unit_ms: first.timestamp_ms,
            });
        }
        let bound = self.config.staleness_ms;
        let took_right = self.take_right(right, now_ms);
        if !add.is_empty() && add.iter().all(|h| now_ms.saturating_sub(h.unit_ms) > bound) {
            if took_right {
                self.dropped += add.iter().map(|h| h.end - h.start).sum::<u64>();
                self.fetches += 1;
                self.answered_ticket = Some(ticket);
                return Ok(Fetched::Kept);
            }
            // Its minter's clock lags this one's by more than the bound:
            // whatever it mints next is as stale, so asking it again would
            // starve this buffer. Its rate tells nothing of ours.
            self.dropped += add.iter().map(|h| h.end - h.start).sum::<u64>();
            self.fetch_failed();
            return Ok(Fetched::Stale);
        }
        self.fetches += 1;
        let start = *self.window_start_ms.get_or_insert(now_ms);
        let window = now_ms.saturating_sub(start);
        if self.dropped_since_fetch {
            self.batch = (self.batch / 2).max(MIN_MINT_BATCH);
        } else if window >= bound / 8 {
            // IDs per quarter bound at the rate served in the window.
            let target = self.window_served.saturating_mul(bound / 4) / window.max(1);
            let target = u32::try_from(target).unwrap_or(u32::MAX);
            self.batch = target
                .max(self.batch / 2)
                .clamp(MIN_MINT_BATCH, self.max_batch);
        }
        if self.dropped_since_fetch || window >= bound / 8 {
            self.window_start_ms = Some(now_ms);
            self.window_served = 0;
        }
        self.dropped_since_fetch = false;
        self.minted_up_to_ms = add
            .iter()
            .map(|h| h.unit_ms)
            .fold(self.minted_up_to_ms, u64::max);
        self.available += add.iter().map(|h| h.end - h.start).sum::<u64>();
        self.held.extend(add);
        self.answered_ticket = Some(ticket);
        Ok(Fetched::Kept)
    }

    /// The minter asked by the fetch of `ticket` answered at `now_ms` that it
    /// has nothing for now, with `code`; the request may still wait
    /// `remaining_ms`. The answer of a fetch a later one took over from
    /// changes nothing ([`Refused::Again`]: polling again finds the later
    /// fetch's IDs, or waits for it). A minter whose time
    /// unit is used up (`sequence_exhausted`) is asked again after a short
    /// wait ([`Refused::Again`]), unless this clock is behind IDs already
    /// minted by more than the request can wait: then the minters' clocks
    /// are ahead of it (it stepped back), the next time unit comes only when
    /// it catches up, and the request answers at once ([`Refused::GiveUp`],
    /// with how long that is). A minter that refuses the count
    /// (`out_of_range`: one of the release before, see
    /// [`MAX_MINT_BATCH_BEFORE_BORROW`]) is asked again, once, for no more
    /// than it takes. Anything else moves to the next minter
    /// ([`Refused::Next`], as [`MintedBuffer::fetch_failed`]).
    pub fn fetch_refused(
        &mut self,
        ticket: u64,
        code: ErrorCode,
        now_ms: u64,
        remaining_ms: u64,
    ) -> Refused {
        if ticket != self.ticket {
            return Refused::Again;
        }
        if code == ErrorCode::OutOfRange && self.max_batch > MAX_MINT_BATCH_BEFORE_BORROW {
            // A minter of the release before refused the count: ask again,
            // for no more than it takes.
            self.fetching.done();
            self.max_batch = MAX_MINT_BATCH_BEFORE_BORROW;
            self.batch = self.batch.min(self.max_batch);
            return Refused::Again;
        }
        if code != ErrorCode::SequenceExhausted {
            self.fetch_failed();
            return Refused::Next;
        }
        self.fetching.done();
        // A minter mints up to MINTER_BORROW_MS ahead of its own clock.
        let behind = self
            .minted_up_to_ms
            .saturating_sub(MINTER_BORROW_MS)
            .saturating_sub(now_ms);
        if behind > remaining_ms {
            Refused::GiveUp {
                code: ErrorCode::ClockMovedBackwards,
                retry_after_ms: behind,
            }
        } else {
            Refused::Again
        }
    }

    /// The request that sent the fetch of `ticket` ran out of its budget at
    /// `now_ms` before its answer came. A minter further than a request's
    /// budget (a first call to a Durable Object costs the most) answers
    /// only after it: counting that as a failure sends the next request to
    /// the next minter, cold again, and its colo waits for ever. So the
    /// fetch is awaited on in the background until the buffer would
    /// presume it lost (`take_over_ms` after it was sent, within
    /// [`MAX_BACKGROUND_WAIT_MS`]): [`Unanswered::Await`], the buffer
    /// unchanged. Past that, [`Unanswered::Failed`], as
    /// [`MintedBuffer::fetch_failed`]. A fetch already answered, or taken
    /// over from, changes nothing ([`Unanswered::Answered`],
    /// [`Unanswered::TakenOver`]).
    pub fn fetch_unanswered(&mut self, ticket: u64, now_ms: u64) -> Unanswered {
        if ticket != self.ticket {
            return Unanswered::TakenOver;
        }
        if !self.fetching.is_busy() {
            return Unanswered::Answered;
        }
        // As `InFlight` reckons it (a clock stepped back counts too).
        let since = now_ms.abs_diff(self.sent_ms);
        let for_ms = self
            .config
            .take_over_ms
            .saturating_sub(since)
            .min(MAX_BACKGROUND_WAIT_MS);
        if for_ms == 0 {
            self.fetch_failed();
            return Unanswered::Failed;
        }
        Unanswered::Await { for_ms }
    }

    /// The latest fetch failed (no answer, or the minter refused, or
    /// [`MintedBuffer::fetched`] refused its batch): the next one goes to
    /// the next minter. Only for the latest fetch, as the caller knows
    /// (right after `fetched` answered an error for its ticket): the answer
    /// of one that may be late goes through [`MintedBuffer::fetch_refused`].
    pub fn fetch_failed(&mut self) {
        self.fetching.done();
        self.pos = (self.pos + 1) % self.config.minters;
    }
}
