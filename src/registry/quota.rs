//! The share of worker IDs one owner may keep from the others.

use super::{Registry, SlotStatus, WorkerSlot};

impl Registry {
    /// Whether `slot` is kept from everyone but its owner at
    /// `registry_now_ms`: its grant is live, or lapsed and not yet free, or
    /// it was freed with a floor (`last_timestamp_ms`) further ahead than
    /// any node's clock may be (the registry's + `max_skew_ms`). Each such
    /// slot counts toward its owner's
    /// [`RegistryConfig::per_owner`](super::RegistryConfig::per_owner), so that
    /// no credential makes more worker IDs unusable than its share.
    pub fn withheld(&self, slot: &WorkerSlot, registry_now_ms: u64) -> bool {
        self.status(slot, registry_now_ms) != SlotStatus::Free
            || slot.last_timestamp_ms > registry_now_ms.saturating_add(self.config.max_skew_ms)
    }

    /// How many worker IDs `owner` keeps from the others
    /// ([`Registry::withheld`]).
    pub fn withheld_by(&self, owner: &str, registry_now_ms: u64) -> usize {
        self.slots()
            .filter(|s| s.owner == owner && self.withheld(s, registry_now_ms))
            .count()
    }
}
