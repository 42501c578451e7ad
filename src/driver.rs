//! The segment client's loop, once: fill the caller's buffer from the double
//! buffer, and say whether to load the next segment now (in the background,
//! or blocking because both halves are dry) or to wait for a load in flight.
//! The Worker's isolates, a monotonic tag's Durable Object and the npm
//! package's `SegmentGenerator` all run this same shape:
//!
//! ```text
//! loop {
//!     poll(now, out) -> Done { prefetch }   // start `prefetch` in the background
//!                     | LoadNow { step }    // load, report, poll again
//!                     | Wait                // a load is in flight: wait, poll again
//! }
//! ```
//!
//! A load in flight for longer than `take_over_ms` is presumed lost with
//! whoever started it, and the next caller starts another.
//!
//! A monotonic tag's store runs it inside a [`MonotonicIssuer`]: every
//! answer writes its last ID to storage before it leaves, each write
//! conditional on the record the store last read or wrote, so an old
//! instance of the store still running beside its replacement never answers
//! an ID twice nor one below an ID already answered.

#[cfg(feature = "alloc")]
use crate::block::HandBack;
use crate::error::Error;
use crate::segment::{Allocation, SegmentBuffer, SegmentSnapshot, StepPolicy};
use crate::wait::{InFlight, DEFAULT_TAKE_OVER_MS};

/// What the caller does after a [`SegmentDriver::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum SegmentStep {
    /// The buffer is full. With `Some(step)`: start loading the next segment
    /// with this step now, in the background.
    Done {
        /// The step of the background load to start, if one is due.
        prefetch: Option<u64>,
    },
    /// Both halves are dry: load a segment with this step now, report it
    /// with [`SegmentDriver::loaded`] or [`SegmentDriver::load_failed`], and
    /// poll again.
    LoadNow {
        /// The step to ask the store for.
        step: u64,
    },
    /// Both halves are dry and a load is in flight: wait for it, poll again.
    Wait,
}

impl SegmentStep {
    /// The step of the load this answer asks the caller to start (a
    /// prefetch, or a load now), if any. The driver counts that load in
    /// flight from this answer on: a caller that will not start it reports
    /// [`SegmentDriver::load_failed`], or every later poll waits for it
    /// until it is taken over.
    pub fn load(&self) -> Option<u64> {
        match *self {
            SegmentStep::Done { prefetch } => prefetch,
            SegmentStep::LoadNow { step } => Some(step),
            SegmentStep::Wait => None,
        }
    }
}

/// The answer of [`SegmentDriver::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct SegmentPoll {
    /// IDs written to the front of the buffer.
    pub filled: usize,
    /// What to do next.
    pub next: SegmentStep,
}

/// Why [`MonotonicIssuer::fill`] left its answer unfilled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FillError<E> {
    /// A load the answer needed failed: the caller's error.
    Load(E),
    /// The driver waits for a load in flight that the synchronous caller
    /// never started.
    InFlight,
}

/// A [`SegmentBuffer`] with the bookkeeping of its loads.
///
/// ```
/// use edgeleaf::driver::{SegmentDriver, SegmentStep};
/// use edgeleaf::segment::{Allocation, StepPolicy};
///
/// let mut d = SegmentDriver::new(StepPolicy::new(10)?);
/// let mut out = [0u64; 3];
/// let p = d.poll(0, &mut out);
/// assert_eq!(p.next, SegmentStep::LoadNow { step: 10 });
/// d.loaded(Allocation::new(1, 10)?, 0)?;        // what the store answered
/// let p = d.poll(0, &mut out);
/// assert_eq!((p.filled, out), (3, [1, 2, 3]));
/// assert_eq!(p.next, SegmentStep::Done { prefetch: Some(20) }); // 10% used
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SegmentDriver {
    buf: SegmentBuffer,
    loading_since: InFlight,
    take_over_ms: u64,
}

impl SegmentDriver {
    /// A driver over an empty buffer that prefetches at Leaf's 10%.
    pub fn new(policy: crate::segment::StepPolicy) -> Self {
        Self::with_buffer(SegmentBuffer::new(policy))
    }

    /// A driver over `buf` (built with the prefetch point of your choice).
    pub fn with_buffer(buf: SegmentBuffer) -> Self {
        SegmentDriver {
            buf,
            loading_since: InFlight::default(),
            take_over_ms: DEFAULT_TAKE_OVER_MS,
        }
    }

    /// Up to `out.len()` IDs, and what to do next, at clock reading `now_ms`
    /// (used for the dynamic step and to take over a lost load).
    pub fn poll(&mut self, now_ms: u64, out: &mut [u64]) -> SegmentPoll {
        let take = self.buf.take(out);
        let full = take.filled == out.len();
        let mut load = take.load;
        if load {
            self.loading_since.start(now_ms);
        } else if !full && self.buf.loading() {
            // A load marked in flight too long is presumed lost: take it over.
            load = self.loading_since.claim(now_ms, self.take_over_ms);
        }
        let step = || self.buf.step_for_next_load(now_ms);
        let next = match (full, load) {
            (true, false) => SegmentStep::Done { prefetch: None },
            (true, true) => SegmentStep::Done {
                prefetch: Some(step()),
            },
            (false, true) => SegmentStep::LoadNow { step: step() },
            (false, false) => SegmentStep::Wait,
        };
        SegmentPoll {
            filled: take.filled,
            next,
        }
    }

    /// Starts a load nobody asked for yet (a warm-up before the first
    /// request): the step to load with, or `None` when one is in flight or
    /// there is no free half.
    pub fn warm_up(&mut self, now_ms: u64) -> Option<u64> {
        if !self.buf.begin_load() {
            return None;
        }
        self.loading_since.start(now_ms);
        Some(self.buf.step_for_next_load(now_ms))
    }

    /// The store allocated `alloc`.
    ///
    /// # Errors
    /// As [`SegmentBuffer::load`]: a range that overlaps IDs loaded before
    /// is refused, never handed out.
    pub fn loaded(&mut self, alloc: Allocation, now_ms: u64) -> Result<(), Error> {
        self.loading_since.done();
        let result = self.buf.load(alloc, now_ms);
        if result.is_err() {
            self.buf.load_failed();
        }
        result
    }

    /// The load in flight failed; the next poll that needs one asks again.
    pub fn load_failed(&mut self) {
        self.loading_since.done();
        self.buf.load_failed();
    }

    /// IDs available without a load.
    pub fn available(&self) -> u64 {
        self.buf.available()
    }

    /// Gives up both halves (a client closing): their unused ranges, last
    /// first, to hand back ([`SegmentBuffer::retire`]).
    pub fn retire(&mut self) -> [Option<Allocation>; 2] {
        self.loading_since.done();
        self.buf.retire()
    }

    /// Closes the client: gives up both halves ([`retire`](SegmentDriver::retire))
    /// and returns their hand-back to the tag's store, last first, stopping
    /// at the first tail not taken or not answered (the core's one rule,
    /// [`HandBack`]). The host sends each [`HandBack::to_send`] and reports
    /// the answer; what is not taken stays a gap, never an ID twice.
    #[cfg(feature = "alloc")]
    pub fn hand_back(&mut self) -> HandBack<Allocation> {
        HandBack::new(self.retire().into_iter().flatten().collect())
    }

    /// The fence ([`SegmentBuffer::fence`]): the end of the last segment
    /// loaded (0: none); no segment at or below it is loaded again.
    pub fn fence(&self) -> u64 {
        self.buf.fence()
    }

    /// The buffer's state for monitoring.
    pub fn snapshot(&self) -> SegmentSnapshot {
        self.buf.snapshot()
    }
}

/// A monotonic tag's record in its store: `max_id`, the end of the last
/// segment the store allocated, and `issued`, the last ID it answered (0:
/// none on record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct IssuedMark {
    /// The end of the last segment allocated.
    pub max_id: u64,
    /// The last ID answered.
    pub issued: u64,
}

/// A monotonic tag's IDs as its store serves them from memory, fenced by
/// its storage.
///
/// The store may run twice for a while: the platform replaces it (a deploy,
/// a partition) and the old instance keeps answering from memory until it
/// touches storage. So every request starts on the record as read
/// ([`MonotonicIssuer::begin`]); each segment the driver asks for is
/// allocated and written (`max_id`) before it is used; and each answer
/// writes its last ID (`issued`, [`MonotonicIssuer::answer`]) before it
/// leaves — every write conditional on [`MonotonicIssuer::expected`], the
/// record as this instance last read or wrote it. A record other than that
/// means another instance wrote since: the segments in memory are dropped,
/// and the instance continues above the record. An old instance's write is
/// refused (another wrote since it read), so its answer never leaves: the
/// answers, in the order they leave, are strictly increasing.
///
/// ```
/// use edgeleaf::driver::{IssuedMark, MonotonicIssuer, SegmentStep};
/// use edgeleaf::segment::{Allocation, StepPolicy};
///
/// let mut m = MonotonicIssuer::new(StepPolicy::new(10)?);
/// m.begin(IssuedMark { max_id: 0, issued: 0 });    // the record as read
/// let mut out = [0u64; 3];
/// assert_eq!(m.poll(0, &mut out).next, SegmentStep::LoadNow { step: 10 });
/// // The store allocates 1..=10 and writes max_id 10 (if the record is still `m.expected()`).
/// m.loaded(Allocation::new(1, 10)?, 0)?;
/// let p = m.poll(0, &mut out);
/// assert_eq!((p.filled, out), (3, [1, 2, 3]));
/// // Before answering, the store writes this (if the record is still `m.expected()`).
/// let mark = m.answer(3);
/// assert_eq!(mark, IssuedMark { max_id: 10, issued: 3 });
/// m.written(mark);
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonotonicIssuer {
    policy: StepPolicy,
    driver: SegmentDriver,
    /// The record as this instance last read or wrote it.
    known: Option<IssuedMark>,
}

impl MonotonicIssuer {
    /// An issuer with nothing in memory.
    pub fn new(policy: StepPolicy) -> Self {
        MonotonicIssuer {
            policy,
            driver: SegmentDriver::new(policy),
            known: None,
        }
    }

    /// Starts a request on the record `read` from storage. A record other
    /// than the one this instance last read or wrote means another wrote
    /// since (another instance, or an admin raising `max_id`): the segments
    /// in memory are dropped, and only segments above the record are loaded.
    pub fn begin(&mut self, read: IssuedMark) {
        if self.known != Some(read) {
            let floor = read.max_id.max(read.issued);
            self.driver =
                SegmentDriver::with_buffer(SegmentBuffer::new(self.policy).starting_above(floor));
            self.known = Some(read);
        }
    }

    /// The record every write of this request is conditional on: the one
    /// this instance last read or wrote (`None` before [`MonotonicIssuer::begin`]).
    pub fn expected(&self) -> Option<IssuedMark> {
        self.known
    }

    /// Up to `out.len()` IDs, as [`SegmentDriver::poll`]. A load it asks
    /// for (now, or a prefetch) is allocated from the record and written
    /// before it is reported with [`MonotonicIssuer::loaded`].
    pub fn poll(&mut self, now_ms: u64, out: &mut [u64]) -> SegmentPoll {
        self.driver.poll(now_ms, out)
    }

    /// The whole loop of one answer, the store's loads being synchronous
    /// (its own storage): fills `out`, calling `load(step)` to allocate and
    /// write a segment whenever the driver asks — a prefetch included, done
    /// at once — and reports each load. A failed prefetch does not fail the
    /// answer it follows (the tag's last IDs are in memory and `out` is
    /// whole); a range refused does, prefetch or not. Then the record to
    /// write before `out` leaves ([`MonotonicIssuer::answer`] of its last).
    ///
    /// # Errors
    /// [`FillError::Load`] when a load the answer needed failed, or a range
    /// was refused (as [`MonotonicIssuer::loaded`]); [`FillError::InFlight`]
    /// when the driver waits for a load this store never started (a
    /// synchronous store leaves none in flight).
    pub fn fill<E: From<Error>>(
        &mut self,
        now_ms: u64,
        out: &mut [u64],
        mut load: impl FnMut(u64) -> Result<Allocation, E>,
    ) -> Result<IssuedMark, FillError<E>> {
        let mut filled = 0;
        loop {
            let poll = self.poll(now_ms, &mut out[filled..]);
            filled += poll.filled;
            let (step, needed) = match poll.next {
                SegmentStep::Done { prefetch: None } => break,
                SegmentStep::Done {
                    prefetch: Some(step),
                } => (step, false),
                SegmentStep::LoadNow { step } => (step, true),
                SegmentStep::Wait => return Err(FillError::InFlight),
            };
            match load(step) {
                Ok(alloc) => self
                    .loaded(alloc, now_ms)
                    .map_err(|e| FillError::Load(e.into()))?,
                Err(e) => {
                    self.load_failed();
                    if needed {
                        return Err(FillError::Load(e));
                    }
                    break;
                }
            }
        }
        Ok(self.answer(out.last().copied().unwrap_or(0)))
    }

    /// The store allocated `alloc` and wrote `max_id = alloc.end`.
    ///
    /// # Errors
    /// As [`SegmentDriver::loaded`]: a segment at or below what this
    /// instance loaded, or below the record it started on, is refused.
    pub fn loaded(&mut self, alloc: Allocation, now_ms: u64) -> Result<(), Error> {
        self.driver.loaded(alloc, now_ms)?;
        if let Some(k) = &mut self.known {
            k.max_id = alloc.end;
        }
        Ok(())
    }

    /// The store refused the allocation (no write was made, e.g. the tag is
    /// exhausted): the next poll that needs one asks again.
    pub fn load_failed(&mut self) {
        self.driver.load_failed();
    }

    /// The record to write before answering IDs up to `last` (the answer's
    /// last ID), conditional on [`MonotonicIssuer::expected`]; report it with
    /// [`MonotonicIssuer::written`] or [`MonotonicIssuer::write_failed`].
    pub fn answer(&self, last: u64) -> IssuedMark {
        IssuedMark {
            max_id: self.known.map_or(0, |k| k.max_id),
            issued: last,
        }
    }

    /// The store wrote `mark`: the answer may leave.
    pub fn written(&mut self, mark: IssuedMark) {
        self.known = Some(mark);
    }

    /// A write was refused (the record was not as this instance knew it) or
    /// failed: the answer must not leave, and what is in memory is dropped
    /// (its IDs are skipped, never answered).
    pub fn write_failed(&mut self) {
        self.known = None;
        self.driver = SegmentDriver::new(self.policy);
    }

    /// The driver's state for monitoring.
    pub fn snapshot(&self) -> SegmentSnapshot {
        self.driver.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_load_at_a_time_and_a_lost_one_is_taken_over() {
        let mut d = SegmentDriver::new(StepPolicy::new(10).unwrap());
        let mut out = [0u64; 1];
        assert_eq!(d.poll(0, &mut out).next, SegmentStep::LoadNow { step: 10 });
        assert_eq!(d.poll(1, &mut out).next, SegmentStep::Wait);
        assert_eq!(d.poll(2_999, &mut out).next, SegmentStep::Wait);
        assert_eq!(
            d.poll(3_000, &mut out).next,
            SegmentStep::LoadNow { step: 10 }
        );
        d.loaded(Allocation::new(1, 10).unwrap(), 3_001).unwrap();
        // The first load answers late: its range has nowhere to go but is
        // never handed out twice.
        let p = d.poll(3_002, &mut out);
        assert_eq!((p.filled, out[0]), (1, 1));
        assert!(d.loaded(Allocation::new(1, 10).unwrap(), 3_003).is_err());
    }

    #[test]
    fn prefetch_is_asked_once_and_again_after_a_failure() {
        let mut d = SegmentDriver::new(StepPolicy::new(10).unwrap());
        let _ = d.poll(0, &mut []);
        d.loaded(Allocation::new(1, 10).unwrap(), 0).unwrap();
        let mut out = [0u64; 2];
        let asked = d.poll(0, &mut out).next;
        assert_eq!(asked, SegmentStep::Done { prefetch: Some(20) });
        assert_eq!(asked.load(), Some(20));
        let after = d.poll(0, &mut out).next;
        assert_eq!(after, SegmentStep::Done { prefetch: None });
        assert_eq!(after.load(), None);
        d.load_failed();
        assert!(matches!(
            d.poll(0, &mut out).next,
            SegmentStep::Done { prefetch: Some(_) }
        ));
        // Both halves dry while the prefetch is in flight: wait, don't load twice.
        let mut big = [0u64; 10];
        assert_eq!(d.poll(0, &mut big).next, SegmentStep::Wait);
        assert_eq!(SegmentStep::Wait.load(), None);
        assert_eq!(SegmentStep::LoadNow { step: 7 }.load(), Some(7));
        assert_eq!(d.warm_up(0), None);
    }
}
