//! The worker-ID registry (`WorkerRegistry`): its requests and answers, and
//! the bodies of the public worker routes.

use alloc::borrow::ToOwned;
use alloc::string::String;
use alloc::vec::Vec;

use edgeleaf::{
    holder::Renewal, registry::Lease, secret::Claim, secret::LeaseSecret, secret::Proof,
};
use serde::{Deserialize, Serialize};

use super::api::LayoutView;
use crate::lease::secret_hash;

/// What the registry is asked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum RegistryRequest {
    /// A worker ID for a node: answers [`Granted`].
    Lease(LeaseRequest),
    /// Minter `index`'s reserved worker ID: answers [`Granted`].
    LeaseMinter(MinterLeaseRequest),
    /// Extends a lease: answers the [`Lease`].
    Renew(RenewRequest),
    /// Gives a lease back: answers [`Released`].
    Release(RenewRequest),
    /// Ends whatever lease holds `worker_id`: answers [`Evicted`].
    Evict {
        /// The worker ID.
        worker_id: u32,
    },
    /// Every worker ID's slot: answers [`WorkerList`].
    List,
    /// The latest lease events: answers [`EventList`].
    Events,
}

impl super::StoreRequest for RegistryRequest {
    fn repeatable(&self) -> bool {
        match self {
            // A renewal run twice extends the same lease.
            RegistryRequest::Renew(_) | RegistryRequest::List | RegistryRequest::Events => true,
            // A grant run twice leaves the first live, with a secret only
            // the lost answer carried (its worker ID unusable until it
            // lapses); a release or an eviction run twice is refused.
            RegistryRequest::Lease(_)
            | RegistryRequest::LeaseMinter(_)
            | RegistryRequest::Release(_)
            | RegistryRequest::Evict { .. } => false,
        }
    }
}

/// `POST /v1/workers/lease`: what a node may ask.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerLeaseBody {
    /// The node's name.
    pub node_key: String,
    /// The node's clock, Unix ms.
    pub node_time: u64,
    /// The node's last grant, from its own cache.
    pub previous: Option<Previous>,
}

/// `POST /v1/workers/{id}/renew` and `DELETE /v1/workers/{id}`: the grant's
/// generation and secret (and, to renew, the node's clock) and the latest
/// timestamp issued under it. The worker ID is the route's; the owner is the
/// credential's: a body can name neither.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimBody {
    /// The grant's generation.
    pub generation: u64,
    /// The grant's secret.
    pub secret: Option<LeaseSecret>,
    /// The node's clock, Unix ms.
    #[serde(default)]
    pub node_time: u64,
    /// The latest timestamp issued under the lease, Unix ms.
    #[serde(default)]
    pub last_timestamp: u64,
}

/// A node's lease, for `owner`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRequest {
    /// The node's name.
    pub node_key: String,
    /// The node's clock, Unix ms.
    pub node_time: u64,
    /// The node's last grant, from its own cache: proves it is that holder.
    pub previous: Option<Previous>,
    /// The credential leasing (the Worker's caller); empty for the
    /// service's own isolates.
    pub owner: String,
}

impl LeaseRequest {
    /// A public route's body, from `owner`.
    pub fn from_body(owner: &str, b: WorkerLeaseBody) -> Self {
        LeaseRequest {
            node_key: b.node_key,
            node_time: b.node_time,
            previous: b.previous,
            owner: owner.to_owned(),
        }
    }
}

/// A minter's lease: only the Worker's minters send it (the public lease
/// route cannot reach it, and refuses their `minter:` node keys).
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MinterLeaseRequest {
    /// Which minter.
    pub index: u32,
    /// The minter's clock, Unix ms.
    pub node_time: u64,
    /// Its last grant, from its storage.
    pub previous: Option<Previous>,
}

/// A grant as its holder names it: `{ workerId, generation, secret? }`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Previous {
    /// The worker ID.
    pub worker_id: u32,
    /// The grant's generation.
    pub generation: u64,
    /// The grant's secret (none: saved before grants had secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<LeaseSecret>,
}

impl From<Claim> for Previous {
    fn from(c: Claim) -> Self {
        Previous {
            worker_id: c.worker_id,
            generation: c.generation,
            secret: c.secret,
        }
    }
}

impl From<Previous> for Claim {
    fn from(p: Previous) -> Self {
        Claim {
            worker_id: p.worker_id,
            generation: p.generation,
            secret: p.secret,
        }
    }
}

impl Previous {
    /// As the registry is given it: the secret hashed.
    pub fn proof(self) -> Proof {
        Claim::from(self).proof(secret_hash)
    }
}

/// To renew or release: a holder's claim, for `owner`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RenewRequest {
    /// The credential asking (empty: the service's own holders).
    pub owner: String,
    /// The grant and its secret.
    pub claim: Previous,
    /// The node's clock, Unix ms.
    pub node_time: u64,
    /// The latest timestamp the node issued under the lease, Unix ms.
    pub last_timestamp: u64,
}

impl RenewRequest {
    /// A public route's body for worker ID `worker_id`, from `owner`.
    pub fn from_body(owner: &str, worker_id: u32, b: ClaimBody) -> Self {
        RenewRequest {
            owner: owner.to_owned(),
            claim: Previous {
                worker_id,
                generation: b.generation,
                secret: b.secret,
            },
            node_time: b.node_time,
            last_timestamp: b.last_timestamp,
        }
    }

    /// As the registry is given it: the secret hashed.
    pub fn renewal(&self) -> Renewal<Proof> {
        Renewal {
            claim: self.claim.proof(),
            node_now_ms: self.node_time,
            last_timestamp_ms: self.last_timestamp,
        }
    }
}

impl From<Renewal> for RenewRequest {
    /// One of the service's own holders' renewals.
    fn from(r: Renewal) -> Self {
        RenewRequest {
            owner: String::new(),
            claim: r.claim.into(),
            node_time: r.node_now_ms,
            last_timestamp: r.last_timestamp_ms,
        }
    }
}

/// A grant as the registry answers it: the lease and its secret, which only
/// this answer carries (the registry keeps its hash).
#[derive(Debug, Deserialize, Serialize)]
pub struct Granted {
    /// The lease.
    #[serde(flatten)]
    pub lease: Lease,
    /// Its secret.
    pub secret: LeaseSecret,
}

/// `POST /v1/workers/lease` and `POST /v1/workers/{id}/renew`: a lease with
/// the service's layout, and (to the caller that leased, once) its secret.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseView {
    /// Stop issuing at this instant (by the node's clock) unless renewed.
    pub expires_at_ms: u64,
    /// The fencing token.
    pub generation: u64,
    /// Issue only IDs whose timestamp is later than this (Unix ms).
    pub issue_after_ms: u64,
    /// The layout to make IDs with.
    pub layout: LayoutView,
    /// The node the lease is for.
    pub node_key: String,
    /// The grant's secret: in the lease answer only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<LeaseSecret>,
    /// The TTL.
    pub ttl_ms: u64,
    /// The worker ID.
    pub worker_id: u32,
}

impl LeaseView {
    /// `lease` under `layout`, with no secret.
    pub fn new(lease: &Lease, layout: LayoutView) -> Self {
        LeaseView {
            expires_at_ms: lease.expires_at_ms,
            generation: lease.generation,
            issue_after_ms: lease.issue_after_ms,
            layout,
            node_key: lease.node_key.clone(),
            secret: None,
            ttl_ms: lease.ttl_ms,
            worker_id: lease.worker_id,
        }
    }

    /// A grant under `layout`, with its secret.
    pub fn granted(g: &Granted, layout: LayoutView) -> Self {
        LeaseView {
            secret: Some(g.secret),
            ..LeaseView::new(&g.lease, layout)
        }
    }
}

// The answers the API passes on as they are. (Fields in alphabetical order:
// the order the API has always answered them in.)

/// `DELETE /v1/workers/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    /// Always `true`.
    pub released: bool,
}

/// `POST /v1/workers/{id}/evict`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evicted {
    /// Always `true`.
    pub evicted: bool,
    /// When the worker ID may be issued again, Unix ms.
    pub issue_after_ms: u64,
    /// The worker ID.
    pub worker_id: u32,
}

/// `GET /v1/workers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerList {
    /// Worker IDs the registry may grant.
    pub capacity: u32,
    /// How many are live.
    pub live: usize,
    /// Every slot ever granted.
    pub workers: Vec<WorkerView>,
}

/// One worker ID's slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerView {
    /// Ended by an admin.
    pub evicted: bool,
    /// The lease's expiry, Unix ms.
    pub expires_at_ms: u64,
    /// The grant's generation.
    pub generation: u64,
    /// The latest timestamp reported, Unix ms.
    pub last_timestamp_ms: u64,
    /// The holder's node.
    pub node_key: String,
    /// The credential that leased it.
    pub owner: String,
    /// Given back.
    pub released: bool,
    /// `live`, `lapsed` or `free`.
    pub status: String,
    /// The worker ID.
    pub worker_id: u32,
}

/// `GET /v1/workers/events`, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventList {
    /// The events.
    pub events: Vec<EventView>,
}

/// One lease event as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// When, Unix ms.
    pub at_ms: i64,
    /// The grant's generation.
    pub generation: i64,
    /// `granted`, `renewed`, `released`, `lapsed`, `evicted`, ...
    pub kind: String,
    /// The holder's node.
    pub node_key: String,
    /// The credential.
    pub owner: String,
    /// The event's number (every event ever recorded counts).
    pub seq: i64,
    /// The worker ID.
    pub worker_id: i64,
}
