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
//! if allocator.persist_first(&answer):                // loaded, retire: always
//!     storage.put(state)      // BEFORE anything leaves: a range past the
//!                             // reservation, a block ask, a tail; a failed
//!                             // put answers nothing and drops the memory
//!                             // copy (read it again)
//! then: answer the range; send the block ask to the root; hand tails back
//! ```
//!
//! Why this keeps every ID unique, with the host's part:
//! - a range is answered only once the stored state counts it served: the
//!   state is saved with a *reservation* (`served_high` up to
//!   [`RESERVE_RANGES`] ranges ahead of the IDs handed on, within the blocks
//!   held, and every ID up to it counted taken), so ranges within it are
//!   answered from memory without a write, and a range past it raises it
//!   and is written first. A replacement restored from storage starts
//!   after the reservation (the IDs between are a gap, never served twice),
//!   and never hands them back; an old instance whose writes fail answers
//!   only ranges within the reservation it saved, and nothing past it;
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

mod ask;
mod hand_back;
mod serve;
#[cfg(test)]
mod tests;

pub use ask::{BlockAsk, BLOCK_REQUEST_ID_BYTES};
pub use hand_back::{HandBack, Tail, TailAnswer, RETIRE_AFTER_MS};
pub use serve::RESERVE_RANGES;
pub use serve::{BlockLoad, Serve};

use crate::segment::{
    SegmentBuffer, SegmentSnapshot, StepPolicy, DEFAULT_SEGMENT_DURATION_MS, MAX_STEP,
};
use crate::wait::InFlight;
use alloc::vec::Vec;

/// A block is this many of the tag's steps (before Leaf's dynamic rule grows
/// it): an allocator serves every isolate of its region, so its loads should
/// be a tenth of theirs. With Leaf's prefetch at 10% used, the next block is
/// asked for once one isolate segment of the block is served, so the region
/// keeps nine segments of runway while the root answers; a lost allocator
/// skips at most two blocks. The root clamps the step to the tag's
/// `max_step` ([`TagRecord::grant_step`](crate::tag::TagRecord::grant_step)),
/// so a tag that pins its step (`max_step == step`) gets blocks of its step.
pub const BLOCK_FACTOR: u64 = 10;

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
///
/// It is saved (`Serialize`) as if every ID up to its reservation
/// ([`reserved`](BlockAllocator::reserved)) had been handed on: its
/// `servedHigh` is the reservation and its blocks' cursors are past it, so
/// a reader of either release starts after it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
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
    /// The highest ID the stored state counts as handed on, when above
    /// `served_high` (0: none above it). Saved as `served_high`
    /// (`Serialize`), so not apart: a restored allocator's reservation is
    /// its `served_high`.
    #[cfg_attr(feature = "serde", serde(skip))]
    reserved: u64,
    /// The length of the last range granted: the reservation is
    /// [`RESERVE_RANGES`] of them. Not saved (a restored allocator reserves
    /// at its first range).
    #[cfg_attr(feature = "serde", serde(skip))]
    range_len: u64,
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
            reserved: 0,
            range_len: 0,
            in_flight: InFlight::default(),
        }
    }

    /// The blocks as monitoring shows them (each half's next ID and end).
    pub fn snapshot(&self) -> SegmentSnapshot {
        self.buf.snapshot()
    }

    /// The highest ID ever handed on (0: none).
    pub fn served_high(&self) -> u64 {
        self.served_high
    }

    /// The highest ID the state this allocator saves counts as handed on
    /// (its reservation, never below [`served_high`](BlockAllocator::served_high)):
    /// ranges up to it are answered without a write.
    pub fn reserved(&self) -> u64 {
        self.reserved.max(self.served_high)
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

    /// Raises the reservation (the host writes the state now): up to
    /// [`RESERVE_RANGES`] ranges of the last length past the IDs handed on,
    /// never past the blocks held (the end of the last one loaded: IDs
    /// above are no one's yet, and a block loaded later must lie above it).
    fn reserve(&mut self) {
        let ahead = self
            .served_high
            .saturating_add(RESERVE_RANGES.saturating_mul(self.range_len));
        self.reserved = self.reserved().max(ahead.min(self.buf.fence()));
    }

    /// The state as the host stores it: every ID up to the reservation
    /// counted handed on (its blocks' cursors past it, the blocks below it
    /// dropped), so that a replacement restored from it, of this release or
    /// the one before, starts after the reservation. `Serialize` writes
    /// this form; a host that stores the allocator another way stores this
    /// (never a clone of the allocator itself: its cursors are behind the
    /// reservation it answers within).
    pub fn to_store(&self) -> BlockAllocator {
        let mut saved = self.clone();
        saved.served_high = self.reserved();
        saved.buf.skip_through(saved.served_high);
        saved.forget_served_blocks();
        saved
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
}

/// The state as stored (the fields the derived `Deserialize` reads, by the
/// same names): [`BlockAllocator::to_store`], so that no host can write a
/// reservation as less than it is.
#[cfg(feature = "serde")]
impl serde::Serialize for BlockAllocator {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Stored<'a> {
            buf: &'a SegmentBuffer,
            blocks: &'a [Tail],
            leased_ms: &'a [u64],
            pending: &'a Option<BlockAsk>,
            tag_step: Option<u64>,
            served_high: u64,
        }
        let saved = self.to_store();
        Stored {
            buf: &saved.buf,
            blocks: &saved.blocks,
            leased_ms: &saved.leased_ms,
            pending: &saved.pending,
            tag_step: saved.tag_step,
            served_high: saved.served_high,
        }
        .serialize(serializer)
    }
}
