//! What a tag is (plain, monotonic or opaque), fixed when it is created,
//! and who may take its segments.

use crate::error::Error;
use crate::opaque::OpaqueDomain;
use crate::segment::MAX_SEGMENT_ID;

/// What a tag is. Fixed when the tag is created: isolates hold its segments
/// (or its store its buffer) under the promise its kind makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub enum TagKind {
    /// IDs increase within each segment; its segments go to the service's
    /// isolates and to outside clients (segment leases).
    #[default]
    Plain,
    /// Its store serves every ID itself, each greater than every one before:
    /// its segments never leave it.
    Monotonic,
    /// Its IDs are a keyed permutation of its counters over the domain; its
    /// segments go only to the service's own isolates, with the key.
    Opaque(OpaqueDomain),
}

impl TagKind {
    /// The kind a new tag asks for.
    ///
    /// # Errors
    /// [`Error::OpaqueAndMonotonic`] for both.
    pub fn new(monotonic: bool, opaque: Option<OpaqueDomain>) -> Result<TagKind, Error> {
        match (monotonic, opaque) {
            (true, Some(_)) => Err(Error::OpaqueAndMonotonic),
            (true, None) => Ok(TagKind::Monotonic),
            (false, Some(d)) => Ok(TagKind::Opaque(d)),
            (false, None) => Ok(TagKind::Plain),
        }
    }

    /// The last ID (for an opaque tag: counter) a tag of this kind may
    /// reach: its opaque domain's end, else 2^63 − 1. Allocation stops there
    /// and the runway view counts to it. Under every layout: the layout is
    /// the snowflakes' bits, and segment IDs cross JSON as strings and JS as
    /// `bigint`.
    pub fn last_id(self) -> u64 {
        self.opaque().map_or(MAX_SEGMENT_ID, OpaqueDomain::max_id)
    }

    /// Whether the tag is monotonic.
    pub fn is_monotonic(self) -> bool {
        self == TagKind::Monotonic
    }

    /// An opaque tag's domain.
    pub fn opaque(self) -> Option<OpaqueDomain> {
        match self {
            TagKind::Opaque(d) => Some(d),
            _ => None,
        }
    }

    /// Checks that the tag's store serves its IDs itself (`/ids`).
    ///
    /// # Errors
    /// [`Error::NotMonotonic`] for any other kind.
    pub fn check_monotonic(self) -> Result<(), Error> {
        if self.is_monotonic() {
            Ok(())
        } else {
            Err(Error::NotMonotonic)
        }
    }

    /// An opaque tag's domain, to read an ID's counter with its key.
    ///
    /// # Errors
    /// [`Error::NotOpaque`] for any other kind.
    pub fn check_opaque(self) -> Result<OpaqueDomain, Error> {
        self.opaque().ok_or(Error::NotOpaque)
    }

    /// Checks that a change naming `monotonic` and `opaque` (`None`: not
    /// named) keeps this kind.
    ///
    /// # Errors
    /// [`Error::MonotonicImmutable`], then [`Error::OpaqueImmutable`], for
    /// a change that names another.
    pub(super) fn check_unchanged(
        self,
        monotonic: Option<bool>,
        opaque: Option<OpaqueDomain>,
    ) -> Result<(), Error> {
        let fixed = self.is_monotonic();
        if let Some(found) = monotonic.filter(|m| *m != fixed) {
            return Err(Error::MonotonicImmutable { fixed, found });
        }
        if let Some(found) = opaque.filter(|d| Some(*d) != self.opaque()) {
            return Err(Error::OpaqueImmutable {
                fixed: self.opaque(),
                found,
            });
        }
        Ok(())
    }

    /// Checks that a segment lease may take this tag's segments:
    /// `for_isolate` says it comes from one of the service's own isolates.
    ///
    /// # Errors
    /// [`Error::OpaqueTag`] for an opaque tag, unless for an isolate;
    /// [`Error::MonotonicTag`] for a monotonic tag.
    pub(super) fn check_lease(self, for_isolate: bool) -> Result<(), Error> {
        match self {
            TagKind::Opaque(_) if !for_isolate => Err(Error::OpaqueTag),
            TagKind::Monotonic => Err(Error::MonotonicTag),
            _ => Ok(()),
        }
    }
}
