//! Every error code any part of edgeleaf answers with, declared once: the
//! core's [`Error::code`](crate::Error::code), the service's own (HTTP
//! routing, bodies, tokens, stores) and the JS package's (options, fetches,
//! the HTTP client). The Worker maps each code to one HTTP status; the JS
//! package throws `Error`s whose `code` is one of these; `pkg/index.d.ts` and
//! `worker/openapi.yaml` list them, checked by `tests/error_codes.rs`.

use core::fmt;

macro_rules! codes {
    ($( $(#[$doc:meta])* $name:ident = $text:literal, $wire:literal; )*) => {
        /// A stable, machine-readable error name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
        // Not `non_exhaustive`: every host must give every code a meaning (the
        // Worker's status table is an exhaustive match).
        pub enum ErrorCode {
            $( $(#[$doc])* $name, )*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name),*];

            /// The snake_case name carried by JSON bodies and JS errors.
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$name => $text,)* }
            }

            /// Whether the HTTP API may answer with this code (the rest are
            /// raised only inside the JS package).
            pub const fn on_wire(self) -> bool {
                match self { $(ErrorCode::$name => $wire,)* }
            }

            /// The code named `text`, if there is one.
            pub fn parse(text: &str) -> Option<ErrorCode> {
                match text { $($text => Some(ErrorCode::$name),)* _ => None }
            }
        }
    };
}

codes! {
    // ---- the core's errors (crate::Error)
    /// A number outside the accepted range.
    OutOfRange = "out_of_range", true;
    /// A layout wider than 63 bits.
    LayoutTooWide = "layout_too_wide", true;
    /// A tag or node key that breaks the key rule.
    InvalidKey = "invalid_key", true;
    /// The clock reads before the layout's epoch.
    ClockBeforeEpoch = "clock_before_epoch", true;
    /// The clock went back further than tolerated.
    ClockMovedBackwards = "clock_moved_backwards", true;
    /// The layout's timestamp field is full.
    LayoutExpired = "layout_expired", true;
    /// An ID with bits outside the layout.
    IdOutOfLayout = "id_out_of_layout", true;
    /// A tag's `max_id` would pass its domain.
    TagExhausted = "tag_exhausted", true;
    /// A malformed segment range.
    InvalidSegment = "invalid_segment", true;
    /// A segment at or below IDs already loaded.
    SegmentOverlap = "segment_overlap", true;
    /// No free half in a double buffer.
    SegmentBufferFull = "segment_buffer_full", true;
    /// Every worker ID is leased.
    NoFreeWorkerId = "no_free_worker_id", true;
    /// A lease presented under a generation that no longer holds it.
    LeaseNotHeld = "lease_not_held", true;
    /// A lease that lapsed before it was renewed.
    LeaseExpired = "lease_expired", true;
    /// A live lease named by a caller that is not its holder (wrong secret
    /// or another credential); the lease is unchanged.
    NotLeaseHolder = "not_lease_holder", true;
    /// A node clock behind the last timestamp on record.
    ClockBehindLastReport = "clock_behind_last_report", true;
    /// A node clock too far from the reference.
    ClockSkew = "clock_skew", true;
    /// A lease holder whose lease was refused, taken over or closed.
    LeaseLost = "lease_lost", false;
    /// A node key in the namespace reserved for the service's minters.
    ReservedNodeKey = "reserved_node_key", true;
    /// A minter answered a batch that breaks the batch rules.
    InvalidBatch = "invalid_batch", true;
    /// A request for an API key that breaks a rule (name, scopes, tags).
    InvalidKeySpec = "invalid_key_spec", true;
    /// A credential holds as many live worker IDs as one may.
    WorkerIdLimit = "worker_id_limit", true;
    /// Segments of a monotonic tag may not leave its store.
    MonotonicTag = "monotonic_tag", true;
    /// `monotonic` is fixed when a tag is created.
    MonotonicImmutable = "monotonic_immutable", true;
    /// IDs asked of a tag's store for a tag that is not monotonic.
    NotMonotonic = "not_monotonic", true;
    /// Not for opaque tags: segment leases to outside clients (the key would
    /// have to leave), or an opaque tag that is also monotonic.
    OpaqueTag = "opaque_tag", true;
    /// A counter asked of a tag that is not opaque.
    NotOpaque = "not_opaque", true;
    /// `opaque` is fixed when a tag is created.
    OpaqueImmutable = "opaque_immutable", true;
    /// A lease request ID outside 1..=128 characters.
    InvalidRequestId = "invalid_request_id", true;
    /// A lease request ID sent again with a different request.
    RequestIdReused = "request_id_reused", true;

    // ---- the service's own
    /// No such route or tag.
    NotFound = "not_found", true;
    /// No bearer token.
    Unauthorized = "unauthorized", true;
    /// A token that does not open the route.
    Forbidden = "forbidden", true;
    /// A route that exists under other methods (see `Allow`).
    MethodNotAllowed = "method_not_allowed", true;
    /// A body that is not JSON of the documented shape.
    InvalidJson = "invalid_json", true;
    /// A body over the size limit.
    BodyTooLarge = "body_too_large", true;
    /// An ID argument that is not a decimal integer in range.
    InvalidId = "invalid_id", true;
    /// A snowflake sequence that stayed used up for longer than a request waits.
    SequenceExhausted = "sequence_exhausted", true;
    /// A Durable Object did not answer, or no segment came in time.
    StoreUnavailable = "store_unavailable", true;
    /// A Durable Object answered something unreadable, or holds a bad row.
    StoreError = "store_error", true;
    /// A setting of the service is invalid.
    ConfigInvalid = "config_invalid", true;
    /// A bug in the bindings: something that should not happen did.
    Internal = "internal", false;

    // ---- the JS package's own
    /// A bad options object (wrong type, unknown key).
    InvalidOption = "invalid_option", false;
    /// A bad argument (not a whole number, out of 0..=2^53).
    InvalidArgument = "invalid_argument", false;
    /// `now()` returned something that is not whole Unix milliseconds.
    InvalidClock = "invalid_clock", false;
    /// The clock is a little behind the last ID: retry after `retryAfterMs`.
    ClockBehind = "clock_behind", false;
    /// A leased snowflake waits for its store to save a later reservation:
    /// retry after `retryAfterMs`.
    SavePending = "save_pending", false;
    /// `fetchSegment` failed.
    SegmentFetchFailed = "segment_fetch_failed", false;
    /// `crypto.getRandomValues` is missing.
    RandomUnavailable = "random_unavailable", false;
    /// No answer from the service.
    ServiceUnreachable = "service_unreachable", false;
    /// No answer from the service's worker-ID registry.
    RegistryUnreachable = "registry_unreachable", false;
    /// The service answered an error without the JSON error shape.
    HttpError = "http_error", false;
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, a) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(ErrorCode::parse(a.as_str()), Some(*a));
            assert!(a
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_'));
            for b in &ErrorCode::ALL[i + 1..] {
                assert_ne!(a.as_str(), b.as_str());
            }
        }
        assert_eq!(ErrorCode::parse("no_such_code"), None);
    }
}
