//! The lease holder's rules, tested once, through the public API: holders
//! (`SnowflakeHolder`) race for a few worker IDs of a real `Registry`, with
//! clocks stepping back and forward (small and large), answers lost, late and
//! reordered, leases lapsing, renewals refused, and restarts from saved state.
//!
//! The store is written only when a holder asks (a reservation about once a
//! second), saves may be lost, and a clock may step back across a restart.
//!
//! Each node leases under a credential (two nodes share one), and two more
//! actors join: an operator who evicts live leases, and a hostile node that
//! knows every public value (worker IDs, generations, node keys, owners) and
//! tries to renew, release and reclaim other nodes' leases, with guessed
//! secrets, no secret, or the right owner's name.
//!
//! A restart whose restore is refused (the clock is behind the saved
//! reservation) leaves the process down, minting nothing and hearing no
//! answer, until a later restart succeeds.
//!
//! How people deploy it (issue 24): nodes 0 and 1 may be two processes
//! started from one config — the same credential and node key — sharing one
//! store (both read and write it), or each restarting from a copy of the
//! other's store. Each may then hold the other's saved grant, secret and all.
//!
//! Invariants: no ID twice; no ID minted by a holder whose lease lapsed by its
//! own clock or whose refusal it had heard; IDs strictly increasing per holder,
//! across its restarts; every hostile attempt refused and changing nothing.
//!
//! Liveness, so that a holder refusing everything cannot pass: after the
//! random schedule, a calm phase (clocks in sync and past everything read or
//! reserved, every answer delivered at once, every save durable, a supervisor
//! restarting processes that are down or stopped). In it every restart
//! succeeds, exactly `min(nodes, worker IDs)` nodes mint, each from within
//! `CALM_DEADLINE` rounds, and then in every round until the end.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::{HashMap, HashSet};

use edgeleaf::{
    holder::Grant, holder::HolderConfig, holder::HolderNext, holder::HolderState, holder::Renewal,
    holder::SnowflakeHolder, rand::RandSource, rand::SplitMix64, registry::GrantRequest,
    registry::Registry, registry::RegistryConfig, registry::SlotStatus, secret::Claim,
    secret::LeaseSecret, Error, Layout,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

#[path = "support/secrets.rs"]
mod secrets;
use secrets::sha256;

const T0: u64 = 1_735_689_600_000;
const LAYOUT: Layout = Layout::LEAF;

#[derive(Debug, Clone)]
enum Op {
    /// Registry time passes (every node's clock moves with it).
    Tick(u64),
    /// Node n's clock steps by this many ms (back or forward).
    Step(usize, i64),
    /// Node n asks for this many IDs (and sends what the holder asks to
    /// send); first, when a save is due, its store saves (or fails to).
    Poll(usize, usize, bool),
    /// The k-th answer in flight arrives.
    Deliver(usize),
    /// The k-th answer in flight is lost.
    Lose(usize),
    /// Node n's store saves what its holder asks (or the save is lost).
    Save(usize, bool),
    /// Node n dies, its clock steps by this much, and it restarts from its
    /// saved state.
    Restart(usize, i64),
    /// The operator evicts the k-th slot's grant (if it has one to evict).
    Evict(usize),
    /// The hostile node attacks the k-th slot's grant.
    Attack(usize, Attack),
}

/// What the hostile node tries: renew, release or reclaim (lease with the
/// grant as `previous`, under its node key), presenting a guessed secret,
/// none, or the real one (leaked) under its own credential; with a guess or
/// none, as itself or under the holder's owner name.
#[derive(Debug, Clone, Copy)]
struct Attack {
    kind: u8,
    secret: Secret,
    as_owner: bool,
}

#[derive(Debug, Clone, Copy)]
enum Secret {
    None,
    Guess(u64),
    Leaked,
}

#[derive(Debug)]
enum Answer {
    Lease(Result<(edgeleaf::registry::Lease, LeaseSecret), Error>),
    Renew(u64, Result<edgeleaf::registry::Lease, Error>),
}

/// Node n's credential: nodes 0 and 1 share one.
fn owner(n: usize) -> String {
    format!("owner-{}", n.max(1))
}

fn random_secret(rng: &mut SplitMix64) -> LeaseSecret {
    let mut b = [0u8; 16];
    for chunk in b.chunks_mut(4) {
        chunk.copy_from_slice(&rng.next_u32().to_le_bytes());
    }
    LeaseSecret::from_random(b)
}

struct Node {
    /// `None`: the process is down. Its last restart was refused (the clock
    /// is behind its saved reservation), and it stays down until a later
    /// restart succeeds, as the npm client's `open` throws and a minter's
    /// Durable Object answers errors until its restore succeeds.
    holder: Option<SnowflakeHolder<SplitMix64>>,
    offset: i64,
    /// Bumped each time the process dies: answers to an earlier one are
    /// delivered to nobody.
    incarnation: u32,
    /// The last ID minted by any incarnation.
    last_id: u64,
    /// Generations whose refusal this node has heard.
    refused: HashSet<u64>,
}

fn op(nodes: usize) -> impl Strategy<Value = Op> {
    let step = prop_oneof![
        -6i64..=6,
        -3_000i64..3_000,
        Just(-600_000i64),
        Just(600_000i64)
    ];
    prop_oneof![
        4 => prop_oneof![0u64..300, 0u64..3_000].prop_map(Op::Tick),
        1 => (0u64..2).prop_map(Op::Tick),
        2 => (0..nodes, step).prop_map(|(n, d)| Op::Step(n, d)),
        10 => (0..nodes, prop_oneof![1usize..50, 1usize..5000], prop::bool::weighted(0.9)).prop_map(|(n, k, ok)| Op::Poll(n, k, ok)),
        5 => any::<usize>().prop_map(Op::Deliver),
        1 => any::<usize>().prop_map(Op::Lose),
        3 => (0..nodes, any::<bool>()).prop_map(|(n, ok)| Op::Save(n, ok)),
        1 => (0..nodes, prop_oneof![Just(0i64), -3_000i64..3_000]).prop_map(|(n, d)| Op::Restart(n, d)),
        1 => any::<usize>().prop_map(Op::Evict),
        3 => (any::<usize>(), 0u8..3, prop_oneof![Just(Secret::None), any::<u64>().prop_map(Secret::Guess), Just(Secret::Leaked)], any::<bool>())
            .prop_map(|(k, kind, secret, as_owner)| Op::Attack(k, Attack { kind, secret, as_owner })),
    ]
}

/// The schedule of two processes sharing a store: time passing in steps of
/// up to a few seconds, both minting (answers mostly delivered at once),
/// saves, small clock steps, and restarts of either from the store.
fn shared_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop_oneof![0u64..500, 0u64..4_000].prop_map(Op::Tick),
        1 => (0..2usize, -300i64..300).prop_map(|(n, d)| Op::Step(n, d)),
        10 => (0..2usize, prop_oneof![1usize..50, 1usize..2000], prop::bool::weighted(0.95)).prop_map(|(n, k, ok)| Op::Poll(n, k, ok)),
        8 => Just(Op::Deliver(0)),
        1 => any::<usize>().prop_map(Op::Lose),
        2 => (0..2usize, prop::bool::weighted(0.9)).prop_map(|(n, ok)| Op::Save(n, ok)),
        2 => (0..2usize, prop_oneof![Just(0i64), -500i64..500]).prop_map(|(n, d)| Op::Restart(n, d)),
    ]
}

const RESERVE_MS: u64 = 3_000;

fn config(lease_again: bool) -> HolderConfig {
    HolderConfig {
        lease_again,
        reserve_ms: RESERVE_MS,
        ..HolderConfig::default()
    }
}

/// How nodes 0 and 1 share a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Share {
    /// Each node has its own store and node key.
    Nothing,
    /// Two processes with one node key and one store (a file both write).
    OneStore,
    /// Two processes with one node key; node 1's store is copied from node
    /// 0's each time node 1 restarts (a container image, a copied file).
    Copies,
}

/// Node n's node key: nodes 0 and 1 share one unless `share` is `Nothing`.
fn node_key(share: Share, n: usize) -> String {
    let n = if share != Share::Nothing && n == 1 {
        0
    } else {
        n
    };
    format!("node-{n}")
}

fn clock(now: u64, offset: i64) -> u64 {
    now.saturating_add_signed(offset)
}

/// What a node's poll came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polled {
    /// The process is down.
    Down,
    /// The holder stopped (its lease lapsed or was refused, and it does not
    /// lease again).
    Stopped,
    /// This many IDs minted (maybe 0).
    Minted(usize),
}

/// The calm phase after the random schedule: clocks in sync, every answer
/// delivered at once, every save durable, a supervisor restarting processes
/// that are down or stopped, each node polled every `CALM_STEP_MS`.
const CALM_STEP_MS: u64 = 100;
/// 15 s: past a renewal (half the TTL) and a dozen reservations.
const CALM_ROUNDS: usize = 150;
/// By this round every node that can get a worker ID has minted: a few
/// rounds to lease and save, and a restart waits out its saved reservation
/// (at most `RESERVE_MS`; a holder whose lease lapsed unnoticed may have
/// reserved that far ahead just before it stopped).
const CALM_DEADLINE: usize = (RESERVE_MS / CALM_STEP_MS) as usize + 4;
const CALM_BATCH: usize = 16;

struct World {
    lease_again: bool,
    capacity: u32,
    reg: Registry,
    nodes: Vec<Node>,
    now: u64,
    /// The latest clock reading of any node: every timestamp issued, saved or
    /// reported lies at most `RESERVE_MS` (and a time unit) past it.
    latest_clock: u64,
    seen: HashSet<u64>,
    in_flight: Vec<(usize, u32, Answer)>,
    out: Vec<u64>,
    minted_under: HashMap<(u32, u64), usize>,
    /// (worker, generation) -> first and last time unit minted under it.
    ranges: HashMap<(u32, u64), (u64, u64)>,
    /// The registry's host: draws each grant's secret.
    secrets: SplitMix64,
    granted: HashMap<(u32, u64), LeaseSecret>,
    share: Share,
    /// What each node's store holds: written only when the holder asks for
    /// a save (so usually stale), as the JS client's store is.
    stores: Vec<HolderState>,
}

impl World {
    fn new(capacity: u32, lease_again: bool, offsets: &[i64], share: Share) -> World {
        let reg_cfg = RegistryConfig {
            capacity,
            ttl_ms: 10_000,
            grace_ms: 2_000,
            max_skew_ms: 1_000,
            minters: 0,
            per_owner: None,
            lenders: 0,
            lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
        };
        let nodes = offsets
            .iter()
            .enumerate()
            .map(|(i, &offset)| Node {
                holder: Some(
                    SnowflakeHolder::with_rand(config(lease_again), SplitMix64::new(i as u64))
                        .unwrap(),
                ),
                offset,
                incarnation: 0,
                last_id: 0,
                refused: HashSet::new(),
            })
            .collect();
        World {
            lease_again,
            capacity,
            reg: Registry::new(reg_cfg).unwrap(),
            nodes,
            now: T0,
            latest_clock: T0,
            seen: HashSet::new(),
            in_flight: Vec::new(),
            out: vec![0u64; 5000],
            minted_under: HashMap::new(),
            ranges: HashMap::new(),
            secrets: SplitMix64::new(capacity.into()),
            granted: HashMap::new(),
            share,
            stores: vec![HolderState::default(); offsets.len()],
        }
    }

    /// The store node n reads and writes.
    fn store_of(&self, n: usize) -> usize {
        if self.share == Share::OneStore && n == 1 {
            0
        } else {
            n
        }
    }

    /// Node n's store saves what its holder asks, or fails to.
    fn save(&mut self, n: usize, at: u64, ok: bool) {
        let store = self.store_of(n);
        let Some(holder) = self.nodes[n].holder.as_mut() else {
            return;
        };
        if let Some(state) = holder.save_request(at) {
            if ok {
                self.stores[store] = state;
                holder.saved(&state);
            } else {
                holder.save_failed();
            }
        }
    }

    /// Node n's clock now.
    fn clock(&mut self, n: usize) -> u64 {
        let at = clock(self.now, self.nodes[n].offset);
        self.latest_clock = self.latest_clock.max(at);
        at
    }

    /// Node n asks for `k` IDs (and sends what the holder asks to send);
    /// first, when a save is due, its store saves (or fails to). Checks
    /// every ID minted.
    fn poll(&mut self, n: usize, k: usize, store_ok: bool) -> Result<Polled, TestCaseError> {
        let at = self.clock(n);
        if self.nodes[n].holder.is_none() {
            return Ok(Polled::Down);
        }
        if self.nodes[n]
            .holder
            .as_ref()
            .and_then(|h| h.save_due_in(at))
            == Some(0)
        {
            self.save(n, at, store_ok);
        }
        let node = &mut self.nodes[n];
        let holder = node.holder.as_mut().expect("up");
        let lease_before = holder.lease().copied();
        let poll = match holder.poll(at, &mut self.out[..k]) {
            Ok(p) => p,
            Err(Error::LeaseExpired { .. } | Error::LeaseLost { .. }) => {
                prop_assert!(!self.lease_again, "a holder that leases again never stops");
                return Ok(Polled::Stopped);
            }
            Err(Error::ClockMovedBackwards { .. } | Error::ClockBeforeEpoch { .. }) => {
                return Ok(Polled::Minted(0))
            }
            Err(e) => panic!("unexpected {e}"),
        };
        if poll.filled > 0 {
            let grant = holder.lease().copied().expect("minted without a lease");
            prop_assert_eq!(
                Some(grant),
                lease_before
                    .filter(|g| g.generation == grant.generation)
                    .or(Some(grant))
            );
            prop_assert!(
                at < grant.expires_at_ms,
                "minted at {} under a lease that ended at {}",
                at,
                grant.expires_at_ms
            );
            prop_assert!(
                !node.refused.contains(&grant.generation),
                "minted after hearing a refusal"
            );
            // One holder per grant, ever.
            let owner = *self
                .minted_under
                .entry((grant.worker_id, grant.generation))
                .or_insert(n);
            prop_assert_eq!(owner, n);
            let first_ms = LAYOUT.decompose(self.out[0]).unwrap().timestamp_ms;
            let last_ms = LAYOUT
                .decompose(self.out[poll.filled - 1])
                .unwrap()
                .timestamp_ms;
            let range = self
                .ranges
                .entry((grant.worker_id, grant.generation))
                .or_insert((first_ms, last_ms));
            range.1 = last_ms;
            let (a, b) = *range;
            // Under one worker ID, grants mint in disjoint stretches of time.
            for (&(w, g), &(c, d)) in &self.ranges {
                prop_assert!(
                    w != grant.worker_id || g == grant.generation || d < a || b < c,
                    "worker {}: generation {} minted in {}..={}, generation {} in {}..={}",
                    w,
                    g,
                    c,
                    d,
                    grant.generation,
                    a,
                    b
                );
            }
            for &id in &self.out[..poll.filled] {
                prop_assert!(self.seen.insert(id), "ID {} twice (node {})", id, n);
                prop_assert!(
                    id > node.last_id,
                    "node {}: {} after {}",
                    n,
                    id,
                    node.last_id
                );
                prop_assert_eq!(LAYOUT.decompose(id).unwrap().worker_id, grant.worker_id);
                node.last_id = id;
            }
        }
        if let Some(r) = poll.renew {
            let answer = self.reg.renew(&owner(n), &r.proof(sha256), self.now);
            self.in_flight.push((
                n,
                node.incarnation,
                Answer::Renew(r.claim.generation, answer),
            ));
        }
        if let HolderNext::Lease(ask) = poll.next {
            let secret = random_secret(&mut self.secrets);
            let (who, key) = (owner(n), node_key(self.share, n));
            let answer = self.reg.lease(
                GrantRequest::from_ask(&ask, &who, &key, &secret, sha256),
                self.now,
            );
            if let Ok(l) = &answer {
                self.granted.insert((l.worker_id, l.generation), secret);
            }
            self.in_flight.push((
                n,
                node.incarnation,
                Answer::Lease(answer.map(|l| (l, secret))),
            ));
        }
        Ok(Polled::Minted(poll.filled))
    }

    /// The k-th answer in flight arrives.
    fn deliver(&mut self, k: usize) {
        let (n, incarnation, answer) = self.in_flight.remove(k % self.in_flight.len());
        let at = self.clock(n);
        let node = &mut self.nodes[n];
        let Some(holder) = node.holder.as_mut() else {
            return;
        };
        if node.incarnation != incarnation {
            return; // the process that asked is gone
        }
        match answer {
            Answer::Lease(Ok((lease, secret))) => {
                let _ = holder.granted(Grant::from_lease(&lease, Some(secret), LAYOUT), at);
            }
            Answer::Lease(Err(e)) => {
                holder.lease_failed(Some(e.error_code()), at);
            }
            Answer::Renew(_, Ok(lease)) => {
                holder.renewed(Grant::from_lease(&lease, None, LAYOUT), at);
            }
            Answer::Renew(generation, Err(e)) => {
                if matches!(
                    e,
                    Error::LeaseNotHeld { .. }
                        | Error::LeaseExpired { .. }
                        | Error::ClockSkew { .. }
                        | Error::ClockBehindLastReport { .. }
                ) && holder.lease().is_some_and(|g| g.generation == generation)
                {
                    node.refused.insert(generation);
                }
                holder.renewal_failed(generation, Some(e.error_code()), at);
            }
        }
    }

    /// Node n's process dies (if it was up), its clock steps by `step`, and
    /// it restarts from its store. Returns whether it is up: a refused
    /// restore leaves it down.
    fn restart(&mut self, n: usize, step: i64) -> Result<bool, TestCaseError> {
        self.nodes[n].offset += step;
        let at = self.clock(n);
        if self.share == Share::Copies && n == 1 {
            self.stores[1] = self.stores[0];
        }
        let saved = self.stores[self.store_of(n)];
        let node = &mut self.nodes[n];
        node.incarnation += 1;
        node.holder = None;
        if self.share != Share::Nothing && n < 2 {
            // From a store the other process wrote, a restart resumes after
            // that process's reservation, not its own last ID: its IDs are
            // unique, but increase only within one process's life.
            node.last_id = 0;
        }
        match SnowflakeHolder::restore(config(self.lease_again), SplitMix64::new(at), saved, at) {
            Ok(h) => {
                node.holder = Some(h);
                Ok(true)
            }
            Err(Error::ClockBehindLastReport { .. }) => {
                prop_assert!(at + RESERVE_MS < saved.last_timestamp_ms);
                Ok(false)
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }

    fn deliver_all(&mut self) {
        while !self.in_flight.is_empty() {
            self.deliver(0);
        }
    }

    /// Liveness: after the calm phase's first rounds, as many nodes as there
    /// are worker IDs (or every node, if fewer) mint in every round.
    fn calm(&mut self) -> Result<(), TestCaseError> {
        // Every answer still in flight arrives, late.
        self.deliver_all();
        // Clocks in sync, and past everything any node read, reserved or
        // reported, every lease's end, evictions' fences and the grace
        // period: every worker ID is free, every restore succeeds.
        let cfg = *self.reg.config();
        for node in &mut self.nodes {
            node.offset = 0;
        }
        self.now = self.now.max(self.latest_clock)
            + RESERVE_MS
            + LAYOUT.unit_ms()
            + cfg.ttl_ms
            + cfg.max_skew_ms
            + cfg.grace_ms;
        let nodes = self.nodes.len();
        // Round of each node's first ID, and how many rounds it minted in.
        let mut first: Vec<Option<usize>> = vec![None; nodes];
        let mut rounds = vec![0usize; nodes];
        for round in 0..CALM_ROUNDS {
            self.now += CALM_STEP_MS;
            for n in 0..nodes {
                let mut polled = self.poll(n, CALM_BATCH, true)?;
                if matches!(polled, Polled::Down | Polled::Stopped) {
                    // A supervisor restarts the process, from its store.
                    prop_assert!(self.restart(n, 0)?, "node {}: restart refused", n);
                    polled = self.poll(n, CALM_BATCH, true)?;
                }
                self.deliver_all();
                if matches!(polled, Polled::Minted(k) if k > 0) {
                    first[n].get_or_insert(round);
                    rounds[n] += 1;
                }
            }
        }
        let minting: Vec<usize> = (0..nodes).filter(|&n| first[n].is_some()).collect();
        prop_assert_eq!(
            minting.len(),
            nodes.min(self.capacity as usize),
            "nodes that minted in the calm phase: {:?} of {} ({} worker IDs)",
            minting,
            nodes,
            self.capacity
        );
        for n in minting {
            let f = first[n].unwrap_or(0);
            prop_assert!(
                f <= CALM_DEADLINE,
                "node {}: first ID in calm round {}",
                n,
                f
            );
            prop_assert_eq!(
                rounds[n],
                CALM_ROUNDS - f,
                "node {}: minted in {} of the {} rounds after its first",
                n,
                rounds[n],
                CALM_ROUNDS - f
            );
        }
        Ok(())
    }
}

impl World {
    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Tick(ms) => self.now += ms,
            Op::Step(n, d) => {
                if let Some(node) = self.nodes.get_mut(n) {
                    node.offset += d
                }
            }
            Op::Poll(n, k, store_ok) => {
                if n < self.nodes.len() {
                    let _ = self.poll(n, k, store_ok)?;
                }
            }
            Op::Deliver(k) | Op::Lose(k) if self.in_flight.is_empty() => {
                let _ = k;
            }
            Op::Lose(k) => {
                self.in_flight.remove(k % self.in_flight.len());
            }
            Op::Deliver(k) => self.deliver(k),
            Op::Save(n, ok) => {
                if n < self.nodes.len() {
                    let at = self.clock(n);
                    self.save(n, at, ok);
                }
            }
            Op::Restart(n, step) => {
                if n < self.nodes.len() {
                    let _ = self.restart(n, step)?;
                }
            }
            Op::Evict(k) => {
                let ids: Vec<u32> = self.reg.slots().map(|s| s.worker_id).collect();
                if !ids.is_empty() {
                    let _ = self.reg.evict(ids[k % ids.len()], self.now);
                }
            }
            Op::Attack(k, a) => {
                let now = self.now;
                let reg = &mut self.reg;
                let live: Vec<_> = reg
                    .slots()
                    .filter(|s| reg.status(s, now) == SlotStatus::Live)
                    .cloned()
                    .collect();
                if live.is_empty() {
                    return Ok(());
                }
                let target = &live[k % live.len()];
                let before = reg.clone();
                let (who, secret) = match a.secret {
                    // A leaked secret is used by another credential.
                    Secret::Leaked => (
                        "hostile".to_string(),
                        self.granted
                            .get(&(target.worker_id, target.generation))
                            .copied(),
                    ),
                    Secret::None => (
                        if a.as_owner {
                            target.owner.clone()
                        } else {
                            "hostile".into()
                        },
                        None,
                    ),
                    Secret::Guess(g) => (
                        if a.as_owner {
                            target.owner.clone()
                        } else {
                            "hostile".into()
                        },
                        Some(random_secret(&mut SplitMix64::new(g))),
                    ),
                };
                let claim = Claim {
                    worker_id: target.worker_id,
                    generation: target.generation,
                    secret,
                };
                let renewal = Renewal {
                    claim,
                    node_now_ms: now,
                    last_timestamp_ms: now,
                }
                .proof(sha256);
                let result = match a.kind {
                    0 => reg.renew(&who, &renewal, now).map(|_| ()),
                    1 => reg.release(&who, &renewal, now),
                    _ => {
                        let ask = GrantRequest {
                            owner: &who,
                            node_key: &target.node_key,
                            node_now_ms: now,
                            previous: Some(claim.proof(sha256)),
                            secret_hash: sha256(&random_secret(&mut self.secrets)),
                        };
                        reg.lease(ask, now).map(|_| ())
                    }
                };
                prop_assert!(
                    matches!(result, Err(Error::NotLeaseHolder { .. })),
                    "attack {:?} on {:?}: {:?}",
                    a,
                    target,
                    result
                );
                prop_assert_eq!(&*reg, &before, "a refused attack changed the registry");
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(props::config(400))]

    #[test]
    fn holders_never_mint_an_id_twice_and_mint_again_once_calm(
        capacity in 1u32..4,
        lease_again in any::<bool>(),
        offsets in prop::collection::vec(prop_oneof![-900i64..900, Just(-990i64), Just(990i64)], 2..5),
        ops in prop::collection::vec(op(4), 1..250),
        share in prop_oneof![2 => Just(Share::Nothing), 1 => Just(Share::OneStore), 1 => Just(Share::Copies)],
    ) {
        let mut w = World::new(capacity, lease_again, &offsets, share);
        for op in ops {
            w.apply(op)?;
        }
        w.calm()?;
    }

    /// Two processes from one config, their store shared or copied: the
    /// schedule dwells on what hurts them (restarts while the other holds
    /// a live grant, minting on both, renewals on time).
    #[test]
    fn two_processes_from_one_store_never_mint_an_id_twice(
        capacity in 1u32..5,
        lease_again in any::<bool>(),
        offsets in prop::collection::vec(prop_oneof![-900i64..900, Just(-990i64), Just(990i64)], 2..=2),
        ops in prop::collection::vec(shared_op(), 1..200),
        share in prop_oneof![Just(Share::OneStore), Just(Share::Copies)],
    ) {
        let mut w = World::new(capacity, lease_again, &offsets, share);
        for op in ops {
            w.apply(op)?;
        }
        w.calm()?;
    }
}

/// Without any answer, a holder that lost its registry mints until its lease
/// ends by its own clock and not a millisecond later, even with the clock
/// stepping forward past the end and back before it.
#[test]
fn an_unanswered_holder_stops_at_the_lapse_even_if_the_clock_steps_back() {
    let mut h = SnowflakeHolder::new(HolderConfig::default()).unwrap();
    let _ = h.poll(T0, &mut []);
    h.granted(
        Grant {
            worker_id: 1,
            generation: 1,
            expires_at_ms: T0 + 10_000,
            issue_after_ms: 0,
            ttl_ms: 10_000,
            layout: LAYOUT,
            secret: None,
        },
        T0,
    )
    .unwrap();
    let mut out = [0u64; 1];
    assert_eq!(h.poll(T0 + 9_999, &mut out).unwrap().filled, 1);
    assert!(h.poll(T0 + 10_000, &mut out).is_err());
    // The clock steps back: the lease is gone for good.
    assert!(h.poll(T0 + 9_000, &mut out).is_err());
}

/// A recycled worker ID: the old holder minted up to its lease's end; the new
/// holder's clock steps back 2.5 s right after its grant. `issue_after_ms`
/// keeps it out of the old holder's stretch of time.
#[test]
fn a_recycled_worker_id_never_mints_into_the_previous_holders_time() {
    let cfg = RegistryConfig {
        capacity: 1,
        ttl_ms: 10_000,
        grace_ms: 2_000,
        max_skew_ms: 1_000,
        minters: 0,
        per_owner: None,
        lenders: 0,
        lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
    };
    let mut reg = Registry::new(cfg).unwrap();
    let lease = |reg: &mut Registry, key: &str, now: u64| {
        let mut h = SnowflakeHolder::new(HolderConfig::default()).unwrap();
        let HolderNext::Lease(ask) = h.poll(now, &mut []).unwrap().next else {
            panic!()
        };
        let secret = LeaseSecret::from_random([key.len() as u8; 16]);
        let l = reg
            .lease(GrantRequest::from_ask(&ask, "o", key, &secret, sha256), now)
            .unwrap();
        h.granted(Grant::from_lease(&l, Some(secret), LAYOUT), now)
            .unwrap();
        h
    };
    let mut a = lease(&mut reg, "a", T0);
    let end = a.lease().unwrap().expires_at_ms;
    let mut out = [0u64; 1];
    assert_eq!(a.poll(end - 1, &mut out).unwrap().filled, 1);
    let a_last = LAYOUT.decompose(out[0]).unwrap().timestamp_ms;
    let mut b = lease(&mut reg, "b", end + cfg.grace_ms);
    // b's clock steps back 2.5 s: it must wait, not mint at or before a_last.
    for back in [2_500u64, 2_000, 1_000, 0] {
        let at = end + cfg.grace_ms - back;
        if let Ok(p) = b.poll(at, &mut out) {
            if p.filled == 1 {
                let ms = LAYOUT.decompose(out[0]).unwrap().timestamp_ms;
                assert!(ms > a_last, "b minted at {ms}, a up to {a_last}");
            }
        }
    }
}

fn grant_via(
    reg: &mut Registry,
    h: &mut SnowflakeHolder<SplitMix64>,
    key: &str,
    at: u64,
    now: u64,
) {
    let HolderNext::Lease(ask) = h.poll(at, &mut []).unwrap().next else {
        panic!("expected a lease request")
    };
    let secret = LeaseSecret::from_random([(at % 251) as u8; 16]);
    // "minter:0" is minter 0's node key; every other node leases as "o".
    let lease = if key == "minter:0" {
        let previous = ask.previous.map(|c| c.proof(sha256));
        reg.lease_minter(0, ask.node_now_ms, previous, sha256(&secret), now)
    } else {
        reg.lease(GrantRequest::from_ask(&ask, "o", key, &secret, sha256), now)
    }
    .unwrap();
    h.granted(Grant::from_lease(&lease, Some(secret), LAYOUT), at)
        .unwrap();
}

fn saved_now(h: &mut SnowflakeHolder<SplitMix64>, at: u64) -> HolderState {
    let state = h.save_request(at).expect("a save");
    h.saved(&state);
    state
}

/// A minter mints for a while after its last save, dies, and restarts under
/// a clock stepped 2 s back. It proves its live grant (a minter takes its
/// live grant back: its store is its Durable Object's own), so the registry
/// gives the same worker ID back with an `issue_after_ms` of the
/// (wound-back) clock: only the saved reservation keeps it from minting over
/// its previous life.
#[test]
fn a_restart_under_a_wound_back_clock_never_reissues() {
    let cfg = RegistryConfig {
        capacity: 2,
        ttl_ms: 10_000,
        grace_ms: 5_000,
        max_skew_ms: 3_000,
        minters: 1,
        per_owner: None,
        lenders: 0,
        lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
    };
    let mut reg = Registry::new(cfg).unwrap();
    let mut a = SnowflakeHolder::with_rand(config(false), SplitMix64::new(1)).unwrap();
    grant_via(&mut reg, &mut a, "minter:0", T0, T0);
    let store = saved_now(&mut a, T0);
    let mut last = 0;
    let mut out = [0u64; 1];
    for t in 0..=2_000 {
        // Extends the reservation as the JS client's timer does; the store
        // keeps only the state saved before the loop (a save that never
        // landed), which is safe: the reservation covers up to T0 + 3 s.
        if a.save_due_in(T0 + t) == Some(0) {
            let s = a.save_request(T0 + t).unwrap();
            a.saved(&s);
        }
        if a.poll(T0 + t, &mut out).unwrap().filled == 1 {
            last = out[0];
        }
    }
    let last_ms = LAYOUT.decompose(last).unwrap().timestamp_ms;
    assert_eq!(last_ms, T0 + 2_000);
    // Dies; the clock steps back 2 s; restarts from the stale store.
    let at = T0 + 2_001 - 2_000;
    let mut b = SnowflakeHolder::restore(config(false), SplitMix64::new(2), store, at).unwrap();
    grant_via(&mut reg, &mut b, "minter:0", at, T0 + 2_001);
    assert_eq!(
        b.lease().unwrap().worker_id,
        0,
        "proved: the same worker ID"
    );
    let _ = saved_now(&mut b, at);
    for t in at..at + 4_000 {
        if b.save_due_in(t) == Some(0) {
            let s = b.save_request(t).unwrap();
            b.saved(&s);
        }
        if b.poll(t, &mut out).unwrap().filled == 1 {
            assert!(
                out[0] > last,
                "restarted at {at}, minted at {t}: {} after {last}",
                out[0]
            );
        }
    }
}

/// A holder whose store has not saved a reservation past the clock mints
/// nothing.
#[test]
fn no_id_past_the_saved_reservation() {
    let mut reg = Registry::new(RegistryConfig::new(&LAYOUT)).unwrap();
    let mut h = SnowflakeHolder::with_rand(config(false), SplitMix64::new(1)).unwrap();
    grant_via(&mut reg, &mut h, "n", T0, T0);
    let mut out = [0u64; 1];
    assert_eq!(
        h.poll(T0, &mut out).unwrap().filled,
        0,
        "nothing before the first save"
    );
    let s = saved_now(&mut h, T0);
    assert_eq!(s.last_timestamp_ms, T0 + 3_000);
    assert_eq!(h.poll(T0 + 3_000, &mut out).unwrap().filled, 1);
    assert_eq!(
        h.poll(T0 + 3_001, &mut out).unwrap().filled,
        0,
        "past the reservation"
    );
    // A save asked for but not yet done does not count.
    let pending = h.save_request(T0 + 3_001).unwrap();
    assert_eq!(h.poll(T0 + 3_001, &mut out).unwrap().filled, 0);
    h.saved(&pending);
    assert_eq!(h.poll(T0 + 3_001, &mut out).unwrap().filled, 1);
}

/// Two processes started from one config (one credential, one node key)
/// share one store: the second starts while the first holds a live grant,
/// and restores the first's saved grant, secret and all. Both then mint for
/// a TTL and more, renewing and saving as the client does: never one ID
/// twice, and never under one worker ID at once.
#[test]
fn two_processes_sharing_a_store_never_mint_the_same_id() {
    let cfg = RegistryConfig {
        capacity: 4,
        ttl_ms: 10_000,
        grace_ms: 2_000,
        max_skew_ms: 1_000,
        minters: 0,
        per_owner: None,
        lenders: 0,
        lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
    };
    let mut reg = Registry::new(cfg).unwrap();
    let mut store = HolderState::default();
    let mut secrets = SplitMix64::new(7);
    let mut a = SnowflakeHolder::restore(config(false), SplitMix64::new(1), store, T0).unwrap();
    let mut procs: Vec<SnowflakeHolder<SplitMix64>> = Vec::new();
    let mut seen = HashSet::new();
    let mut out = [0u64; 64];
    let mut step = |h: &mut SnowflakeHolder<SplitMix64>,
                    reg: &mut Registry,
                    store: &mut HolderState,
                    at: u64,
                    seen: &mut HashSet<u64>| {
        if h.save_due_in(at) == Some(0) {
            if let Some(s) = h.save_request(at) {
                *store = s;
                h.saved(&s);
            }
        }
        let Ok(poll) = h.poll(at, &mut out) else {
            return;
        };
        for &id in &out[..poll.filled] {
            assert!(seen.insert(id), "ID {id} twice at {at}");
        }
        if let Some(r) = poll.renew {
            match reg.renew("o", &r.proof(sha256), at) {
                Ok(l) => h.renewed(Grant::from_lease(&l, None, LAYOUT), at),
                Err(e) => h.renewal_failed(r.claim.generation, Some(e.error_code()), at),
            }
        }
        if let HolderNext::Lease(ask) = poll.next {
            let secret = random_secret(&mut secrets);
            match reg.lease(
                GrantRequest::from_ask(&ask, "o", "host", &secret, sha256),
                at,
            ) {
                Ok(l) => {
                    let _ = h.granted(Grant::from_lease(&l, Some(secret), LAYOUT), at);
                }
                Err(e) => {
                    h.lease_failed(Some(e.error_code()), at);
                }
            }
        }
    };
    for t in (0..30_000).step_by(7) {
        let at = T0 + t;
        step(&mut a, &mut reg, &mut store, at, &mut seen);
        if t == 5_103 {
            // The second process starts from the store the first writes.
            procs.push(
                SnowflakeHolder::restore(config(false), SplitMix64::new(2), store, at).unwrap(),
            );
        }
        for p in &mut procs {
            step(p, &mut reg, &mut store, at, &mut seen);
        }
    }
    assert!(
        procs[0].lease().is_some() && a.lease().is_some(),
        "both still mint"
    );
}
