//! Allocation: the step granted, the next segment, and how a segment lease
//! is answered.

use crate::error::{check_range, Error};
use crate::segment::{Allocation, MAX_STEP};

use super::{Asker, Remembered, SegmentAnswer, SegmentAsk, TagRecord, MAX_REQUEST_ID_LEN};

impl TagRecord {
    /// How to answer a segment lease `ask`, given the segment its store
    /// remembers under [`SegmentAsk::remembered_as`] (`remembered`; ignored
    /// for an ask without a request ID).
    ///
    /// # Errors
    /// [`Error::OpaqueTag`] or [`Error::MonotonicTag`] for a tag whose
    /// segments may not go to the caller ([`TagKind`](super::TagKind));
    /// [`Error::RequestIdNeedsKey`] for a request ID from a caller without a
    /// credential of its own ([`Asker::Shared`]);
    /// [`Error::InvalidRequestId`] for a request ID outside
    /// 1..=[`MAX_REQUEST_ID_LEN`] bytes; [`Error::RequestIdReused`] when the
    /// request remembered under it was granted another step than this ask
    /// is (not a retry of the same request).
    pub fn lease_segment(
        &self,
        ask: &SegmentAsk<'_>,
        remembered: Option<&Remembered>,
    ) -> Result<SegmentAnswer, Error> {
        self.kind.check_lease(ask.for_isolate)?;
        let step = self.grant_step(ask.step);
        let Some(id) = ask.request_id else {
            return Ok(SegmentAnswer::Allocate { step });
        };
        if ask.caller == Asker::Shared {
            return Err(Error::RequestIdNeedsKey);
        }
        if id.is_empty() || id.len() > MAX_REQUEST_ID_LEN {
            return Err(Error::InvalidRequestId {
                len: id.len(),
                max: MAX_REQUEST_ID_LEN,
            });
        }
        match remembered {
            None => Ok(SegmentAnswer::Allocate { step }),
            Some(r) if r.granted == step => Ok(SegmentAnswer::Again(r.segment)),
            // Not a retry of the same request: say so, rather than hand
            // back a segment of another size.
            Some(r) => Err(Error::RequestIdReused {
                granted: r.granted,
                asked: step,
            }),
        }
    }

    /// The step granted to a caller that asks for `requested` (its dynamic
    /// step): never below the tag's configured step, never above its
    /// `max_step` (Leaf's cap when unset).
    pub fn grant_step(&self, requested: Option<u64>) -> u64 {
        requested.map_or(self.step, |s| {
            s.clamp(self.step, self.max_step.unwrap_or(MAX_STEP))
        })
    }

    /// The next segment of `step` IDs (the record's own step when `None`),
    /// and the record as it must be stored before the segment is handed out.
    /// The tag's last segment is shorter: the IDs left up to
    /// [`TagRecord::last_id`].
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a step outside 1..=1,000,000;
    /// [`Error::TagExhausted`] when no ID is left (`max_id` is
    /// [`TagRecord::last_id`]).
    pub fn allocate(
        &self,
        step: Option<u64>,
        now_ms: u64,
    ) -> Result<(Allocation, TagRecord), Error> {
        let step = check_range("step", step.unwrap_or(self.step), 1, MAX_STEP)?;
        if self.max_id >= self.last_id() {
            return Err(Error::TagExhausted {
                max_id: self.max_id,
                step,
            });
        }
        let end = self.max_id.saturating_add(step).min(self.last_id());
        let alloc = Allocation::new(self.max_id + 1, end)?;
        let next = TagRecord {
            max_id: end,
            update_time: now_ms,
            ..self.clone()
        };
        Ok((alloc, next))
    }
}
