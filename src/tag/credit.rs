//! Credits: an outside client's tail handed back, kept for the same asker,
//! and leased to it again.

use crate::error::Error;
use crate::segment::Allocation;

use super::{
    CreditBack, CreditedAnswer, LeaseSource, Remembered, SegmentAnswer, SegmentAsk, TagRecord,
    TailBack, TailSkipped,
};

/// The most credits ([`TagRecord::credit_back`]) one asker holds on a tag:
/// a tail handed back beyond them stays a gap.
pub const MAX_CREDITS: usize = 8;

/// A credit a lease is answered from ([`TagRecord::lowest_credit`]).
pub(super) struct CreditUsed {
    /// The IDs answered.
    pub(super) segment: Allocation,
    /// The credit, whole.
    pub(super) taken: Allocation,
    /// What is left of it.
    pub(super) rest: Option<Allocation>,
}

impl TagRecord {
    /// How to answer a segment lease `ask` (as [`TagRecord::lease_segment`])
    /// from an asker holding `credits` on this tag (the credits stored for
    /// [`SegmentAsk::credit_owner`]; ignored without one): a new lease is
    /// answered from the lowest credit first, at most the granted step, the
    /// rest kept. A retry of a lease is answered as it was first. `above`:
    /// the highest ID the asking client already holds (0: none); credits
    /// starting at or below it are left for another client of the same
    /// asker (a client's buffer never loads below what it held).
    ///
    /// # Errors
    /// As [`TagRecord::lease_segment`].
    pub fn lease_with_credits(
        &self,
        ask: &SegmentAsk<'_>,
        remembered: Option<&Remembered>,
        credits: &[Allocation],
        above: u64,
    ) -> Result<CreditedAnswer, Error> {
        let plan = self.plan_lease(ask, remembered, credits, above)?;
        Ok(match plan.source {
            LeaseSource::Again(segment) => CreditedAnswer::Segment(SegmentAnswer::Again(segment)),
            LeaseSource::Allocate { step } => {
                CreditedAnswer::Segment(SegmentAnswer::Allocate { step })
            }
            LeaseSource::Credit {
                segment,
                granted,
                taken,
                rest,
            } => CreditedAnswer::Credit {
                segment,
                granted,
                taken: taken.range,
                rest: rest.map(|a| a.range),
            },
        })
    }

    /// The lowest of an asker's `credits` starting above `above`, split for
    /// a lease granted `step`: the lease is answered its first `step` IDs,
    /// the rest kept (`None`: no such credit).
    pub(super) fn lowest_credit(
        credits: &[Allocation],
        above: u64,
        step: u64,
    ) -> Result<Option<CreditUsed>, Error> {
        let Some(&taken) = credits
            .iter()
            .filter(|c| c.start > above)
            .min_by_key(|c| c.start)
        else {
            return Ok(None);
        };
        let last = taken.start.saturating_add(step - 1).min(taken.end);
        let segment = Allocation::new(taken.start, last)?;
        let rest = if last < taken.end {
            Some(Allocation::new(last + 1, taken.end)?)
        } else {
            None
        };
        Ok(Some(CreditUsed {
            segment,
            taken,
            rest,
        }))
    }

    /// How to answer an outside client's tail handed back
    /// ([`TailBack::credit_owner`]), given the range its store remembers
    /// under [`TailBack::remembered_as`] and the credits the asker already
    /// holds on the tag. The root cannot know whether a client handed those
    /// IDs out (a bug, a crash mid-use, two copies of one process, a
    /// hostile key holder), so `max_id` never moves back for a client:
    /// the tail becomes a credit that only the same asker leases again
    /// ([`TagRecord::lease_with_credits`]), so a false return can repeat
    /// IDs only within the asker's own credential. Credited only when the
    /// tail is the end of the range remembered under the asker's own
    /// request ID (shortened or removed in the same write: a retry of the
    /// lease never answers the IDs credited) and the asker holds fewer than
    /// [`MAX_CREDITS`]; otherwise the tail stays a gap. Allocators use
    /// [`TagRecord::take_back`].
    ///
    /// # Errors
    /// As [`TagRecord::take_back`].
    pub fn credit_back(
        &self,
        back: &TailBack<'_>,
        remembered: Option<&Remembered>,
        credits: &[Allocation],
    ) -> Result<CreditBack, Error> {
        let (tail, leased) = match self.check_tail(back, remembered)? {
            Ok(found) => found,
            Err(skipped) => return Ok(CreditBack::Skipped(skipped)),
        };
        if back.credit_owner().is_none() {
            // An allocator's tail: `take_back`'s.
            return Ok(CreditBack::Skipped(TailSkipped::FromClient));
        }
        if credits
            .iter()
            .any(|c| c.start <= tail.end && tail.start <= c.end)
        {
            return Ok(CreditBack::Skipped(TailSkipped::NotItsTail {
                remembered: leased.segment,
            }));
        }
        if credits.len() >= MAX_CREDITS {
            return Ok(CreditBack::Skipped(TailSkipped::CreditsFull));
        }
        Ok(CreditBack::Credited {
            credit: tail,
            remembered: Self::kept(leased, tail)?,
        })
    }
}
