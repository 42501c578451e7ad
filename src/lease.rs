//! The messages a lease holder and the registry exchange: the holder's
//! asks ([`LeaseAsk`], [`Renewal`]) and the registry's answer ([`Lease`]).
//! Both `holder` and `registry` import them; neither imports the other.
//! Re-exported from their old paths (`holder::LeaseAsk`, `holder::Renewal`,
//! `registry::Lease`).

#[cfg(feature = "alloc")]
use alloc::string::String;

use crate::secret::{Claim, LeaseSecret, Proof, SecretHash};

/// Ask the registry for a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseAsk {
    /// The node's clock, Unix ms.
    pub node_now_ms: u64,
    /// The last grant, with its secret: proves the node held it.
    pub previous: Option<Claim>,
}

/// Ask the registry to renew (or, from `holder::SnowflakeHolder::close`, release).
/// The holder sends it with its [`Claim`]; the registry is given it with a
/// [`Proof`] ([`Renewal::proof`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewal<C = Claim> {
    /// The grant, with its secret (or, for the registry, its hash).
    pub claim: C,
    /// The node's clock, Unix ms.
    pub node_now_ms: u64,
    /// The latest timestamp issued under the lease, Unix ms.
    pub last_timestamp_ms: u64,
}

impl Renewal {
    /// The renewal as the registry is given it: the claim's secret hashed
    /// by `hash` (the host's SHA-256).
    pub fn proof(&self, hash: impl FnOnce(&LeaseSecret) -> SecretHash) -> Renewal<Proof> {
        Renewal {
            claim: self.claim.proof(hash),
            node_now_ms: self.node_now_ms,
            last_timestamp_ms: self.last_timestamp_ms,
        }
    }
}

/// A grant or renewal: what a node needs to issue IDs. The grant's secret
/// is not here: the registry never has it (the host draws it, gives the
/// registry its hash, and answers the secret to the caller alone).
#[cfg(feature = "alloc")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct Lease {
    /// The worker ID to stamp into IDs.
    pub worker_id: u32,
    /// The fencing token: renewals and the release must present it.
    pub generation: u64,
    /// The node the lease is for.
    pub node_key: String,
    /// Stop issuing at this instant (by the node's clock) unless renewed.
    pub expires_at_ms: u64,
    /// Issue only IDs whose timestamp is later than this (Unix ms): everything
    /// earlier may have been issued by a previous holder.
    pub issue_after_ms: u64,
    /// The TTL, so the node can renew when half of it has passed.
    pub ttl_ms: u64,
}
