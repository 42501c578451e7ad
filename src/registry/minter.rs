//! The worker IDs reserved for the service's minters: their node keys, their
//! grants, and the refusal of anyone else naming them.

use alloc::string::String;

use crate::error::{check_range, Error};
use crate::secret::{Proof, SecretHash};

use super::{GrantRequest, Lease, Registry, RegistryConfig};

/// Node keys starting with this are the service's minters'; other nodes may
/// not lease under them.
pub const MINTER_KEY_PREFIX: &str = "minter:";

/// The node key of minter `index`, the only key that leases worker ID `index`
/// while it is reserved.
pub fn minter_node_key(index: u32) -> String {
    alloc::format!("{MINTER_KEY_PREFIX}{index}")
}

/// Whether a grant of `worker_id` to `node_key` is a lender's: a minter's
/// rights holder's ([`RegistryConfig::lenders`]).
fn lends(config: &RegistryConfig, worker_id: u32, node_key: &str) -> bool {
    node_key.starts_with(MINTER_KEY_PREFIX)
        && (config.minters - config.lenders..config.minters).contains(&worker_id)
}

/// The TTL of a grant or renewal of `worker_id` to `node_key`.
pub(super) fn ttl_for(config: &RegistryConfig, worker_id: u32, node_key: &str) -> u64 {
    if lends(config, worker_id, node_key) {
        config.lender_ttl_ms
    } else {
        config.ttl_ms
    }
}

/// The expiry and the floor a grant or renewal of `worker_id` to `node_key`
/// records, asked to last until `expires_at_ms` over the expiry recorded
/// before (`expires_before_ms`) and with the floor so far (`floor_ms`): a
/// minter's expiry never moves back (a minter reclaiming its live grant, a
/// shorter TTL since, a registry clock that stepped back), since its holder
/// may have lent up to the expiry it was answered; and a lender's floor is
/// its expiry ([`RegistryConfig::lenders`]). Others' as asked.
pub(super) fn minter_terms(
    config: &RegistryConfig,
    worker_id: u32,
    node_key: &str,
    expires_at_ms: u64,
    expires_before_ms: Option<u64>,
    floor_ms: u64,
) -> (u64, u64) {
    let expires_at_ms = if node_key.starts_with(MINTER_KEY_PREFIX) {
        expires_at_ms.max(expires_before_ms.unwrap_or(0))
    } else {
        expires_at_ms
    };
    let floor_ms = if lends(config, worker_id, node_key) {
        floor_ms.max(expires_at_ms)
    } else {
        floor_ms
    };
    (expires_at_ms, floor_ms)
}

impl Registry {
    /// Refuses a minter's grant named by anyone but that minter: the
    /// service's own, and no caller's to reclaim, release or evict (refused,
    /// not passed over, so that the caller learns it named one). With a
    /// `generation`, only that grant is one: a node's own older grant of an
    /// ID a minter holds now (it held it before the ID was reserved) is a
    /// stale proof, passed over like any other.
    pub(super) fn not_a_minters(
        &self,
        worker_id: u32,
        generation: Option<u64>,
    ) -> Result<(), Error> {
        match self.slot(worker_id) {
            Some(s)
                if s.node_key.starts_with(MINTER_KEY_PREFIX)
                    && generation.is_none_or(|g| g == s.generation) =>
            {
                Err(Error::ReservedWorkerId { worker_id })
            }
            _ => Ok(()),
        }
    }

    /// Leases worker ID `index` to minter `index` (node key
    /// [`minter_node_key`]`(index)`, owner: the service): the same rules as
    /// [`Registry::lease`], over that one reserved ID. Minters are the
    /// service's own, reached by no caller from outside, so a minter whose
    /// state was saved before grants had secrets reclaims such a grant by
    /// its generation alone.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] unless `index < minters`; as [`Registry::lease`],
    /// with [`Error::NoFreeWorkerId`] while another grant of that ID is live
    /// or in its grace period (a node that held it before it was reserved, or
    /// the minter's own earlier grant it cannot prove).
    pub fn lease_minter(
        &mut self,
        index: u32,
        node_now_ms: u64,
        previous: Option<Proof>,
        secret_hash: SecretHash,
        registry_now_ms: u64,
    ) -> Result<Lease, Error> {
        if self.config.minters == 0 {
            return Err(Error::OutOfRange {
                what: "minter",
                min: 0,
                max: 0,
                found: index.into(),
            });
        }
        check_range(
            "minter",
            index.into(),
            0,
            u64::from(self.config.minters) - 1,
        )?;
        let key = minter_node_key(index);
        let ask = GrantRequest {
            owner: "",
            node_key: &key,
            node_now_ms,
            previous,
            secret_hash,
        };
        self.grant(ask, registry_now_ms, index..index + 1, true, None)
    }
}
