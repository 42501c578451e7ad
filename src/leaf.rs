//! Moving a tag from Leaf: where the service's tag continues, given the row
//! Leaf's `leaf_alloc` table holds, so that it never hands out an ID a Leaf
//! node could have.
//!
//! A Leaf node takes a segment with `max_id = max_id + step` and hands out
//! IDs below the new `max_id`: every ID Leaf handed out, or holds in a
//! node's current or prefetched segment, is at most the dumped `max_id`. The
//! margin covers segments Leaf nodes still take after the dump. The
//! service's `max_id` is the last ID allotted (the next segment starts above
//! it), and a tag's `max_id` only grows.
//!
//! So a bad or hostile dump could leave a tag exhausted for good (a row at
//! 2^63 − 1): a target above [`MAX_IMPORT_TARGET`] is refused unless forced.

use crate::error::Error;
use crate::segment::MAX_SEGMENT_ID;

/// Leaf's largest dynamic step (`SegmentIDGenImpl.MAX_STEP`): one segment a
/// Leaf node loads is at most `max(step, LEAF_MAX_STEP)` IDs.
pub const LEAF_MAX_STEP: u64 = 1_000_000;

/// The default margin for a Leaf tag of `step`: two of the largest segments
/// a Leaf node loads, for a dump taken while nodes were still loading. A
/// table frozen before the dump needs none.
pub const fn default_margin(step: u64) -> u64 {
    let load = if step > LEAF_MAX_STEP {
        step
    } else {
        LEAF_MAX_STEP
    };
    load.saturating_mul(2)
}

/// The highest `max_id` an import leaves a tag at unless forced: 2^62,
/// which leaves the tag 2^62 − 1 IDs (half the space). No Leaf installation
/// comes near it (a million IDs a second take 146,000 years to reach it); a
/// dump that does is bad or hostile, and a tag's `max_id` never goes back.
pub const MAX_IMPORT_TARGET: u64 = 1 << 62;

/// The service's tag as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceTag {
    /// Its `max_id`: the last ID it allotted (or was set to).
    pub max_id: u64,
    /// An opaque tag: its IDs are a permutation, not above anything.
    pub opaque: bool,
}

/// What to do with the service's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// No such tag: create it at the target `max_id`.
    Create,
    /// It never allotted an ID (`max_id` 0): raise it to the target.
    Raise,
    /// It is at or above the target already: nothing to do (a second run).
    Unchanged,
}

/// Why a tag cannot continue Leaf's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// Leaf's `max_id` plus the margin passes the last ID: nothing is left
    /// above them.
    PastLastId,
    /// Leaf's `max_id` plus the margin passes [`MAX_IMPORT_TARGET`], and the
    /// import is not forced: the tag would be left with a short runway.
    ShortRunway {
        /// Leaf's `max_id` plus the margin.
        target: u64,
    },
    /// The service's tag is opaque.
    Opaque,
    /// The service's tag allotted IDs below the target (up to this
    /// `max_id`): some may equal IDs Leaf handed out, or will hand out
    /// within the margin.
    Allotted {
        /// The service's `max_id`.
        service_max_id: u64,
    },
}

/// Where the service's tag continues after Leaf's row (`leaf_max_id`, with
/// `margin`), and what to do with the tag `service` says exists (`None`:
/// none): `Ok((target_max_id, move))`, where `target_max_id` is
/// `leaf_max_id + margin`, or why it cannot. A target above
/// [`MAX_IMPORT_TARGET`] is a conflict unless `force`.
///
/// # Errors
/// [`Error::OutOfRange`] for a `leaf_max_id` above the last ID.
pub fn continue_after(
    leaf_max_id: u64,
    margin: u64,
    service: Option<ServiceTag>,
    force: bool,
) -> Result<Result<(u64, Move), Conflict>, Error> {
    crate::error::check_range("leaf max_id", leaf_max_id, 0, MAX_SEGMENT_ID)?;
    let Some(target) = leaf_max_id
        .checked_add(margin)
        .filter(|t| *t <= MAX_SEGMENT_ID)
    else {
        return Ok(Err(Conflict::PastLastId));
    };
    if target > MAX_IMPORT_TARGET && !force {
        return Ok(Err(Conflict::ShortRunway { target }));
    }
    Ok(match service {
        None => Ok((target, Move::Create)),
        Some(s) if s.opaque => Err(Conflict::Opaque),
        Some(s) if s.max_id >= target => Ok((target, Move::Unchanged)),
        Some(s) if s.max_id == 0 => Ok((target, Move::Raise)),
        Some(s) => Err(Conflict::Allotted {
            service_max_id: s.max_id,
        }),
    })
}
