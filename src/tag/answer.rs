//! How a tag's store answers: the values its host performs (write, answer,
//! skip).

use crate::segment::Allocation;

use super::{RememberedChange, TagRecord};

/// How a tag's store answers a segment lease ([`TagRecord::lease_segment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentAnswer {
    /// A retry: the segment first answered under its request ID, again —
    /// neither burnt nor handed out twice.
    Again(Allocation),
    /// A new segment of `step` IDs: allocate it ([`TagRecord::allocate`]),
    /// and remember it under the request ID if the lease has one (as a
    /// [`Remembered`](super::Remembered) granted `step`).
    Allocate {
        /// The step granted.
        step: u64,
    },
}

/// Why a tail handed back stays skipped (its IDs are never handed out, as
/// when a holder is lost): nothing is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailSkipped {
    /// Nothing is remembered under the request ID for this caller (another
    /// caller's, forgotten after [`REQUEST_ID_TTL_MS`](super::REQUEST_ID_TTL_MS), or already handed
    /// back whole).
    NotRemembered,
    /// The tail is not the end of the range remembered under it (already
    /// handed back, or not this lease's IDs).
    NotItsTail {
        /// The range remembered under the request ID.
        remembered: Allocation,
    },
    /// An outside client's tail: it never moves `max_id` back (the root
    /// cannot know whether the client handed those IDs out); it may become
    /// a credit of its own asker instead ([`TagRecord::credit_back`]).
    FromClient,
    /// The asker already holds [`MAX_CREDITS`](super::MAX_CREDITS) credits on the tag.
    CreditsFull,
}

/// How a tag's store answers an outside client's tail handed back
/// ([`TagRecord::credit_back`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditBack {
    /// The tail becomes a credit of its asker (`max_id` unchanged: the IDs
    /// stay reserved, leased again only by the same asker): store `credit`
    /// among the asker's credits and apply `remembered`, in one write.
    Credited {
        /// The IDs credited.
        credit: Allocation,
        /// The change to the range remembered under the request ID.
        remembered: RememberedChange,
    },
    /// The IDs stay a gap; nothing is written.
    Skipped(TailSkipped),
}

/// How a tag's store answers a segment lease from a caller that may hold
/// credits ([`TagRecord::lease_with_credits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditedAnswer {
    /// As [`TagRecord::lease_segment`] answers (no credit used).
    Segment(SegmentAnswer),
    /// From the asker's lowest credit: answer `segment`, remember it under
    /// the request ID (if any) as a [`Remembered`](super::Remembered) granted `granted`, and
    /// replace the credit `taken` by `rest` (`None`: remove it), in one
    /// write. `max_id` does not move.
    Credit {
        /// The IDs answered: the start of the credit, at most `granted`.
        segment: Allocation,
        /// The step the request was granted.
        granted: u64,
        /// The credit used.
        taken: Allocation,
        /// What is left of it.
        rest: Option<Allocation>,
    },
}

/// How a tag's store answers a tail handed back ([`TagRecord::take_back`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeBack {
    /// The IDs return: store `record` (its `max_id` moved back to
    /// `tail.start - 1`) and apply `remembered` in one write.
    Returned {
        /// The record to store.
        record: TagRecord,
        /// The change to the range remembered under the request ID.
        remembered: RememberedChange,
    },
    /// IDs were handed out after the tail (`max_id` is past its end): it
    /// stays skipped, and it is closed — apply `remembered` (the range
    /// remembered under the request ID now ends before the tail) in one
    /// write before answering. So no later copy of this hand-back is ever
    /// taken, whatever `max_id` does next, and the refusal proves the tail
    /// was never taken back: its holder may serve it again
    /// ([`TakeBack::proves_untaken`]).
    Closed {
        /// The tag's `max_id` now.
        max_id: u64,
        /// The change to the range remembered under the request ID.
        remembered: RememberedChange,
    },
    /// The IDs stay skipped; nothing is written.
    Skipped(TailSkipped),
}

impl TakeBack {
    /// Whether this answer proves the tail was never taken back and never
    /// will be, so that its holder may serve it again
    /// ([`BlockAllocator::keep`](crate::block::BlockAllocator::keep)): only
    /// [`TakeBack::Closed`], given after the tail was found to be the end of
    /// the range still remembered under its request ID (every take-back
    /// shortens or removes that entry in the same write, so it was never
    /// taken), and written so that it never can be. Before it was written, a
    /// copy of the hand-back arriving after `max_id` fell back to the tail's
    /// end (another tail returned) took IDs its holder had served again. The
    /// others may answer a second copy of a hand-back the root took (its
    /// entry gone or shortened): the tail stays skipped.
    pub fn proves_untaken(&self) -> bool {
        matches!(self, TakeBack::Closed { .. })
    }
}

/// How a tag's store answers any tail handed back
/// ([`TagRecord::answer_tail`]): the core chooses between returning the IDs
/// and crediting them by who hands them back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailBackAnswer {
    /// An allocator's tail returns ([`TakeBack::Returned`]): store `record`
    /// and apply `remembered`, in one write.
    Returned {
        /// The record to store (`max_id` moved back).
        record: TagRecord,
        /// The change to the range remembered under the request ID.
        remembered: RememberedChange,
    },
    /// An outside client's tail becomes its credit
    /// ([`CreditBack::Credited`]): store `credit` among the credits of
    /// [`TailBack::credit_owner`](super::TailBack::credit_owner) and apply
    /// `remembered`, in one write.
    Credited {
        /// The IDs credited.
        credit: Allocation,
        /// The change to the range remembered under the request ID.
        remembered: RememberedChange,
    },
    /// An allocator's tail refused with proof and closed
    /// ([`TakeBack::Closed`]): apply `remembered`, then answer untaken.
    Closed {
        /// The change to the range remembered under the request ID.
        remembered: RememberedChange,
    },
    /// The IDs stay a gap; nothing is written.
    Skipped(TailSkipped),
}

impl TailBackAnswer {
    /// Whether the tail was taken (returned or credited).
    pub fn taken(&self) -> bool {
        matches!(
            self,
            TailBackAnswer::Returned { .. } | TailBackAnswer::Credited { .. }
        )
    }

    /// Whether the refusal proves the tail never taken and closed, so that
    /// it never will be ([`TakeBack::proves_untaken`]): answer it only once
    /// [`remembered`](TailBackAnswer::remembered) is written.
    pub fn untaken(&self) -> bool {
        matches!(self, TailBackAnswer::Closed { .. })
    }

    /// The change to the range remembered under the request ID, written
    /// with the rest.
    pub fn remembered(&self) -> Option<RememberedChange> {
        match self {
            TailBackAnswer::Returned { remembered, .. }
            | TailBackAnswer::Credited { remembered, .. }
            | TailBackAnswer::Closed { remembered } => Some(*remembered),
            TailBackAnswer::Skipped(_) => None,
        }
    }

    /// The tag's `max_id` once the answer is written, from `before`.
    pub fn max_id(&self, before: u64) -> u64 {
        match self {
            TailBackAnswer::Returned { record, .. } => record.max_id,
            _ => before,
        }
    }
}
