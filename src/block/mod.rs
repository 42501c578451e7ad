//! A tag's regional allocator, as a pure state machine: a segment *client*
//! of the tag's root (its store, which owns `max_id`) and a segment *server*
//! to the isolates of its region. It is the segment client's double buffer
//! ([`SegmentBuffer`]) whose halves are *blocks* leased from the root with
//! the tag's lease rule ([`TagRecord::lease_segment`](crate::tag::TagRecord::lease_segment)),
//! handed on in contiguous ranges ([`SegmentBuffer::take_range`]). Not a
//! third allocator: the root allocates, the buffer serves.
//!
//! The host (a Durable Object named `{tag}@{region}`) holds no rule:
//!
//! ```text
//! state  = storage.get() once, then kept in memory   (BlockAllocator, serde)
//! answer = allocator.serve(step, now, rand)           // or loaded / retire
//! storage.put(state)          // BEFORE anything leaves: a range, a block ask,
//!                             // a tail; a failed put answers nothing and
//!                             // drops the memory copy (read it again)
//! then: answer the range; send the block ask to the root; hand tails back
//! ```
//!
//! Why this keeps every ID unique, with the host's part:
//! - a range is answered only after the state that records it served
//!   (`served_high`) is durable: a replacement restored from storage never
//!   serves it again, and an old instance whose writes fail answers nothing;
//! - a block ask carries a request ID drawn from randomness the host passes
//!   in, and is in the state before it is sent: a replacement (or a retry
//!   after a lost answer) sends the same ask again and the root answers the
//!   same block (`SegmentAnswer::Again`), never a second one for one ask;
//! - only the block ask in the state is installed: a late answer to an ask
//!   abandoned by [`BlockAllocator::retire`] (or a second copy of an answer)
//!   is ignored, and never handed back (its IDs may be served already);
//! - a tail is handed back only after the state without it is durable, and
//!   the root takes it only if nothing followed it and it is the end of the
//!   block remembered under this allocator's request ID
//!   ([`TagRecord::take_back`](crate::tag::TagRecord::take_back)).

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::Error;
use crate::rand::RandSource;
use crate::segment::{
    Allocation, SegmentBuffer, SegmentSnapshot, StepPolicy, DEFAULT_SEGMENT_DURATION_MS, MAX_STEP,
};
use crate::tag::{Asker, SegmentAsk, TailBack, REQUEST_ID_TTL_MS};
use crate::wait::{InFlight, DEFAULT_TAKE_OVER_MS};

/// A block is this many of the tag's steps (before Leaf's dynamic rule grows
/// it): an allocator serves every isolate of its region, so its loads should
/// be a tenth of theirs. With Leaf's prefetch at 10% used, the next block is
/// asked for once one isolate segment of the block is served, so the region
/// keeps nine segments of runway while the root answers; a lost allocator
/// skips at most two blocks. The root clamps the step to the tag's
/// `max_step` ([`TagRecord::grant_step`](crate::tag::TagRecord::grant_step)),
/// so a tag that pins its step (`max_step == step`) gets blocks of its step.
pub const BLOCK_FACTOR: u64 = 10;

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

/// The random bytes of a block ask's request ID (written as hex): 128 bits,
/// so that no two asks of any allocator ever share one.
pub const BLOCK_REQUEST_ID_BYTES: usize = 16;

/// A block lease, as the allocator asks the root for it: recorded in the
/// state before it is sent, and sent again unchanged until answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct BlockAsk {
    /// The lease's request ID (hex of [`BLOCK_REQUEST_ID_BYTES`] random bytes).
    pub request_id: String,
    /// The step asked for (`None`: the tag's own step, for the first block,
    /// before the allocator knows it).
    pub step: Option<u64>,
}

impl BlockAsk {
    /// The ask as the root's lease rule takes it
    /// ([`TagRecord::lease_segment`](crate::tag::TagRecord::lease_segment)):
    /// from `allocator` (the allocator's own name, e.g. `"{tag}@{region}"`,
    /// a credential no one else holds), one of the service's own.
    pub fn as_lease<'a>(&'a self, allocator: &'a str) -> SegmentAsk<'a> {
        SegmentAsk {
            step: self.step,
            request_id: Some(&self.request_id),
            caller: Asker::Own(allocator),
            for_isolate: true,
        }
    }
}

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
    /// ([`BlockAsk::as_lease`]).
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
    /// never took it ([`TailSkipped::proves_untaken`](crate::tag::TailSkipped::proves_untaken)).
    Refused {
        /// The root proves it never took this tail.
        untaken: bool,
    },
    /// No answer (an error, a timeout): the root may have taken it.
    Lost,
}

/// One retirement's tails on their way back to the root, last first (only
/// the last range handed out can return, then the one before it): the host
/// sends each [`to_send`](HandBack::to_send) and reports its answer, then
/// [`finish`](HandBack::finish)es. A refusal or a lost answer ends it: the
/// earlier tails cannot come back once a later one did not, so they are
/// not sent, and stay this allocator's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandBack {
    /// Not sent yet, the next last.
    unsent: Vec<Tail>,
    /// Still this allocator's alone: served again at the end.
    kept: Vec<Tail>,
    /// IDs the root took back.
    taken: u64,
    done: bool,
}

impl HandBack {
    /// The tails of [`BlockAllocator::retire`] (last first), to hand back
    /// once its state without them is persisted.
    pub fn new(mut tails: Vec<Tail>) -> Self {
        tails.reverse();
        HandBack {
            unsent: tails,
            kept: Vec::new(),
            taken: 0,
            done: false,
        }
    }

    /// The tail to send now, or `None`: [`finish`](HandBack::finish).
    pub fn to_send(&mut self) -> Option<Tail> {
        if self.done {
            return None;
        }
        self.unsent.pop()
    }

    /// The root's answer to `tail` (the last [`to_send`](HandBack::to_send)).
    pub fn answered(&mut self, tail: Tail, answer: TailAnswer) {
        match answer {
            TailAnswer::Taken => self.taken += tail.range.step,
            TailAnswer::Refused { untaken } => {
                if untaken {
                    self.kept.push(tail);
                }
                self.done = true;
            }
            TailAnswer::Lost => self.done = true,
        }
    }

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

/// What the host does after [`BlockAllocator::serve`] (always: persist the
/// state first).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Serve {
    /// Persist, then answer `range` to the isolate; then, with `ask`, send
    /// it to the root (in the background) and report its answer with
    /// [`BlockAllocator::loaded`] or [`BlockAllocator::load_failed`].
    Range {
        /// The IDs for the isolate: a contiguous range of one block.
        range: Allocation,
        /// A block ask to send now.
        ask: Option<BlockAsk>,
    },
    /// No IDs: persist, send this ask to the root, report its answer, and
    /// serve again.
    Load(BlockAsk),
    /// No IDs and a block ask is in flight: wait for it (within the
    /// request's budget), then serve again; or lease from the root.
    Wait,
}

/// What [`BlockAllocator::loaded`] did with an answer of the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockLoad {
    /// The block is installed: persist the state before serving from it (the
    /// next [`BlockAllocator::serve`] persists anyway).
    Installed,
    /// Not the ask in the state (abandoned by a retirement, or answered
    /// already): ignored. Its IDs stay skipped, never handed back.
    Ignored,
}

/// A tag's regional allocator: its blocks, the ask in flight, and the
/// highest ID it ever handed on. Serialise it whole (feature `serde`) as the
/// object's state, as JSON text (`serde_json::to_string`): its numbers go up
/// to 2^64 − 1, past what a JS number holds exactly.
///
/// ```
/// use edgeleaf::block::{BlockAllocator, BlockLoad, Serve};
/// use edgeleaf::rand::SplitMix64;
/// use edgeleaf::segment::Allocation;
///
/// let mut rand = SplitMix64::new(7);
/// let mut a = BlockAllocator::new();
/// let Serve::Load(ask) = a.serve(100, 0, &mut rand) else { unreachable!() };
/// // persist, send `ask` to the root; it answers a block and the tag's step
/// assert_eq!(a.loaded(&ask.request_id, Allocation::new(1, 1_000)?, 100, 0)?, BlockLoad::Installed);
/// let Serve::Range { range, .. } = a.serve(100, 0, &mut rand) else { unreachable!() };
/// assert_eq!((range.start, range.end), (1, 100)); // persist, then answer it
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct BlockAllocator {
    /// The blocks as the two halves of a double buffer.
    buf: SegmentBuffer,
    /// The blocks with IDs not yet handed on, with their request IDs.
    blocks: Vec<Tail>,
    /// When each of `blocks` was installed (clock readings, in order).
    #[cfg_attr(feature = "serde", serde(default))]
    leased_ms: Vec<u64>,
    /// The block ask recorded before it was sent, until answered.
    pending: Option<BlockAsk>,
    /// The tag's step, as the root last said (`None`: no block yet).
    tag_step: Option<u64>,
    /// The highest ID ever handed on (0: none): nothing at or below it is
    /// served again, whatever a block says.
    served_high: u64,
    /// When this instance sent the pending ask; not saved: a restored
    /// instance sends the pending ask again at once.
    #[cfg_attr(feature = "serde", serde(skip))]
    in_flight: InFlight,
}

impl Default for BlockAllocator {
    fn default() -> Self {
        Self::new()
    }
}

/// The buffer's own policy: Leaf's dynamic rule over any step; the floor
/// (the tag's step times [`BLOCK_FACTOR`]) is applied when a block is asked.
fn block_policy() -> StepPolicy {
    StepPolicy {
        min_step: 1,
        max_step: MAX_STEP,
        duration_ms: DEFAULT_SEGMENT_DURATION_MS,
    }
}

/// A request ID of [`BLOCK_REQUEST_ID_BYTES`] random bytes, as hex.
fn request_id(rand: &mut impl RandSource) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(2 * BLOCK_REQUEST_ID_BYTES);
    for _ in 0..BLOCK_REQUEST_ID_BYTES / 4 {
        for byte in rand.next_u32().to_be_bytes() {
            id.push(char::from(HEX[usize::from(byte >> 4)]));
            id.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
    id
}

impl BlockAllocator {
    /// An allocator with no block yet.
    pub fn new() -> Self {
        BlockAllocator {
            buf: SegmentBuffer::new(block_policy()),
            blocks: Vec::new(),
            leased_ms: Vec::new(),
            pending: None,
            tag_step: None,
            served_high: 0,
            in_flight: InFlight::default(),
        }
    }

    /// A contiguous range of `requested_step` IDs for an isolate (at least
    /// the tag's step however few are asked, shorter at a block's end), or
    /// what to do to get one, at clock reading `now_ms`; `rand` draws the
    /// request ID of a new block ask. The host persists the state before it
    /// answers or sends anything.
    pub fn serve(&mut self, requested_step: u64, now_ms: u64, rand: &mut impl RandSource) -> Serve {
        let take = self.buf.take_range(self.grant(requested_step));
        let ask = if take.load {
            Some(self.new_ask(now_ms, rand))
        } else {
            self.ask_to_send_again(now_ms)
        };
        match take.range {
            Some(range) => {
                self.served_high = range.end;
                self.forget_served_blocks();
                Serve::Range { range, ask }
            }
            None => ask.map_or(Serve::Wait, Serve::Load),
        }
    }

    /// The root answered the block ask `request_id` with `block`, for a tag
    /// whose step is `tag_step`, at clock reading `now_ms`.
    ///
    /// # Errors
    /// [`Error::SegmentOverlap`] for a block at or below IDs this allocator
    /// holds or handed on (never served; the next block is asked under a new
    /// request ID); [`Error::InvalidSegment`] for a malformed range.
    pub fn loaded(
        &mut self,
        request_id: &str,
        block: Allocation,
        tag_step: u64,
        now_ms: u64,
    ) -> Result<BlockLoad, Error> {
        let Some(ask) = self.pending.take_if(|a| a.request_id == request_id) else {
            return Ok(BlockLoad::Ignored);
        };
        self.in_flight.done();
        // The buffer's high-water is at least `served_high` (it is raised
        // to it on retirement): it refuses a block at or below it.
        let installed = Allocation::new(block.start, block.end)
            .and_then(|block| self.buf.load(block, now_ms).map(|()| block));
        let block = match installed {
            Ok(block) => block,
            Err(e) => {
                // No load in flight any more: the next serve asks anew.
                self.buf.load_failed();
                return Err(e);
            }
        };
        self.tag_step = Some(tag_step);
        self.blocks.push(Tail {
            range: block,
            request_id: ask.request_id,
        });
        self.leased_ms.push(now_ms);
        Ok(BlockLoad::Installed)
    }

    /// The block ask `request_id` failed (the root did not answer): the next
    /// [`BlockAllocator::serve`] sends it again, under the same request ID
    /// (the root may have allocated it: its retry is answered the same block).
    pub fn load_failed(&mut self, request_id: &str) {
        if self
            .pending
            .as_ref()
            .is_some_and(|a| a.request_id == request_id)
        {
            self.in_flight.done();
        }
    }

    /// Gives up every block (the object goes idle, or is retired): the
    /// unserved tails to hand back to the root, last first (only the last
    /// range handed out can return, and then the one before it). The ask in
    /// flight is abandoned (its answer is ignored). Persist the state before
    /// sending any tail: a tail is never served after it is sent.
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
        self.buf = SegmentBuffer::new(block_policy()).starting_above(self.served_high);
        self.blocks.clear();
        self.leased_ms.clear();
        self.pending = None;
        self.in_flight.done();
        tails
    }

    /// The root refused to take `refused` back with proof that it never took
    /// them ([`TailSkipped::proves_untaken`](crate::tag::TailSkipped::proves_untaken):
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
        // A kept tail is never due, but the blocks leased after it are.
        self.leased_ms
            .iter()
            .find(|at| **at != KEPT)
            .is_some_and(|at| now_ms.saturating_sub(*at) >= RETIRE_AFTER_MS)
    }

    /// The blocks as monitoring shows them (each half's next ID and end).
    pub fn snapshot(&self) -> SegmentSnapshot {
        self.buf.snapshot()
    }

    /// The highest ID ever handed on (0: none).
    pub fn served_high(&self) -> u64 {
        self.served_high
    }

    /// IDs held in blocks, not yet handed on (the region's runway).
    pub fn available(&self) -> u64 {
        self.buf.available()
    }

    /// The blocks still holding IDs, with their request IDs (monitoring).
    pub fn blocks(&self) -> &[Tail] {
        &self.blocks
    }

    /// The block ask recorded and not yet answered, if any.
    pub fn pending(&self) -> Option<&BlockAsk> {
        self.pending.as_ref()
    }

    /// The tag's step as the root last said (`None`: no block yet).
    pub fn tag_step(&self) -> Option<u64> {
        self.tag_step
    }

    /// Drops the blocks handed on whole (and their lease times).
    fn forget_served_blocks(&mut self) {
        let served = self
            .blocks
            .iter()
            .take_while(|b| b.range.end <= self.served_high)
            .count();
        self.blocks.drain(..served);
        self.leased_ms.drain(..served.min(self.leased_ms.len()));
    }

    /// The range length granted for `requested`: never below the tag's step
    /// (as the root grants an isolate), never above Leaf's cap; a block's
    /// end shortens it (its length is the tag's `max_step` at most).
    fn grant(&self, requested: u64) -> u64 {
        requested.clamp(self.tag_step.unwrap_or(1), MAX_STEP)
    }

    /// The step of the next block: Leaf's dynamic rule over the blocks'
    /// lifetimes, never below [`BLOCK_FACTOR`] times the tag's step.
    fn block_step(&self, now_ms: u64) -> Option<u64> {
        let floor = self.tag_step?.saturating_mul(BLOCK_FACTOR);
        Some(self.buf.step_for_next_load(now_ms).max(floor).min(MAX_STEP))
    }

    /// Records a new block ask (the buffer asked for a load), in flight from
    /// `now_ms`.
    fn new_ask(&mut self, now_ms: u64, rand: &mut impl RandSource) -> BlockAsk {
        let ask = BlockAsk {
            request_id: request_id(rand),
            step: self.block_step(now_ms),
        };
        self.pending = Some(ask.clone());
        self.in_flight.start(now_ms);
        ask
    }

    /// The recorded ask again, when no copy of it is in flight from this
    /// instance (restored from storage, failed, or presumed lost).
    fn ask_to_send_again(&mut self, now_ms: u64) -> Option<BlockAsk> {
        let ask = self.pending.as_ref()?;
        self.in_flight
            .claim(now_ms, DEFAULT_TAKE_OVER_MS)
            .then(|| ask.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rand::SplitMix64;

    fn range(s: &Serve) -> (u64, u64) {
        match s {
            Serve::Range { range, .. } => (range.start, range.end),
            other => panic!("expected a range, found {other:?}"),
        }
    }

    fn block(start: u64, end: u64) -> Allocation {
        Allocation::new(start, end).unwrap()
    }

    #[test]
    fn asks_a_block_serves_ranges_and_prefetches_one_ask_at_a_time() {
        let mut rand = SplitMix64::new(1);
        let mut a = BlockAllocator::new();
        let Serve::Load(first) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        assert_eq!(first.step, None, "the tag's step is not known yet");
        assert_eq!(first.request_id.len(), 2 * BLOCK_REQUEST_ID_BYTES);
        assert_eq!(a.serve(5, 0, &mut rand), Serve::Wait, "one ask in flight");
        assert_eq!(
            a.loaded(&first.request_id, block(1, 100), 10, 0),
            Ok(BlockLoad::Installed)
        );
        // Granted at least the tag's step; past 10% used, the prefetch.
        assert_eq!(
            a.serve(5, 0, &mut rand),
            Serve::Range {
                range: block(1, 10),
                ask: None
            }
        );
        let s = a.serve(5, 0, &mut rand);
        assert_eq!(range(&s), (11, 20));
        let Serve::Range {
            ask: Some(next), ..
        } = s
        else {
            panic!("{s:?}")
        };
        assert_eq!(next.step, Some(200), "a block that lasted 0 ms doubles");
        assert_ne!(next.request_id, first.request_id);
        assert_eq!(
            range(&a.serve(95, 0, &mut rand)),
            (21, 100),
            "a block's end"
        );
        assert_eq!(a.serve(5, 0, &mut rand), Serve::Wait);
        // A second copy of the first answer is ignored.
        assert_eq!(
            a.loaded(&first.request_id, block(1, 100), 10, 0),
            Ok(BlockLoad::Ignored)
        );
        assert_eq!(
            a.loaded(&next.request_id, block(301, 500), 10, 1),
            Ok(BlockLoad::Installed)
        );
        assert_eq!(range(&a.serve(10, 1, &mut rand)), (301, 310));
        assert_eq!(a.served_high(), 310);
    }

    #[test]
    fn a_block_held_half_an_hour_is_due_to_retire() {
        let mut rand = SplitMix64::new(4);
        let mut a = BlockAllocator::new();
        assert!(!a.retire_due(RETIRE_AFTER_MS));
        let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        a.loaded(&ask.request_id, block(1, 20), 10, 1_000).unwrap();
        assert!(!a.retire_due(1_000 + RETIRE_AFTER_MS - 1));
        assert!(a.retire_due(1_000 + RETIRE_AFTER_MS));
        // Served whole: nothing held, nothing due.
        let _ = a.serve(20, 2_000, &mut rand);
        assert_eq!(a.blocks(), []);
        assert!(!a.retire_due(1_000 + RETIRE_AFTER_MS));
        assert_eq!(a.retire(), []);
    }

    #[test]
    fn a_tail_the_root_refused_is_served_again_and_never_due_again() {
        let mut rand = SplitMix64::new(5);
        let mut a = BlockAllocator::new();
        let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        a.loaded(&ask.request_id, block(1, 100), 10, 0).unwrap();
        assert_eq!(range(&a.serve(10, 0, &mut rand)), (1, 10));
        let tails = a.retire();
        assert_eq!(tails.len(), 1);
        assert_eq!(a.available(), 0);
        // The root refused it (it handed out IDs after it): kept.
        assert_eq!(a.keep(tails.clone(), RETIRE_AFTER_MS), 1);
        assert_eq!(a.available(), 90);
        assert!(!a.retire_due(10 * RETIRE_AFTER_MS), "kept for good");
        // Kept twice: refused (the buffer holds it already).
        assert_eq!(a.keep(tails, RETIRE_AFTER_MS), 0);
        let Serve::Range { range, ask } = a.serve(10, RETIRE_AFTER_MS, &mut rand) else {
            panic!("the kept tail served")
        };
        assert_eq!(range.start, 11);
        // A block leased after the kept tail is due in its time.
        let next = ask.expect("the next block asked at the kept tail's 10%");
        a.loaded(&next.request_id, block(200, 299), 10, 2 * RETIRE_AFTER_MS)
            .unwrap();
        assert!(!a.retire_due(3 * RETIRE_AFTER_MS - 1));
        assert!(a.retire_due(3 * RETIRE_AFTER_MS));
    }

    /// An allocator retired with two tails, last first: 101..=200, 12..=100.
    fn retired_with_two_tails() -> (BlockAllocator, Vec<Tail>) {
        let mut rand = SplitMix64::new(8);
        let mut a = BlockAllocator::new();
        let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        a.loaded(&ask.request_id, block(1, 100), 10, 0).unwrap();
        let Serve::Range {
            ask: Some(next), ..
        } = a.serve(11, 0, &mut rand)
        else {
            panic!("the next block asked at 10%")
        };
        a.loaded(&next.request_id, block(101, 200), 10, 0).unwrap();
        let tails = a.retire();
        assert_eq!(
            tails.iter().map(|t| t.range.start).collect::<Vec<_>>(),
            [101, 12]
        );
        (a, tails)
    }

    #[test]
    fn a_hand_back_sends_last_first_and_stops_at_the_first_tail_not_taken() {
        // Both taken: nothing kept.
        let (mut a, tails) = retired_with_two_tails();
        let mut back = HandBack::new(tails);
        while let Some(t) = back.to_send() {
            back.answered(t, TailAnswer::Taken);
        }
        assert_eq!(back.finish(&mut a, 0), (189, 0));
        assert_eq!(a.available(), 0);
        // The last refused with proof: it and the unsent one kept.
        let (mut a, tails) = retired_with_two_tails();
        let mut back = HandBack::new(tails);
        let t = back.to_send().unwrap();
        assert_eq!(t.range.start, 101);
        back.answered(t, TailAnswer::Refused { untaken: true });
        assert_eq!(back.to_send(), None, "the earlier tail cannot come back");
        assert_eq!(back.finish(&mut a, 0), (0, 2));
        assert_eq!(a.available(), 189);
        // The last lost (maybe taken): a gap; the unsent one kept.
        let (mut a, tails) = retired_with_two_tails();
        let mut back = HandBack::new(tails);
        let t = back.to_send().unwrap();
        back.answered(t, TailAnswer::Lost);
        assert_eq!(back.finish(&mut a, 0), (0, 1));
        assert_eq!(a.available(), 89);
        // Refused without proof: a gap too.
        let (mut a, tails) = retired_with_two_tails();
        let mut back = HandBack::new(tails);
        let t = back.to_send().unwrap();
        back.answered(t, TailAnswer::Refused { untaken: false });
        assert_eq!(back.finish(&mut a, 0), (0, 1));
        assert_eq!(a.available(), 89);
    }

    #[test]
    fn a_refused_tail_stays_skipped_once_the_allocator_moved_on() {
        let mut rand = SplitMix64::new(6);
        let mut a = BlockAllocator::new();
        let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        a.loaded(&ask.request_id, block(1, 100), 10, 0).unwrap();
        let _ = a.serve(10, 0, &mut rand);
        let tails = a.retire();
        // An isolate came first: a new block is asked for, above the tail.
        assert!(matches!(a.serve(10, 0, &mut rand), Serve::Load(_)));
        assert_eq!(a.keep(tails, 0), 0);
    }

    #[test]
    fn a_failed_or_restored_ask_is_sent_again_under_its_request_id() {
        let mut rand = SplitMix64::new(2);
        let mut a = BlockAllocator::new();
        let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        a.load_failed(&ask.request_id);
        assert_eq!(a.serve(5, 1, &mut rand), Serve::Load(ask.clone()));
        assert_eq!(a.serve(5, 2, &mut rand), Serve::Wait);
        // Presumed lost after the take-over time: the same ask again.
        assert_eq!(
            a.serve(5, 2 + DEFAULT_TAKE_OVER_MS, &mut rand),
            Serve::Load(ask.clone())
        );
        // A restored copy has nothing in flight: it sends it again at once.
        let mut restored = a.clone();
        restored.in_flight = InFlight::default();
        assert_eq!(restored.serve(5, 3, &mut rand), Serve::Load(ask));
    }

    #[test]
    fn retiring_hands_back_the_unserved_tails_last_first_and_never_serves_below() {
        let mut rand = SplitMix64::new(3);
        let mut a = BlockAllocator::new();
        let Serve::Load(first) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        a.loaded(&first.request_id, block(1, 100), 10, 0).unwrap();
        let Serve::Range {
            ask: Some(next), ..
        } = a.serve(20, 0, &mut rand)
        else {
            panic!()
        };
        a.loaded(&next.request_id, block(101, 300), 10, 0).unwrap();
        let tails = a.retire();
        assert_eq!(
            tails,
            [
                Tail {
                    range: block(101, 300),
                    request_id: next.request_id.clone()
                },
                Tail {
                    range: block(21, 100),
                    request_id: first.request_id.clone()
                },
            ]
        );
        assert_eq!((a.available(), a.pending()), (0, None));
        // Asks anew; a block at or below what it served is refused.
        let Serve::Load(again) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        assert_eq!(again.step, Some(100), "the tag's step times the factor");
        assert!(matches!(
            a.loaded(&again.request_id, block(20, 200), 10, 0),
            Err(Error::SegmentOverlap { .. })
        ));
        let Serve::Load(bad) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        let backwards = Allocation {
            start: 300,
            end: 250,
            step: 0,
        };
        assert_eq!(
            a.loaded(&bad.request_id, backwards, 10, 0),
            Err(Error::InvalidSegment {
                start: 300,
                end: 250
            })
        );
        // The tail came back to the root: served again, from above 20.
        let Serve::Load(third) = a.serve(5, 0, &mut rand) else {
            panic!()
        };
        a.loaded(&third.request_id, block(21, 120), 10, 0).unwrap();
        assert_eq!(range(&a.serve(10, 0, &mut rand)), (21, 30));
    }
}
