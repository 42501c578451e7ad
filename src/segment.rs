//! Leaf's segment mode on the client side: a double buffer of ID ranges as a
//! pure state machine. It never loads anything itself; it tells the caller when
//! to load the next segment and with which step, and takes the result.

use crate::error::{check_range, Error};

/// The largest ID a segment may hold: IDs stay positive as Java/SQL `bigint`.
pub const MAX_SEGMENT_ID: u64 = i64::MAX as u64;
/// Leaf's cap on the dynamic step.
pub const MAX_STEP: u64 = 1_000_000;
/// Leaf's target: a segment should last 15 minutes.
pub const DEFAULT_SEGMENT_DURATION_MS: u64 = 15 * 60 * 1000;
/// Leaf loads the next segment once 10% of the current one is used.
pub const DEFAULT_PREFETCH_PERCENT: u8 = 10;

/// A range of IDs, `start..=end`, handed out by a tag's store in one
/// transaction (Leaf's `(max_id - step, max_id]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Allocation {
    /// First ID of the range.
    pub start: u64,
    /// Last ID of the range (inclusive).
    pub end: u64,
    /// The step the store granted (`end - start + 1`).
    pub step: u64,
}

impl AsRef<Allocation> for Allocation {
    fn as_ref(&self) -> &Allocation {
        self
    }
}

impl Allocation {
    /// A checked range.
    ///
    /// # Errors
    /// [`Error::InvalidSegment`] unless `1 <= start <= end <= 2^63 - 1`.
    pub fn new(start: u64, end: u64) -> Result<Self, Error> {
        if start == 0 || start > end || end > MAX_SEGMENT_ID {
            return Err(Error::InvalidSegment { start, end });
        }
        Ok(Allocation {
            start,
            end,
            step: end - start + 1,
        })
    }
}

/// Leaf's dynamic step: aim for segments that last about `duration_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct StepPolicy {
    /// The configured step: never go below it, and the first load uses it.
    pub min_step: u64,
    /// Never go above it (Leaf: 1,000,000).
    pub max_step: u64,
    /// A segment that lasted less than this doubles the step (Leaf: 15 min);
    /// one that lasted more than twice this halves it.
    pub duration_ms: u64,
}

impl StepPolicy {
    /// Leaf's policy for a configured step.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] unless `1 <= min_step <= 1,000,000`.
    pub fn new(min_step: u64) -> Result<Self, Error> {
        check_range("step", min_step, 1, MAX_STEP)?;
        Ok(StepPolicy {
            min_step,
            max_step: MAX_STEP,
            duration_ms: DEFAULT_SEGMENT_DURATION_MS,
        })
    }

    /// Checks a hand-built policy.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] unless `1 <= min_step <= max_step <= 1,000,000`
    /// and `duration_ms >= 1`.
    pub fn validate(&self) -> Result<(), Error> {
        check_range("max_step", self.max_step, 1, MAX_STEP)?;
        check_range("step", self.min_step, 1, self.max_step)?;
        check_range("duration_ms", self.duration_ms, 1, u64::MAX / 2)?;
        Ok(())
    }

    /// The step for the next segment, given the current step and how long the
    /// last segment lasted: under `duration_ms` doubles (capped at
    /// `max_step`), up to twice that keeps, longer halves (never below
    /// `min_step`).
    pub fn next_step(&self, current_step: u64, lasted_ms: u64) -> u64 {
        let step = current_step.clamp(self.min_step, self.max_step);
        if lasted_ms < self.duration_ms {
            step.saturating_mul(2).min(self.max_step)
        } else if lasted_ms < self.duration_ms.saturating_mul(2) {
            step
        } else {
            (step / 2).max(self.min_step)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
struct Segment {
    /// The next ID to hand out; past `end` when used up.
    next: u64,
    end: u64,
    step: u64,
    /// Once `next` reaches this, the next segment should be loading.
    prefetch_at: u64,
}

impl Segment {
    fn remaining(&self) -> u64 {
        (self.end + 1).saturating_sub(self.next)
    }
}

/// One half of the double buffer as monitoring shows it (Leaf's `/cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SegmentView {
    /// The next ID this segment will hand out (`max + 1` when used up).
    pub value: u64,
    /// The segment's last ID.
    pub max: u64,
    /// The segment's length.
    pub step: u64,
}

/// The buffer's state for monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct SegmentSnapshot {
    /// A segment has been loaded at least once.
    pub initialized: bool,
    /// Which half (0 or 1) is current.
    pub current_pos: u8,
    /// The other half holds a loaded segment.
    pub next_ready: bool,
    /// A load is in flight.
    pub loading: bool,
    /// The step the next load will ask for is based on this.
    pub step: u64,
    /// Both halves.
    pub segments: [Option<SegmentView>; 2],
}

/// The answer of [`SegmentBuffer::next_id`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum SegmentNext {
    /// An ID. With `prefetch`, the caller must now start loading the next
    /// segment (in the background) and report back with
    /// [`SegmentBuffer::load`] or [`SegmentBuffer::load_failed`].
    Id {
        /// The ID.
        id: u64,
        /// Start loading the next segment now.
        prefetch: bool,
    },
    /// Both halves are empty. With `load`, the caller must load a segment
    /// now; without, a load is already in flight: wait for it.
    Exhausted {
        /// Start a load now.
        load: bool,
    },
}

/// The answer of [`SegmentBuffer::take`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Take {
    /// IDs written to the front of the buffer.
    pub filled: usize,
    /// Start loading the next segment now (as [`SegmentNext::Id::prefetch`]).
    pub load: bool,
}

/// The answer of [`SegmentBuffer::take_range`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct RangeTake {
    /// The IDs taken: a contiguous range of the current half (`None`: both
    /// halves are dry, or none was asked for).
    pub range: Option<Allocation>,
    /// Start loading the next segment now (as [`Take::load`]).
    pub load: bool,
}

/// Leaf's double buffer for one tag.
///
/// ```
/// use edgeleaf::segment::{Allocation, SegmentBuffer, SegmentNext, StepPolicy};
///
/// let mut buf = SegmentBuffer::new(StepPolicy::new(10)?);
/// assert_eq!(buf.next_id(), SegmentNext::Exhausted { load: true });
/// let step = buf.step_for_next_load(0);        // 10 on the first load
/// buf.load(Allocation::new(1, step)?, 0)?;      // what the store answered
/// assert_eq!(buf.next_id(), SegmentNext::Id { id: 1, prefetch: false });
/// assert_eq!(buf.next_id(), SegmentNext::Id { id: 2, prefetch: true }); // 10% used
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SegmentBuffer {
    policy: StepPolicy,
    prefetch_percent: u8,
    segments: [Option<Segment>; 2],
    current: usize,
    loading: bool,
    step: u64,
    last_load_ms: Option<u64>,
    high_water: u64,
}

impl SegmentBuffer {
    /// An empty buffer that prefetches at Leaf's 10%.
    pub fn new(policy: StepPolicy) -> Self {
        SegmentBuffer {
            step: policy.min_step,
            policy,
            prefetch_percent: DEFAULT_PREFETCH_PERCENT,
            segments: [None, None],
            current: 0,
            loading: false,
            last_load_ms: None,
            high_water: 0,
        }
    }

    /// An empty buffer that asks for the next segment once `percent` of the
    /// current one is used.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] unless `percent` is 0..=100 and the policy is
    /// valid.
    pub fn with_prefetch_percent(policy: StepPolicy, percent: u8) -> Result<Self, Error> {
        policy.validate()?;
        check_range("prefetch_percent", percent.into(), 0, 100)?;
        let mut buf = Self::new(policy);
        buf.prefetch_percent = percent;
        Ok(buf)
    }

    /// The same buffer, refusing every segment at or below `floor` (IDs
    /// another holder may have handed out): a holder that starts over on a
    /// store's record loads only above it.
    pub fn starting_above(mut self, floor: u64) -> Self {
        self.high_water = self.high_water.max(floor);
        self
    }

    /// The fence: the end of the last segment loaded (0: none, or the floor
    /// of [`starting_above`](SegmentBuffer::starting_above)). Nothing at or
    /// below it is ever loaded again, so a client may tell its store it
    /// holds nothing there (the service's lease `after`: the credits of
    /// other clients of the same key, at or below it, are left for them).
    pub fn fence(&self) -> u64 {
        self.high_water
    }

    /// The step to ask the store for now, by Leaf's dynamic rule from how long
    /// the last segment lasted (`now_ms` minus the last load).
    pub fn step_for_next_load(&self, now_ms: u64) -> u64 {
        match self.last_load_ms {
            None => self.policy.min_step,
            Some(at) => self.policy.next_step(self.step, now_ms.saturating_sub(at)),
        }
    }

    /// Marks a load as in flight, for callers that start one without having
    /// been told to (a warm-up before the first request). Returns false when
    /// one is already in flight or there is no free half.
    pub fn begin_load(&mut self) -> bool {
        if self.loading || (self.segments[self.other()].is_some() && self.current_has_ids()) {
            return false;
        }
        self.loading = true;
        true
    }

    /// Installs a segment the store allocated, at clock reading `now_ms`
    /// (used by the dynamic step). Ends the load in flight, if any.
    ///
    /// # Errors
    /// [`Error::SegmentOverlap`] when the range does not lie wholly above every
    /// ID loaded before (loading it could repeat an ID);
    /// [`Error::SegmentBufferFull`] when both halves still hold IDs;
    /// [`Error::InvalidSegment`] for a malformed range. The buffer is
    /// unchanged (but for the load flag) on error.
    pub fn load(&mut self, alloc: Allocation, now_ms: u64) -> Result<(), Error> {
        self.loading = false;
        let alloc = Allocation::new(alloc.start, alloc.end)?;
        if alloc.start <= self.high_water {
            return Err(Error::SegmentOverlap {
                start: alloc.start,
                high_water: self.high_water,
            });
        }
        self.drop_used_up();
        let slot = if self.segments[self.current].is_none() {
            self.current
        } else if self.segments[self.other()].is_none() {
            self.other()
        } else {
            return Err(Error::SegmentBufferFull);
        };
        let used_before_prefetch = alloc.step * u64::from(self.prefetch_percent) / 100;
        self.segments[slot] = Some(Segment {
            next: alloc.start,
            end: alloc.end,
            step: alloc.step,
            prefetch_at: alloc.start + used_before_prefetch,
        });
        self.high_water = alloc.end;
        self.step = alloc.step;
        self.last_load_ms = Some(now_ms);
        Ok(())
    }

    /// Ends the load in flight without a segment (the store failed); the next
    /// call that needs one will ask again.
    pub fn load_failed(&mut self) {
        self.loading = false;
        if let Some(seg) = &mut self.segments[self.current] {
            seg.prefetch_at = seg.next.saturating_sub(1);
        }
    }

    fn other(&self) -> usize {
        1 - self.current
    }

    fn current_has_ids(&self) -> bool {
        self.segments[self.current].is_some_and(|s| s.remaining() > 0)
    }

    /// Frees a used-up current half, switching to the other if it is loaded.
    fn drop_used_up(&mut self) {
        if self.segments[self.current].is_some_and(|s| s.remaining() == 0) {
            self.segments[self.current] = None;
            if self.segments[self.other()].is_some() {
                self.current = self.other();
            }
        }
    }

    /// Called once the current segment passed its prefetch point: starts the
    /// load unless one is in flight or the other half is ready. Either way the
    /// segment stops asking (load_failed re-arms it), keeping the hot path short.
    fn wants_prefetch(&mut self) -> bool {
        let other_empty = self.segments[self.other()].is_none();
        let Some(seg) = &mut self.segments[self.current] else {
            return false;
        };
        if seg.next <= seg.prefetch_at {
            return false;
        }
        seg.prefetch_at = u64::MAX;
        if !self.loading && other_empty {
            self.loading = true;
            true
        } else {
            false
        }
    }

    /// The next ID, or what the caller must do to get one.
    #[inline]
    pub fn next_id(&mut self) -> SegmentNext {
        if let Some(seg) = &mut self.segments[self.current] {
            if seg.next <= seg.end {
                let id = seg.next;
                seg.next += 1;
                let prefetch = id >= seg.prefetch_at && self.wants_prefetch();
                return SegmentNext::Id { id, prefetch };
            }
        }
        self.drop_used_up();
        if self.current_has_ids() {
            return self.next_id();
        }
        let load = !self.loading;
        self.loading = true;
        SegmentNext::Exhausted { load }
    }

    /// Takes up to `out.len()` IDs (across the switch to the other half).
    /// `filled < out.len()` means both halves ran dry: `load` then says
    /// whether the caller must start the load or one is in flight already.
    pub fn take(&mut self, out: &mut [u64]) -> Take {
        let mut filled = 0;
        let mut load = false;
        while filled < out.len() {
            self.drop_used_up();
            let Some(seg) = &mut self.segments[self.current] else {
                break;
            };
            let room = usize::try_from(seg.remaining())
                .unwrap_or(usize::MAX)
                .min(out.len() - filled);
            if room == 0 {
                break;
            }
            for (slot, id) in out[filled..filled + room].iter_mut().zip(seg.next..) {
                *slot = id;
            }
            seg.next += room as u64;
            filled += room;
            load |= self.wants_prefetch();
        }
        if filled < out.len() && !self.loading {
            self.loading = true;
            load = true;
        }
        Take { filled, load }
    }

    /// Takes a contiguous range of at most `max` IDs from the current half:
    /// shorter at the half's end (the next call starts on the other half),
    /// so that a segment server hands on ranges, not lists. `range: None`
    /// with `max > 0` means both halves ran dry: `load` then says whether
    /// the caller must start the load or one is in flight already; with a
    /// range, `load` is the prefetch signal of [`SegmentBuffer::take`].
    pub fn take_range(&mut self, max: u64) -> RangeTake {
        if max == 0 {
            return RangeTake {
                range: None,
                load: false,
            };
        }
        self.drop_used_up();
        if let Some(seg) = &mut self.segments[self.current] {
            let len = seg.remaining().min(max);
            if len > 0 {
                let range = Allocation {
                    start: seg.next,
                    end: seg.next + (len - 1),
                    step: len,
                };
                seg.next += len;
                let load = self.wants_prefetch();
                return RangeTake {
                    range: Some(range),
                    load,
                };
            }
        }
        let load = !self.loading;
        self.loading = true;
        RangeTake { range: None, load }
    }

    /// Counts every loaded ID at or below `id` as handed out, without the
    /// prefetch signal or a load: the buffer as a holder that reserved them
    /// saves it (a reader of that state starts above `id`, and still asks
    /// for the next segment when its own take passes the prefetch point).
    #[cfg(feature = "alloc")]
    pub(crate) fn skip_through(&mut self, id: u64) {
        for seg in self.segments.iter_mut().flatten() {
            seg.next = seg.next.max(id.saturating_add(1).min(seg.end + 1));
        }
    }

    /// The IDs loaded and not handed out: each half's unused range, last
    /// first (the order in which a tag's store can take them back: only the
    /// last range it handed out can return, then the one before it). A half
    /// used up, or none, is `None`; a range is never one this buffer handed
    /// out an ID of.
    pub fn unused(&self) -> [Option<Allocation>; 2] {
        let range = |s: &Option<Segment>| {
            s.filter(|s| s.remaining() > 0).map(|s| Allocation {
                start: s.next,
                end: s.end,
                step: s.remaining(),
            })
        };
        let (current, other) = (
            range(&self.segments[self.current]),
            range(&self.segments[self.other()]),
        );
        match (current, other) {
            (Some(c), Some(o)) if c.end > o.end => [Some(c), Some(o)],
            (c, None) => [c, None],
            (None, o) => [o, None],
            (c, o) => [o, c],
        }
    }

    /// Gives up both halves (a client closing): their unused ranges, as
    /// [`SegmentBuffer::unused`] says, to hand back to the tag's store. The
    /// buffer then hands out nothing until it loads again, and never loads
    /// at or below an ID it held (its fence stays), so a range handed back
    /// is never handed out by it. A load in flight is forgotten (its answer
    /// may still be loaded: it lies above the fence).
    pub fn retire(&mut self) -> [Option<Allocation>; 2] {
        let unused = self.unused();
        self.segments = [None, None];
        self.current = 0;
        self.loading = false;
        unused
    }

    /// Whether a load is in flight.
    pub fn loading(&self) -> bool {
        self.loading
    }

    /// IDs available without a load.
    pub fn available(&self) -> u64 {
        self.segments.iter().flatten().map(Segment::remaining).sum()
    }

    /// The buffer's state for monitoring.
    pub fn snapshot(&self) -> SegmentSnapshot {
        let view = |s: &Option<Segment>| {
            s.map(|s| SegmentView {
                value: s.next,
                max: s.end,
                step: s.step,
            })
        };
        SegmentSnapshot {
            initialized: self.last_load_ms.is_some(),
            current_pos: u8::from(self.current == 1),
            next_ready: self.segments[self.other()].is_some(),
            loading: self.loading,
            step: self.step,
            segments: [view(&self.segments[0]), view(&self.segments[1])],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    #[test]
    fn dynamic_step_follows_leaf() {
        let p = StepPolicy::new(1000).unwrap();
        assert_eq!(p.next_step(1000, 5 * MIN), 2000);
        assert_eq!(p.next_step(1000, 15 * MIN - 1), 2000);
        assert_eq!(p.next_step(1000, 15 * MIN), 1000);
        assert_eq!(p.next_step(4000, 30 * MIN - 1), 4000);
        assert_eq!(p.next_step(4000, 30 * MIN), 2000);
        assert_eq!(p.next_step(1000, 60 * MIN), 1000, "never below min");
        assert_eq!(p.next_step(800_000, 0), 1_000_000, "capped");
        assert_eq!(p.next_step(1_000_000, 0), 1_000_000);
    }

    #[test]
    fn step_bounds_are_checked() {
        assert!(StepPolicy::new(0).is_err());
        assert!(StepPolicy::new(1).is_ok());
        assert!(StepPolicy::new(1_000_000).is_ok());
        assert!(StepPolicy::new(1_000_001).is_err());
        let bad = StepPolicy {
            min_step: 10,
            max_step: 5,
            duration_ms: 1,
        };
        assert!(SegmentBuffer::with_prefetch_percent(bad, 10).is_err());
        assert!(SegmentBuffer::with_prefetch_percent(StepPolicy::new(5).unwrap(), 101).is_err());
    }

    #[test]
    fn double_buffer_switches_without_waiting() {
        let mut b = SegmentBuffer::new(StepPolicy::new(10).unwrap());
        assert_eq!(b.next_id(), SegmentNext::Exhausted { load: true });
        assert_eq!(b.next_id(), SegmentNext::Exhausted { load: false });
        b.load(Allocation::new(1, 10).unwrap(), 0).unwrap();
        assert_eq!(
            b.next_id(),
            SegmentNext::Id {
                id: 1,
                prefetch: false
            }
        );
        assert_eq!(
            b.next_id(),
            SegmentNext::Id {
                id: 2,
                prefetch: true
            }
        );
        assert_eq!(
            b.next_id(),
            SegmentNext::Id {
                id: 3,
                prefetch: false
            }
        );
        // While loading, the dynamic step sees a segment that lasted 1 minute.
        assert_eq!(b.step_for_next_load(MIN), 20);
        b.load(Allocation::new(31, 50).unwrap(), MIN).unwrap();
        let snap = b.snapshot();
        assert!(snap.initialized && snap.next_ready && !snap.loading);
        let ids: [u64; 8] = core::array::from_fn(|_| match b.next_id() {
            SegmentNext::Id { id, .. } => id,
            other => panic!("{other:?}"),
        });
        assert_eq!(ids, [4, 5, 6, 7, 8, 9, 10, 31]);
        assert_eq!(b.snapshot().current_pos, 1);
        assert!(!b.snapshot().next_ready);
    }

    #[test]
    fn refuses_overlapping_or_lower_segments() {
        let mut b = SegmentBuffer::new(StepPolicy::new(10).unwrap());
        b.load(Allocation::new(11, 20).unwrap(), 0).unwrap();
        assert_eq!(
            b.load(Allocation::new(20, 29).unwrap(), 0),
            Err(Error::SegmentOverlap {
                start: 20,
                high_water: 20
            })
        );
        assert!(b.load(Allocation::new(1, 10).unwrap(), 0).is_err());
        b.load(Allocation::new(21, 30).unwrap(), 0).unwrap();
        assert_eq!(
            b.load(Allocation::new(31, 40).unwrap(), 0),
            Err(Error::SegmentBufferFull)
        );
        assert!(Allocation::new(0, 5).is_err());
        assert!(Allocation::new(5, 4).is_err());
        assert!(Allocation::new(1, MAX_SEGMENT_ID + 1).is_err());
    }

    #[test]
    fn take_crosses_segments_and_reports_the_load() {
        let mut b = SegmentBuffer::new(StepPolicy::new(10).unwrap());
        b.load(Allocation::new(1, 10).unwrap(), 0).unwrap();
        let mut out = [0u64; 4];
        let t = b.take(&mut out);
        assert_eq!((t.filled, t.load), (4, true));
        b.load(Allocation::new(101, 110).unwrap(), 0).unwrap();
        let mut out = [0u64; 20];
        let t = b.take(&mut out);
        assert_eq!(t.filled, 16);
        assert_eq!(out[5], 10);
        assert_eq!(out[6], 101);
        assert!(t.load, "both halves dry: caller must load");
        assert_eq!(b.available(), 0);
    }

    #[test]
    fn failed_load_is_asked_again() {
        let mut b = SegmentBuffer::new(StepPolicy::new(10).unwrap());
        assert_eq!(b.next_id(), SegmentNext::Exhausted { load: true });
        b.load_failed();
        assert_eq!(b.next_id(), SegmentNext::Exhausted { load: true });
    }

    #[test]
    fn take_range_stops_at_a_halfs_end_and_signals_as_take() {
        let mut b = SegmentBuffer::new(StepPolicy::new(10).unwrap());
        assert_eq!(
            b.take_range(5),
            RangeTake {
                range: None,
                load: true
            }
        );
        assert!(!b.take_range(5).load, "a load is in flight");
        b.load(Allocation::new(1, 10).unwrap(), 0).unwrap();
        assert_eq!(b.take_range(0).range, None);
        let t = b.take_range(1);
        assert_eq!(
            (t.range, t.load),
            (Some(Allocation::new(1, 1).unwrap()), false)
        );
        let t = b.take_range(3);
        assert_eq!(
            (t.range, t.load),
            (Some(Allocation::new(2, 4).unwrap()), true)
        );
        b.load(Allocation::new(101, 110).unwrap(), 0).unwrap();
        let t = b.take_range(100);
        assert_eq!(
            t.range,
            Some(Allocation::new(5, 10).unwrap()),
            "the half's end"
        );
        let t = b.take_range(100);
        assert_eq!(t.range, Some(Allocation::new(101, 110).unwrap()));
        assert!(t.load, "past the prefetch point of the other half");
        assert_eq!(b.take_range(1).range, None);
    }
}
