//! The worker-ID registry (Leaf used ZooKeeper) as pure logic over a table of
//! slots: leases with a TTL, renewals that carry the node's clock and last
//! issued timestamp, recycling only after TTL + grace, a fencing generation
//! per grant, and Leaf's clock checks. A Durable Object runs it over storage.
//!
//! Two clocks appear: the registry's (`registry_now_ms`, the owner's clock)
//! and the node's (`node_now_ms`, what the node will stamp into IDs).
//!
//! The rule that keeps IDs unique across holders of one worker ID: a holder
//! stops issuing at its lease's `expires_at_ms` (by its own clock, which the
//! skew check keeps close), and the next holder issues only after the lease's
//! `issue_after_ms`, which is past everything the previous holders could have
//! issued.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{check_range, ClockReference, Error};
use crate::key::check_key;
use crate::layout::Layout;

/// Default lease time to live.
pub const DEFAULT_TTL_MS: u64 = 60_000;
/// Default wait after a lease lapses before its worker ID is recycled.
pub const DEFAULT_GRACE_MS: u64 = 10_000;
/// Default largest clock difference accepted.
pub const DEFAULT_MAX_SKEW_MS: u64 = 2_000;
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
    /// [`minter_node_key`]`(i)` (the service's snowflake minters), so that
    /// however many other nodes lease, the minters keep theirs.
    #[cfg_attr(feature = "serde", serde(default))]
    pub minters: u32,
    /// The most live worker IDs one owner (a credential of the service) may
    /// hold through [`Registry::lease_owned`]; `None`: no limit.
    #[cfg_attr(feature = "serde", serde(default))]
    pub per_owner: Option<u32>,
}

/// Node keys starting with this are the service's minters'; other nodes may
/// not lease under them.
pub const MINTER_KEY_PREFIX: &str = "minter:";

/// The node key of minter `index`, the only key that leases worker ID `index`
/// while it is reserved.
pub fn minter_node_key(index: u32) -> String {
    alloc::format!("{MINTER_KEY_PREFIX}{index}")
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
        }
    }

    /// A fair share for one owner: half the worker IDs that are not the
    /// minters' (at least 1), so that no one credential can take them all.
    pub fn half_share(&self) -> u32 {
        (self.capacity.saturating_sub(self.minters) / 2).max(1)
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] unless capacity is 1..=65,536, the TTL is
    /// 1 s..=1 day, and `max_skew_ms < grace_ms <= 1 day` (a lapsed holder,
    /// whose clock may lag by the skew, must be done before the ID recycles),
    /// and at most half the worker IDs are reserved for minters.
    pub fn validate(&self) -> Result<(), Error> {
        const DAY: u64 = 86_400_000;
        check_range("capacity", self.capacity.into(), 1, MAX_CAPACITY.into())?;
        check_range(
            "minters",
            self.minters.into(),
            0,
            (self.capacity / 2).into(),
        )?;
        check_range("ttl_ms", self.ttl_ms, 1_000, DAY)?;
        check_range("grace_ms", self.grace_ms, 1, DAY)?;
        check_range("max_skew_ms", self.max_skew_ms, 0, self.grace_ms - 1)?;
        if let Some(n) = self.per_owner {
            check_range("per_owner", n.into(), 1, self.capacity.into())?;
        }
        Ok(())
    }
}

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
    /// Who leased it through [`Registry::lease_owned`] (empty: no owner).
    #[cfg_attr(feature = "serde", serde(default))]
    pub owner: String,
}

/// Where a slot stands at a given registry time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SlotStatus {
    /// Leased and not expired.
    Live,
    /// Expired, but within the grace period: not yet reusable.
    Lapsed,
    /// Released by its holder, or past TTL + grace: reusable.
    Free,
}

/// A grant or renewal: what a node needs to issue IDs.
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

/// The registry.
///
/// ```
/// use edgeleaf::{Layout, Registry, RegistryConfig};
///
/// let mut reg = Registry::new(RegistryConfig::new(&Layout::LEAF))?;
/// let now = 1_700_000_000_000;
/// let a = reg.lease("10.0.0.1:8080", now, now, None)?;
/// let b = reg.lease("10.0.0.2:8080", now, now, None)?;
/// assert_ne!(a.worker_id, b.worker_id);
/// let renewed = reg.renew(a.worker_id, a.generation, now + 1_000, now + 999, now + 1_000)?;
/// assert_eq!(renewed.worker_id, a.worker_id);
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct Registry {
    config: RegistryConfig,
    next_generation: u64,
    /// Indexed by worker ID; `None` for IDs never leased.
    slots: Vec<Option<WorkerSlot>>,
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
        };
        for slot in slots {
            check_range(
                "worker_id",
                slot.worker_id.into(),
                0,
                u64::from(config.capacity) - 1,
            )?;
            check_range("generation", slot.generation, 0, reg.next_generation - 1)?;
            check_key("node_key", &slot.node_key)?;
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

    /// Where a slot stands at `registry_now_ms`.
    pub fn status(&self, slot: &WorkerSlot, registry_now_ms: u64) -> SlotStatus {
        if slot.released
            || registry_now_ms >= slot.expires_at_ms.saturating_add(self.config.grace_ms)
        {
            SlotStatus::Free
        } else if registry_now_ms < slot.expires_at_ms {
            SlotStatus::Live
        } else {
            SlotStatus::Lapsed
        }
    }

    fn check_skew(
        &self,
        reference: ClockReference,
        node_now_ms: u64,
        reference_ms: u64,
    ) -> Result<(), Error> {
        if node_now_ms.abs_diff(reference_ms) > self.config.max_skew_ms {
            return Err(Error::ClockSkew {
                reference,
                node_now_ms,
                reference_ms,
                max_skew_ms: self.config.max_skew_ms,
            });
        }
        Ok(())
    }

    /// The live nodes' clocks now, averaged: each last report moved forward by
    /// the registry time since. `None` when no node is live.
    pub fn live_clock_average(&self, registry_now_ms: u64) -> Option<u64> {
        let (sum, n) = self
            .slots()
            .filter(|s| self.status(s, registry_now_ms) == SlotStatus::Live)
            .map(|s| i128::from(s.reported_clock_ms) - i128::from(s.reported_at_ms))
            .fold((0i128, 0i128), |(sum, n), offset| (sum + offset, n + 1));
        if n == 0 {
            return None;
        }
        let avg = i128::from(registry_now_ms) + sum / n;
        Some(u64::try_from(avg.max(0)).unwrap_or(u64::MAX))
    }

    /// Leases a worker ID to `node_key`.
    ///
    /// The node gets, in order of preference: the ID named by `previous`
    /// (worker ID and generation from its own cache) if that grant is still
    /// the latest one of that ID, even if live — the node proves it is the
    /// holder; else its own earlier ID if free; else the lowest free ID.
    /// A node that cannot prove it holds a live lease never shares its ID.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for a bad node key; [`Error::ClockSkew`] when the
    /// node's clock is off from the registry's or from the live nodes'
    /// average; [`Error::ClockBehindLastReport`] when it is behind the last
    /// timestamp recorded for the chosen ID; [`Error::NoFreeWorkerId`].
    pub fn lease(
        &mut self,
        node_key: &str,
        node_now_ms: u64,
        registry_now_ms: u64,
        previous: Option<(u32, u64)>,
    ) -> Result<Lease, Error> {
        self.lease_owned("", node_key, node_now_ms, registry_now_ms, previous)
    }

    /// As [`Registry::lease`], for `owner` (a credential; empty: none), who
    /// may hold at most [`RegistryConfig::per_owner`] live worker IDs. A
    /// node re-leasing the live ID it proves to hold (`previous`) is not
    /// counted twice.
    ///
    /// # Errors
    /// As [`Registry::lease`]; [`Error::WorkerIdLimit`] when `owner`
    /// already holds its limit.
    pub fn lease_owned(
        &mut self,
        owner: &str,
        node_key: &str,
        node_now_ms: u64,
        registry_now_ms: u64,
        previous: Option<(u32, u64)>,
    ) -> Result<Lease, Error> {
        check_key("node_key", node_key)?;
        if node_key.starts_with(MINTER_KEY_PREFIX) {
            return Err(Error::ReservedNodeKey {
                prefix: MINTER_KEY_PREFIX,
            });
        }
        if let (Some(limit), false) = (self.config.per_owner, owner.is_empty()) {
            let held = self
                .slots()
                .filter(|s| s.owner == owner && self.status(s, registry_now_ms) == SlotStatus::Live)
                .filter(|s| previous != Some((s.worker_id, s.generation)))
                .count();
            if held >= limit as usize {
                return Err(Error::WorkerIdLimit { limit });
            }
        }
        let ids = self.config.minters..self.config.capacity;
        self.grant(owner, node_key, node_now_ms, registry_now_ms, previous, ids)
    }

    /// Leases worker ID `index` to minter `index` (node key
    /// [`minter_node_key`]`(index)`): the same rules as [`Registry::lease`],
    /// over that one reserved ID.
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
        registry_now_ms: u64,
        previous: Option<(u32, u64)>,
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
        self.grant(
            "",
            &key,
            node_now_ms,
            registry_now_ms,
            previous,
            index..index + 1,
        )
    }

    fn grant(
        &mut self,
        owner: &str,
        node_key: &str,
        node_now_ms: u64,
        registry_now_ms: u64,
        previous: Option<(u32, u64)>,
        ids: core::ops::Range<u32>,
    ) -> Result<Lease, Error> {
        self.check_skew(ClockReference::Registry, node_now_ms, registry_now_ms)?;
        if let Some(avg) = self.live_clock_average(registry_now_ms) {
            self.check_skew(ClockReference::LiveNodesAverage, node_now_ms, avg)?;
        }
        let worker_id = self.choose(node_key, registry_now_ms, previous, ids)?;
        let generation = self.next_generation;
        let ttl_ms = self.config.ttl_ms;
        let slot = &mut self.slots[worker_id as usize];
        let issue_after_ms = match slot {
            None => 0,
            Some(s) => {
                if node_now_ms < s.last_timestamp_ms {
                    return Err(Error::ClockBehindLastReport {
                        worker_id: Some(worker_id),
                        last_timestamp_ms: s.last_timestamp_ms,
                        node_now_ms,
                    });
                }
                let proved = previous == Some((worker_id, s.generation)) && s.node_key == node_key;
                // An unreleased earlier grant to someone who has not proved
                // to be this node may have issued up to its expiry. A node
                // that proved it held the grant is restarting: its previous
                // incarnation may have issued up to now, past its last report.
                if s.released {
                    s.last_timestamp_ms
                } else if proved {
                    s.last_timestamp_ms.max(node_now_ms.min(s.expires_at_ms))
                } else {
                    s.last_timestamp_ms.max(s.expires_at_ms)
                }
            }
        };
        *slot = Some(WorkerSlot {
            worker_id,
            node_key: node_key.into(),
            generation,
            expires_at_ms: registry_now_ms + ttl_ms,
            released: false,
            last_timestamp_ms: issue_after_ms,
            reported_clock_ms: node_now_ms,
            reported_at_ms: registry_now_ms,
            owner: owner.into(),
        });
        self.next_generation += 1;
        Ok(Lease {
            worker_id,
            generation,
            node_key: node_key.into(),
            expires_at_ms: registry_now_ms + ttl_ms,
            issue_after_ms,
            ttl_ms,
        })
    }

    fn choose(
        &mut self,
        node_key: &str,
        registry_now_ms: u64,
        previous: Option<(u32, u64)>,
        ids: core::ops::Range<u32>,
    ) -> Result<u32, Error> {
        if let Some((id, generation)) = previous.filter(|(id, _)| ids.contains(id)) {
            if let Some(s) = self.slot(id) {
                if s.generation == generation && s.node_key == node_key && !s.released {
                    return Ok(id);
                }
            }
        }
        let free = |id: &u32| {
            self.slot(*id)
                .is_none_or(|s| self.status(s, registry_now_ms) == SlotStatus::Free)
        };
        let own = ids
            .clone()
            .find(|id| free(id) && self.slot(*id).is_some_and(|s| s.node_key == node_key));
        let Some(id) = own.or_else(|| ids.clone().find(free)) else {
            return Err(Error::NoFreeWorkerId {
                capacity: self.config.capacity,
            });
        };
        if self.slots.len() <= id as usize {
            self.slots.resize(id as usize + 1, None);
        }
        Ok(id)
    }

    fn held(&mut self, worker_id: u32, generation: u64) -> Result<&mut WorkerSlot, Error> {
        match self
            .slots
            .get_mut(worker_id as usize)
            .and_then(Option::as_mut)
        {
            Some(s) if s.generation == generation && !s.released => Ok(s),
            _ => Err(Error::LeaseNotHeld {
                worker_id,
                generation,
            }),
        }
    }

    /// Extends a live lease. `last_timestamp_ms` is the latest timestamp the
    /// node has issued under it.
    ///
    /// # Errors
    /// [`Error::LeaseNotHeld`] for a wrong generation (fenced off by a newer
    /// grant) or a released lease; [`Error::LeaseExpired`] once the lease
    /// lapsed — the node must stop issuing and lease again;
    /// [`Error::ClockSkew`] against the registry's clock;
    /// [`Error::ClockBehindLastReport`] when the node's clock went back past
    /// what it reported before.
    pub fn renew(
        &mut self,
        worker_id: u32,
        generation: u64,
        node_now_ms: u64,
        last_timestamp_ms: u64,
        registry_now_ms: u64,
    ) -> Result<Lease, Error> {
        let max_skew_ms = self.config.max_skew_ms;
        let ttl_ms = self.config.ttl_ms;
        let slot = self.held(worker_id, generation)?;
        if registry_now_ms >= slot.expires_at_ms {
            return Err(Error::LeaseExpired {
                worker_id,
                expired_at_ms: slot.expires_at_ms,
                now_ms: registry_now_ms,
            });
        }
        if node_now_ms.abs_diff(registry_now_ms) > max_skew_ms {
            return Err(Error::ClockSkew {
                reference: ClockReference::Registry,
                node_now_ms,
                reference_ms: registry_now_ms,
                max_skew_ms,
            });
        }
        if node_now_ms < slot.last_timestamp_ms.max(slot.reported_clock_ms) {
            return Err(Error::ClockBehindLastReport {
                worker_id: Some(worker_id),
                last_timestamp_ms: slot.last_timestamp_ms.max(slot.reported_clock_ms),
                node_now_ms,
            });
        }
        slot.last_timestamp_ms = slot.last_timestamp_ms.max(last_timestamp_ms);
        slot.reported_clock_ms = node_now_ms;
        slot.reported_at_ms = registry_now_ms;
        slot.expires_at_ms = registry_now_ms + ttl_ms;
        Ok(Lease {
            worker_id,
            generation,
            node_key: slot.node_key.clone(),
            expires_at_ms: slot.expires_at_ms,
            issue_after_ms: slot.last_timestamp_ms,
            ttl_ms,
        })
    }

    /// Gives a worker ID back; it is free at once. `last_timestamp_ms` is the
    /// latest timestamp issued under it, kept so the next holder issues after
    /// it.
    ///
    /// # Errors
    /// [`Error::LeaseNotHeld`] for a wrong generation or an ID already released.
    pub fn release(
        &mut self,
        worker_id: u32,
        generation: u64,
        last_timestamp_ms: u64,
        registry_now_ms: u64,
    ) -> Result<(), Error> {
        let slot = self.held(worker_id, generation)?;
        slot.last_timestamp_ms = slot.last_timestamp_ms.max(last_timestamp_ms);
        if registry_now_ms >= slot.expires_at_ms {
            // Released after it lapsed: the holder's word is no better than
            // the lease's end, which bounds what it may have issued.
            slot.last_timestamp_ms = slot.last_timestamp_ms.max(slot.expires_at_ms);
        }
        slot.released = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_700_000_000_000;

    fn reg(capacity: u32) -> Registry {
        Registry::new(RegistryConfig {
            capacity,
            ttl_ms: 10_000,
            grace_ms: 5_000,
            max_skew_ms: 1_000,
            minters: 0,
            per_owner: None,
        })
        .unwrap()
    }

    #[test]
    fn lowest_free_id_and_no_sharing() {
        let mut r = reg(3);
        let ids: Vec<u32> = ["a", "b", "c"]
            .iter()
            .map(|k| r.lease(k, T, T, None).unwrap().worker_id)
            .collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(
            r.lease("d", T, T, None),
            Err(Error::NoFreeWorkerId { capacity: 3 })
        );
        // "a" again without proof: its ID is live, so it gets none.
        assert!(r.lease("a", T, T, None).is_err());
    }

    #[test]
    fn lease_expiry_at_ttl_and_recycling_after_grace() {
        let mut r = reg(1);
        let a = r.lease("a", T, T, None).unwrap();
        assert_eq!(a.expires_at_ms, T + 10_000);
        // TTL − 1 ms: renewal works.
        let a = r
            .renew(0, a.generation, T + 9_999, T + 9_000, T + 9_999)
            .unwrap();
        // TTL + 1 ms after that renewal: refused, the node must stop.
        let lapsed_at = a.expires_at_ms;
        assert_eq!(
            r.renew(0, a.generation, lapsed_at + 1, T, lapsed_at + 1),
            Err(Error::LeaseExpired {
                worker_id: 0,
                expired_at_ms: lapsed_at,
                now_ms: lapsed_at + 1
            })
        );
        // Exactly at TTL it has lapsed too.
        assert!(r.renew(0, a.generation, lapsed_at, T, lapsed_at).is_err());
        // Within the grace period nobody else gets it.
        let g = lapsed_at + 5_000;
        assert!(matches!(
            r.lease("b", g - 1, g - 1, None),
            Err(Error::NoFreeWorkerId { .. })
        ));
        // After TTL + grace it is recycled, issuing only after the old lease's end.
        let b = r.lease("b", g, g, None).unwrap();
        assert_eq!(b.worker_id, 0);
        assert!(b.generation > a.generation);
        assert_eq!(b.issue_after_ms, lapsed_at);
        // The old holder is fenced off.
        assert!(matches!(
            r.renew(0, a.generation, g, g, g),
            Err(Error::LeaseNotHeld { .. })
        ));
    }

    #[test]
    fn a_node_gets_its_previous_id_back() {
        let mut r = reg(4);
        r.lease("x", T, T, None).unwrap();
        let a = r.lease("a", T, T, None).unwrap();
        // With proof (its cached grant), even while live: same ID, new generation.
        let again = r
            .lease("a", T + 1, T + 1, Some((a.worker_id, a.generation)))
            .unwrap();
        assert_eq!(again.worker_id, a.worker_id);
        assert!(again.generation > a.generation);
        // Its previous incarnation may have issued up to now: resume after it.
        assert_eq!(again.issue_after_ms, T + 1);
        // Released: free, and it comes back to the same node.
        r.release(again.worker_id, again.generation, T + 1, T + 2)
            .unwrap();
        let third = r.lease("a", T + 3, T + 3, None).unwrap();
        assert_eq!(third.worker_id, a.worker_id);
        assert_eq!(third.issue_after_ms, T + 1);
    }

    #[test]
    fn clock_checks_refuse_bad_nodes() {
        let mut r = reg(8);
        assert!(matches!(
            r.lease("a", T + 1_001, T, None),
            Err(Error::ClockSkew {
                reference: ClockReference::Registry,
                ..
            })
        ));
        // Two live nodes running 900 ms ahead of the registry.
        r.lease("a", T + 900, T, None).unwrap();
        r.lease("b", T + 900, T, None).unwrap();
        // Within 1 s of the registry, but 1.1 s behind the live average.
        assert!(matches!(
            r.lease("c", T - 200, T, None),
            Err(Error::ClockSkew {
                reference: ClockReference::LiveNodesAverage,
                ..
            })
        ));
        assert!(r.lease("c", T + 500, T, None).is_ok());
    }

    #[test]
    fn a_clock_behind_the_last_report_is_refused() {
        let mut r = reg(1);
        let a = r.lease("a", T, T, None).unwrap();
        let a = r
            .renew(0, a.generation, T + 2_000, T + 1_999, T + 2_000)
            .unwrap();
        // The node's clock went back 500 ms since its last report.
        assert!(matches!(
            r.renew(0, a.generation, T + 1_500, T + 1_500, T + 2_500),
            Err(Error::ClockBehindLastReport { .. })
        ));
        r.release(0, a.generation, T + 1_999, T + 2_600).unwrap();
        // A restart whose clock is behind the last issued timestamp: refused.
        assert!(matches!(
            r.lease("a", T + 1_000, T + 1_500, None),
            Err(Error::ClockBehindLastReport { .. })
        ));
    }

    #[test]
    fn reserved_ids_go_to_their_minters_only() {
        let mut r = Registry::new(RegistryConfig {
            minters: 2,
            ..*reg(4).config()
        })
        .unwrap();
        // Others draw from 2..4 only, and may not pose as minters.
        assert_eq!(r.lease("a", T, T, None).unwrap().worker_id, 2);
        assert_eq!(r.lease("b", T, T, None).unwrap().worker_id, 3);
        assert_eq!(
            r.lease("c", T, T, None),
            Err(Error::NoFreeWorkerId { capacity: 4 })
        );
        assert_eq!(
            r.lease("minter:0", T, T, None),
            Err(Error::ReservedNodeKey {
                prefix: MINTER_KEY_PREFIX
            })
        );
        // Minter i gets worker ID i however full the rest is.
        let m1 = r.lease_minter(1, T, T, None).unwrap();
        assert_eq!((m1.worker_id, m1.node_key.as_str()), (1, "minter:1"));
        assert!(matches!(
            r.lease_minter(2, T, T, None),
            Err(Error::OutOfRange { .. })
        ));
        // A restarted minter proves its grant and keeps its ID; one that
        // cannot prove it waits for the lapse like anyone else.
        let again = r
            .lease_minter(1, T + 5, T + 5, Some((1, m1.generation)))
            .unwrap();
        assert_eq!(again.worker_id, 1);
        assert_eq!(again.issue_after_ms, T + 5);
        assert!(r.lease_minter(1, T + 6, T + 6, None).is_err());
        // Proof of a reserved ID does not get an ordinary node into it.
        assert!(r.lease("a", T, T, Some((1, again.generation))).is_err());
        // A node that held an ID before it was reserved keeps it until it
        // lapses; the minter waits.
        let mut small = reg(4);
        let x = small.lease("x", T, T, None).unwrap();
        assert_eq!(x.worker_id, 0);
        let mut grown = Registry::from_parts(
            RegistryConfig {
                minters: 1,
                ..*small.config()
            },
            small.next_generation(),
            small.slots().cloned(),
        )
        .unwrap();
        assert!(grown.lease_minter(0, T, T, None).is_err());
        let later = T + 10_000 + 5_000;
        let m0 = grown.lease_minter(0, later, later, None).unwrap();
        assert_eq!((m0.worker_id, m0.issue_after_ms), (0, T + 10_000));
    }

    #[test]
    fn config_and_parts_are_validated() {
        let mut c = RegistryConfig::new(&Layout::LEAF);
        assert_eq!(c.capacity, 1024);
        c.max_skew_ms = c.grace_ms;
        assert!(Registry::new(c).is_err());
        let ok = RegistryConfig::new(&Layout::JS_SAFE);
        assert_eq!(ok.capacity, 128);
        let too_many = RegistryConfig { minters: 65, ..ok };
        assert!(too_many.validate().is_err());
        let slot = WorkerSlot {
            worker_id: 200,
            node_key: "n".into(),
            generation: 1,
            expires_at_ms: 0,
            released: false,
            last_timestamp_ms: 0,
            reported_clock_ms: 0,
            reported_at_ms: 0,
            owner: String::new(),
        };
        assert!(Registry::from_parts(ok, 5, [slot.clone()]).is_err());
        let mut r = reg(2);
        r.lease("a", T, T, None).unwrap();
        let back =
            Registry::from_parts(*r.config(), r.next_generation(), r.slots().cloned()).unwrap();
        assert_eq!(back, r);
    }
}
