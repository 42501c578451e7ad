//! Serving ranges to the region's isolates, and installing the blocks the
//! root answers.

use crate::code::ErrorCode;
use crate::error::Error;
use crate::rand::RandSource;
use crate::segment::Allocation;

use super::{BlockAllocator, BlockAsk, Tail};

/// How many ranges ahead of the IDs handed on a write reserves (of the
/// range's length, within the blocks held): ranges within the reservation
/// are answered without a write. A restored allocator skips what was
/// reserved and not handed on, so this is also the gap a replacement
/// leaves: at most this many ranges. In the world simulation's steady hour
/// 16 takes the regional allocators' rows from 12,499 to 713 a million IDs
/// (`docs/benchmarks.md`, the bill); 4, 8, 32 and 64 in its short form:
/// 6,413, 3,655, 1,252 and 819 against 16's 2,086.
pub const RESERVE_RANGES: u64 = 16;

/// What the host does after [`BlockAllocator::serve`]: persist the state
/// first when [`BlockAllocator::persist_first`] says so.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Serve {
    /// Persist if `persist`, then answer `range` to the isolate; then, with
    /// `ask`, send it to the root (in the background) and report its answer
    /// with [`BlockAllocator::loaded`] or [`BlockAllocator::load_failed`].
    Range {
        /// The IDs for the isolate: a contiguous range of one block.
        range: Allocation,
        /// A block ask to send now.
        ask: Option<BlockAsk>,
        /// The range passes the reservation the state was saved with, or
        /// an ask goes out: the state (its reservation raised) is written
        /// before anything leaves. Otherwise the stored state counts the
        /// range handed on already.
        persist: bool,
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
    /// first range [`BlockAllocator::serve`] takes from the block writes
    /// anyway: it passes the reservation, which never reaches past the
    /// blocks held when it is written).
    Installed,
    /// Not the ask in the state (abandoned by a retirement, or answered
    /// already): ignored. Its IDs stay skipped, never handed back.
    Ignored,
}

impl BlockAllocator {
    /// A contiguous range of `requested_step` IDs for an isolate (at least
    /// the tag's step however few are asked, shorter at a block's end), or
    /// what to do to get one, at clock reading `now_ms`; `rand` draws the
    /// request ID of a new block ask. The host persists the state before it
    /// answers or sends anything when [`BlockAllocator::persist_first`] says.
    pub fn serve(&mut self, requested_step: u64, now_ms: u64, rand: &mut impl RandSource) -> Serve {
        let grant = self.grant(requested_step);
        let take = self.buf.take_range(grant);
        let ask = if take.load {
            Some(self.new_ask(now_ms, rand))
        } else {
            self.ask_to_send_again(now_ms)
        };
        match take.range {
            Some(range) => {
                let persist = ask.is_some() || range.end > self.reserved();
                self.served_high = range.end;
                self.range_len = grant;
                self.forget_served_blocks();
                if persist {
                    // Written now: reserve ahead in the same write.
                    self.reserve();
                }
                Serve::Range {
                    range,
                    ask,
                    persist,
                }
            }
            None => ask.map_or(Serve::Wait, Serve::Load),
        }
    }

    /// Whether the host persists the state before it acts on `next` (answers
    /// the range, sends the ask): for a range past the reservation the
    /// stored state holds (the write raises it: [`RESERVE_RANGES`]), or
    /// with an ask; not for a range within it (the stored state counts it
    /// handed on already). For an ask alone, always — except the first ask
    /// of an allocator that never held a block
    /// ([`BlockAllocator::never_held`]), sent unwritten so that a far
    /// region's first ID costs one call to the root, not a write too, and a
    /// made-up name costs no storage; a replacement that asks anew leaves
    /// only that block a gap. A wait changes nothing kept.
    pub fn persist_first(&self, next: &Serve) -> bool {
        match next {
            Serve::Range { persist, .. } => *persist,
            Serve::Load(_) => !self.never_held(),
            Serve::Wait => false,
        }
    }

    /// Whether this allocator never held a block: none installed, nothing
    /// handed on, so nothing to fence.
    pub fn never_held(&self) -> bool {
        self.tag_step.is_none() && self.served_high == 0
    }

    /// Whether the host drops this allocator's state after the root refused
    /// its ask with `code`: the name is no tag (`not_found`) or a tag whose
    /// IDs come from its root alone (`monotonic_tag`), and the allocator
    /// never held a block — so made-up names cost no storage, here as at
    /// the root.
    pub fn forgets_after(&self, code: ErrorCode) -> bool {
        matches!(code, ErrorCode::NotFound | ErrorCode::MonotonicTag) && self.never_held()
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

    /// The block ask `request_id` was answered `code` instead of a block (or
    /// its call failed with `code`). Returns whether the ask was given up.
    ///
    /// [`ErrorCode::RequestIdReused`] never changes however often the ask is
    /// sent again (the root remembers that request ID with another step: an
    /// admin changed the tag's step after the ask was first answered), so the
    /// ask is given up: the block the root allocated under it, never
    /// answered, stays a gap, and the next [`BlockAllocator::serve`] asks
    /// anew under a new request ID (a late answer to the old one is then
    /// ignored, [`BlockLoad::Ignored`]). Any other code is
    /// [`load_failed`](BlockAllocator::load_failed): the same ask again.
    pub fn load_refused(&mut self, request_id: &str, code: ErrorCode) -> bool {
        if code != ErrorCode::RequestIdReused {
            self.load_failed(request_id);
            return false;
        }
        if self
            .pending
            .take_if(|a| a.request_id == request_id)
            .is_none()
        {
            return false;
        }
        self.in_flight.done();
        // No load in flight any more: the buffer asks for one again.
        self.buf.load_failed();
        true
    }
}
