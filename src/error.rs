//! The one error type of the core. Every fallible function returns it, and each
//! host maps it once: the wasm bindings to a JS `Error` with `code`, the Worker to
//! an HTTP status with a JSON body. `code()` is the stable, machine-readable name.

use core::fmt;

use crate::code::ErrorCode;
use crate::opaque_domain::OpaqueDomain;

/// Which clock a skew check compared the node's clock against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum ClockReference {
    /// The registry's own clock.
    Registry,
    /// The average of the clocks the live nodes of the same owner last
    /// reported, moved forward by the time elapsed since each report (Leaf
    /// paper's start-up check; one vote per owner, so that no credential
    /// moves another's reference).
    LiveNodesAverage,
}

impl fmt::Display for ClockReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClockReference::Registry => "the registry's clock",
            ClockReference::LiveNodesAverage => "the average clock of the live nodes",
        })
    }
}

/// Everything that can go wrong in the core. Messages read
/// "what: expected X, found Y".
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A number lies outside the range the operation accepts.
    OutOfRange {
        /// What the number is (`"worker_id"`, `"step"`, ...).
        what: &'static str,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
        /// The value given.
        found: u64,
    },
    /// A layout's bit widths add up to more than 63 (the sign bit must stay 0).
    LayoutTooWide {
        /// timestamp + worker + sequence bits.
        total_bits: u32,
    },
    /// A tag or node key is empty, too long, or has a character outside
    /// `[A-Za-z0-9._:-]`.
    InvalidKey {
        /// `"biz_tag"` or `"node_key"`.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The first character that is not allowed, if that is the problem.
        bad_char: Option<char>,
    },
    /// The clock reads earlier than the layout's epoch.
    ClockBeforeEpoch {
        /// The layout's epoch, Unix ms.
        epoch_ms: u64,
        /// The clock, Unix ms.
        now_ms: u64,
    },
    /// The clock went back further than the generator tolerates. Leaf answers
    /// the same: an error, never an ID under a clock that went back.
    ClockMovedBackwards {
        /// Timestamp of the last issued ID, Unix ms.
        last_ms: u64,
        /// The clock now, Unix ms.
        now_ms: u64,
    },
    /// The layout cannot encode this instant: its timestamp field is full.
    LayoutExpired {
        /// The last instant the layout can encode, Unix ms.
        expires_at_ms: u64,
        /// The clock now, Unix ms.
        now_ms: u64,
    },
    /// An ID has bits set above the layout's width (or the sign bit).
    IdOutOfLayout {
        /// The ID given.
        id: u64,
        /// The largest ID the layout can hold.
        max_id: u64,
    },
    /// No ID is left: the tag's `max_id` is its last ID (2^63 − 1, or the
    /// end of its opaque domain).
    TagExhausted {
        /// The tag's current `max_id`.
        max_id: u64,
        /// The step asked for.
        step: u64,
    },
    /// A segment's bounds are not `1 <= start <= end <= 2^63 - 1`.
    InvalidSegment {
        /// First ID of the segment.
        start: u64,
        /// Last ID of the segment.
        end: u64,
    },
    /// A segment overlaps or precedes IDs this buffer already held: loading it
    /// could hand out an ID twice.
    SegmentOverlap {
        /// First ID of the refused segment.
        start: u64,
        /// The highest ID of any segment loaded so far.
        high_water: u64,
    },
    /// Both halves of the double buffer hold unused IDs; there is nowhere to
    /// put another segment.
    SegmentBufferFull,
    /// Every worker ID of the layout is leased to a live node.
    NoFreeWorkerId {
        /// How many worker IDs the layout has.
        capacity: u32,
    },
    /// The lease named is not held by the caller: wrong generation (a newer
    /// grant fenced it off), released, or never granted; or, at a renewal,
    /// its worker ID is now the minters' (their count grew over it).
    LeaseNotHeld {
        /// The worker ID.
        worker_id: u32,
        /// The generation the caller presented.
        generation: u64,
    },
    /// A grant that is live (or still provable) was named by a caller that
    /// did not prove to hold it: a wrong or missing lease secret, or another
    /// credential than the one that leased. Nothing changed: the real
    /// holder keeps its lease.
    NotLeaseHolder {
        /// The worker ID.
        worker_id: u32,
        /// What was wrong: `"secret"` or `"owner"`.
        mismatch: &'static str,
    },
    /// The lease lapsed before it was renewed; the node must stop issuing.
    LeaseExpired {
        /// The worker ID.
        worker_id: u32,
        /// When the lease lapsed, registry ms.
        expired_at_ms: u64,
        /// The registry's clock now.
        now_ms: u64,
    },
    /// The node's clock is behind the last timestamp recorded for this worker
    /// ID (or saved by this holder): issuing now could repeat IDs issued before.
    ClockBehindLastReport {
        /// The worker ID, when one is known.
        worker_id: Option<u32>,
        /// Last issued timestamp on record, Unix ms.
        last_timestamp_ms: u64,
        /// The node's clock, Unix ms.
        node_now_ms: u64,
    },
    /// The node's clock is off from a reference clock by more than allowed.
    ClockSkew {
        /// What the node's clock was compared with.
        reference: ClockReference,
        /// The node's clock, Unix ms.
        node_now_ms: u64,
        /// The reference clock, Unix ms.
        reference_ms: u64,
        /// The largest difference allowed, ms.
        max_skew_ms: u64,
    },
    /// A lease holder may not mint: its renewal was refused (the lease was
    /// fenced off by a newer grant, lapsed at the registry, or its clock was
    /// refused), or it was closed.
    LeaseLost {
        /// The worker ID.
        worker_id: u32,
        /// The generation that was lost.
        generation: u64,
        /// Why, as the registry's code (`None`: closed by its owner).
        cause: Option<ErrorCode>,
    },
    /// A node key in the namespace reserved for the service's minters.
    ReservedNodeKey {
        /// The reserved prefix.
        prefix: &'static str,
    },
    /// A minted batch holds a range that is empty, outside the layout, spans
    /// more than one time unit or worker ID, or overlaps IDs already held.
    InvalidBatch {
        /// First ID of the range.
        start: u64,
        /// One past its last ID.
        end: u64,
    },
    /// A minter lent a right to mint ([`MintRight`](crate::minted::MintRight))
    /// outside the layout, or with no sequence or no time in it.
    InvalidRight {
        /// Its worker ID.
        worker_id: u32,
        /// Its first sequence value.
        seq_start: u32,
        /// How many sequence values.
        seq_len: u32,
        /// Its first unit's start, Unix ms.
        from_ms: u64,
        /// Where it ends, Unix ms.
        until_ms: u64,
    },
    /// The credential already holds as many live worker IDs as one may.
    WorkerIdLimit {
        /// The limit.
        limit: u32,
    },
    /// A minter's grant, named by anyone but that minter: no caller
    /// reclaims, releases or evicts it (the service's own).
    ReservedWorkerId {
        /// The worker ID.
        worker_id: u32,
    },
    /// A segment lease asked of a monotonic tag: its store serves every ID
    /// itself, so its segments never leave it.
    MonotonicTag,
    /// A change of a tag names another `monotonic` than the tag was created
    /// with (isolates hold its segments, or its store its buffer, under the
    /// promise the kind makes).
    MonotonicImmutable {
        /// What the tag was created with.
        fixed: bool,
        /// What the change named.
        found: bool,
    },
    /// IDs asked of a tag's store for a tag that is not monotonic.
    NotMonotonic,
    /// A segment lease of an opaque tag asked from outside the service: its
    /// key stays inside.
    OpaqueTag,
    /// A new tag asked to be both monotonic and opaque (opaque IDs have no
    /// order to keep).
    OpaqueAndMonotonic,
    /// An opaque ID's counter asked of a tag that is not opaque.
    NotOpaque,
    /// A change of a tag names another opaque domain than the tag was created
    /// with (or makes a plain tag opaque).
    OpaqueImmutable {
        /// The domain the tag was created with (`None`: not opaque).
        fixed: Option<OpaqueDomain>,
        /// The domain the change named.
        found: OpaqueDomain,
    },
    /// A segment lease's request ID is empty or longer than
    /// `tag::MAX_REQUEST_ID_LEN` bytes.
    InvalidRequestId {
        /// Its length in bytes.
        len: usize,
        /// The longest allowed.
        max: usize,
    },
    /// A request ID sent again with a different request: a retry asks for
    /// the step it first asked for (as granted), and gets the same segment.
    RequestIdReused {
        /// The step of the segment first answered under the ID.
        granted: u64,
        /// The step this request is granted.
        asked: u64,
    },
    /// A segment lease's request ID from a caller without a credential of
    /// its own (none, or one others hold too): another caller could send
    /// the same ID and be answered its segment.
    RequestIdNeedsKey,
    /// A conditional change of a tag found it other than its writer read it
    /// (`None`: no live tag).
    TagChanged {
        /// The `max_id` the writer read.
        expected: Option<u64>,
        /// The `max_id` the tag has now.
        found: Option<u64>,
    },
    /// A region name that is not one of the nine `locationHint`s
    /// (`region::Region`).
    InvalidRegion {
        /// The name's length in bytes (the name itself is the caller's).
        len: usize,
    },
}

/// An opaque domain as a `PUT` body names it (`none`: not opaque).
fn write_domain(f: &mut fmt::Formatter<'_>, d: Option<OpaqueDomain>) -> fmt::Result {
    match d {
        None => f.write_str("none"),
        Some(OpaqueDomain::Bits(b)) => write!(f, "{{\"bits\": {b}}}"),
        Some(OpaqueDomain::Digits(d)) => write!(f, "{{\"digits\": {d}}}"),
    }
}

impl Error {
    /// A stable, snake_case name for the error, for JS `code` and JSON bodies.
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }

    /// The error's entry in the one list of codes.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Error::OutOfRange { .. } => ErrorCode::OutOfRange,
            Error::LayoutTooWide { .. } => ErrorCode::LayoutTooWide,
            Error::InvalidKey { .. } => ErrorCode::InvalidKey,
            Error::ClockBeforeEpoch { .. } => ErrorCode::ClockBeforeEpoch,
            Error::ClockMovedBackwards { .. } => ErrorCode::ClockMovedBackwards,
            Error::LayoutExpired { .. } => ErrorCode::LayoutExpired,
            Error::IdOutOfLayout { .. } => ErrorCode::IdOutOfLayout,
            Error::TagExhausted { .. } => ErrorCode::TagExhausted,
            Error::InvalidSegment { .. } => ErrorCode::InvalidSegment,
            Error::SegmentOverlap { .. } => ErrorCode::SegmentOverlap,
            Error::SegmentBufferFull => ErrorCode::SegmentBufferFull,
            Error::NoFreeWorkerId { .. } => ErrorCode::NoFreeWorkerId,
            Error::LeaseNotHeld { .. } => ErrorCode::LeaseNotHeld,
            Error::LeaseExpired { .. } => ErrorCode::LeaseExpired,
            Error::NotLeaseHolder { .. } => ErrorCode::NotLeaseHolder,
            Error::ClockBehindLastReport { .. } => ErrorCode::ClockBehindLastReport,
            Error::ClockSkew { .. } => ErrorCode::ClockSkew,
            Error::LeaseLost { .. } => ErrorCode::LeaseLost,
            Error::ReservedNodeKey { .. } => ErrorCode::ReservedNodeKey,
            Error::InvalidBatch { .. } | Error::InvalidRight { .. } => ErrorCode::InvalidBatch,
            Error::WorkerIdLimit { .. } => ErrorCode::WorkerIdLimit,
            Error::ReservedWorkerId { .. } => ErrorCode::ReservedWorkerId,
            Error::MonotonicTag => ErrorCode::MonotonicTag,
            Error::MonotonicImmutable { .. } => ErrorCode::MonotonicImmutable,
            Error::NotMonotonic => ErrorCode::NotMonotonic,
            Error::OpaqueTag | Error::OpaqueAndMonotonic => ErrorCode::OpaqueTag,
            Error::NotOpaque => ErrorCode::NotOpaque,
            Error::OpaqueImmutable { .. } => ErrorCode::OpaqueImmutable,
            Error::InvalidRequestId { .. } => ErrorCode::InvalidRequestId,
            Error::RequestIdReused { .. } => ErrorCode::RequestIdReused,
            Error::RequestIdNeedsKey => ErrorCode::RequestIdNeedsKey,
            Error::TagChanged { .. } => ErrorCode::TagChanged,
            Error::InvalidRegion { .. } => ErrorCode::InvalidRegion,
        }
    }
}

impl fmt::Display for Error {
    // Long: one arm per variant, in one match so that no variant goes without its message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::OutOfRange {
                what,
                min,
                max,
                found,
            } => write!(f, "{what}: expected {min}..={max}, found {found}"),
            Error::LayoutTooWide { total_bits } => write!(
                f,
                "layout: expected timestamp + worker + sequence bits <= 63, found {total_bits}"
            ),
            Error::InvalidKey {
                what,
                len,
                bad_char: Some(c),
            } => write!(
                f,
                "{what}: expected only characters [A-Za-z0-9._:-], found {c:?} (length {len})"
            ),
            Error::InvalidKey {
                what,
                len,
                bad_char: None,
            } => write!(f, "{what}: expected 1..=128 characters, found {len}"),
            Error::ClockBeforeEpoch { epoch_ms, now_ms } => write!(
                f,
                "clock: expected a time at or after the epoch {epoch_ms} ms, found {now_ms} ms"
            ),
            Error::ClockMovedBackwards { last_ms, now_ms } => write!(
                f,
                "clock moved backwards: expected at least {last_ms} ms (last issued), found {now_ms} ms ({} ms behind)",
                last_ms.saturating_sub(now_ms)
            ),
            Error::LayoutExpired {
                expires_at_ms,
                now_ms,
            } => write!(
                f,
                "layout expired: expected a time at or before {expires_at_ms} ms, found {now_ms} ms"
            ),
            Error::IdOutOfLayout { id, max_id } => {
                write!(f, "id: expected 0..={max_id} under this layout, found {id}")
            }
            Error::TagExhausted { max_id, step } => write!(
                f,
                "tag exhausted: expected an ID left above max_id, found max_id {max_id} at the tag's last ID (asked for {step})"
            ),
            Error::InvalidSegment { start, end } => write!(
                f,
                "segment: expected 1 <= start <= end <= {}, found start {start}, end {end}",
                i64::MAX
            ),
            Error::SegmentOverlap { start, high_water } => write!(
                f,
                "segment overlap: expected start > {high_water} (highest ID already loaded), found {start}"
            ),
            Error::SegmentBufferFull => f.write_str(
                "segment buffer: expected a free half to load into, found both halves holding IDs",
            ),
            Error::NoFreeWorkerId { capacity } => write!(
                f,
                "worker id: expected a free worker ID, found all {capacity} leased"
            ),
            Error::LeaseNotHeld {
                worker_id,
                generation,
            } => write!(
                f,
                "lease: expected worker {worker_id} to be held under generation {generation}, found it is not"
            ),
            Error::NotLeaseHolder {
                worker_id,
                mismatch,
            } => write!(
                f,
                "lease of worker {worker_id}: expected the holder's {mismatch}, found another"
            ),
            Error::LeaseExpired {
                worker_id,
                expired_at_ms,
                now_ms,
            } => write!(
                f,
                "lease of worker {worker_id}: expected a renewal by {expired_at_ms} ms, found {now_ms} ms"
            ),
            Error::ClockBehindLastReport {
                worker_id,
                last_timestamp_ms,
                node_now_ms,
            } => {
                match worker_id {
                    Some(id) => write!(f, "clock of worker {id}")?,
                    None => f.write_str("clock")?,
                }
                write!(
                    f,
                    ": expected at least {last_timestamp_ms} ms (last issued timestamp on record), found {node_now_ms} ms"
                )
            }
            Error::ClockSkew {
                reference,
                node_now_ms,
                reference_ms,
                max_skew_ms,
            } => write!(
                f,
                "clock skew: expected within {max_skew_ms} ms of {reference} ({reference_ms} ms), found {node_now_ms} ms"
            ),
            Error::LeaseLost {
                worker_id,
                generation,
                cause: Some(cause),
            } => write!(
                f,
                "lease of worker {worker_id}: expected generation {generation} to be held, found it refused by the registry ({cause}); lease again"
            ),
            Error::LeaseLost {
                worker_id,
                generation,
                cause: None,
            } => write!(
                f,
                "lease of worker {worker_id}: expected generation {generation} to be held, found it closed"
            ),
            Error::ReservedNodeKey { prefix } => write!(
                f,
                "node_key: expected a key not starting with {prefix:?} (reserved for the service's minters), found one"
            ),
            Error::InvalidBatch { start, end } => write!(
                f,
                "minted batch: expected a non-empty range [start, end) of new IDs in one time unit of one worker, found [{start}, {end})"
            ),
            Error::InvalidRight {
                worker_id,
                seq_start,
                seq_len,
                from_ms,
                until_ms,
            } => write!(
                f,
                "right to mint: expected a worker ID and sequences within the layout and a window that is not empty, found worker {worker_id}, sequences {seq_start}+{seq_len}, units from {from_ms} until {until_ms}"
            ),
            Error::WorkerIdLimit { limit } => write!(
                f,
                "worker id: expected fewer than {limit} live worker IDs held by this credential, found {limit} (release one, or let one lapse)"
            ),
            Error::ReservedWorkerId { worker_id } => write!(
                f,
                "worker {worker_id}: expected a grant of a node, found a minter's (the service's own: reclaimed, released or evicted by no one else)"
            ),
            Error::MonotonicTag => f.write_str(
                "biz_tag: expected a tag whose segments may leave its store, found a monotonic tag (its store serves its IDs itself)",
            ),
            Error::MonotonicImmutable { fixed, found } => write!(
                f,
                "monotonic: expected {fixed} (fixed when the tag was first created), found {found}"
            ),
            Error::NotMonotonic => {
                f.write_str("biz_tag: expected a monotonic tag, found one that is not")
            }
            Error::OpaqueTag => f.write_str(
                "biz_tag: expected a tag whose segments may leave the service, found an opaque tag (its key stays inside; the service serves its IDs)",
            ),
            Error::OpaqueAndMonotonic => f.write_str(
                "biz_tag: expected monotonic or opaque, found both (opaque IDs have no order to keep)",
            ),
            Error::NotOpaque => f.write_str(
                "biz_tag: expected an opaque tag, found one that is not (its IDs are their own counters)",
            ),
            Error::OpaqueImmutable { fixed, found } => {
                f.write_str("opaque: expected ")?;
                write_domain(f, fixed)?;
                f.write_str(" (fixed when the tag was first created), found ")?;
                write_domain(f, Some(found))
            }
            Error::InvalidRequestId { len, max } => {
                write!(f, "requestId: expected 1..={max} bytes, found {len}")
            }
            Error::RequestIdReused { granted, asked } => write!(
                f,
                "requestId: expected the request it was first sent with (step {granted}), found one for step {asked}"
            ),
            Error::RequestIdNeedsKey => f.write_str(
                "requestId: expected a caller with a credential of its own (an API key), found a shared token or none: another caller could send the same request ID and be answered this segment; lease without a requestId (a retry after a lost answer then skips a range), or with an API key",
            ),
            Error::TagChanged { expected, found } => {
                let tag = |f: &mut fmt::Formatter<'_>, m: Option<u64>| match m {
                    Some(m) => write!(f, "the tag at max_id {m}"),
                    None => f.write_str("no tag"),
                };
                f.write_str("tag changed: expected ")?;
                tag(f, expected)?;
                f.write_str(" (as read before this write), found ")?;
                tag(f, found)?;
                f.write_str(": IDs were drawn or the tag was made in between; read it again")
            }
            Error::InvalidRegion { len } => write!(
                f,
                "region: expected one of wnam, enam, sam, weur, eeur, apac, oc, afr, me, found another ({len} bytes)"
            ),
        }
    }
}

impl core::error::Error for Error {}

/// Checks `min <= found <= max`, naming the value in the error.
///
/// # Errors
/// [`Error::OutOfRange`] outside the range.
pub fn check_range(what: &'static str, found: u64, min: u64, max: u64) -> Result<u64, Error> {
    if (min..=max).contains(&found) {
        Ok(found)
    } else {
        Err(Error::OutOfRange {
            what,
            min,
            max,
            found,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn messages_say_what_expected_and_found() {
        let e = Error::OutOfRange {
            what: "step",
            min: 1,
            max: 1_000_000,
            found: 0,
        };
        assert_eq!(e.to_string(), "step: expected 1..=1000000, found 0");
        assert_eq!(e.code(), "out_of_range");
        let e = Error::ClockMovedBackwards {
            last_ms: 100,
            now_ms: 40,
        };
        assert!(e.to_string().contains("60 ms behind"));
    }
}
