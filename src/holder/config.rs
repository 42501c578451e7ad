//! How a holder mints and what it does after losing its lease, and its
//! defaults.

use crate::wait::DEFAULT_TAKE_OVER_MS;

/// After a renewal that got no answer, the next try waits this long.
pub const RENEW_RETRY_MS: u64 = 1_000;

/// How far ahead a holder with a store reserves (a restart waits at most this).
pub const DEFAULT_RESERVE_MS: u64 = 3_000;

/// The furthest ahead a holder that only lends may reserve
/// ([`HolderConfig::lends_only`]: a minter's rights holder, whose rights
/// last minutes). A holder that mints reserves at most
/// [`MAX_TOLERANCE_MS`](crate::snowflake::MAX_TOLERANCE_MS) ahead: after a
/// restart it stamps IDs up to its reservation ahead of its clock, which
/// its renewals report, and a registry accepts no report further ahead.
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
    /// At most [`MAX_TOLERANCE_MS`](crate::snowflake::MAX_TOLERANCE_MS), or
    /// [`MAX_RESERVE_MS`] for a holder that only lends.
    pub reserve_ms: u64,
    /// The holder only lends (a minter's rights holder,
    /// [`rights_holder_config`](crate::minted::rights_holder_config)): its
    /// polls mint nothing, it may reserve up to [`MAX_RESERVE_MS`] ahead,
    /// and its renewals report at most its clock +
    /// [`MAX_TOLERANCE_MS`](crate::snowflake::MAX_TOLERANCE_MS), what a
    /// registry accepts — what it lent lies before its lease's expiry,
    /// which the registry records as the floor of a lender's worker ID
    /// ([`RegistryConfig::lenders`](crate::registry::RegistryConfig::lenders)).
    #[cfg_attr(feature = "serde", serde(default))]
    pub lends_only: bool,
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
            lends_only: false,
        }
    }
}
