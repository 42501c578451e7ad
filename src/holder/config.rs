//! How a holder mints and what it does after losing its lease, and its
//! defaults.

use crate::wait::DEFAULT_TAKE_OVER_MS;

/// After a renewal that got no answer, the next try waits this long.
pub const RENEW_RETRY_MS: u64 = 1_000;

/// How far ahead a holder with a store reserves (a restart waits at most this).
pub const DEFAULT_RESERVE_MS: u64 = 3_000;

/// The furthest ahead a holder may reserve. Past
/// [`MAX_TOLERANCE_MS`](crate::snowflake::MAX_TOLERANCE_MS) only for a holder
/// that lends and never mints ([`HolderConfig::lends_only`]: a minter's
/// rights holder, whose rights last minutes): one that mints would, after
/// a restart, stamp IDs that far ahead of its clock, past what a registry
/// accepts as reported.
pub const MAX_RESERVE_MS: u64 = 600_000;

/// How a holder mints and what it does after losing its lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct HolderConfig {
    /// As [`SnowflakeConfig::max_backward_ms`](crate::snowflake::SnowflakeConfig::max_backward_ms).
    pub max_backward_ms: u64,
    /// As
    /// [`SnowflakeConfig::sequence_start_bound`](crate::snowflake::SnowflakeConfig::sequence_start_bound);
    /// `None`: the layout's default.
    pub sequence_start_bound: Option<u32>,
    /// As [`SnowflakeConfig::max_borrow_ms`](crate::snowflake::SnowflakeConfig::max_borrow_ms).
    pub max_borrow_ms: u64,
    /// After a lapse or a refused renewal: ask for a new lease (true), or stay
    /// stopped and answer the error to every call (false).
    pub lease_again: bool,
    /// A lease or renewal in flight longer than this is presumed lost.
    pub take_over_ms: u64,
    /// For holders whose state is saved (a store): mint only below a
    /// timestamp reserved this far ahead and saved first (0: no reservation,
    /// for holders that never restore). A restart waits at most this long.
    /// Further ahead than
    /// [`MAX_TOLERANCE_MS`](crate::snowflake::MAX_TOLERANCE_MS): a holder that
    /// only lends ([`HolderConfig::lends_only`]).
    pub reserve_ms: u64,
}

impl HolderConfig {
    /// A holder reserving further ahead than a registry accepts as reported
    /// ([`MAX_TOLERANCE_MS`](crate::snowflake::MAX_TOLERANCE_MS)) only lends
    /// (a minter's rights holder): its polls mint nothing, and its
    /// renewals report at most its clock + that tolerance — what it lent
    /// lies before its lease's expiry, which the registry records as the
    /// floor of a lender's worker ID
    /// ([`RegistryConfig::lenders`](crate::registry::RegistryConfig::lenders)).
    pub const fn lends_only(&self) -> bool {
        self.reserve_ms > crate::snowflake::MAX_TOLERANCE_MS
    }
}

impl Default for HolderConfig {
    fn default() -> Self {
        HolderConfig {
            max_backward_ms: crate::snowflake::DEFAULT_MAX_BACKWARD_MS,
            sequence_start_bound: None,
            max_borrow_ms: 0,
            lease_again: false,
            take_over_ms: DEFAULT_TAKE_OVER_MS,
            reserve_ms: 0,
        }
    }
}
