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
//! use edgeleaf::snowflake::{Next, SnowflakeConfig, SnowflakeGenerator};
//! use edgeleaf::Layout;
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
//! ## Modules
//! - [`layout`]: the bit layout of a snowflake ID; [`snowflake`]: the generator.
//! - [`segment`]: a buffer of two ranges a client loads from a store, and
//!   [`driver`], the client's loop over it; [`tag`]: the store's row, which
//!   allocates the ranges.
//! - [`registry`]: leases worker IDs; [`holder`]: the node that holds one and
//!   mints under it; [`minted`]: the service's minters and the batches they
//!   hand to isolates; [`secret`]: the proof that a lease is its holder's.
//! - [`wait`]: how long a request may wait, and when work in flight is
//!   presumed lost; [`opaque`]: the keyed permutation of opaque IDs.
//! - [`block`]: a tag's regional allocator, a segment client of the tag's
//!   store and a segment server to its region's isolates; [`sources`]: an
//!   isolate's client of a tag fed by its root and its regions' allocators;
//!   [`region`]: the Durable Object regions and the region nearest each colo.
//! - [`leaf`]: where a tag moved from Leaf continues;
//! - [`name`]: the rule for tags and node keys; [`rand`]: the seeded
//!   randomness the host passes in; [`error`] and [`code`]: the one error
//!   type and the one list of codes.
//!
//! ## Features
//! - `alloc`: [`tag`], [`registry`], [`minted`], [`block`] and [`sources`],
//!   which own strings and tables.
//! - `std` (default, implies `alloc`): [`clock::unix_now_ms`].
//! - `serde`: `Serialize`/`Deserialize` for state, records, leases, snapshots.
#![no_std]
#![warn(missing_docs)]
#![warn(clippy::cast_possible_truncation, clippy::cast_sign_loss)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

pub mod code;
pub mod driver;
pub mod error;
pub mod holder;
pub mod layout;
pub mod leaf;
// The messages of `holder` and `registry`, re-exported from both.
mod lease;
pub mod name;
pub mod opaque;
// Below `error`: plain data the error carries, re-exported from `opaque`.
mod opaque_domain;
pub mod rand;
pub mod region;
pub mod secret;
pub mod segment;
pub mod snowflake;
pub mod wait;

#[cfg(feature = "alloc")]
pub mod block;
#[cfg(feature = "std")]
pub mod clock;
#[cfg(feature = "alloc")]
pub mod minted;
#[cfg(feature = "alloc")]
pub mod registry;
#[cfg(feature = "alloc")]
pub mod sources;
#[cfg(feature = "alloc")]
pub mod tag;

// The three names nearly every caller needs.
pub use error::Error;
pub use layout::{Id, Layout};

/// The Rust examples of the front page, run as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The Rust examples of the crate's README (`src/README.md`), run as doctests.
#[cfg(doctest)]
#[doc = include_str!("README.md")]
struct CrateReadmeDoctests;
