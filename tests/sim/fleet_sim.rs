//! A fleet of Worker isolates serving snowflake IDs, simulated over the core's
//! real `Registry`, `SnowflakeHolder` and `MintedBuffer`: isolates arrive,
//! serve requests at their own rates and vanish without a word (as isolates
//! do), with clocks skewed within the registry's bound, while minters restart
//! from their saved state. The same scenario runs twice — every isolate
//! leasing its own worker ID (before), and isolates serving batches of a
//! bounded set of minters (now) — and prints both side by side.
//!
//! ```text
//! cargo run --release --example fleet_sim -- [--isolates 10000] [--minutes 60]
//!     [--minters 16] [--layout leaf|jsSafe] [--seed 1] [--short]
//! ```
//! `--short` (used by `make test`) is 1,000 isolates for 10 minutes.
//!
//! Beside the isolates, `--nodes` application nodes (the npm client with a
//! store) lease worker IDs of their own in the minters' run, as they do next
//! to a deployment's minters. Stores fail: one save in `--save-fail` (a
//! minter's failed save fails its request, as the Durable Object answers an
//! error).
//!
//! Checked in both runs; the exit status is 1 on any violation: no ID served
//! twice; the fence (under one worker ID, every ID of a later grant is above
//! every ID of an earlier one); staleness (no minted ID served more than the
//! bound after its time unit began, by the serving clock); reserved IDs
//! (minters mint only under worker IDs `0..minters`, leases get only the
//! rest); and liveness (each run serves IDs, and so do the nodes).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use edgeleaf::{
    holder::Grant, holder::HolderConfig, holder::HolderNext, holder::HolderState, holder::Renewal,
    holder::SnowflakeHolder, minted::batch_ranges, minted::minter_step, minted::MintConfig,
    minted::MintStep, minted::MintedBuffer, minted::MinterStep, minted::StalenessHistogram,
    minted::DEFAULT_STALENESS_MS, rand::SplitMix64, registry::GrantRequest, registry::Registry,
    registry::RegistryConfig, registry::SlotStatus, secret::LeaseSecret, secret::SecretHash,
    Layout,
};
use sha2::{Digest, Sha256};

const T0: u64 = 1_767_225_600_000;

/// The registry's host hashes the lease secrets it is given (as the Worker).
fn sha256(s: &LeaseSecret) -> SecretHash {
    SecretHash(Sha256::digest(s.as_bytes()).into())
}

struct Args {
    isolates: u64,
    minutes: u64,
    minters: u32,
    layout: Layout,
    seed: u64,
    /// Mean isolate lifetime, s.
    lifetime_s: f64,
    /// Request rates per isolate are log-uniform in this range, req/s.
    rates: (f64, f64),
    /// Application nodes leasing their own worker IDs (minters' run only).
    nodes: usize,
    /// One save in this many fails (0: none).
    save_fail: u64,
}

fn args() -> Args {
    let mut a = Args {
        isolates: 10_000,
        minutes: 60,
        minters: 16,
        layout: Layout::LEAF,
        seed: 1,
        lifetime_s: 900.0,
        rates: (0.2, 20.0),
        nodes: 8,
        save_fail: 50,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = |i: usize| argv.get(i + 1).cloned().unwrap_or_default();
        let number = |i: usize| {
            value(i).parse::<u64>().unwrap_or_else(|_| {
                eprintln!("{}: expected a whole number, found {:?}", argv[i], value(i));
                std::process::exit(2)
            })
        };
        match argv[i].as_str() {
            "--short" => {
                a.isolates = 1_000;
                a.minutes = 10;
                a.lifetime_s = 300.0;
                i += 1;
                continue;
            }
            "--isolates" => a.isolates = number(i),
            "--minutes" => a.minutes = number(i),
            "--minters" => a.minters = u32::try_from(number(i)).unwrap_or(u32::MAX),
            "--seed" => a.seed = number(i),
            "--nodes" => a.nodes = usize::try_from(number(i)).unwrap_or(usize::MAX),
            "--save-fail" => a.save_fail = number(i),
            "--layout" => {
                a.layout = match value(i).as_str() {
                    "leaf" => Layout::LEAF,
                    "jsSafe" => Layout::JS_SAFE,
                    other => {
                        eprintln!("--layout: expected leaf or jsSafe, found {other:?}");
                        std::process::exit(2)
                    }
                }
            }
            other => {
                eprintln!("unknown argument {other:?} (see the file's header)");
                std::process::exit(2)
            }
        }
        i += 2;
    }
    a
}

#[path = "rng.rs"]
mod rng;
use rng::Rng;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrive(usize),
    Request(usize),
    Vanish(usize),
    /// A batch answer reaches isolate i: (isolate, index into `answers`).
    Answer(usize, usize),
    RestartMinter(u32),
    /// Application node j serves a request.
    NodeRequest(usize),
    Sample,
}

struct Isolate {
    alive: bool,
    offset: i64,
    rate: f64,
    /// Before: its own worker ID.
    holder: Option<SnowflakeHolder<SplitMix64>>,
    /// Now: minted batches.
    buffer: Option<MintedBuffer>,
    /// Requests waiting for a batch: when each started.
    waiting: Vec<u64>,
    tries: u32,
}

struct Minter {
    /// `None` from a restart until its first request restores it (again at
    /// each request while the restore is refused).
    holder: Option<SnowflakeHolder<SplitMix64>>,
    saved: HolderState,
    offset: i64,
    /// A Durable Object runs one request at a time: busy until then.
    busy_until: u64,
}

/// An application node: the npm client, with a store, leasing its own ID.
struct Node {
    holder: SnowflakeHolder<SplitMix64>,
    saved: HolderState,
    offset: i64,
}

/// A store: saves what the holder asks, failing one save in `fail_one_in`.
/// Returns whether it saved (or had nothing to save).
fn save(
    holder: &mut SnowflakeHolder<SplitMix64>,
    saved: &mut HolderState,
    at: u64,
    rng: &mut Rng,
    fail_one_in: u64,
    report: &mut Report,
) -> bool {
    let Some(state) = holder.save_request(at) else {
        return true;
    };
    report.saves += 1;
    if fail_one_in > 0 && rng.below(fail_one_in) == 0 {
        report.saves_failed += 1;
        holder.save_failed();
        return false;
    }
    *saved = state;
    holder.saved(&state);
    true
}

#[derive(Default)]
struct Report {
    requests: u64,
    served: u64,
    refused: u64,
    waited: u64,
    wait_ms: StalenessHistogram,
    staleness: StalenessHistogram,
    max_in_use: u32,
    minter_calls: u64,
    dropped: u64,
    duplicates: u64,
    /// IDs the application nodes served (minters' run).
    node_served: u64,
    saves: u64,
    saves_failed: u64,
    /// Minted IDs served later than the staleness bound.
    stale_served: u64,
    /// IDs under a worker ID of the wrong kind (a minter's outside
    /// `0..minters`, a lease's inside).
    wrong_range: u64,
    /// Pairs of grants of one worker ID whose IDs interleave.
    fence_breaks: u64,
}

struct Sim {
    args: Args,
    minted_mode: bool,
    /// The scenario (arrivals, rates, lifetimes, requests): the same in both runs.
    rng: Rng,
    /// Latencies and minter restarts.
    net: Rng,
    now: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    reg: Registry,
    isolates: Vec<Isolate>,
    minters: Vec<Minter>,
    answers: Vec<Option<Vec<(u64, u64)>>>,
    ids: Vec<u64>,
    /// (worker ID, generation) -> the lowest and highest ID minted under it.
    grants: HashMap<(u32, u64), (u64, u64)>,
    nodes: Vec<Node>,
    /// The stores' failures, and the nodes' scenario: apart, so that both
    /// runs see the same isolates and latencies.
    store: Rng,
    report: Report,
}

const LATENCY_MS: (u64, u64) = (2, 40);
/// An application node's mean time between requests.
const NODE_REQUEST_MS: f64 = 100.0;

fn holder_config(reserve: bool) -> HolderConfig {
    HolderConfig {
        lease_again: true,
        reserve_ms: if reserve { 3_000 } else { 0 },
        ..HolderConfig::default()
    }
}

impl Sim {
    fn new(args: Args, minted_mode: bool) -> Sim {
        let mut cfg = RegistryConfig::new(&args.layout);
        cfg.minters = if minted_mode { args.minters } else { 0 };
        let reg = Registry::new(cfg).expect("registry config");
        let rng = Rng(args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut net = Rng(args.seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        let store = Rng(args.seed.wrapping_mul(0xA24B_AED4_963E_E407) | 1);
        let minters = (0..cfg.minters)
            .map(|i| Minter {
                holder: Some(
                    SnowflakeHolder::with_rand(holder_config(true), SplitMix64::new(i.into()))
                        .expect("holder config"),
                ),
                saved: HolderState::default(),
                offset: net.offset(300),
                busy_until: 0,
            })
            .collect();
        let mut sim = Sim {
            args,
            minted_mode,
            rng,
            net,
            now: T0,
            queue: BinaryHeap::new(),
            seq: 0,
            reg,
            isolates: Vec::new(),
            minters,
            answers: Vec::new(),
            ids: Vec::new(),
            grants: HashMap::new(),
            nodes: Vec::new(),
            store,
            report: Report::default(),
        };
        let span = sim.args.minutes * 60_000;
        for i in 0..sim.args.isolates as usize {
            let at = T0 + sim.rng.below(span);
            sim.at(at, Event::Arrive(i));
        }
        for m in 0..cfg.minters {
            let at = T0 + sim.net.exp_ms(1_200_000.0);
            sim.at(at, Event::RestartMinter(m));
        }
        if minted_mode {
            for j in 0..sim.args.nodes {
                let offset = sim.store.offset(500);
                sim.nodes.push(Node {
                    holder: SnowflakeHolder::with_rand(
                        holder_config(true),
                        SplitMix64::new(1_000_000 + j as u64),
                    )
                    .expect("holder config"),
                    saved: HolderState::default(),
                    offset,
                });
                let first = sim.store.exp_ms(NODE_REQUEST_MS);
                sim.at(T0 + first, Event::NodeRequest(j));
            }
        }
        sim.at(T0, Event::Sample);
        sim
    }

    /// IDs minted under a grant, for the fence and the reserved ranges.
    fn minted(&mut self, grant: Option<&Grant>, ids: &[u64], by_minter: bool) {
        let (Some(g), Some(&lo), Some(&hi)) = (grant, ids.iter().min(), ids.iter().max()) else {
            return;
        };
        let reserved = self.reg.config().minters;
        if by_minter != (g.worker_id < reserved) {
            self.report.wrong_range += ids.len() as u64;
        }
        for &id in ids {
            let w = self.args.layout.decompose(id).map(|p| p.worker_id);
            if w != Ok(g.worker_id) {
                self.report.wrong_range += 1;
            }
        }
        let e = self
            .grants
            .entry((g.worker_id, g.generation))
            .or_insert((lo, hi));
        e.0 = e.0.min(lo);
        e.1 = e.1.max(hi);
    }

    /// Grants of one worker ID whose IDs interleave.
    fn fence_breaks(&self) -> u64 {
        let mut by_worker: HashMap<u32, Vec<(u64, u64, u64)>> = HashMap::new();
        for (&(w, g), &(lo, hi)) in &self.grants {
            by_worker.entry(w).or_default().push((g, lo, hi));
        }
        let mut breaks = 0;
        for grants in by_worker.values_mut() {
            grants.sort_unstable();
            let mut earlier_max = 0;
            for &(_, lo, hi) in grants.iter() {
                if lo <= earlier_max {
                    breaks += 1;
                }
                earlier_max = earlier_max.max(hi);
            }
        }
        breaks
    }

    /// Application node j serves a request: its own lease, its store.
    fn node_request(&mut self, j: usize) {
        let now = self.now;
        let layout = self.args.layout;
        let clock = now.saturating_add_signed(self.nodes[j].offset);
        let key = format!("node-{j}");
        let mut out = [0u64; 1];
        let mut waited = 0;
        for _ in 0..8 {
            let at = clock + waited;
            let node = &mut self.nodes[j];
            if node.holder.save_due_in(at) == Some(0) {
                save(
                    &mut node.holder,
                    &mut node.saved,
                    at,
                    &mut self.store,
                    self.args.save_fail,
                    &mut self.report,
                );
            }
            let Ok(poll) = node.holder.poll(at, &mut out) else {
                break;
            };
            if let Some(r) = poll.renew {
                renew(&mut self.reg, &mut node.holder, r, now, at, layout);
            }
            if poll.filled == 1 {
                let grant = node.holder.lease().copied();
                self.minted(grant.as_ref(), &out, false);
                self.ids.push(out[0]);
                self.report.node_served += 1;
                break;
            }
            match poll.next {
                HolderNext::Lease(ask) => {
                    let secret = LeaseSecret::from_random([(j % 251) as u8; 16]);
                    match self
                        .reg
                        .lease(GrantRequest::from_ask(&ask, "", &key, &secret, sha256), now)
                    {
                        Ok(l) => {
                            let _ = node
                                .holder
                                .granted(Grant::from_lease(&l, Some(secret), layout), at);
                        }
                        Err(e) => {
                            node.holder.lease_failed(Some(e.error_code()), at);
                            break;
                        }
                    }
                }
                HolderNext::RetryAfter { ms, .. } => waited += ms,
                HolderNext::Done | HolderNext::LeaseInFlight => break,
            }
        }
        let next = now + self.store.exp_ms(NODE_REQUEST_MS);
        self.at(next, Event::NodeRequest(j));
    }

    fn at(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, e)));
    }

    fn latency(&mut self) -> u64 {
        LATENCY_MS.0 + self.net.below(LATENCY_MS.1 - LATENCY_MS.0)
    }

    fn run(mut self) -> Report {
        let end = T0 + self.args.minutes * 60_000;
        while let Some(Reverse((t, _, e))) = self.queue.pop() {
            if t > end {
                break;
            }
            self.now = t;
            match e {
                Event::Arrive(i) => self.arrive(i),
                Event::Request(i) => self.request(i),
                Event::Vanish(i) => {
                    // No goodbye: its lease (if any) lapses on its own.
                    let iso = &mut self.isolates[i];
                    iso.alive = false;
                    iso.holder = None;
                    iso.buffer = None;
                    self.report.refused += iso.waiting.len() as u64;
                    iso.waiting.clear();
                }
                Event::Answer(i, k) => self.answer(i, k),
                Event::NodeRequest(j) => self.node_request(j),
                Event::RestartMinter(m) => {
                    // The Durable Object comes back, maybe on another
                    // machine: its clock may now be behind its saved
                    // reservation. It restores at its next request.
                    let mm = &mut self.minters[m as usize];
                    mm.holder = None;
                    mm.offset = self.store.offset(300);
                    let next = self.now + self.net.exp_ms(1_200_000.0);
                    self.at(next, Event::RestartMinter(m));
                }
                Event::Sample => {
                    let now = self.now;
                    // The isolates' design's worker IDs (not the nodes').
                    let minters = self.reg.config().minters;
                    let in_use = self
                        .reg
                        .slots()
                        .filter(|s| !self.minted_mode || s.worker_id < minters)
                        .filter(|s| self.reg.status(s, now) != SlotStatus::Free)
                        .count();
                    let in_use = u32::try_from(in_use).unwrap_or(u32::MAX);
                    self.report.max_in_use = self.report.max_in_use.max(in_use);
                    self.at(now + 1_000, Event::Sample);
                }
            }
        }
        let breaks = self.fence_breaks();
        let mut report = self.report;
        report.fence_breaks = breaks;
        for iso in &self.isolates {
            if let Some(b) = &iso.buffer {
                report.staleness.merge(b.staleness());
                report.dropped += b.dropped();
            }
        }
        let mut ids = self.ids;
        ids.sort_unstable();
        report.duplicates = ids.windows(2).filter(|w| w[0] == w[1]).count() as u64;
        report
    }

    fn arrive(&mut self, i: usize) {
        while self.isolates.len() <= i {
            self.isolates.push(Isolate {
                alive: false,
                offset: 0,
                rate: 0.0,
                holder: None,
                buffer: None,
                waiting: Vec::new(),
                tries: 0,
            });
        }
        let (lo, hi) = self.args.rates;
        let rate = (lo.ln() + (hi.ln() - lo.ln()) * self.rng.unit()).exp();
        let offset = self.rng.offset(500);
        let home = self.rng.next();
        let iso = &mut self.isolates[i];
        iso.alive = true;
        iso.offset = offset;
        iso.rate = rate;
        if self.minted_mode {
            let config = MintConfig::new(self.args.minters, home);
            iso.buffer = Some(MintedBuffer::new(self.args.layout, config).expect("mint config"));
        } else {
            iso.holder = Some(
                SnowflakeHolder::with_rand(holder_config(false), SplitMix64::new(home))
                    .expect("holder config"),
            );
        }
        let life = self.rng.exp_ms(self.args.lifetime_s * 1_000.0);
        let first = self.rng.exp_ms(1_000.0 / rate);
        let now = self.now;
        self.at(now + life, Event::Vanish(i));
        self.at(now + first, Event::Request(i));
    }

    fn request(&mut self, i: usize) {
        if !self.isolates[i].alive {
            return;
        }
        self.report.requests += 1;
        if self.minted_mode {
            let now = self.now;
            self.isolates[i].waiting.push(now);
            self.serve_minted(i);
        } else {
            self.serve_leased(i);
        }
        let next = self.now + self.rng.exp_ms(1_000.0 / self.isolates[i].rate);
        self.at(next, Event::Request(i));
    }

    /// Before: the isolate mints under its own lease (leasing it first).
    fn serve_leased(&mut self, i: usize) {
        let now = self.now;
        let layout = self.args.layout;
        let clock = now.saturating_add_signed(self.isolates[i].offset);
        let mut out = [0u64; 1];
        let mut waited = 0;
        for _ in 0..4 {
            let holder = self.isolates[i].holder.as_mut().expect("alive");
            let Ok(poll) = holder.poll(clock + waited, &mut out) else {
                break;
            };
            if let Some(r) = poll.renew {
                renew(&mut self.reg, holder, r, now, clock, layout);
            }
            // Served only what was minted (`Done` with nothing minted is
            // not an ID).
            if poll.filled == 1 {
                let grant = holder.lease().copied();
                self.minted(grant.as_ref(), &out, false);
                self.ids.push(out[0]);
                self.report.served += 1;
                self.report.staleness.record(0, 1);
                if waited > 0 {
                    self.report.waited += 1;
                    self.report.wait_ms.record(waited, 1);
                }
                return;
            }
            match poll.next {
                HolderNext::Done | HolderNext::LeaseInFlight => break,
                HolderNext::Lease(ask) => {
                    waited += LATENCY_MS.1 / 2;
                    let key = format!("isolate-{i}");
                    let secret = LeaseSecret::from_random([(i % 251) as u8; 16]);
                    match self
                        .reg
                        .lease(GrantRequest::from_ask(&ask, "", &key, &secret, sha256), now)
                    {
                        Ok(l) => {
                            let _ =
                                holder.granted(Grant::from_lease(&l, Some(secret), layout), clock);
                        }
                        Err(e) => {
                            holder.lease_failed(Some(e.error_code()), clock);
                            break;
                        }
                    }
                }
                HolderNext::RetryAfter { ms, .. } => waited += ms,
            }
        }
        self.report.refused += 1;
    }

    /// Now: serve the waiting requests from the buffer; fetch as it says.
    fn serve_minted(&mut self, i: usize) {
        let now = self.now;
        let clock = now.saturating_add_signed(self.isolates[i].offset);
        let mut out = [0u64; 1];
        let mut ask = None;
        while let Some(&since) = self.isolates[i].waiting.first() {
            let buf = self.isolates[i].buffer.as_mut().expect("alive");
            let poll = buf.poll(clock, &mut out);
            match poll.next {
                MintStep::Done { prefetch } => ask = ask.or(prefetch),
                MintStep::FetchNow(a) => ask = Some(a),
                MintStep::Wait => {}
            }
            if poll.filled == 0 {
                break;
            }
            self.isolates[i].waiting.remove(0);
            let unit_ms = self
                .args
                .layout
                .decompose(out[0])
                .map_or(0, |p| p.timestamp_ms);
            if clock.saturating_sub(unit_ms) > DEFAULT_STALENESS_MS {
                self.report.stale_served += 1;
            }
            self.ids.push(out[0]);
            self.report.served += 1;
            if now > since {
                self.report.waited += 1;
                self.report.wait_ms.record(now - since, 1);
            }
        }
        if let Some(ask) = ask {
            self.report.minter_calls += 1;
            let latency = self.latency();
            let (ids, done) = self.mint(ask.minter, ask.count as usize, now + latency / 2);
            let ranges = (!ids.is_empty()).then(|| batch_ranges(&self.args.layout, &ids));
            self.answers.push(ranges);
            let k = self.answers.len() - 1;
            self.at(done + latency / 2, Event::Answer(i, k));
        }
    }

    fn answer(&mut self, i: usize, k: usize) {
        let ranges = self.answers[k].take();
        let iso = &mut self.isolates[i];
        if !iso.alive {
            return;
        }
        let clock = self.now.saturating_add_signed(iso.offset);
        let buf = iso.buffer.as_mut().expect("alive");
        match ranges {
            Some(r) => {
                buf.fetched(buf.ticket(), &r, clock)
                    .expect("a minter's batch is valid");
                iso.tries = 0;
            }
            None => {
                buf.fetch_failed();
                iso.tries += 1;
                if iso.tries >= MintConfig::new(self.args.minters, 0).tries_per_request() {
                    // Every minter tried failed: refuse what waits.
                    self.report.refused += iso.waiting.len() as u64;
                    iso.waiting.clear();
                    iso.tries = 0;
                }
            }
        }
        self.serve_minted(i);
    }

    /// A minter's loop, as its Durable Object runs it: the IDs, and when it
    /// answered. It restores on first use after a restart (no IDs while
    /// that is refused), and a failed save fails the request: it answers no
    /// IDs (the ones minted before it in this call are never served).
    fn mint(&mut self, index: u32, count: usize, arrives: u64) -> (Vec<u64>, u64) {
        let layout = self.args.layout;
        let m = &mut self.minters[index as usize];
        let now = arrives.max(m.busy_until);
        let clock = now.saturating_add_signed(m.offset);
        if m.holder.is_none() {
            let restored =
                SnowflakeHolder::restore(holder_config(true), SplitMix64::new(now), m.saved, clock);
            match restored {
                Ok(h) => m.holder = Some(h),
                Err(_) => return (Vec::new(), now),
            }
        }
        let Some(holder) = m.holder.as_mut() else {
            return (Vec::new(), now);
        };
        let mut out = vec![0u64; count];
        let mut filled = 0;
        let mut leased = false;
        // (grant, first, end) of each poll that minted.
        let mut under = Vec::new();
        let mut failed = false;
        for _ in 0..64 {
            let at = clock;
            if holder.save_due_in(at) == Some(0)
                && !save(
                    holder,
                    &mut m.saved,
                    at,
                    &mut self.store,
                    self.args.save_fail,
                    &mut self.report,
                )
            {
                failed = true;
                break;
            }
            let Ok(poll) = holder.poll(at, &mut out[filled..]) else {
                break;
            };
            if poll.filled > 0 {
                under.push((holder.lease().copied(), filled, filled + poll.filled));
            }
            filled += poll.filled;
            if let Some(r) = poll.renew {
                renew(&mut self.reg, holder, r, now, at, layout);
            }
            // As the Durable Object: it never waits, and leases at most once.
            match minter_step(filled, poll.next, leased) {
                MinterStep::Answer | MinterStep::Unavailable { .. } => break,
                MinterStep::Lease(ask) => {
                    leased = true;
                    let secret = LeaseSecret::from_random([(index % 251) as u8; 16]);
                    let previous = ask.previous.map(|c| c.proof(sha256));
                    match self.reg.lease_minter(
                        index,
                        ask.node_now_ms,
                        previous,
                        sha256(&secret),
                        now,
                    ) {
                        Ok(l) => {
                            let _ = holder.granted(Grant::from_lease(&l, Some(secret), layout), at);
                        }
                        Err(e) => {
                            holder.lease_failed(Some(e.error_code()), at);
                            break;
                        }
                    }
                }
            }
        }
        m.busy_until = now;
        for (grant, a, b) in under {
            self.minted(grant.as_ref(), &out[a..b], true);
        }
        out.truncate(if failed { 0 } else { filled });
        (out, now)
    }
}

/// A holder's renewal, answered by the registry at once (`now`: the
/// registry's clock; `clock`: the holder's).
fn renew(
    reg: &mut Registry,
    holder: &mut SnowflakeHolder<SplitMix64>,
    r: Renewal,
    now: u64,
    clock: u64,
    layout: Layout,
) {
    match reg.renew("", &r.proof(sha256), now) {
        Ok(l) => holder.renewed(Grant::from_lease(&l, None, layout), clock),
        Err(e) => holder.renewal_failed(r.claim.generation, Some(e.error_code()), clock),
    }
}

fn row(name: &str, r: &Report) -> String {
    let pct = |n: u64| 100.0 * n as f64 / r.requests.max(1) as f64;
    format!(
        "| {name} | {} | {} | {} ({:.2}%) | {} ({:.2}%), p99 {} ms | {} | {} / {} / {} ms | {:.1} | {} |",
        r.max_in_use,
        r.requests,
        r.refused,
        pct(r.refused),
        r.waited,
        pct(r.waited),
        r.wait_ms.percentile(99),
        r.duplicates,
        r.staleness.percentile(50),
        r.staleness.percentile(99),
        r.staleness.max(),
        1000.0 * r.minter_calls as f64 / r.served.max(1) as f64,
        r.dropped,
    )
}

fn main() {
    let a = args();
    let describe = format!(
        "{} isolates over {} simulated minutes (mean life {:.0} s, {:.1}-{:.0} req/s each), layout {}-bit worker IDs, staleness bound {} ms",
        a.isolates,
        a.minutes,
        a.lifetime_s,
        a.rates.0,
        a.rates.1,
        a.layout.worker_bits(),
        DEFAULT_STALENESS_MS,
    );
    let started = std::time::Instant::now();
    let before = Sim::new(args(), false).run();
    let minters = a.minters;
    let now = Sim::new(args(), true).run();
    println!("{describe}");
    println!("| design | worker IDs in use (max) | requests | refused | waited on a lease/minter | duplicates | staleness p50 / p99 / max | minter calls per 1,000 IDs | IDs dropped stale |");
    println!("|---|---|---|---|---|---|---|---|---|");
    println!("{}", row("per-isolate leasing", &before));
    println!("{}", row(&format!("{minters} minters"), &now));
    println!(
        "Checks: {} application nodes served {} IDs under their own leases beside the minters; stores saved {} times, {} failed (1 in {}).",
        a.nodes, now.node_served, before.saves + now.saves, before.saves_failed + now.saves_failed, a.save_fail,
    );
    println!("(simulated in {:.1} s)", started.elapsed().as_secs_f64());
    let mut violations = Vec::new();
    for (name, r) in [("per-isolate leasing", &before), ("minters", &now)] {
        let mut check = |bad: u64, what: &str| {
            if bad > 0 {
                violations.push(format!("{name}: {bad} {what}"));
            }
        };
        check(r.duplicates, "IDs served twice");
        check(
            r.fence_breaks,
            "grants whose IDs are not all above an earlier grant's of the same worker ID",
        );
        check(r.stale_served, "minted IDs served past the staleness bound");
        check(
            r.wrong_range,
            "IDs under a worker ID of the wrong kind (minters': 0..minters; leases': the rest)",
        );
        check(u64::from(r.served == 0), "run that served no ID");
    }
    if a.nodes > 0 && now.node_served == 0 {
        violations.push("minters: the application nodes served no ID".into());
    }
    for v in &violations {
        eprintln!("VIOLATION: {v}");
    }
    if !violations.is_empty() {
        std::process::exit(1);
    }
}
