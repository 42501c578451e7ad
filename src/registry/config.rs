//! The registry's settings and their defaults.

use crate::error::{check_range, Error};
use crate::layout::Layout;

/// Default lease time to live.
pub const DEFAULT_TTL_MS: u64 = 60_000;

/// Default wait after a lease lapses before its worker ID is recycled.
pub const DEFAULT_GRACE_MS: u64 = 10_000;

/// Default largest clock difference accepted.
pub const DEFAULT_MAX_SKEW_MS: u64 = 2_000;

/// Default lease time to live of a minter's rights holder
/// ([`RegistryConfig::lender_ttl_ms`]): six minutes. Renewed at half, a
/// lease reaches 3 to 6 minutes ahead, and a right ends by its expiry, so
/// rights last 3 minutes at least and [`MAX_RIGHT_MS`](crate::minted::MAX_RIGHT_MS)
/// (5) at most.
pub const DEFAULT_LENDER_TTL_MS: u64 = 360_000;

#[cfg(feature = "serde")]
fn default_lender_ttl_ms() -> u64 {
    DEFAULT_LENDER_TTL_MS
}

/// The most worker IDs one registry manages (16 worker bits).
pub const MAX_CAPACITY: u32 = 1 << 16;

/// The registry's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct RegistryConfig {
    /// Worker IDs `0..capacity` are leased.
    pub capacity: u32,
    /// A lease lasts this long after its grant or last renewal.
    pub ttl_ms: u64,
    /// After a lease lapses, its worker ID stays out of use this much longer.
    pub grace_ms: u64,
    /// A node whose clock is further than this from the registry's, or from
    /// the average of the live nodes', is refused.
    pub max_skew_ms: u64,
    /// Worker IDs `0..minters` are reserved: ID `i` only for the node key
    /// [`minter_node_key`](super::minter_node_key)`(i)` (the service's snowflake minters), so that
    /// however many other nodes lease, the minters keep theirs.
    #[cfg_attr(feature = "serde", serde(default))]
    pub minters: u32,
    /// The most live worker IDs one owner (a credential of the service) may
    /// hold through [`Registry::lease`](super::Registry::lease); `None`: no limit.
    #[cfg_attr(feature = "serde", serde(default))]
    pub per_owner: Option<u32>,
    /// The last `lenders` of the minters' worker IDs
    /// (`minters - lenders..minters`) are their rights holders', which lend
    /// rights to mint for minutes. Their grants last `lender_ttl_ms`, and
    /// each grant and renewal records the lease's expiry as the ID's floor
    /// (`last_timestamp_ms`): every right ends by an expiry its holder was
    /// answered, and a registry that moves the expiry back (one of the
    /// release before, whose renewal sets its clock + 60 s) still issues
    /// the ID's next holder after that floor.
    #[cfg_attr(feature = "serde", serde(default))]
    pub lenders: u32,
    /// A lender's lease lasts this long after its grant or last renewal.
    #[cfg_attr(feature = "serde", serde(default = "default_lender_ttl_ms"))]
    pub lender_ttl_ms: u64,
}

impl RegistryConfig {
    /// Defaults for a layout: every worker ID it has (at most 65,536), a 60 s
    /// TTL, 10 s grace, 2 s skew.
    pub fn new(layout: &Layout) -> Self {
        RegistryConfig {
            capacity: (layout.max_worker_id().saturating_add(1)).min(MAX_CAPACITY),
            ttl_ms: DEFAULT_TTL_MS,
            grace_ms: DEFAULT_GRACE_MS,
            max_skew_ms: DEFAULT_MAX_SKEW_MS,
            minters: 0,
            per_owner: None,
            lenders: 0,
            lender_ttl_ms: DEFAULT_LENDER_TTL_MS,
        }
    }

    /// A fair share for one owner: half the worker IDs that are not the
    /// minters' (at least 1), so that no one credential can take them all.
    pub fn half_share(&self) -> u32 {
        (self.capacity.saturating_sub(self.minters) / 2).max(1)
    }

    /// Reserves worker IDs for `minters` minters and, with `rights`, as
    /// many again for their rights holders, which lend (minter `i`'s at
    /// `minters + i`: [`rights_worker_index`](crate::minted::rights_worker_index);
    /// [`RegistryConfig::lenders`]): the split the Worker and the world
    /// simulation both run.
    pub fn reserve_minters(&mut self, minters: u32, rights: bool) {
        self.minters = if rights {
            minters.saturating_mul(2)
        } else {
            minters
        };
        self.lenders = if rights { minters } else { 0 };
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] unless capacity is 1..=65,536, the TTL is
    /// 1 s..=1 day, and `max_skew_ms < grace_ms <= 1 day` (a lapsed holder,
    /// whose clock may lag by the skew, must be done before the ID recycles),
    /// at most half the worker IDs are reserved for minters, the lenders
    /// are among them, and the lenders' TTL is 1 s..=1 day.
    pub fn validate(&self) -> Result<(), Error> {
        const DAY: u64 = 86_400_000;
        check_range("capacity", self.capacity.into(), 1, MAX_CAPACITY.into())?;
        check_range(
            "minters",
            self.minters.into(),
            0,
            (self.capacity / 2).into(),
        )?;
        check_range("lenders", self.lenders.into(), 0, self.minters.into())?;
        check_range("ttl_ms", self.ttl_ms, 1_000, DAY)?;
        check_range("lender_ttl_ms", self.lender_ttl_ms, 1_000, DAY)?;
        check_range("grace_ms", self.grace_ms, 1, DAY)?;
        check_range("max_skew_ms", self.max_skew_ms, 0, self.grace_ms - 1)?;
        if let Some(n) = self.per_owner {
            check_range("per_owner", n.into(), 1, self.capacity.into())?;
        }
        Ok(())
    }
}
