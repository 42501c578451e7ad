//! The store side of segment mode: one record per `biz_tag`, the allocation
//! that advances it, and the rules of its store: a tag's kind (plain,
//! monotonic or opaque), fixed when it is created, says who may take its
//! segments; a segment lease sent again under its request ID is answered the
//! same segment, and only a caller with a credential of its own may send one.
//! A Durable Object runs this over its storage; the record returned must be
//! durable before the allocation is handed out.

mod allocate;
mod answer;
mod ask;
mod change;
mod credit;
mod hand_back;
mod kind;
mod plan;
#[cfg(test)]
mod tests;

pub use answer::{
    CreditBack, CreditedAnswer, SegmentAnswer, TailBackAnswer, TailSkipped, TakeBack,
};
pub use ask::{
    remembered_prune, Asker, Remembered, RememberedChange, SegmentAsk, TailBack,
    MAX_COUNTED_CALLERS, MAX_REMEMBERED_PER_CALLER, MAX_REQUEST_ID_LEN, REMEMBERED_PRUNE_MARGIN,
    REQUEST_ID_TTL_MS,
};
pub use change::{TagChange, TagExpected};
pub use credit::MAX_CREDITS;
pub use kind::TagKind;
pub use plan::{CreditRow, LeasePlan, LeaseSource, TailPlan};

use crate::error::{check_range, Error};
use crate::name::check_tag;
use crate::segment::MAX_STEP;
use alloc::string::String;

/// The longest description kept with a tag, in bytes.
pub const MAX_DESCRIPTION_LEN: usize = 256;

/// Leaf's `leaf_alloc` row.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TagRecord {
    /// The business key.
    pub biz_tag: String,
    /// The highest ID handed out in a segment so far (0: none yet).
    pub max_id: u64,
    /// The configured step (segment length).
    pub step: u64,
    /// Free text.
    pub description: String,
    /// When the record last changed, Unix ms.
    pub update_time: u64,
    /// What the tag is, fixed when it is created. An opaque tag's counters
    /// (and so `max_id`) end at its domain's last ID.
    #[cfg_attr(feature = "serde", serde(default))]
    pub kind: TagKind,
    /// The largest step granted (`None`: Leaf's 1,000,000). A tag whose
    /// segments must stay short (fewer IDs skipped when an isolate is lost)
    /// pins its step with `max_step == step`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub max_step: Option<u64>,
}

impl TagRecord {
    /// A new tag whose first ID will be `max_id + 1`.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for a bad tag; [`Error::OutOfRange`] for a step
    /// outside 1..=1,000,000, a `max_id` above 2^63 − 1, or a description over
    /// 256 bytes.
    pub fn new(
        biz_tag: &str,
        step: u64,
        max_id: u64,
        description: &str,
        now_ms: u64,
    ) -> Result<Self, Error> {
        check_tag(biz_tag)?;
        let record = TagRecord {
            biz_tag: biz_tag.into(),
            max_id,
            step,
            description: description.into(),
            update_time: now_ms,
            kind: TagKind::Plain,
            max_step: None,
        };
        record.validate()?;
        Ok(record)
    }

    /// Checks a record read back from storage or built by hand.
    ///
    /// # Errors
    /// As [`TagRecord::new`].
    pub fn validate(&self) -> Result<(), Error> {
        check_tag(&self.biz_tag)?;
        check_range("step", self.step, 1, MAX_STEP)?;
        if let Some(m) = self.max_step {
            check_range("max_step", m, self.step, MAX_STEP)?;
        }
        if let Some(d) = self.kind.opaque() {
            d.validate()?;
        }
        check_range("max_id", self.max_id, 0, self.last_id())?;
        check_range(
            "description length",
            self.description.len() as u64,
            0,
            MAX_DESCRIPTION_LEN as u64,
        )?;
        Ok(())
    }

    /// The same record of another kind (at creation, or read back from
    /// storage).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for an opaque domain outside the allowed widths
    /// or a `max_id` already past its end.
    pub fn with_kind(mut self, kind: TagKind) -> Result<Self, Error> {
        self.kind = kind;
        self.validate()?;
        Ok(self)
    }

    /// The last ID (for an opaque tag: counter) the tag may hand out:
    /// 2^63 − 1, or the end of its opaque domain.
    pub fn last_id(&self) -> u64 {
        self.kind.last_id()
    }

    /// The same record with its largest step set (`None`, or Leaf's cap of
    /// 1,000,000, which is the same: unset).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] unless `step <= max_step <= 1,000,000`.
    pub fn with_max_step(mut self, max_step: Option<u64>) -> Result<Self, Error> {
        self.max_step = max_step.filter(|m| *m != MAX_STEP);
        self.validate()?;
        Ok(self)
    }
}
