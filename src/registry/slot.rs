//! One worker ID's record, where it stands, and the events of its grants.

use alloc::string::String;

use crate::secret::SecretHash;

/// One worker ID's record: who held it last and what is known of their clock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct WorkerSlot {
    /// The worker ID.
    pub worker_id: u32,
    /// The node that holds (or last held) it.
    pub node_key: String,
    /// The fencing token of the latest grant.
    pub generation: u64,
    /// When the latest grant lapses, registry ms.
    pub expires_at_ms: u64,
    /// The holder gave it back.
    pub released: bool,
    /// The highest timestamp any holder reported issuing under this ID, Unix ms.
    pub last_timestamp_ms: u64,
    /// The holder's clock at its last report (grant, renewal, release).
    pub reported_clock_ms: u64,
    /// The registry's clock at that report.
    pub reported_at_ms: u64,
    /// Who leased it (a credential of the service; empty: the service itself).
    #[cfg_attr(feature = "serde", serde(default))]
    pub owner: String,
    /// The hash of the latest grant's secret. `None`: nobody can prove to
    /// hold the grant — it was granted before grants had secrets, or evicted.
    #[cfg_attr(feature = "serde", serde(default))]
    pub secret: Option<SecretHash>,
    /// An operator evicted the grant: its holder is refused at its next
    /// renewal, and the ID is fenced like an unprovable grant's.
    #[cfg_attr(feature = "serde", serde(default))]
    pub evicted: bool,
}

/// Where a slot stands at a given registry time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SlotStatus {
    /// Leased and not expired.
    Live,
    /// Expired or evicted, but within the grace period: not yet reusable.
    Lapsed,
    /// Released by its holder, or past its end + grace: reusable.
    Free,
}

/// What happened to a worker ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum LeaseEventKind {
    /// Leased to a node.
    Granted,
    /// The holder renewed it.
    Renewed,
    /// The holder gave it back.
    Released,
    /// Its lease ran out unreleased (recorded when the ID is granted again).
    Lapsed,
    /// An operator ended it without its holder.
    Evicted,
}

impl LeaseEventKind {
    /// Its name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            LeaseEventKind::Granted => "granted",
            LeaseEventKind::Renewed => "renewed",
            LeaseEventKind::Released => "released",
            LeaseEventKind::Lapsed => "lapsed",
            LeaseEventKind::Evicted => "evicted",
        }
    }
}

/// Something that happened to a worker ID's grant, as the [`Registry`](super::Registry)
/// emits it (drained with [`Registry::take_events`](super::Registry::take_events)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseEvent {
    /// What.
    pub kind: LeaseEventKind,
    /// When, registry ms (a lapse: when the lease ran out).
    pub at_ms: u64,
    /// The grant it happened to.
    pub worker_id: u32,
    /// Its generation.
    pub generation: u64,
    /// Its node.
    pub node_key: String,
    /// Its owner (empty: the service's own).
    pub owner: String,
}

impl LeaseEvent {
    /// An event of `kind` at `at_ms`, to the grant `slot` holds.
    pub fn new(kind: LeaseEventKind, at_ms: u64, slot: &WorkerSlot) -> LeaseEvent {
        LeaseEvent {
            kind,
            at_ms,
            worker_id: slot.worker_id,
            generation: slot.generation,
            node_key: slot.node_key.clone(),
            owner: slot.owner.clone(),
        }
    }
}
