//! Every error code any part of edgeleaf answers with, declared once: the
//! core's [`Error::code`](crate::Error::code), the service's own (HTTP
//! routing, bodies, tokens, stores) and the JS package's (options, fetches,
//! the HTTP client). The list is here because the core is the one crate the
//! package and the service both build on; what a code means over HTTP (its
//! status, whether the HTTP API answers it at all) is the service's rule
//! (`edgeleaf-rules`, `status`). `pkg/index.d.ts` and `worker/openapi.yaml`
//! list the codes, checked by `worker/rules/tests/error_codes.rs`.

use core::fmt;

macro_rules! codes {
    ($( $(#[$doc:meta])* $name:ident = $text:literal; )*) => {
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
    OutOfRange = "out_of_range";
    /// A layout wider than 63 bits.
    LayoutTooWide = "layout_too_wide";
    /// A tag or node key that breaks the key rule.
    InvalidKey = "invalid_key";
    /// The clock reads before the layout's epoch.
    ClockBeforeEpoch = "clock_before_epoch";
    /// The clock went back further than tolerated.
    ClockMovedBackwards = "clock_moved_backwards";
    /// The layout's timestamp field is full.
    LayoutExpired = "layout_expired";
    /// An ID with bits outside the layout.
    IdOutOfLayout = "id_out_of_layout";
    /// A tag's `max_id` would pass its domain.
    TagExhausted = "tag_exhausted";
    /// A malformed segment range.
    InvalidSegment = "invalid_segment";
    /// A segment at or below IDs already loaded.
    SegmentOverlap = "segment_overlap";
    /// No free half in a double buffer.
    SegmentBufferFull = "segment_buffer_full";
    /// Every worker ID is leased.
    NoFreeWorkerId = "no_free_worker_id";
    /// A lease presented under a generation that no longer holds it.
    LeaseNotHeld = "lease_not_held";
    /// A lease that lapsed before it was renewed.
    LeaseExpired = "lease_expired";
    /// A live lease named by a caller that is not its holder (wrong secret
    /// or another credential); the lease is unchanged.
    NotLeaseHolder = "not_lease_holder";
    /// A node clock behind the last timestamp on record.
    ClockBehindLastReport = "clock_behind_last_report";
    /// A node clock too far from the reference.
    ClockSkew = "clock_skew";
    /// A lease holder whose lease was refused, taken over or closed.
    LeaseLost = "lease_lost";
    /// A node key in the namespace reserved for the service's minters.
    ReservedNodeKey = "reserved_node_key";
    /// A minter answered a batch that breaks the batch rules.
    InvalidBatch = "invalid_batch";
    /// A request for an API key that breaks a rule (name, scopes, tags).
    InvalidKeySpec = "invalid_key_spec";
    /// A credential holds as many live worker IDs as one may.
    WorkerIdLimit = "worker_id_limit";
    /// A minter's grant named by anyone but that minter (a reclaim, a
    /// release, an eviction).
    ReservedWorkerId = "reserved_worker_id";
    /// Segments of a monotonic tag may not leave its store.
    MonotonicTag = "monotonic_tag";
    /// `monotonic` is fixed when a tag is created.
    MonotonicImmutable = "monotonic_immutable";
    /// IDs asked of a tag's store for a tag that is not monotonic.
    NotMonotonic = "not_monotonic";
    /// Not for opaque tags: segment leases to outside clients (the key would
    /// have to leave), or an opaque tag that is also monotonic.
    OpaqueTag = "opaque_tag";
    /// A counter asked of a tag that is not opaque.
    NotOpaque = "not_opaque";
    /// `opaque` is fixed when a tag is created.
    OpaqueImmutable = "opaque_immutable";
    /// A lease request ID outside 1..=128 characters.
    InvalidRequestId = "invalid_request_id";
    /// A lease request ID sent again with a different request.
    RequestIdReused = "request_id_reused";
    /// A lease request ID from a caller without a credential of its own.
    RequestIdNeedsKey = "request_id_needs_key";
    /// A conditional change of a tag found it other than its writer read it.
    TagChanged = "tag_changed";
    /// A region name that is not one of the nine `locationHint`s.
    InvalidRegion = "invalid_region";

    // ---- the service's own
    /// No such route or tag.
    NotFound = "not_found";
    /// No bearer token.
    Unauthorized = "unauthorized";
    /// A token that does not open the route.
    Forbidden = "forbidden";
    /// A route that exists under other methods (see `Allow`).
    MethodNotAllowed = "method_not_allowed";
    /// A body that is not JSON of the documented shape.
    InvalidJson = "invalid_json";
    /// A body over the size limit.
    BodyTooLarge = "body_too_large";
    /// An ID argument that is not a decimal integer in range.
    InvalidId = "invalid_id";
    /// A snowflake sequence that stayed used up for longer than a request waits.
    SequenceExhausted = "sequence_exhausted";
    /// A Durable Object did not answer, or no segment came in time.
    StoreUnavailable = "store_unavailable";
    /// A Durable Object answered something unreadable, or holds a bad row.
    StoreError = "store_error";
    /// A setting of the service is invalid.
    ConfigInvalid = "config_invalid";
    /// A bug in the bindings: something that should not happen did.
    Internal = "internal";

    // ---- the JS package's own
    /// A bad options object (wrong type, unknown key).
    InvalidOption = "invalid_option";
    /// A bad argument (not a whole number, out of 0..=2^53).
    InvalidArgument = "invalid_argument";
    /// `now()` returned something that is not whole Unix milliseconds.
    InvalidClock = "invalid_clock";
    /// The clock is a little behind the last ID: retry after `retryAfterMs`.
    ClockBehind = "clock_behind";
    /// A leased snowflake waits for its store to save a later reservation:
    /// retry after `retryAfterMs`.
    SavePending = "save_pending";
    /// `fetchSegment` failed.
    SegmentFetchFailed = "segment_fetch_failed";
    /// `crypto.getRandomValues` is missing.
    RandomUnavailable = "random_unavailable";
    /// No answer from the service.
    ServiceUnreachable = "service_unreachable";
    /// No answer from the service's worker-ID registry.
    RegistryUnreachable = "registry_unreachable";
    /// The service answered an error without the JSON error shape.
    HttpError = "http_error";
    /// The runtime refuses to compile the package's wasm synchronously (the
    /// default entry); `edgeleaf/slim` compiles it asynchronously.
    SyncCompileRefused = "sync_compile_refused";
    /// `edgeleaf/slim` used before `init`.
    NotInitialized = "not_initialized";
    /// The command line: a Leaf dump or CSV it cannot read (at a line).
    InvalidDump = "invalid_dump";
    /// The command line: a Leaf import that would reissue IDs, refused whole.
    ImportConflict = "import_conflict";
    /// `edgeleaf/file-store`: the store's file is in use by another live
    /// process (two processes must not share one store).
    StoreLocked = "store_locked";
    /// A `SegmentGenerator` used after `close()` (its unused IDs were handed
    /// back).
    GeneratorClosed = "generator_closed";
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
