//! Creating and changing a tag, and the precondition of a conditional change.

use crate::error::{check_range, Error};
use crate::opaque::OpaqueDomain;
use crate::segment::MAX_STEP;

use super::{TagKind, TagRecord};

/// A request to create a tag or change one: each `None` keeps what the tag
/// has (at creation: the default). The kind (`monotonic`, `opaque`) is set
/// at creation only; a change may name the kind the tag has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TagChange<'a> {
    /// The step.
    pub step: Option<u64>,
    /// A new `max_id`: never below the tag's (that would reissue IDs).
    pub max_id: Option<u64>,
    /// The largest step granted.
    pub max_step: Option<u64>,
    /// Free text.
    pub description: Option<&'a str>,
    /// Whether the tag is monotonic.
    pub monotonic: Option<bool>,
    /// An opaque tag's domain.
    pub opaque: Option<OpaqueDomain>,
    /// What the writer read of the tag (`None`: unconditional): the change
    /// goes through only if the tag is still so ([`TagChange::check_expected`]).
    pub expected: Option<TagExpected>,
}

/// What a conditional change read of its tag before it was sent (a plan made
/// from that reading, such as an import from Leaf): the change goes through
/// only if the tag is still so when it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagExpected {
    /// No live tag (none, or a deleted one).
    Absent,
    /// A live tag whose `max_id` is this.
    MaxId(u64),
}

impl TagChange<'_> {
    /// Checks the change's precondition against the tag as it is now
    /// (`live`: `None` for no tag or a deleted one).
    ///
    /// # Errors
    /// [`Error::TagChanged`] when the tag is not as the writer read it
    /// (created, deleted, or its `max_id` moved: IDs were drawn in between).
    pub fn check_expected(&self, live: Option<&TagRecord>) -> Result<(), Error> {
        let found = live.map(|r| r.max_id);
        let holds = match self.expected {
            None => true,
            Some(TagExpected::Absent) => found.is_none(),
            Some(TagExpected::MaxId(m)) => found == Some(m),
        };
        if holds {
            return Ok(());
        }
        Err(Error::TagChanged {
            expected: match self.expected {
                Some(TagExpected::MaxId(m)) => Some(m),
                _ => None,
            },
            found,
        })
    }
}

impl TagRecord {
    /// A new tag as `change` asks, with a step of `default_step` unless it
    /// names one.
    ///
    /// # Errors
    /// As [`TagRecord::new`] and [`TagRecord::with_max_step`];
    /// [`Error::OpaqueAndMonotonic`]; as [`TagRecord::with_kind`].
    pub fn create(
        biz_tag: &str,
        change: &TagChange<'_>,
        default_step: u64,
        now_ms: u64,
    ) -> Result<Self, Error> {
        let record = TagRecord::new(
            biz_tag,
            change.step.unwrap_or(default_step),
            change.max_id.unwrap_or(0),
            change.description.unwrap_or(""),
            now_ms,
        )?
        .with_max_step(change.max_step)?;
        let kind = TagKind::new(change.monotonic.unwrap_or(false), change.opaque)?;
        record.with_kind(kind)
    }

    /// The tag changed as `change` asks ([`TagRecord::update`]), its kind
    /// kept.
    ///
    /// # Errors
    /// As [`TagRecord::update`]; [`Error::MonotonicImmutable`] or
    /// [`Error::OpaqueImmutable`] for a change that names another kind.
    pub fn change(&self, change: &TagChange<'_>, now_ms: u64) -> Result<Self, Error> {
        let next = self.update(
            change.step.unwrap_or(self.step),
            change.max_id,
            change.max_step,
            change.description.unwrap_or(&self.description),
            now_ms,
        )?;
        self.kind.check_unchanged(change.monotonic, change.opaque)?;
        Ok(next)
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
            kind: self.kind,
            max_step: max_step.or(self.max_step).filter(|m| *m != MAX_STEP),
        };
        next.validate()?;
        Ok(next)
    }
}
