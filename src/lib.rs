//! # edgeleaf
//!
//! Leaf-style distributed ID generation — Meituan's Leaf, segment mode and
//! snowflake mode — as a pure, `no_std` state machine core. It does no I/O,
//! reads no clock and never sleeps or spins: time comes in as an argument, and
//! where a caller must wait, the answer says for how long.
//!
//! ## Snowflake bit layout
//!
//! ```text
//!  63 62                                        22 21          12 11           0
//! +--+-------------------------------------------+--------------+--------------+
//! |0 | timestamp: ms since epoch (41 bits)       | worker (10)  | sequence (12)|
//! +--+-------------------------------------------+--------------+--------------+
//! ```
//!
//! [`Layout::LEAF`] is Leaf's layout (epoch 2010-11-04T01:42:54.657Z, valid to
//! 2080); [`Layout::JS_SAFE`] keeps IDs below 2^53 (38 bits of 10 ms, 7 worker
//! bits, 8 sequence bits, epoch 2024-01-01, valid to 2111). Any other split
//! of at most 63 bits, epoch and time unit can be built with [`Layout::new`].
//!
//! ## Getting started
//!
//! ```
//! use edgeleaf::{Layout, Next, SnowflakeConfig, SnowflakeGenerator};
//!
//! let mut gen = SnowflakeGenerator::new(SnowflakeConfig::new(Layout::LEAF, 1))?;
//! let now_ms = 1_735_689_600_000; // your clock, Unix ms
//! match gen.next_id(now_ms)? {
//!     Next::Id(id) => {
//!         let parts = Layout::LEAF.decompose(id.get())?;
//!         assert_eq!((parts.timestamp_ms, parts.worker_id), (now_ms, 1));
//!     }
//!     // Sequence used up, or the clock went back a little: call again later.
//!     Next::RetryAfter { ms, .. } => println!("retry in {ms} ms"),
//! }
//! # Ok::<(), edgeleaf::Error>(())
//! ```
//!
//! Segment mode: a [`SegmentBuffer`] hands out IDs from two ranges its caller
//! loads from a store, and a [`SegmentDriver`] runs the client's loop over it;
//! a [`TagRecord`] is the store's row and [`TagRecord::allocate`] advances it.
//! The [`Registry`] leases worker IDs; a [`SnowflakeHolder`] is the node that
//! holds one and mints under it. Every error has a code from the one list,
//! [`ErrorCode`].
//!
//! ## Features
//! - `alloc`: [`TagRecord`] and [`Registry`], which own strings and tables.
//! - `std` (default, implies `alloc`): [`unix_now_ms`].
//! - `serde`: `Serialize`/`Deserialize` for state, records, leases, snapshots.
#![no_std]
#![warn(missing_docs)]
#![warn(clippy::cast_possible_truncation, clippy::cast_sign_loss)]

#[cfg(feature = "alloc")]
extern crate alloc;
// The crate is also a cdylib (for wasm-pack), and a cdylib needs a panic
// handler, which only std has: targets that have std link it even without the
// `std` feature. Nothing outside `std`-gated code uses it; the no_std build
// for a bare-metal target in `make test` proves that.
#[cfg(any(feature = "std", not(target_os = "none")))]
extern crate std;

mod code;
mod driver;
mod error;
mod holder;
mod key;
mod layout;
mod opaque;
mod rand;
mod secret;
mod segment;
mod snowflake;
mod wait;

#[cfg(feature = "alloc")]
mod access;
#[cfg(feature = "std")]
mod clock;
#[cfg(feature = "alloc")]
mod history;
#[cfg(feature = "alloc")]
mod minted;
#[cfg(feature = "alloc")]
mod registry;
#[cfg(feature = "alloc")]
mod tag;

#[cfg(feature = "alloc")]
pub use access::{
    check_token, new_key, token_hash, token_key_id, Access, KeyCache, KeyLookup, KeyRecord,
    KeySpec, Scope, Scopes, TagLimit, KEY_CACHE_ENTRIES, KEY_CACHE_MS, KEY_RANDOM_BYTES,
    KEY_TOKEN_PREFIX, MAX_KEY_NAME_LEN,
};
#[cfg(feature = "std")]
pub use clock::unix_now_ms;
pub use code::ErrorCode;
pub use driver::{SegmentDriver, SegmentPoll, SegmentStep};
pub use error::{ClockReference, Error};
#[cfg(feature = "alloc")]
pub use history::{
    domain_max, per_minute, runway, AllocationEvent, MinuteBucket, Runway, HISTORY_LEN,
    LEASE_EVENTS_LEN, RUNWAY_WINDOW_MS,
};
pub use holder::{
    Grant, HolderConfig, HolderNext, HolderPoll, HolderState, LeaseAsk, Renewal, SavedLease,
    SnowflakeHolder, DEFAULT_RESERVE_MS, RENEW_RETRY_MS,
};
pub use key::{check_key, check_tag, MAX_KEY_LEN};
pub use layout::{Id, Layout, LayoutSpec, Parts, MAX_UNIT_MS};
#[cfg(feature = "alloc")]
pub use minted::{
    batch_ranges, minter_step, BatchAsk, MintConfig, MintPoll, MintStep, MintedBuffer, MinterStep,
    Refused, StalenessHistogram, DEFAULT_STALENESS_MS, FIRST_BATCH, MAX_BATCH, MINTERS_PER_REQUEST,
    MIN_BATCH,
};
pub use opaque::{key_from_hex, OpaqueDomain, OpaqueIds, OPAQUE_KEY_BYTES};
pub use rand::{NoRandom, RandSource, SplitMix64};
#[cfg(feature = "alloc")]
pub use registry::{
    minter_node_key, GrantRequest, Lease, LeaseEvent, LeaseEventKind, Registry, RegistryConfig,
    SlotStatus, WorkerSlot, DEFAULT_GRACE_MS, DEFAULT_MAX_SKEW_MS, DEFAULT_TTL_MS, MAX_CAPACITY,
    MINTER_KEY_PREFIX,
};
pub use secret::{
    constant_time_eq, Claim, HexSecret, LeaseSecret, Proof, SecretHash, LEASE_SECRET_BYTES,
};
pub use segment::{
    Allocation, SegmentBuffer, SegmentNext, SegmentSnapshot, SegmentView, StepPolicy, Take,
    DEFAULT_PREFETCH_PERCENT, DEFAULT_SEGMENT_DURATION_MS, MAX_SEGMENT_ID, MAX_STEP,
};
pub use snowflake::{
    Fill, Next, SnowflakeConfig, SnowflakeGenerator, SnowflakeState, Wait, DEFAULT_MAX_BACKWARD_MS,
    DEFAULT_SEQUENCE_START_BOUND, JS_DEFAULT_BORROW_MS, MAX_TOLERANCE_MS,
};
#[cfg(feature = "alloc")]
pub use tag::{
    SegmentAnswer, SegmentAsk, TagChange, TagKind, TagRecord, MAX_DESCRIPTION_LEN,
    MAX_REQUEST_ID_LEN, REQUEST_ID_TTL_MS,
};
pub use wait::{InFlight, WaitBudget, DEFAULT_TAKE_OVER_MS, MAX_WAIT_MS};

/// The README's examples, run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(all(feature = "wasm", target_arch = "wasm32"))]
mod wasm;
