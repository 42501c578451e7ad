//! The store side of segment mode: one record per `biz_tag` and the
//! allocation that advances it. A Durable Object runs this over its storage;
//! the record returned must be durable before the allocation is handed out.

use alloc::string::String;

use crate::error::{check_range, Error};
use crate::name::check_tag;
use crate::opaque::OpaqueDomain;
use crate::segment::{Allocation, MAX_SEGMENT_ID, MAX_STEP};

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
    /// An opaque tag's domain: its counters (and so `max_id`) end at the
    /// domain's last ID. Fixed when the tag is created.
    #[cfg_attr(feature = "serde", serde(default))]
    pub opaque: Option<OpaqueDomain>,
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
            opaque: None,
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
        if let Some(d) = self.opaque {
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

    /// The same record as an opaque tag over `domain` (at creation).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a domain outside the allowed widths or a
    /// `max_id` already past its end.
    pub fn with_opaque(mut self, domain: OpaqueDomain) -> Result<Self, Error> {
        self.opaque = Some(domain);
        self.validate()?;
        Ok(self)
    }

    /// The last ID (for an opaque tag: counter) the tag may hand out:
    /// 2^63 − 1, or the end of its opaque domain.
    pub fn last_id(&self) -> u64 {
        self.opaque.map_or(MAX_SEGMENT_ID, OpaqueDomain::max_id)
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
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a step outside 1..=1,000,000;
    /// [`Error::TagExhausted`] when the segment would pass
    /// [`TagRecord::last_id`].
    pub fn allocate(
        &self,
        step: Option<u64>,
        now_ms: u64,
    ) -> Result<(Allocation, TagRecord), Error> {
        let step = check_range("step", step.unwrap_or(self.step), 1, MAX_STEP)?;
        let end = self
            .max_id
            .checked_add(step)
            .filter(|end| *end <= self.last_id())
            .ok_or(Error::TagExhausted {
                max_id: self.max_id,
                step,
            })?;
        let alloc = Allocation::new(self.max_id + 1, end)?;
        let next = TagRecord {
            max_id: end,
            update_time: now_ms,
            ..self.clone()
        };
        Ok((alloc, next))
    }

    /// The record with a new step and description, keeping `max_id`: an
    /// update may never move `max_id` back (that would reissue IDs). A higher
    /// `max_id` is accepted (skipping IDs is safe). `max_step` is kept when
    /// `None`, else set as by [`TagRecord::with_max_step`], against the new step.
    ///
    /// # Errors
    /// As [`TagRecord::new`]; [`Error::OutOfRange`] when `max_id` would go
    /// back or `max_step` would be below the step.
    pub fn update(
        &self,
        step: u64,
        max_id: Option<u64>,
        max_step: Option<u64>,
        description: &str,
        now_ms: u64,
    ) -> Result<TagRecord, Error> {
        let max_id = match max_id {
            Some(m) => check_range("max_id", m, self.max_id, self.last_id())?,
            None => self.max_id,
        };
        let next = TagRecord {
            biz_tag: self.biz_tag.clone(),
            max_id,
            step,
            description: description.into(),
            update_time: now_ms,
            opaque: self.opaque,
            max_step: max_step.or(self.max_step).filter(|m| *m != MAX_STEP),
        };
        next.validate()?;
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_advances_max_id_like_leaf() {
        let r = TagRecord::new("order", 2000, 1, "orders", 5).unwrap();
        let (a, r2) = r.allocate(None, 10).unwrap();
        assert_eq!((a.start, a.end, a.step), (2, 2001, 2000));
        assert_eq!((r2.max_id, r2.update_time), (2001, 10));
        let (b, r3) = r2.allocate(Some(10), 11).unwrap();
        assert_eq!((b.start, b.end), (2002, 2011));
        assert_eq!(r3.max_id, 2011);
    }

    #[test]
    fn allocation_stops_at_i64_max() {
        let r = TagRecord::new("t", 10, MAX_SEGMENT_ID - 10, "", 0).unwrap();
        let (a, r2) = r.allocate(None, 0).unwrap();
        assert_eq!(a.end, MAX_SEGMENT_ID);
        assert_eq!(
            r2.allocate(Some(1), 0),
            Err(Error::TagExhausted {
                max_id: MAX_SEGMENT_ID,
                step: 1
            })
        );
        let r = TagRecord::new("t", 10, MAX_SEGMENT_ID - 5, "", 0).unwrap();
        assert_eq!(
            r.allocate(None, 0),
            Err(Error::TagExhausted {
                max_id: MAX_SEGMENT_ID - 5,
                step: 10
            })
        );
    }

    #[test]
    fn an_opaque_tag_ends_at_its_domain() {
        let d = OpaqueDomain::Bits(32);
        let r = TagRecord::new("o", 10, d.max_id() - 10, "", 0)
            .unwrap()
            .with_opaque(d)
            .unwrap();
        let (a, r2) = r.allocate(None, 0).unwrap();
        assert_eq!(a.end, d.max_id());
        assert!(matches!(
            r2.allocate(Some(1), 0),
            Err(Error::TagExhausted { .. })
        ));
        assert!(TagRecord::new("o", 10, d.max_id() + 1, "", 0)
            .unwrap()
            .with_opaque(d)
            .is_err());
    }

    #[test]
    fn records_are_validated() {
        assert!(TagRecord::new("bad tag", 10, 0, "", 0).is_err());
        assert!(TagRecord::new("t", 0, 0, "", 0).is_err());
        assert!(TagRecord::new("t", 1_000_001, 0, "", 0).is_err());
        assert!(TagRecord::new("t", 1, MAX_SEGMENT_ID + 1, "", 0).is_err());
        assert!(TagRecord::new("t", 1, 0, &"x".repeat(257), 0).is_err());
        let r = TagRecord::new("t", 10, 100, "", 0).unwrap();
        assert!(r.allocate(Some(0), 0).is_err());
        assert_eq!(r.grant_step(Some(1)), 10, "never below the tag's step");
        assert_eq!(r.grant_step(Some(5_000_000)), MAX_STEP);
        assert_eq!(r.grant_step(None), 10);
        let pinned = r.clone().with_max_step(Some(10)).unwrap();
        assert_eq!(
            pinned.grant_step(Some(5_000)),
            10,
            "never above the tag's max_step"
        );
        assert!(
            r.clone().with_max_step(Some(9)).is_err(),
            "max_step below the step"
        );
        assert!(r.clone().with_max_step(Some(MAX_STEP + 1)).is_err());
        assert!(
            r.update(10, Some(99), None, "", 1).is_err(),
            "max_id never goes back"
        );
        assert_eq!(r.update(20, Some(500), None, "d", 1).unwrap().max_id, 500);
    }
}
