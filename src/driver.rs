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

use crate::error::Error;
use crate::segment::{Allocation, SegmentBuffer, SegmentSnapshot};
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

/// The answer of [`SegmentDriver::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct SegmentPoll {
    /// IDs written to the front of the buffer.
    pub filled: usize,
    /// What to do next.
    pub next: SegmentStep,
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

    /// The buffer's state for monitoring.
    pub fn snapshot(&self) -> SegmentSnapshot {
        self.buf.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::StepPolicy;

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
        assert_eq!(
            d.poll(0, &mut out).next,
            SegmentStep::Done { prefetch: Some(20) }
        );
        assert_eq!(
            d.poll(0, &mut out).next,
            SegmentStep::Done { prefetch: None }
        );
        d.load_failed();
        assert!(matches!(
            d.poll(0, &mut out).next,
            SegmentStep::Done { prefetch: Some(_) }
        ));
        // Both halves dry while the prefetch is in flight: wait, don't load twice.
        let mut big = [0u64; 10];
        assert_eq!(d.poll(0, &mut big).next, SegmentStep::Wait);
        assert_eq!(d.warm_up(0), None);
    }
}
