//! The worker-ID registry (Leaf used ZooKeeper) as pure logic over a table of
//! slots: leases with a TTL, renewals that carry the node's clock and last
//! issued timestamp, recycling only after TTL + grace, a fencing generation
//! per grant, and Leaf's clock checks. A Durable Object runs it over storage.
//!
//! Each operation emits what it did to a grant (granted, renewed, released,
//! lapsed, evicted) as [`LeaseEvent`]s, which the host drains and records.
//!
//! Two clocks appear: the registry's (`registry_now_ms`, the owner's clock)
//! and the node's (`node_now_ms`, what the node will stamp into IDs).
//!
//! The rule that keeps IDs unique across holders of one worker ID: a holder
//! stops issuing at its lease's `expires_at_ms` (by its own clock, which the
//! skew check keeps close), and the next holder issues only after the lease's
//! `issue_after_ms`, which is past everything the previous holders could have
//! issued.

mod clock;
mod config;
mod grant;
mod minter;
mod quota;
mod renew;
mod slot;
#[cfg(test)]
mod tests;

pub use crate::lease::Lease;
pub use config::{
    RegistryConfig, DEFAULT_GRACE_MS, DEFAULT_LENDER_TTL_MS, DEFAULT_MAX_SKEW_MS, DEFAULT_TTL_MS,
    MAX_CAPACITY,
};
pub use grant::GrantRequest;
pub use minter::{minter_node_key, MINTER_KEY_PREFIX};
pub use slot::{LeaseEvent, LeaseEventKind, SlotStatus, WorkerSlot};

use alloc::vec::Vec;

use crate::error::{check_range, Error};
use crate::name::check_name;

/// The registry.
///
/// ```
/// use edgeleaf::holder::Renewal;
/// use edgeleaf::registry::{GrantRequest, Registry, RegistryConfig};
/// use edgeleaf::secret::{Claim, LeaseSecret, SecretHash};
/// use edgeleaf::Layout;
/// use sha2::{Digest, Sha256};
///
/// // The host's hash: the registry sees hashes of secrets only.
/// let sha256 = |s: &LeaseSecret| SecretHash(Sha256::digest(s.as_bytes()).into());
/// let mut reg = Registry::new(RegistryConfig::new(&Layout::LEAF))?;
/// let now = 1_700_000_000_000;
/// // The host draws each grant's secret from its CSPRNG and answers it to
/// // the caller alone; the registry keeps its hash.
/// let secret = LeaseSecret::from_random([7; 16]);
/// let ask = |node_key| GrantRequest {
///     owner: "team-a", node_key, node_now_ms: now, previous: None, secret_hash: sha256(&secret),
/// };
/// let a = reg.lease(ask("10.0.0.1:8080"), now)?;
/// let b = reg.lease(ask("10.0.0.2:8080"), now)?;
/// assert_ne!(a.worker_id, b.worker_id);
/// // The holder sends its claim with the secret; the host hashes it.
/// let claim = Claim { worker_id: a.worker_id, generation: a.generation, secret: Some(secret) };
/// let renewal = Renewal { claim, node_now_ms: now + 1_000, last_timestamp_ms: now + 999 }.proof(sha256);
/// let renewed = reg.renew("team-a", &renewal, now + 1_000)?;
/// assert_eq!(renewed.worker_id, a.worker_id);
/// // Another credential, even with the secret, is refused; nothing changes.
/// assert!(reg.renew("team-b", &renewal, now + 1_000).is_err());
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct Registry {
    config: RegistryConfig,
    next_generation: u64,
    /// Indexed by worker ID; `None` for IDs never leased.
    slots: Vec<Option<WorkerSlot>>,
    /// What the operations did, until the host drains it
    /// ([`Registry::take_events`]): output, not state.
    #[cfg_attr(feature = "serde", serde(skip))]
    events: Vec<LeaseEvent>,
}

/// Two registries are equal when their tables are: events not yet drained
/// are output, not state.
impl PartialEq for Registry {
    fn eq(&self, other: &Self) -> bool {
        self.config == other.config
            && self.next_generation == other.next_generation
            && self.slots == other.slots
    }
}

impl Eq for Registry {}

/// How a grant of a worker ID came to be chosen.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Chosen {
    /// The node proved it held the latest grant of this ID, no longer live
    /// (or it is a minter): it restarts.
    Reclaimed,
    /// The node's own earlier ID (same node key and owner), free.
    Own,
    /// Another free ID.
    Free,
}

impl Registry {
    /// An empty registry.
    ///
    /// # Errors
    /// As [`RegistryConfig::validate`].
    pub fn new(config: RegistryConfig) -> Result<Self, Error> {
        Self::from_parts(config, 1, Vec::new())
    }

    /// A registry rebuilt from stored slots and the next generation number.
    ///
    /// # Errors
    /// As [`RegistryConfig::validate`]; [`Error::OutOfRange`] for a slot whose
    /// worker ID is outside the capacity or whose generation is not below
    /// `next_generation`; [`Error::InvalidKey`] for a bad node key.
    pub fn from_parts(
        config: RegistryConfig,
        next_generation: u64,
        slots: impl IntoIterator<Item = WorkerSlot>,
    ) -> Result<Self, Error> {
        config.validate()?;
        let mut reg = Registry {
            config,
            next_generation: next_generation.max(1),
            slots: Vec::new(),
            events: Vec::new(),
        };
        for slot in slots {
            check_range(
                "worker_id",
                slot.worker_id.into(),
                0,
                u64::from(config.capacity) - 1,
            )?;
            check_range("generation", slot.generation, 0, reg.next_generation - 1)?;
            check_name("node_key", &slot.node_key)?;
            let i = slot.worker_id as usize;
            if reg.slots.len() <= i {
                reg.slots.resize(i + 1, None);
            }
            reg.slots[i] = Some(slot);
        }
        Ok(reg)
    }

    /// The settings.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// The generation the next grant will carry.
    pub fn next_generation(&self) -> u64 {
        self.next_generation
    }

    /// Every worker ID ever leased, in order.
    pub fn slots(&self) -> impl Iterator<Item = &WorkerSlot> {
        self.slots.iter().flatten()
    }

    /// One worker ID's record.
    pub fn slot(&self, worker_id: u32) -> Option<&WorkerSlot> {
        self.slots.get(worker_id as usize).and_then(Option::as_ref)
    }

    /// The events of the operations since the last call, oldest first, for
    /// the host to record: each grant (after a lapse of the grant it
    /// replaces, if that ran out unreleased), renewal that extends a lease,
    /// release and eviction. A refused operation emits none.
    pub fn take_events(&mut self) -> Vec<LeaseEvent> {
        core::mem::take(&mut self.events)
    }

    /// The latest instant (registry ms, and the bound on the timestamps its
    /// holder may have issued) of a slot's grant. A grant nobody can prove to
    /// hold (evicted, or from before secrets) is not asked how far it got:
    /// its holder may mint until its expiry by a clock up to `max_skew_ms`
    /// away, so it ends that much later.
    pub fn grant_end_ms(&self, slot: &WorkerSlot) -> u64 {
        if slot.evicted || slot.secret.is_none() {
            slot.expires_at_ms.saturating_add(self.config.max_skew_ms)
        } else {
            slot.expires_at_ms
        }
    }

    /// Where a slot stands at `registry_now_ms`.
    pub fn status(&self, slot: &WorkerSlot, registry_now_ms: u64) -> SlotStatus {
        if slot.released
            || registry_now_ms >= self.grant_end_ms(slot).saturating_add(self.config.grace_ms)
        {
            SlotStatus::Free
        } else if registry_now_ms < slot.expires_at_ms && !slot.evicted {
            SlotStatus::Live
        } else {
            SlotStatus::Lapsed
        }
    }
}
