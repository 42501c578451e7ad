//! What each error code means over HTTP: its status, and whether the HTTP
//! API answers with it at all (some codes are raised only inside the JS
//! package).

use edgeleaf::code::ErrorCode;

/// What `code` means over HTTP: its status, and whether the HTTP API may
/// answer with it (the rest are raised only inside the JS package, or never
/// leave the service). The one table: an exhaustive match, so a new code
/// must be given a meaning here.
const fn meaning(code: ErrorCode) -> (u16, bool) {
    use ErrorCode as C;
    match code {
        C::OutOfRange
        | C::LayoutTooWide
        | C::InvalidKey
        | C::IdOutOfLayout
        | C::InvalidSegment
        | C::InvalidJson
        | C::InvalidRequestId
        | C::RequestIdNeedsKey
        | C::ReservedNodeKey
        | C::InvalidId
        | C::InvalidKeySpec
        | C::InvalidRegion => (400, true),
        C::Unauthorized => (401, true),
        // Its own code: "someone else named your lease" is not "your lease
        // is gone" (409 lease_not_held), and must never stop the holder.
        C::Forbidden | C::NotLeaseHolder => (403, true),
        C::NotFound => (404, true),
        C::MethodNotAllowed => (405, true),
        C::BodyTooLarge => (413, true),
        // A quota: a lease the credential holds must lapse or be released.
        C::WorkerIdLimit => (429, true),
        C::TagExhausted
        | C::SegmentOverlap
        | C::SegmentBufferFull
        | C::LeaseNotHeld
        | C::LeaseExpired
        | C::ClockBehindLastReport
        | C::ClockSkew
        | C::MonotonicTag
        | C::MonotonicImmutable
        | C::NotMonotonic
        | C::OpaqueTag
        | C::RequestIdReused
        | C::TagChanged
        | C::NotOpaque
        | C::OpaqueImmutable
        // The worker ID is a minter's (the state of the ID, not the
        // caller's rights): no caller reclaims, releases or evicts it.
        | C::ReservedWorkerId => (409, true),
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
        | C::ConfigInvalid => (503, true),
        // Never answered over HTTP: a holder's own verdict on its lease, and
        // the service's last resort.
        C::LeaseLost => (409, false),
        C::Internal => (503, false),
        // Raised only inside the JS package.
        C::InvalidOption
        | C::InvalidArgument
        | C::InvalidClock
        | C::ClockBehind
        | C::SavePending
        | C::SegmentFetchFailed
        | C::RandomUnavailable
        | C::ServiceUnreachable
        | C::RegistryUnreachable
        | C::HttpError
        | C::SyncCompileRefused
        | C::NotInitialized
        | C::InvalidDump
        | C::ImportConflict
        | C::StoreLocked
        | C::GeneratorClosed => (503, false),
    }
}

/// The HTTP status of an answer carrying `code`.
pub const fn status(code: ErrorCode) -> u16 {
    meaning(code).0
}

/// Whether the HTTP API may answer with `code`.
pub const fn on_wire(code: ErrorCode) -> bool {
    meaning(code).1
}
