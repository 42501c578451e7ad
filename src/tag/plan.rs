//! A lease's and a tail's writes, as values: which credit row goes and
//! which comes, which record is stored, what is remembered under which key.
//! The core decides them once; every store (the Worker's tag object, the
//! tests' models of it) performs them, in one synchronous turn.

use alloc::string::String;

use crate::error::Error;
use crate::segment::Allocation;

use super::{
    Remembered, RememberedChange, SegmentAnswer, SegmentAsk, TagRecord, TailBack, TailBackAnswer,
};

/// One of an asker's credits on a tag, as its store keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditRow<'a> {
    /// The asker holding it ([`SegmentAsk::credit_owner`]).
    pub owner: &'a str,
    /// The IDs credited.
    pub range: Allocation,
}

/// Where a lease's segment comes from ([`TagRecord::plan_lease`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseSource<'a> {
    /// A retry: the segment first answered under its request ID, again;
    /// nothing is written.
    Again(Allocation),
    /// A new segment of `step` IDs: allocate it ([`TagRecord::allocate`])
    /// and store the record.
    Allocate {
        /// The step granted.
        step: u64,
    },
    /// From the asker's lowest credit: remove `taken`, store `rest` (what is
    /// left of it, if anything), answer `segment`. `max_id` does not move.
    Credit {
        /// The IDs answered: the start of the credit, at most the step
        /// granted.
        segment: Allocation,
        /// The step the lease was granted.
        granted: u64,
        /// The credit used.
        taken: CreditRow<'a>,
        /// What is left of it.
        rest: Option<CreditRow<'a>>,
    },
}

/// A segment lease's writes ([`TagRecord::plan_lease`]): the segment from
/// its [`source`](LeasePlan::source), then, once it is known, the entry
/// [`remembered`](LeasePlan::remembered) under the request ID, all in one
/// synchronous turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasePlan<'a> {
    /// Where the segment comes from, and the credit rows that change.
    pub source: LeaseSource<'a>,
    /// The key ([`SegmentAsk::remembered_as`]) and the step granted, for a
    /// new segment asked under a request ID of the caller's own.
    remember: Option<(String, u64)>,
}

impl LeasePlan<'_> {
    /// What to remember once the segment `answered` is known (allocated for
    /// [`LeaseSource::Allocate`], the source's own otherwise): under which
    /// key, the segment and the step granted. `None`: nothing (a retry, or
    /// no request ID of the caller's own).
    pub fn remembered(&self, answered: Allocation) -> Option<(&str, Remembered)> {
        self.remember.as_ref().map(|(key, granted)| {
            (
                key.as_str(),
                Remembered {
                    segment: answered,
                    granted: *granted,
                },
            )
        })
    }
}

/// A tail handed back's writes and answer ([`TagRecord::plan_tail`]): the
/// record, then the credit row, then the change to the range remembered,
/// in one synchronous turn; answer only once they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailPlan<'a> {
    /// The record to store (`max_id` moved back): an allocator's tail
    /// returned.
    pub record: Option<TagRecord>,
    /// The credit row to add: an outside client's tail credited.
    pub credit: Option<CreditRow<'a>>,
    /// The change to the range remembered under the request ID, and its key
    /// ([`TailBack::remembered_as`]).
    pub remembered: Option<(String, RememberedChange)>,
    /// Whether the tail was taken (returned or credited).
    pub taken: bool,
    /// Whether the refusal proves the tail never taken and closed, so that
    /// it never will be ([`TailBackAnswer::untaken`]), with the range
    /// remembered changed under its key: its holder may serve it again.
    pub closed: bool,
    /// The tag's `max_id` once the plan is written.
    pub max_id: u64,
}

impl TagRecord {
    /// A segment lease's writes, decided as
    /// [`TagRecord::lease_with_credits`] answers (same arguments): a retry
    /// again, a new segment allocated, or one from the asker's lowest
    /// credit; each new one remembered under the request ID with the step
    /// granted.
    ///
    /// # Errors
    /// As [`TagRecord::lease_segment`].
    pub fn plan_lease<'a>(
        &self,
        ask: &SegmentAsk<'a>,
        remembered: Option<&Remembered>,
        credits: &[Allocation],
        above: u64,
    ) -> Result<LeasePlan<'a>, Error> {
        let step = match self.lease_segment(ask, remembered)? {
            SegmentAnswer::Again(segment) => {
                return Ok(LeasePlan {
                    source: LeaseSource::Again(segment),
                    remember: None,
                })
            }
            SegmentAnswer::Allocate { step } => step,
        };
        let from_credit = match ask.credit_owner() {
            Some(owner) => {
                Self::lowest_credit(credits, above, step)?.map(|used| LeaseSource::Credit {
                    segment: used.segment,
                    granted: step,
                    taken: CreditRow {
                        owner,
                        range: used.taken,
                    },
                    rest: used.rest.map(|range| CreditRow { owner, range }),
                })
            }
            None => None,
        };
        Ok(LeasePlan {
            source: from_credit.unwrap_or(LeaseSource::Allocate { step }),
            remember: ask.remembered_as().map(|key| (key, step)),
        })
    }

    /// A tail handed back's writes and answer, decided as
    /// [`TagRecord::answer_tail`] answers (same arguments).
    ///
    /// # Errors
    /// As [`TagRecord::take_back`].
    pub fn plan_tail<'a>(
        &self,
        back: &TailBack<'a>,
        remembered: Option<&Remembered>,
        credits: &[Allocation],
        now_ms: u64,
    ) -> Result<TailPlan<'a>, Error> {
        let answer = self.answer_tail(back, remembered, credits, now_ms)?;
        let key = back.remembered_as();
        let credit = match (&answer, back.credit_owner()) {
            (TailBackAnswer::Credited { credit, .. }, Some(owner)) => Some(CreditRow {
                owner,
                range: *credit,
            }),
            _ => None,
        };
        Ok(TailPlan {
            credit,
            remembered: key.clone().zip(answer.remembered()),
            taken: answer.taken(),
            closed: answer.untaken() && key.is_some(),
            max_id: answer.max_id(self.max_id),
            record: match answer {
                TailBackAnswer::Returned { record, .. } => Some(record),
                _ => None,
            },
        })
    }
}
