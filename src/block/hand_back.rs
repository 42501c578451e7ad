//! Retirement: the tails of an allocator's blocks handed back to the root,
//! last first, and the ones it keeps.

use crate::segment::{Allocation, SegmentBuffer};
use crate::tag::{Asker, TailBack, REQUEST_ID_TTL_MS};
use alloc::string::String;
use alloc::vec::Vec;

use super::{block_policy, BlockAllocator};

/// An allocator whose oldest block was leased this long ago is due to
/// retire ([`BlockAllocator::retire_due`]): the root remembers a block's
/// request ID for [`REQUEST_ID_TTL_MS`] (an hour), and only a block it
/// remembers can give its tail back; half of that leaves the hand-back time
/// to arrive. A busy region's blocks last about 15 minutes (Leaf's dynamic
/// step), so only slow regions retire, each at most twice an hour.
pub const RETIRE_AFTER_MS: u64 = REQUEST_ID_TTL_MS / 2;

/// The lease time recorded for a tail kept after the root refused it back
/// ([`BlockAllocator::keep`]): never [`retire_due`](BlockAllocator::retire_due).
const KEPT: u64 = u64::MAX;

/// A range of a block the allocator holds, with the request ID it was leased
/// under: the capability to hand it back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct Tail {
    /// The IDs (for a block: all of it; for a tail: the unserved end).
    pub range: Allocation,
    /// The request ID of the block lease.
    pub request_id: String,
}

impl Tail {
    /// The tail as the root's hand-back rule takes it
    /// ([`TagRecord::take_back`](crate::tag::TagRecord::take_back)): from
    /// `allocator`, the name its block was leased under
    /// ([`BlockAsk::as_lease`](super::BlockAsk::as_lease)).
    pub fn as_back<'a>(&'a self, allocator: &'a str) -> TailBack<'a> {
        TailBack {
            tail: self.range,
            request_id: &self.request_id,
            caller: Asker::Own(allocator),
            for_isolate: true,
        }
    }
}

/// The root's answer to one tail handed back ([`HandBack::answered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailAnswer {
    /// Taken back: `max_id` moved back to before it.
    Taken,
    /// Refused, nothing written; `untaken`: with the root's proof that it
    /// never took it ([`TakeBack::proves_untaken`](crate::tag::TakeBack::proves_untaken)).
    Refused {
        /// The root proves it never took this tail.
        untaken: bool,
    },
    /// No answer (an error, a timeout): the root may have taken it.
    Lost,
}

/// Tails on their way back to the tag's root, last first (only the last
/// range handed out can return, then the one before it): the host sends
/// each [`to_send`](HandBack::to_send) and reports its answer. A refusal or
/// a lost answer ends it: the earlier tails cannot come back once a later
/// one did not (and after an answer that says nothing, the root may or may
/// not have taken it), so they are not sent.
///
/// One rule for every holder of ranges: a regional allocator's retirement
/// (`HandBack<Tail>`, then [`finish`](HandBack::finish): what was not sent
/// stays the allocator's) and a segment client closing
/// (`HandBack<Allocation>`, from
/// [`SegmentDriver::hand_back`](crate::driver::SegmentDriver::hand_back):
/// the npm `SegmentGenerator.close()`; what is not taken stays a gap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandBack<T = Tail> {
    /// Not sent yet, the next last.
    unsent: Vec<T>,
    /// Still this holder's alone (refused with proof).
    kept: Vec<T>,
    /// IDs the root took back.
    taken: u64,
    done: bool,
}

impl<T: AsRef<Allocation>> HandBack<T> {
    /// The tails (last first, as [`BlockAllocator::retire`] and
    /// [`SegmentBuffer::retire`] give them), to hand back once the state
    /// without them is persisted.
    pub fn new(mut tails: Vec<T>) -> Self {
        tails.reverse();
        HandBack {
            unsent: tails,
            kept: Vec::new(),
            taken: 0,
            done: false,
        }
    }

    /// The tail to send now, or `None`: the hand-back is over.
    pub fn to_send(&mut self) -> Option<T> {
        if self.done {
            return None;
        }
        self.unsent.pop()
    }

    /// The root's answer to `tail` (the last [`to_send`](HandBack::to_send)).
    pub fn answered(&mut self, tail: T, answer: TailAnswer) {
        match answer {
            TailAnswer::Taken => self.taken += tail.as_ref().step,
            TailAnswer::Refused { untaken } => {
                if untaken {
                    self.kept.push(tail);
                }
                self.done = true;
            }
            TailAnswer::Lost => self.done = true,
        }
    }

    /// The tails not sent yet, the next first.
    pub fn pending(&self) -> impl Iterator<Item = &T> {
        self.unsent.iter().rev()
    }

    /// IDs the root took back so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }
}

impl HandBack<Tail> {
    /// Ends the hand-back: the tails still this allocator's (refused with
    /// proof, or never sent) served again by `allocator`
    /// ([`BlockAllocator::keep`]; persist its state after). Returns the IDs
    /// the root took back and the tails kept.
    pub fn finish(mut self, allocator: &mut BlockAllocator, now_ms: u64) -> (u64, usize) {
        self.kept.append(&mut self.unsent);
        let kept = if self.kept.is_empty() {
            0
        } else {
            allocator.keep(self.kept, now_ms)
        };
        (self.taken, kept)
    }
}

impl AsRef<Allocation> for Tail {
    fn as_ref(&self) -> &Allocation {
        &self.range
    }
}

impl BlockAllocator {
    /// Gives up every block (the object goes idle, or is retired): the
    /// unserved tails to hand back to the root, last first (only the last
    /// range handed out can return, and then the one before it). The ask in
    /// flight is abandoned (its answer is ignored). Persist the state before
    /// sending any tail: a tail is never served after it is sent. The tails
    /// start after the IDs handed on, never at or below what the state it
    /// was restored from counts handed on (its reservation).
    pub fn retire(&mut self) -> Vec<Tail> {
        let mut tails: Vec<Tail> = self
            .buf
            .snapshot()
            .segments
            .into_iter()
            .flatten()
            .filter(|half| half.value <= half.max && half.value > self.served_high)
            .filter_map(|half| {
                let block = self.blocks.iter().find(|b| b.range.end == half.max)?;
                Some(Tail {
                    range: Allocation::new(half.value, half.max).ok()?,
                    request_id: block.request_id.clone(),
                })
            })
            .collect();
        tails.sort_by_key(|t| core::cmp::Reverse(t.range.start));
        // The state saved now says what was handed on, not the reservation:
        // the IDs between were reserved by this instance (a restored one
        // starts above what it read), which handed none on, so they go back
        // with the tails; an old instance still serving within a reservation
        // it saved serves at or below what this one read.
        self.reserved = 0;
        self.buf = SegmentBuffer::new(block_policy()).starting_above(self.served_high);
        self.blocks.clear();
        self.leased_ms.clear();
        self.pending = None;
        self.in_flight.done();
        tails
    }

    /// The root refused to take `refused` back with proof that it never took
    /// them ([`TakeBack::proves_untaken`](crate::tag::TakeBack::proves_untaken):
    /// IDs followed them while their lease still ends there; it wrote
    /// nothing), or they were never sent: they are still this allocator's
    /// alone, so it serves them
    /// again rather than skip them and leave its region without runway. A
    /// kept tail is never due to retire again (the root's `max_id` is past
    /// it for good). A tail at or below a block loaded since the retirement
    /// stays skipped (the buffer refuses it). Never for a tail whose
    /// hand-back got no answer, or a refusal without that proof (a second
    /// copy of a hand-back the root took finds its lease gone): it may
    /// have been taken, and stays skipped. Returns how many tails are served again; persist the
    /// state before serving from them, as always.
    pub fn keep(&mut self, mut refused: Vec<Tail>, now_ms: u64) -> usize {
        // An ask sent since the retirement: the allocator has moved on to
        // a block above these tails; they stay skipped.
        if self.pending.is_some() {
            return 0;
        }
        refused.sort_by_key(|t| t.range.start);
        let mut kept = 0;
        for tail in refused {
            if tail.range.start <= self.served_high || self.buf.load(tail.range, now_ms).is_err() {
                continue;
            }
            self.blocks.push(tail);
            self.leased_ms.push(KEPT);
            kept += 1;
        }
        kept
    }

    /// Whether to [`retire`](BlockAllocator::retire) now, at clock reading
    /// `now_ms` (the host asks on a timer): it holds IDs in a block leased
    /// [`RETIRE_AFTER_MS`] or more ago, whose tail the root may soon forget.
    pub fn retire_due(&self, now_ms: u64) -> bool {
        self.next_check(now_ms) == Some(0)
    }

    /// How long after clock reading `now_ms` the host should next ask
    /// [`retire_due`](BlockAllocator::retire_due) (`Some(0)`: it is due
    /// now), or `None` when nothing it holds can ever become due: no block,
    /// or only tails kept after a retirement. A host that sets its timer to
    /// this answer, and only while it is `Some`, looks once per block
    /// instead of for ever.
    pub fn next_check(&self, now_ms: u64) -> Option<u64> {
        // A kept tail is never due, but the blocks leased after it are.
        let oldest = self.leased_ms.iter().find(|at| **at != KEPT)?;
        Some(RETIRE_AFTER_MS.saturating_sub(now_ms.saturating_sub(*oldest)))
    }
}
