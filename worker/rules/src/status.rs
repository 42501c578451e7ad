//! What each error code means over HTTP: its status, and whether the HTTP
//! API answers with it at all (some codes are raised only inside the JS
//! package). One table, an exhaustive match: a new code must be given a
//! status here.

use edgeleaf::code::ErrorCode;

/// The one table from error codes to HTTP statuses.
pub fn status(code: ErrorCode) -> u16 {
    use ErrorCode as C;
    match code {
        C::OutOfRange
        | C::LayoutTooWide
        | C::InvalidKey
        | C::IdOutOfLayout
        | C::InvalidSegment
        | C::InvalidJson
        | C::InvalidRequestId
        | C::ReservedNodeKey
        | C::InvalidId
        | C::InvalidKeySpec => 400,
        C::Unauthorized => 401,
        // Its own code: "someone else named your lease" is not "your lease
        // is gone" (409 lease_not_held), and must never stop the holder.
        C::Forbidden | C::NotLeaseHolder => 403,
        C::NotFound => 404,
        C::MethodNotAllowed => 405,
        C::BodyTooLarge => 413,
        // A quota: a lease the credential holds must lapse or be released.
        C::WorkerIdLimit => 429,
        C::TagExhausted
        | C::SegmentOverlap
        | C::SegmentBufferFull
        | C::LeaseNotHeld
        | C::LeaseExpired
        | C::LeaseLost
        | C::ClockBehindLastReport
        | C::ClockSkew
        | C::MonotonicTag
        | C::MonotonicImmutable
        | C::NotMonotonic
        | C::OpaqueTag
        | C::RequestIdReused
        | C::NotOpaque
        | C::OpaqueImmutable => 409,
        // Waiting mends these, or they are the service's own trouble (its
        // clock before the epoch or past the layout's end, its settings, its
        // stores), not the caller's.
        C::ClockMovedBackwards
        | C::NoFreeWorkerId
        | C::ClockBeforeEpoch
        | C::LayoutExpired
        | C::SequenceExhausted
        | C::StoreUnavailable
        | C::StoreError
        | C::InvalidBatch
        | C::ConfigInvalid => 503,
        // Raised only inside the JS package; listed so that a new code must
        // be given a status here.
        C::Internal
        | C::InvalidOption
        | C::InvalidArgument
        | C::InvalidClock
        | C::ClockBehind
        | C::SavePending
        | C::SegmentFetchFailed
        | C::RandomUnavailable
        | C::ServiceUnreachable
        | C::RegistryUnreachable
        | C::HttpError => 503,
    }
}

/// Whether the HTTP API may answer with `code` (the rest are raised only
/// inside the JS package, or never leave the service).
pub const fn on_wire(code: ErrorCode) -> bool {
    use ErrorCode as C;
    !matches!(
        code,
        C::LeaseLost
            | C::Internal
            | C::InvalidOption
            | C::InvalidArgument
            | C::InvalidClock
            | C::ClockBehind
            | C::SavePending
            | C::SegmentFetchFailed
            | C::RandomUnavailable
            | C::ServiceUnreachable
            | C::RegistryUnreachable
            | C::HttpError
    )
}
