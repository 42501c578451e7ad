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

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{check_range, ClockReference, Error};
use crate::layout::Layout;
pub use crate::lease::Lease;
use crate::lease::{LeaseAsk, Renewal};
use crate::name::check_name;
use crate::secret::{LeaseSecret, Proof, SecretHash};
use crate::snowflake::MAX_TOLERANCE_MS;

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
    /// hold through [`Registry::lease`]; `None`: no limit.
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

/// Something that happened to a worker ID's grant, as the [`Registry`]
/// emits it (drained with [`Registry::take_events`]).
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

/// A node's request for a lease.
#[derive(Debug, Clone, Copy)]
pub struct GrantRequest<'a> {
    /// The credential asking (empty: the service itself). It alone may
    /// renew, release or reclaim the grant, and it may hold at most
    /// [`RegistryConfig::per_owner`] live worker IDs.
    pub owner: &'a str,
    /// The node's name (Leaf used ip:port).
    pub node_key: &'a str,
    /// The node's clock, Unix ms.
    pub node_now_ms: u64,
    /// The grant the node held before, from its own cache: with the hash
    /// of its secret, a restarted node gets its worker ID back.
    pub previous: Option<Proof>,
    /// The hash of the new grant's secret. The host draws the secret from
    /// its CSPRNG, gives the registry its hash, and answers the secret to
    /// the caller alone.
    pub secret_hash: SecretHash,
}

impl<'a> GrantRequest<'a> {
    /// A holder's [`LeaseAsk`], from `owner`'s node `node_key`, for a grant
    /// under `secret`: the host hashes it and the previous grant's secret
    /// with `hash` (its SHA-256).
    pub fn from_ask(
        ask: &LeaseAsk,
        owner: &'a str,
        node_key: &'a str,
        secret: &LeaseSecret,
        hash: impl Fn(&LeaseSecret) -> SecretHash,
    ) -> Self {
        GrantRequest {
            owner,
            node_key,
            node_now_ms: ask.node_now_ms,
            previous: ask.previous.map(|c| c.proof(&hash)),
            secret_hash: hash(secret),
        }
    }
}

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

    /// The clocks of `owner`'s live nodes now, averaged: each last report
    /// moved forward by the registry time since. `None` when it has none.
    /// One vote per owner's fleet, never across owners: every report is
    /// within the skew bound, so one credential's many leases could
    /// otherwise walk the reference another credential's nodes are
    /// checked against. (The service's own — minters and isolates — are
    /// owner `""`.)
    pub fn live_clock_average(&self, owner: &str, registry_now_ms: u64) -> Option<u64> {
        let (sum, n) = self
            .slots()
            .filter(|s| s.owner == owner && self.status(s, registry_now_ms) == SlotStatus::Live)
            .map(|s| i128::from(s.reported_clock_ms) - i128::from(s.reported_at_ms))
            .fold((0i128, 0i128), |(sum, n), offset| (sum + offset, n + 1));
        if n == 0 {
            return None;
        }
        let avg = i128::from(registry_now_ms) + sum / n;
        Some(u64::try_from(avg.max(0)).unwrap_or(u64::MAX))
    }

    /// Leases a worker ID to a node.
    ///
    /// The node gets, in order of preference: the ID named by `previous` if
    /// that grant is still the latest one of that ID, no longer live, and
    /// the node proves it holds it (same owner, node key and secret) — it
    /// restarts, issuing after that grant's expiry; else its own earlier ID
    /// (same node key and owner) if free; else the lowest free ID whose
    /// floor its clock has passed; else the lowest free ID whose floor is at
    /// most `max_skew_ms` ahead of the registry's clock (the node issues
    /// after it, waiting). A node proving a grant that is still live gets
    /// another ID: the proof may be a copy (two processes sharing one
    /// store), and the grant's holder may still be minting. A node that
    /// cannot prove it holds a live grant never shares its ID, and naming a
    /// live grant without proof is refused, not passed over.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for a bad node key; [`Error::ReservedNodeKey`]
    /// for a minter's; [`Error::ReservedWorkerId`] when `previous` names a
    /// minter's grant; [`Error::WorkerIdLimit`] when the owner already keeps
    /// its limit of worker IDs from the others ([`Registry::withheld`]);
    /// [`Error::NotLeaseHolder`] when `previous` names a live grant with
    /// another owner or a wrong (or no) secret; [`Error::ClockSkew`] when the
    /// node's clock is off from the registry's or from the average of its
    /// owner's live nodes; [`Error::ClockBehindLastReport`] when the chosen
    /// ID is the node's own and its clock is behind its last reading on
    /// record, or more than `max_skew_ms` behind the ID's floor;
    /// [`Error::NoFreeWorkerId`].
    pub fn lease(&mut self, ask: GrantRequest<'_>, registry_now_ms: u64) -> Result<Lease, Error> {
        check_name("node_key", ask.node_key)?;
        if ask.node_key.starts_with(MINTER_KEY_PREFIX) {
            return Err(Error::ReservedNodeKey {
                prefix: MINTER_KEY_PREFIX,
            });
        }
        if let Some(p) = ask.previous {
            self.not_a_minters(p.worker_id, Some(p.generation))?;
        }
        let limit = self.config.per_owner.filter(|_| !ask.owner.is_empty());
        let ids = self.config.minters..self.config.capacity;
        self.grant(ask, registry_now_ms, ids, false, limit)
    }

    /// Refuses a minter's grant named by anyone but that minter: the
    /// service's own, and no caller's to reclaim, release or evict (refused,
    /// not passed over, so that the caller learns it named one). With a
    /// `generation`, only that grant is one: a node's own older grant of an
    /// ID a minter holds now (it held it before the ID was reserved) is a
    /// stale proof, passed over like any other.
    fn not_a_minters(&self, worker_id: u32, generation: Option<u64>) -> Result<(), Error> {
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

    /// Whether `slot` is kept from everyone but its owner at
    /// `registry_now_ms`: its grant is live, or lapsed and not yet free, or
    /// it was freed with a floor (`last_timestamp_ms`) further ahead than
    /// any node's clock may be (the registry's + `max_skew_ms`). Each such
    /// slot counts toward its owner's [`RegistryConfig::per_owner`], so that
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

    fn grant(
        &mut self,
        ask: GrantRequest<'_>,
        registry_now_ms: u64,
        ids: core::ops::Range<u32>,
        minter: bool,
        limit: Option<u32>,
    ) -> Result<Lease, Error> {
        let node_now_ms = ask.node_now_ms;
        self.check_skew(ClockReference::Registry, node_now_ms, registry_now_ms)?;
        if let Some(avg) = self.live_clock_average(ask.owner, registry_now_ms) {
            self.check_skew(ClockReference::LiveNodesAverage, node_now_ms, avg)?;
        }
        let chosen = self.choose(&ask, registry_now_ms, ids, minter);
        if let Some(limit) = limit {
            // Everything the owner keeps from the others counts (a live ID
            // `previous` proves too: the node gets another), but the ID it
            // is given now only once.
            let replaced = chosen.as_ref().ok().map(|&(id, _)| id);
            let held = self
                .slots()
                .filter(|s| {
                    s.owner == ask.owner
                        && Some(s.worker_id) != replaced
                        && self.withheld(s, registry_now_ms)
                })
                .count();
            if held >= limit as usize && !matches!(chosen, Err(Error::NotLeaseHolder { .. })) {
                return Err(Error::WorkerIdLimit { limit });
            }
        }
        let (worker_id, chosen) = chosen?;
        if self.slots.len() <= worker_id as usize {
            self.slots.resize(worker_id as usize + 1, None);
        }
        let end_ms = self.slot(worker_id).map(|s| self.grant_end_ms(s));
        let generation = self.next_generation;
        let ttl_ms = self.config.ttl_ms;
        let slot = &mut self.slots[worker_id as usize];
        let issue_after_ms = match (slot, end_ms) {
            (Some(s), Some(end_ms)) => {
                // The node's own earlier ID or grant: a clock behind its
                // last reading on record went back (Leaf's check), and one
                // further behind the floor than the skew bound would wait
                // too long for it. A floor a little ahead (a reservation it
                // reported, a lease's expiry set by a late release) is
                // waited for, as is another node's ID whose floor is a
                // little ahead: the node issues after the floor.
                if chosen != Chosen::Free {
                    let behind = if node_now_ms < s.reported_clock_ms {
                        Some(s.reported_clock_ms)
                    } else if node_now_ms.saturating_add(self.config.max_skew_ms)
                        < s.last_timestamp_ms
                    {
                        Some(s.last_timestamp_ms)
                    } else {
                        None
                    };
                    if let Some(last_timestamp_ms) = behind {
                        return Err(Error::ClockBehindLastReport {
                            worker_id: Some(worker_id),
                            last_timestamp_ms,
                            node_now_ms,
                        });
                    }
                }
                // Given back by its proved holder: it told how far it got.
                // Reclaimed while live (a minter): its previous incarnation
                // may have issued up to now, past its last report. Reclaimed
                // after it lapsed: its holder may have issued up to its
                // expiry (by its own clock, whatever the reclaimer's says).
                // Otherwise the earlier grant may have issued up to its end.
                if s.released {
                    s.last_timestamp_ms
                } else if chosen == Chosen::Reclaimed && registry_now_ms < s.expires_at_ms {
                    s.last_timestamp_ms.max(node_now_ms.min(s.expires_at_ms))
                } else if chosen == Chosen::Reclaimed {
                    s.last_timestamp_ms.max(s.expires_at_ms)
                } else {
                    s.last_timestamp_ms.max(end_ms)
                }
            }
            _ => 0,
        };
        // A grant it replaces that was neither given back nor evicted
        // lapsed when its lease ran out (one a node proving it held it takes
        // over before then did not).
        if let Some(old) = &self.slots[worker_id as usize] {
            if !old.released && !old.evicted && old.expires_at_ms <= registry_now_ms {
                let lapsed = LeaseEvent::new(LeaseEventKind::Lapsed, old.expires_at_ms, old);
                self.events.push(lapsed);
            }
        }
        let slot = WorkerSlot {
            worker_id,
            node_key: ask.node_key.into(),
            generation,
            expires_at_ms: registry_now_ms + ttl_ms,
            released: false,
            last_timestamp_ms: issue_after_ms,
            reported_clock_ms: node_now_ms,
            reported_at_ms: registry_now_ms,
            owner: ask.owner.into(),
            secret: Some(ask.secret_hash),
            evicted: false,
        };
        let granted = LeaseEvent::new(LeaseEventKind::Granted, registry_now_ms, &slot);
        self.events.push(granted);
        self.slots[worker_id as usize] = Some(slot);
        self.next_generation += 1;
        Ok(Lease {
            worker_id,
            generation,
            node_key: ask.node_key.into(),
            expires_at_ms: registry_now_ms + ttl_ms,
            issue_after_ms,
            ttl_ms,
        })
    }

    /// Whether `owner`, presenting `proof`, holds `slot`'s latest grant.
    /// `legacy`: a grant from before secrets is proved by its generation.
    fn check_holder(
        slot: &WorkerSlot,
        owner: &str,
        proof: &Proof,
        legacy: bool,
    ) -> Result<(), Error> {
        let refused = |mismatch| Error::NotLeaseHolder {
            worker_id: proof.worker_id,
            mismatch,
        };
        // The owner first: another credential learns nothing of the grant
        // (its generation, whether it was released or evicted).
        if slot.owner != owner {
            return Err(refused("owner"));
        }
        if slot.generation != proof.generation || slot.released || slot.evicted {
            return Err(Error::LeaseNotHeld {
                worker_id: proof.worker_id,
                generation: proof.generation,
            });
        }
        match (slot.secret, proof.secret_hash) {
            (Some(held), Some(given)) if held == given => Ok(()),
            (None, None) if legacy => Ok(()),
            _ => Err(refused("secret")),
        }
    }

    fn choose(
        &self,
        ask: &GrantRequest<'_>,
        registry_now_ms: u64,
        ids: core::ops::Range<u32>,
        minter: bool,
    ) -> Result<(u32, Chosen), Error> {
        if let Some(p) = ask.previous.filter(|p| ids.contains(&p.worker_id)) {
            if let Some(s) = self.slot(p.worker_id) {
                // Both from before secrets: the node has nothing to prove
                // with, and is not told off for it (it gets another ID).
                let legacy = s.secret.is_none() && p.secret_hash.is_none();
                // A proof of a grant that is no longer the latest proves
                // nothing (whoever holds the ID now): no refusal either.
                let current = s.generation == p.generation;
                let checked = if current {
                    Self::check_holder(s, ask.owner, &p, minter)
                } else {
                    Err(Error::LeaseNotHeld {
                        worker_id: p.worker_id,
                        generation: p.generation,
                    })
                };
                match checked {
                    // A grant that is no longer live: its holder stopped
                    // minting at its expiry, so the node takes the ID back
                    // (issuing after that expiry). A live grant is not taken
                    // over by an ordinary node: whoever has its saved grant
                    // may be another process still minting under it (two
                    // processes from one config and one store), so the node
                    // gets another ID, and the live grant stays its holder's
                    // until it lapses. A minter does take its live grant
                    // back: its store is its Durable Object's own storage,
                    // which the platform fences (an old instance cannot
                    // write once a new one has), and its holder resumes
                    // after the reservation it saved there.
                    Ok(())
                        if s.node_key == ask.node_key
                            && (minter || self.status(s, registry_now_ms) != SlotStatus::Live) =>
                    {
                        return Ok((p.worker_id, Chosen::Reclaimed))
                    }
                    // Someone names a live grant it cannot prove to hold:
                    // refused, so that it learns its proof is wrong.
                    Err(e @ Error::NotLeaseHolder { .. })
                        if current
                            && !legacy
                            && self.status(s, registry_now_ms) == SlotStatus::Live =>
                    {
                        return Err(e)
                    }
                    // A grant that is gone, or not this node's: no proof.
                    _ => {}
                }
            }
        }
        let free = |id: &u32| {
            self.slot(*id)
                .is_none_or(|s| self.status(s, registry_now_ms) == SlotStatus::Free)
        };
        // The node's own earlier ID: same node key *and* same owner. Node
        // keys are guessable (and public to monitors), so another
        // credential's ID under this key is not this node's: it neither
        // gets it as its own nor is refused for its floor.
        let own = ids.clone().find(|id| {
            free(id)
                && self
                    .slot(*id)
                    .is_some_and(|s| s.node_key == ask.node_key && s.owner == ask.owner)
        });
        if let Some(id) = own {
            return Ok((id, Chosen::Own));
        }
        // Another node's freed ID: first one whose floor this node's clock
        // has passed, else one whose floor is at most the skew bound ahead
        // of the registry's clock (the node waits for it: it issues after
        // its `issue_after_ms`). A floor further ahead keeps the ID from
        // everyone, and counts against its owner's share
        // ([`Registry::withheld`]).
        let within = |bound: u64| {
            move |id: &u32| free(id) && self.slot(*id).is_none_or(|s| s.last_timestamp_ms <= bound)
        };
        let ahead = registry_now_ms.saturating_add(self.config.max_skew_ms);
        ids.clone()
            .find(within(ask.node_now_ms))
            .or_else(|| ids.clone().find(within(ahead)))
            .map(|id| (id, Chosen::Free))
            .ok_or(Error::NoFreeWorkerId {
                capacity: self.config.capacity,
            })
    }

    fn held(&mut self, owner: &str, proof: &Proof) -> Result<&mut WorkerSlot, Error> {
        let slot = self
            .slots
            .get_mut(proof.worker_id as usize)
            .and_then(Option::as_mut)
            .ok_or(Error::LeaseNotHeld {
                worker_id: proof.worker_id,
                generation: proof.generation,
            })?;
        Self::check_holder(slot, owner, proof, false)?;
        Ok(slot)
    }

    /// Extends a live lease for its holder: `owner`, presenting the hash of
    /// the grant's secret in the [`Renewal`]'s proof, with the node's clock and the latest
    /// timestamp it issued under the lease. A refusal changes nothing.
    ///
    /// # Errors
    /// [`Error::LeaseNotHeld`] for a wrong generation (fenced off by a newer
    /// grant), a released or an evicted lease; [`Error::NotLeaseHolder`] for
    /// another owner or a wrong secret (the lease stays its holder's);
    /// [`Error::LeaseExpired`] once the lease lapsed — the node must stop
    /// issuing and lease again; [`Error::ClockSkew`] against the registry's
    /// clock; [`Error::ClockBehindLastReport`] when the node's clock went
    /// back past what it reported before.
    pub fn renew(
        &mut self,
        owner: &str,
        renewal: &Renewal<Proof>,
        registry_now_ms: u64,
    ) -> Result<Lease, Error> {
        let max_skew_ms = self.config.max_skew_ms;
        let ttl_ms = self.config.ttl_ms;
        let Renewal {
            claim,
            node_now_ms,
            last_timestamp_ms,
        } = *renewal;
        let worker_id = claim.worker_id;
        let slot = self.held(owner, &claim)?;
        // No holder issues further ahead of its clock than it may borrow: a
        // timestamp beyond that would fence its worker ID for ever. (After
        // the holder check: a stranger is told only that it is not one.)
        check_range(
            "last_timestamp_ms",
            last_timestamp_ms,
            0,
            node_now_ms.saturating_add(MAX_TOLERANCE_MS),
        )?;
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
        // Against the node's last clock reading, not the timestamps it
        // reported: those may lie ahead of its clock (a restarted holder
        // reports the reservation it resumes after), and its own floor
        // already keeps it from minting below them.
        if node_now_ms < slot.reported_clock_ms {
            return Err(Error::ClockBehindLastReport {
                worker_id: Some(worker_id),
                last_timestamp_ms: slot.reported_clock_ms,
                node_now_ms,
            });
        }
        let extends = registry_now_ms + ttl_ms > slot.expires_at_ms;
        slot.last_timestamp_ms = slot.last_timestamp_ms.max(last_timestamp_ms);
        slot.reported_clock_ms = node_now_ms;
        slot.reported_at_ms = registry_now_ms;
        slot.expires_at_ms = registry_now_ms + ttl_ms;
        let lease = Lease {
            worker_id,
            generation: claim.generation,
            node_key: slot.node_key.clone(),
            expires_at_ms: slot.expires_at_ms,
            issue_after_ms: slot.last_timestamp_ms,
            ttl_ms,
        };
        // A renewal that does not extend the lease (a second one within the
        // same ms, or under a registry clock that went back) is no event.
        if extends {
            let renewed = LeaseEvent::new(LeaseEventKind::Renewed, registry_now_ms, slot);
            self.events.push(renewed);
        }
        Ok(lease)
    }

    /// Gives a worker ID back for its holder (`owner`, presenting the hash
    /// of the grant's secret); it is free at once. The release's
    /// `last_timestamp_ms` is the latest timestamp issued under it, kept so
    /// the next holder issues after it — only the proved holder's word sets
    /// that floor, and while it lies further ahead than the skew bound the
    /// ID counts against the owner's share ([`Registry::withheld`]).
    ///
    /// # Errors
    /// As [`Registry::renew`]'s [`Error::LeaseNotHeld`] and
    /// [`Error::NotLeaseHolder`]; [`Error::ReservedWorkerId`] for a minter's
    /// grant; [`Error::OutOfRange`] for a
    /// `last_timestamp_ms` further ahead than its holder could have minted:
    /// the registry's clock (the grant's expiry, if earlier) + `max_skew_ms`
    /// + [`MAX_TOLERANCE_MS`].
    pub fn release(
        &mut self,
        owner: &str,
        release: &Renewal<Proof>,
        registry_now_ms: u64,
    ) -> Result<(), Error> {
        let max_skew_ms = self.config.max_skew_ms;
        self.not_a_minters(release.claim.worker_id, Some(release.claim.generation))?;
        let slot = self.held(owner, &release.claim)?;
        // No further ahead than its holder could have minted: by a clock
        // within the skew bound of the registry's now (and of the grant's
        // expiry, once it lapsed), plus the largest borrow or reservation.
        let latest = registry_now_ms
            .min(slot.expires_at_ms)
            .saturating_add(max_skew_ms + MAX_TOLERANCE_MS);
        check_range("last_timestamp_ms", release.last_timestamp_ms, 0, latest)?;
        slot.last_timestamp_ms = slot.last_timestamp_ms.max(release.last_timestamp_ms);
        if registry_now_ms >= slot.expires_at_ms {
            // Released after it lapsed: the holder's word is no better than
            // the lease's end, which bounds what it may have issued.
            slot.last_timestamp_ms = slot.last_timestamp_ms.max(slot.expires_at_ms);
        }
        slot.released = true;
        let released = LeaseEvent::new(LeaseEventKind::Released, registry_now_ms, slot);
        self.events.push(released);
        Ok(())
    }

    /// An operator's tool for a stuck node: ends the latest grant of
    /// `worker_id` without its holder. The holder is refused at its next
    /// renewal ([`Error::LeaseNotHeld`]: it stops), and since it may mint
    /// until then by its own clock, the ID is reused only after the grant's
    /// end ([`Registry::grant_end_ms`]: its expiry plus the largest skew)
    /// plus the grace period, and its next holder issues only after that
    /// end. Returns that end.
    ///
    /// # Errors
    /// [`Error::LeaseNotHeld`] when the ID has no grant to evict (never
    /// leased, released, already evicted, or free);
    /// [`Error::ReservedWorkerId`] for a minter's grant (the service's own).
    pub fn evict(&mut self, worker_id: u32, registry_now_ms: u64) -> Result<u64, Error> {
        self.not_a_minters(worker_id, None)?;
        let status = self
            .slot(worker_id)
            .map(|s| self.status(s, registry_now_ms));
        let slot = self
            .slots
            .get_mut(worker_id as usize)
            .and_then(Option::as_mut);
        match (slot, status) {
            (Some(s), Some(SlotStatus::Live | SlotStatus::Lapsed)) if !s.evicted => {
                s.evicted = true;
                s.secret = None;
                let end = s.expires_at_ms.saturating_add(self.config.max_skew_ms);
                let evicted = LeaseEvent::new(LeaseEventKind::Evicted, registry_now_ms, s);
                self.events.push(evicted);
                Ok(end)
            }
            (s, _) => Err(Error::LeaseNotHeld {
                worker_id,
                generation: s.map_or(0, |s| s.generation),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::holder::Renewal;
    use crate::secret::LeaseSecret;
    use sha2::{Digest, Sha256};

    const T: u64 = 1_700_000_000_000;
    const OWNER: &str = "team-a";

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

    /// Each grant's secret: unique per grant, known to the test.
    fn secret_of(generation: u64) -> LeaseSecret {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&generation.to_le_bytes());
        LeaseSecret::from_random(b)
    }

    /// The host's hash of a secret.
    fn sha256(s: &LeaseSecret) -> SecretHash {
        SecretHash(Sha256::digest(s.as_bytes()).into())
    }

    /// The hash of grant `generation`'s secret.
    fn hash_of(generation: u64) -> SecretHash {
        sha256(&secret_of(generation))
    }

    fn proof(l: &Lease) -> Proof {
        Proof {
            worker_id: l.worker_id,
            generation: l.generation,
            secret_hash: Some(hash_of(l.generation)),
        }
    }

    fn rn(claim: Proof, node_now_ms: u64, last_timestamp_ms: u64) -> Renewal<Proof> {
        Renewal {
            claim,
            node_now_ms,
            last_timestamp_ms,
        }
    }

    /// Leases as `OWNER` with a fresh secret.
    fn lease(
        r: &mut Registry,
        key: &str,
        node_now: u64,
        reg_now: u64,
        previous: Option<Proof>,
    ) -> Result<Lease, Error> {
        let ask = GrantRequest {
            owner: OWNER,
            node_key: key,
            node_now_ms: node_now,
            previous,
            secret_hash: hash_of(r.next_generation()),
        };
        r.lease(ask, reg_now)
    }

    #[test]
    fn lowest_free_id_and_no_sharing() {
        let mut r = reg(3);
        let ids: Vec<u32> = ["a", "b", "c"]
            .iter()
            .map(|k| lease(&mut r, k, T, T, None).unwrap().worker_id)
            .collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(
            lease(&mut r, "d", T, T, None),
            Err(Error::NoFreeWorkerId { capacity: 3 })
        );
        // "a" again without proof: its ID is live, so it gets none.
        assert!(lease(&mut r, "a", T, T, None).is_err());
    }

    #[test]
    fn lease_expiry_at_ttl_and_recycling_after_grace() {
        let mut r = reg(1);
        let a = lease(&mut r, "a", T, T, None).unwrap();
        assert_eq!(a.expires_at_ms, T + 10_000);
        // TTL − 1 ms: renewal works.
        let a = r
            .renew(OWNER, &rn(proof(&a), T + 9_999, T + 9_000), T + 9_999)
            .unwrap();
        // TTL + 1 ms after that renewal: refused, the node must stop.
        let lapsed_at = a.expires_at_ms;
        assert_eq!(
            r.renew(OWNER, &rn(proof(&a), lapsed_at + 1, T), lapsed_at + 1),
            Err(Error::LeaseExpired {
                worker_id: 0,
                expired_at_ms: lapsed_at,
                now_ms: lapsed_at + 1
            })
        );
        // Exactly at TTL it has lapsed too.
        assert!(r
            .renew(OWNER, &rn(proof(&a), lapsed_at, T), lapsed_at)
            .is_err());
        // Within the grace period nobody else gets it.
        let g = lapsed_at + 5_000;
        assert!(matches!(
            lease(&mut r, "b", g - 1, g - 1, None),
            Err(Error::NoFreeWorkerId { .. })
        ));
        // After TTL + grace it is recycled, issuing only after the old lease's end.
        let b = lease(&mut r, "b", g, g, None).unwrap();
        assert_eq!(b.worker_id, 0);
        assert!(b.generation > a.generation);
        assert_eq!(b.issue_after_ms, lapsed_at);
        // The old holder is fenced off.
        assert!(matches!(
            r.renew(OWNER, &rn(proof(&a), g, g), g),
            Err(Error::LeaseNotHeld { .. })
        ));
    }

    #[test]
    fn a_node_gets_its_previous_id_back_once_its_grant_is_no_longer_live() {
        let mut r = reg(4);
        lease(&mut r, "x", T, T, None).unwrap();
        let a = lease(&mut r, "a", T, T, None).unwrap();
        // With proof while the grant is live: another ID (the proof may be
        // a copy, held by a second process still minting under it), and
        // the grant stays its holder's.
        let other = lease(&mut r, "a", T + 1, T + 1, Some(proof(&a))).unwrap();
        assert_ne!(other.worker_id, a.worker_id);
        assert!(r.renew(OWNER, &rn(proof(&a), T + 2, T + 1), T + 2).is_ok());
        // Lapsed, not yet free: the proof takes it back, issuing after its
        // expiry, though the node's clock lags behind that.
        let lapsed_at = T + 2 + 10_000;
        let again = lease(&mut r, "a", lapsed_at - 500, lapsed_at + 1, Some(proof(&a))).unwrap();
        assert_eq!(again.worker_id, a.worker_id);
        assert!(again.generation > a.generation);
        assert_eq!(again.issue_after_ms, lapsed_at);
        // Released: free, and it comes back to the same node.
        r.release(OWNER, &rn(proof(&again), 0, lapsed_at), lapsed_at + 2)
            .unwrap();
        let third = lease(&mut r, "a", lapsed_at + 3, lapsed_at + 3, None).unwrap();
        assert_eq!(third.worker_id, a.worker_id);
        assert_eq!(third.issue_after_ms, lapsed_at);
    }

    #[test]
    fn only_the_holder_renews_releases_or_reclaims() {
        let mut r = reg(4);
        let a = lease(&mut r, "a", T, T, None).unwrap();
        let before = r.clone();
        let wrong = Proof {
            secret_hash: Some(hash_of(999)),
            ..proof(&a)
        };
        let none = Proof {
            secret_hash: None,
            ..proof(&a)
        };
        let secret_refused = Error::NotLeaseHolder {
            worker_id: a.worker_id,
            mismatch: "secret",
        };
        let owner_refused = Error::NotLeaseHolder {
            worker_id: a.worker_id,
            mismatch: "owner",
        };
        for p in [wrong, none] {
            assert_eq!(
                r.renew(OWNER, &rn(p, T + 1, T), T + 1).unwrap_err(),
                secret_refused
            );
            assert_eq!(
                r.release(OWNER, &rn(p, 0, T), T + 1).unwrap_err(),
                secret_refused
            );
            assert_eq!(
                lease(&mut r, "a", T + 1, T + 1, Some(p)).unwrap_err(),
                secret_refused
            );
        }
        // The right secret under another credential is refused too.
        assert_eq!(
            r.renew("team-b", &rn(proof(&a), T + 1, T), T + 1)
                .unwrap_err(),
            owner_refused
        );
        assert_eq!(
            r.release("team-b", &rn(proof(&a), 0, T), T + 1)
                .unwrap_err(),
            owner_refused
        );
        // Nothing changed: the holder's lease is as it was, and it renews.
        assert_eq!(r, before);
        assert!(r.renew(OWNER, &rn(proof(&a), T + 2, T + 1), T + 2).is_ok());
        // A proof of a grant that is gone is no proof (and no refusal): the
        // node gets a fresh ID.
        let g = T + 2 + 10_000 + 5_000;
        let later = lease(&mut r, "z", g, g, Some(wrong)).unwrap();
        assert_eq!(later.worker_id, 0);
    }

    #[test]
    fn eviction_stops_the_holder_and_fences_past_its_end_plus_skew() {
        let mut r = reg(1);
        let a = lease(&mut r, "a", T, T, None).unwrap();
        assert!(matches!(r.evict(0, T + 100), Ok(end) if end == a.expires_at_ms + 1_000));
        assert!(r.evict(0, T + 100).is_err(), "evicted twice");
        // The holder is refused at its next renewal, so it stops.
        assert!(matches!(
            r.renew(OWNER, &rn(proof(&a), T + 200, T + 100), T + 200),
            Err(Error::LeaseNotHeld { .. })
        ));
        assert_eq!(r.status(r.slot(0).unwrap(), T + 200), SlotStatus::Lapsed);
        // Reused only after its end (expiry + skew) + grace, issuing after the end.
        let free_at = a.expires_at_ms + 1_000 + 5_000;
        assert!(lease(&mut r, "b", free_at - 1, free_at - 1, None).is_err());
        let b = lease(&mut r, "b", free_at, free_at, None).unwrap();
        assert_eq!(b.issue_after_ms, a.expires_at_ms + 1_000);
        // Nothing to evict on a free or never-leased ID.
        assert!(reg(2).evict(1, T).is_err());
    }

    #[test]
    fn grants_from_before_secrets_are_fenced_and_only_minters_reclaim_them() {
        let mut r = Registry::new(RegistryConfig {
            minters: 1,
            ..*reg(3).config()
        })
        .unwrap();
        let m = r.lease_minter(0, T, None, hash_of(1), T).unwrap();
        let n = lease(&mut r, "n", T, T, None).unwrap();
        // As an old store has them: no secret.
        let slots: Vec<WorkerSlot> = r
            .slots()
            .cloned()
            .map(|s| WorkerSlot { secret: None, ..s })
            .collect();
        let mut r = Registry::from_parts(*r.config(), r.next_generation(), slots).unwrap();
        let legacy = |l: &Lease| Proof {
            secret_hash: None,
            ..proof(l)
        };
        // Nobody renews or releases them, with or without a secret.
        assert!(r.renew(OWNER, &rn(legacy(&n), T + 1, T), T + 1).is_err());
        assert!(r.renew(OWNER, &rn(proof(&n), T + 1, T), T + 1).is_err());
        assert!(r.release(OWNER, &rn(legacy(&n), 0, T), T + 1).is_err());
        // The node that held it, restarting without a secret, gets another
        // ID while it is live (no refusal: it had nothing to prove with).
        let n2 = lease(&mut r, "n", T + 1, T + 1, Some(legacy(&n))).unwrap();
        assert_ne!(n2.worker_id, n.worker_id);
        // A minter reclaims its own by generation (it is the service's own).
        let m2 = r
            .lease_minter(0, T + 2, Some(legacy(&m)), hash_of(7), T + 2)
            .unwrap();
        assert_eq!((m2.worker_id, m2.issue_after_ms), (0, T + 2));
        // The legacy grant lapses, then is fenced at expiry + skew.
        let free_at = n.expires_at_ms + 1_000 + 5_000;
        r.release(OWNER, &rn(proof(&n2), 0, T + 5), T + 5).unwrap();
        assert!(
            lease(&mut r, "x", free_at - 1, free_at - 1, None)
                .unwrap()
                .worker_id
                != n.worker_id
        );
        let x = lease(&mut r, "y", free_at, free_at, None).unwrap();
        assert_eq!(
            (x.worker_id, x.issue_after_ms),
            (n.worker_id, n.expires_at_ms + 1_000)
        );
    }

    #[test]
    fn clock_checks_refuse_bad_nodes() {
        let mut r = reg(8);
        assert!(matches!(
            lease(&mut r, "a", T + 1_001, T, None),
            Err(Error::ClockSkew {
                reference: ClockReference::Registry,
                ..
            })
        ));
        // Two live nodes running 900 ms ahead of the registry.
        lease(&mut r, "a", T + 900, T, None).unwrap();
        lease(&mut r, "b", T + 900, T, None).unwrap();
        // Within 1 s of the registry, but 1.1 s behind the live average.
        assert!(matches!(
            lease(&mut r, "c", T - 200, T, None),
            Err(Error::ClockSkew {
                reference: ClockReference::LiveNodesAverage,
                ..
            })
        ));
        assert!(lease(&mut r, "c", T + 500, T, None).is_ok());
    }

    #[test]
    fn a_clock_behind_the_last_report_is_refused() {
        let mut r = reg(1);
        let a = lease(&mut r, "a", T, T, None).unwrap();
        let a = r
            .renew(OWNER, &rn(proof(&a), T + 2_000, T + 1_999), T + 2_000)
            .unwrap();
        // The node's clock went back 500 ms since its last report.
        assert!(matches!(
            r.renew(OWNER, &rn(proof(&a), T + 1_500, T + 1_500), T + 2_500),
            Err(Error::ClockBehindLastReport { .. })
        ));
        r.release(OWNER, &rn(proof(&a), 0, T + 1_999), T + 2_600)
            .unwrap();
        // A restart whose clock is behind the last issued timestamp: refused.
        assert!(matches!(
            lease(&mut r, "a", T + 1_000, T + 1_500, None),
            Err(Error::ClockBehindLastReport { .. })
        ));
    }

    #[test]
    fn a_timestamp_far_ahead_cannot_fence_a_worker_id_for_ever() {
        let mut r = reg(2);
        let a = lease(&mut r, "a", T, T, None).unwrap();
        let far = T + 9_000_000_000_000;
        assert!(matches!(
            r.renew(OWNER, &rn(proof(&a), T + 1, far), T + 1),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            r.release(OWNER, &rn(proof(&a), T + 1, far), T + 1),
            Err(Error::OutOfRange { .. })
        ));
        // The most a release may report: what its holder could have minted
        // by a clock within the skew bound of the registry's, borrowing the
        // most. Its ID is then passed over by other nodes (not refused),
        // counts against its owner's share while the floor is ahead, and
        // only its own node is refused.
        let most = T + 2 + 1_000 + MAX_TOLERANCE_MS;
        assert!(matches!(
            r.release(OWNER, &rn(proof(&a), T + 1, most + 1), T + 2),
            Err(Error::OutOfRange { .. })
        ));
        r.release(OWNER, &rn(proof(&a), T + 1, most), T + 2)
            .unwrap();
        assert!(r.withheld(r.slot(a.worker_id).unwrap(), T + 2));
        assert_eq!(r.withheld_by(OWNER, most - 1_001), 1);
        assert_eq!(r.withheld_by(OWNER, most - 1_000), 0);
        let b = lease(&mut r, "b", T + 3, T + 3, None).unwrap();
        assert_ne!(b.worker_id, a.worker_id);
        assert!(matches!(
            lease(&mut r, "a", T + 3, T + 3, None),
            Err(Error::ClockBehindLastReport { .. })
        ));
        // Another credential, even naming an old generation, learns nothing.
        assert!(matches!(
            r.renew("team-b", &rn(proof(&a), T + 4, T), T + 4),
            Err(Error::NotLeaseHolder {
                mismatch: "owner",
                ..
            })
        ));
    }

    #[test]
    fn a_freed_id_whose_floor_is_a_little_ahead_is_granted_to_wait_for() {
        let mut r = reg(1);
        let a = lease(&mut r, "a", T, T, None).unwrap();
        r.release(OWNER, &rn(proof(&a), T, T + 800), T).unwrap();
        // Another node, its clock 100 ms behind the registry's: no refusal,
        // no "no free ID": it issues after the floor.
        let b = lease(&mut r, "b", T - 100, T + 1, None).unwrap();
        assert_eq!((b.worker_id, b.issue_after_ms), (0, T + 800));
        // A floor further ahead than the skew bound keeps it from others.
        r.release(OWNER, &rn(proof(&b), T + 1, T + 1_002), T + 1)
            .unwrap();
        assert!(matches!(
            lease(&mut r, "c", T + 1, T + 1, None),
            Err(Error::NoFreeWorkerId { .. })
        ));
        assert_eq!(r.withheld_by(OWNER, T + 1), 1);
        assert_eq!(lease(&mut r, "c", T + 2, T + 2, None).unwrap().worker_id, 0);
    }

    #[test]
    fn a_holder_reporting_timestamps_ahead_of_its_clock_is_renewed_again() {
        // A restarted holder resumes after its saved reservation, up to a
        // few seconds ahead of its clock, and reports that as issued.
        let mut r = reg(1);
        let a = lease(&mut r, "a", T, T, None).unwrap();
        r.renew(OWNER, &rn(proof(&a), T + 1_000, T + 3_000), T + 1_000)
            .unwrap();
        let again = r.renew(OWNER, &rn(proof(&a), T + 2_000, T + 3_000), T + 2_000);
        assert_eq!(again.map(|l| l.issue_after_ms), Ok(T + 3_000));
    }

    #[test]
    fn reserved_ids_go_to_their_minters_only() {
        let mut r = Registry::new(RegistryConfig {
            minters: 2,
            ..*reg(4).config()
        })
        .unwrap();
        // Others draw from 2..4 only, and may not pose as minters.
        assert_eq!(lease(&mut r, "a", T, T, None).unwrap().worker_id, 2);
        assert_eq!(lease(&mut r, "b", T, T, None).unwrap().worker_id, 3);
        assert_eq!(
            lease(&mut r, "c", T, T, None),
            Err(Error::NoFreeWorkerId { capacity: 4 })
        );
        assert_eq!(
            lease(&mut r, "minter:0", T, T, None),
            Err(Error::ReservedNodeKey {
                prefix: MINTER_KEY_PREFIX
            })
        );
        // Minter i gets worker ID i however full the rest is.
        let m1 = r
            .lease_minter(1, T, None, hash_of(r.next_generation()), T)
            .unwrap();
        assert_eq!((m1.worker_id, m1.node_key.as_str()), (1, "minter:1"));
        assert!(matches!(
            r.lease_minter(2, T, None, hash_of(0), T),
            Err(Error::OutOfRange { .. })
        ));
        // A restarted minter proves its grant and keeps its ID; one that
        // cannot prove it waits for the lapse like anyone else.
        let next = hash_of(r.next_generation());
        let again = r
            .lease_minter(1, T + 5, Some(proof(&m1)), next, T + 5)
            .unwrap();
        assert_eq!(again.worker_id, 1);
        assert_eq!(again.issue_after_ms, T + 5);
        assert!(r.lease_minter(1, T + 6, None, hash_of(0), T + 6).is_err());
        // Claim of a reserved ID does not get an ordinary node into it.
        assert!(lease(&mut r, "a", T, T, Some(proof(&again))).is_err());
        // A node that held an ID before it was reserved keeps it until it
        // lapses; the minter waits.
        let mut small = reg(4);
        let x = lease(&mut small, "x", T, T, None).unwrap();
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
        assert!(grown.lease_minter(0, T, None, hash_of(0), T).is_err());
        let later = T + 10_000 + 5_000;
        let m0 = grown
            .lease_minter(0, later, None, hash_of(0), later)
            .unwrap();
        assert_eq!((m0.worker_id, m0.issue_after_ms), (0, T + 10_000));
    }

    #[test]
    fn a_minters_grant_is_never_released_reclaimed_or_evicted_by_anyone_else() {
        let mut r = Registry::new(RegistryConfig {
            minters: 1,
            ..*reg(3).config()
        })
        .unwrap();
        let m = r.lease_minter(0, T, None, hash_of(1), T).unwrap();
        let before = r.clone();
        let refused = Error::ReservedWorkerId { worker_id: 0 };
        // Named as `previous`, with the right secret or not, by a node or by
        // the service's own isolates (owner ""): refused, not passed over.
        let mut wrong = proof(&m);
        wrong.secret_hash = Some(hash_of(9));
        for (owner, p) in [(OWNER, proof(&m)), ("", proof(&m)), (OWNER, wrong)] {
            let ask = GrantRequest {
                owner,
                node_key: "n",
                node_now_ms: T,
                previous: Some(p),
                secret_hash: hash_of(5),
            };
            assert_eq!(r.lease(ask, T + 1), Err(refused.clone()));
            assert_eq!(r.release(owner, &rn(p, T, T), T + 1), Err(refused.clone()));
        }
        // Nor does the operator evict it.
        assert_eq!(r.evict(0, T + 1), Err(refused.clone()));
        // A node's own older grant of that ID (from before it was reserved)
        // is a stale proof, passed over as any other.
        let stale = Proof {
            generation: m.generation - 1,
            ..proof(&m)
        };
        let ask = GrantRequest {
            owner: OWNER,
            node_key: "n",
            node_now_ms: T,
            previous: Some(stale),
            secret_hash: hash_of(6),
        };
        assert!(r.clone().lease(ask, T + 1).is_ok());
        assert_eq!(r, before);
        // The minter renews and reclaims it as before.
        assert!(r.renew("", &rn(proof(&m), T + 2, T + 1), T + 2).is_ok());
        let again = r.lease_minter(0, T + 3, Some(proof(&m)), hash_of(2), T + 3);
        assert_eq!(again.map(|l| l.worker_id), Ok(0));
    }

    #[test]
    fn per_owner_is_never_passed_by_proving_a_live_grant_under_another_key() {
        let mut r = Registry::new(RegistryConfig {
            per_owner: Some(1),
            ..*reg(4).config()
        })
        .unwrap();
        let a = lease(&mut r, "a", T, T, None).unwrap();
        // Proved, but under another node key: another ID would be a second.
        assert_eq!(
            lease(&mut r, "b", T + 1, T + 1, Some(proof(&a))),
            Err(Error::WorkerIdLimit { limit: 1 })
        );
        assert_eq!(r.withheld_by(OWNER, T + 1), 1);
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
            secret: None,
            evicted: false,
        };
        assert!(Registry::from_parts(ok, 5, [slot.clone()]).is_err());
        let mut r = reg(2);
        lease(&mut r, "a", T, T, None).unwrap();
        let back =
            Registry::from_parts(*r.config(), r.next_generation(), r.slots().cloned()).unwrap();
        assert_eq!(back, r);
    }
}
