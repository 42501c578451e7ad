//! A tail handed back by the service's own isolates and allocators: the IDs
//! return to the tag when nothing was handed out after them.

use crate::error::Error;
use crate::segment::Allocation;

use super::{
    CreditBack, Remembered, RememberedChange, TagRecord, TailBack, TailBackAnswer, TailSkipped,
    TakeBack,
};

impl TagRecord {
    /// The checks of a tail handed back, shared by [`TagRecord::take_back`]
    /// and [`TagRecord::credit_back`]: the tail, and the range remembered
    /// under its request ID, or why it stays a gap.
    #[allow(clippy::type_complexity)]
    pub(super) fn check_tail(
        &self,
        back: &TailBack<'_>,
        remembered: Option<&Remembered>,
    ) -> Result<Result<(Allocation, Remembered), TailSkipped>, Error> {
        self.kind.check_lease(back.for_isolate)?;
        let tail = Allocation::new(back.tail.start, back.tail.end)?;
        // The same checks as the lease's (the kind, done above, is ignored
        // there for a step of its own).
        self.lease_segment(&back.as_lease(), None)?;
        let Some(leased) = remembered else {
            return Ok(Err(TailSkipped::NotRemembered));
        };
        let seg = leased.segment;
        if tail.end != seg.end || tail.start < seg.start {
            return Ok(Err(TailSkipped::NotItsTail { remembered: seg }));
        }
        Ok(Ok((tail, *leased)))
    }

    /// The range remembered under a lease once `tail` left it.
    pub(super) fn kept(leased: Remembered, tail: Allocation) -> Result<RememberedChange, Error> {
        Ok(if tail.start == leased.segment.start {
            RememberedChange::Remove
        } else {
            RememberedChange::Shorten(Remembered {
                segment: Allocation::new(leased.segment.start, tail.start - 1)?,
                granted: leased.granted,
            })
        })
    }

    /// How to answer a tail handed back by the asker that leased it, given
    /// the range its store remembers under [`TailBack::remembered_as`]
    /// (`remembered`). The IDs return (the next lease answers them) only
    /// when nothing was handed out after them (`max_id == tail.end`, a
    /// conditional write) and the tail is the end of the range its asker
    /// leased under its own request ID (a capability only its holder has:
    /// no one else can hand back another's IDs, nor the same IDs twice).
    /// Monotonic tags never take IDs back: their IDs must keep increasing.
    /// Only the service's own allocators' tails (`for_isolate`: they persist
    /// their state before serving, so they know a tail unused) move
    /// `max_id` back; an outside client's stays skipped here
    /// ([`TailSkipped::FromClient`]) and is credited instead
    /// ([`TagRecord::credit_back`]).
    ///
    /// # Errors
    /// [`Error::MonotonicTag`] or [`Error::OpaqueTag`] as for a lease
    /// ([`TagRecord::lease_segment`]); [`Error::RequestIdNeedsKey`] from a
    /// caller without a credential of its own; [`Error::InvalidRequestId`]
    /// for a request ID outside 1..=[`MAX_REQUEST_ID_LEN`](super::MAX_REQUEST_ID_LEN) bytes;
    /// [`Error::InvalidSegment`] for a malformed tail.
    pub fn take_back(
        &self,
        back: &TailBack<'_>,
        remembered: Option<&Remembered>,
        now_ms: u64,
    ) -> Result<TakeBack, Error> {
        let checked = self.check_tail(back, remembered)?;
        if back.credit_owner().is_some() {
            // An outside client cannot prove the tail unused: see
            // `credit_back`.
            return Ok(TakeBack::Skipped(TailSkipped::FromClient));
        }
        let (tail, leased) = match checked {
            Ok(found) => found,
            Err(skipped) => return Ok(TakeBack::Skipped(skipped)),
        };
        if self.max_id != tail.end {
            return Ok(TakeBack::Closed {
                max_id: self.max_id,
                remembered: Self::kept(leased, tail)?,
            });
        }
        let record = TagRecord {
            max_id: tail.start - 1,
            update_time: now_ms,
            ..self.clone()
        };
        Ok(TakeBack::Returned {
            record,
            remembered: Self::kept(leased, tail)?,
        })
    }

    /// How to answer a tail handed back, whoever hands it back: an outside
    /// client's ([`TailBack::credit_owner`]) as [`TagRecord::credit_back`]
    /// (given `credits`, the ones its asker holds on the tag), any other's
    /// as [`TagRecord::take_back`] (`credits` unread). A client's tail never
    /// moves `max_id` back; an allocator's never becomes a credit.
    ///
    /// # Errors
    /// As [`TagRecord::take_back`].
    pub fn answer_tail(
        &self,
        back: &TailBack<'_>,
        remembered: Option<&Remembered>,
        credits: &[Allocation],
        now_ms: u64,
    ) -> Result<TailBackAnswer, Error> {
        Ok(if back.credit_owner().is_some() {
            match self.credit_back(back, remembered, credits)? {
                CreditBack::Credited { credit, remembered } => {
                    TailBackAnswer::Credited { credit, remembered }
                }
                CreditBack::Skipped(s) => TailBackAnswer::Skipped(s),
            }
        } else {
            match self.take_back(back, remembered, now_ms)? {
                TakeBack::Returned { record, remembered } => {
                    TailBackAnswer::Returned { record, remembered }
                }
                TakeBack::Closed { remembered, .. } => TailBackAnswer::Closed { remembered },
                TakeBack::Skipped(s) => TailBackAnswer::Skipped(s),
            }
        })
    }
}
