//! Snowflake at edge scale, tested through the public API: minters
//! (`SnowflakeHolder`s under worker IDs reserved by `Registry::lease_minter`)
//! mint batches for isolates (`MintedBuffer`s) while ordinary nodes lease the
//! rest of the pool, isolates' clocks step, batch answers arrive late or are
//! lost, and minters restart from their saved state — with a clock that may
//! come back behind their saved reservation (further behind than
//! `reserve_ms`: the restore is refused, and the minter answers nothing, but
//! tries again at each request, as the Durable Object does).
//!
//! Invariants: no ID served twice; every ID served was minted; none served
//! later than the staleness bound by the serving clock; minters use only
//! their reserved worker IDs, ordinary nodes never do; a minter's IDs
//! increase across its restarts, and a restored minter's lie after the
//! reservation it restored.
//!
//! Liveness, so that refusing everything cannot pass: after the random
//! schedule, a calm phase (isolates' clocks in sync, minters' within half
//! the staleness bound but for one that lags them by more than the bound,
//! every answer delivered at once, time past every reservation and lease).
//! In it each minter mints when asked, and each isolate serves every
//! request, from within `CALM_DEADLINE` rounds on: the lagging minter's
//! batches are stale on arrival, which counts as a failed fetch, so it
//! cannot starve the isolates that ask it first.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;

use edgeleaf::{
    code::ErrorCode, holder::Grant, holder::HolderConfig, holder::HolderNext, holder::HolderState,
    holder::SnowflakeHolder, minted::batch_ranges, minted::minter_holder_config,
    minted::MintConfig, minted::MintStep, minted::MintedBuffer, minted::MinterPools,
    minted::MINTERS_PER_REQUEST, minted::RETURN_HOME_MS, rand::SplitMix64, registry::GrantRequest,
    registry::Registry, registry::RegistryConfig, secret::LeaseSecret, secret::SecretHash,
    snowflake::DEFAULT_MAX_BACKWARD_MS, Error, Layout,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

#[path = "support/props.rs"]
mod props;

#[path = "support/secrets.rs"]
mod secrets;
use secrets::sha256;

const T0: u64 = 1_735_689_600_000;
const LAYOUT: Layout = Layout::LEAF;
const MINTERS: u32 = 3;
const STALENESS_MS: u64 = 200;
const RESERVE_MS: u64 = 3_000;
const REG: RegistryConfig = RegistryConfig {
    capacity: 8,
    ttl_ms: 10_000,
    grace_ms: 2_000,
    max_skew_ms: 1_000,
    minters: MINTERS,
    per_owner: None,
    lenders: 0,
    lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
};

#[derive(Debug, Clone)]
enum Op {
    /// Time passes for everyone.
    Tick(u64),
    /// Isolate n's clock steps (within the registry's skew bound).
    Step(usize, i64),
    /// Isolate n serves a request for this many IDs.
    Serve(usize, usize),
    /// The k-th batch answer in flight arrives.
    Deliver(usize),
    /// The k-th batch answer in flight is lost.
    Lose(usize),
    /// Minter m dies and comes back with its clock this far behind the
    /// registry's; it restores from its saved state at its next request.
    Restart(usize, u64),
    /// An ordinary node leases a worker ID.
    Lease,
}

struct Minter {
    /// `None`: not restored yet (after a restart, or refused: its clock is
    /// behind the saved reservation by more than `reserve_ms`).
    holder: Option<SnowflakeHolder<SplitMix64>>,
    saved: HolderState,
    /// Its clock minus the registry's.
    offset: i64,
    /// The saved timestamp its holder was restored from: it mints after it.
    restored_after: u64,
    /// The last ID any incarnation minted.
    last_id: u64,
}

impl Minter {
    fn new(index: u32) -> Minter {
        Minter {
            holder: Some(
                SnowflakeHolder::with_rand(holder_config(), SplitMix64::new(u64::from(index)))
                    .unwrap(),
            ),
            saved: HolderState::default(),
            offset: 0,
            restored_after: 0,
            last_id: 0,
        }
    }
}

/// The service's minter (borrowing included), with a shorter reservation.
fn holder_config() -> HolderConfig {
    HolderConfig {
        reserve_ms: RESERVE_MS,
        ..minter_holder_config(DEFAULT_MAX_BACKWARD_MS)
    }
}

/// The minter's loop, as the Durable Object runs it: restore on first use
/// (and at every request while that is refused), lease, renew and save at
/// once (its registry and store answer synchronously here), and answer what
/// could be minted without waiting. `now` is the registry's clock. Checks
/// every ID minted.
fn mint(
    m: &mut Minter,
    index: u32,
    reg: &mut Registry,
    now: u64,
    count: usize,
) -> Result<Vec<u64>, TestCaseError> {
    let clock = now.saturating_add_signed(m.offset);
    if m.holder.is_none() {
        match SnowflakeHolder::restore(holder_config(), SplitMix64::new(clock), m.saved, clock) {
            Ok(h) => {
                m.holder = Some(h);
                m.restored_after = m.saved.last_timestamp_ms;
            }
            Err(Error::ClockBehindLastReport { .. }) => {
                prop_assert!(clock + RESERVE_MS < m.saved.last_timestamp_ms);
                return Ok(Vec::new());
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    let holder = m.holder.as_mut().expect("restored");
    let mut out = vec![0u64; count];
    let mut filled = 0;
    for _ in 0..8 {
        if holder.save_due_in(clock) == Some(0) {
            if let Some(state) = holder.save_request(clock) {
                m.saved = state;
                holder.saved(&state);
            }
        }
        let Ok(poll) = holder.poll(clock, &mut out[filled..]) else {
            break;
        };
        filled += poll.filled;
        if let Some(r) = poll.renew {
            match reg.renew("", &r.proof(sha256), now) {
                Ok(l) => holder.renewed(Grant::from_lease(&l, None, LAYOUT), clock),
                Err(e) => holder.renewal_failed(r.claim.generation, Some(e.error_code()), clock),
            }
        }
        match poll.next {
            HolderNext::Done => break,
            HolderNext::Lease(ask) => {
                let secret = LeaseSecret::from_random([(now % 251) as u8; 16]);
                let previous = ask.previous.map(|c| c.proof(sha256));
                match reg.lease_minter(index, ask.node_now_ms, previous, sha256(&secret), now) {
                    Ok(l) => {
                        prop_assert_eq!(l.worker_id, index, "a minter got another worker ID");
                        if holder
                            .granted(Grant::from_lease(&l, Some(secret), LAYOUT), clock)
                            .is_err()
                        {
                            break;
                        }
                    }
                    Err(e) => {
                        holder.lease_failed(Some(e.error_code()), clock);
                        break;
                    }
                }
            }
            HolderNext::LeaseInFlight | HolderNext::RetryAfter { .. } => {
                if let Some(state) = holder.save_request(clock) {
                    m.saved = state;
                    holder.saved(&state);
                }
                // As the Durable Object: it never waits; nothing minted is
                // answered as nothing.
                break;
            }
        }
    }
    out.truncate(filled);
    for &id in &out {
        let parts = LAYOUT.decompose(id).unwrap();
        prop_assert_eq!(
            parts.worker_id,
            index,
            "minter {} minted under another ID",
            index
        );
        prop_assert!(
            id > m.last_id,
            "minter {}: {} after {} (restarts included)",
            index,
            id,
            m.last_id
        );
        prop_assert!(
            parts.timestamp_ms > m.restored_after,
            "minter {}: minted at {} though restored after {}",
            index,
            parts.timestamp_ms,
            m.restored_after
        );
        m.last_id = id;
    }
    Ok(out)
}

fn op(isolates: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop_oneof![0u64..20, 0u64..400, Just(2_000u64)].prop_map(Op::Tick),
        1 => (0..isolates, -400i64..400).prop_map(|(n, d)| Op::Step(n, d)),
        10 => (0..isolates, prop_oneof![1usize..5, 1usize..1000]).prop_map(|(n, k)| Op::Serve(n, k)),
        4 => any::<usize>().prop_map(Op::Deliver),
        1 => any::<usize>().prop_map(Op::Lose),
        // Back within the skew bound (behind the reservation, within
        // `reserve_ms` of it or further), or beyond it.
        1 => (0..MINTERS as usize, prop_oneof![Just(0u64), 0u64..=1_000, 3_000u64..=5_000]).prop_map(|(m, back)| Op::Restart(m, back)),
        1 => Just(Op::Lease),
    ]
}

/// The calm phase: rounds this far apart, each isolate serving `CALM_SERVE`
/// IDs and each minter asked for `CALM_SERVE` directly.
const CALM_STEP_MS: u64 = 100;
const CALM_ROUNDS: usize = 40;
const CALM_SERVE: usize = 8;
/// From this round on, every request is served and every minter mints.
const CALM_DEADLINE: usize = 2;

/// An upgrade's hand-over: build 1's minter `i`, at its first request,
/// takes build 0's minter `i`'s saved state (once), which retires.
#[derive(Default)]
struct Succession {
    enabled: bool,
    /// Build 0's minter `i` handed its state over (or was asked to).
    handed: Vec<bool>,
    /// Build 1's minter `i` asked for it.
    took_over: Vec<bool>,
    /// The answer to minter `i`'s hand-over is lost.
    lost: Vec<bool>,
}

struct World {
    reg: Registry,
    /// The minter objects: `b * MINTERS + i` is minter `i` (worker ID `i`)
    /// of build `b` (build 0: `minter-{i}`; build 1, after an upgrade:
    /// `minter-{region}-{i}`, a new object with no saved state).
    minters: Vec<Minter>,
    /// Each isolate's buffer and clock offset.
    isolates: Vec<(MintedBuffer, i64)>,
    /// Each isolate's build: it asks that build's minter objects.
    builds: Vec<usize>,
    /// Each isolate's region's minters (empty: none).
    pools: Vec<std::ops::Range<u32>>,
    /// The build left running in the calm phase (the other's isolates and
    /// minters are gone).
    calm_build: usize,
    /// Minters that never answer in the calm phase (a region down).
    down: Vec<u32>,
    /// The IDs of the last `serve`.
    last_served: Vec<u64>,
    /// The calm phase's rounds are this far apart.
    calm_step_ms: u64,
    /// The hand-over from build 0's minters to build 1's.
    succession: Succession,
    now: u64,
    /// The latest clock reading of any minter.
    latest_clock: u64,
    /// Batch answers on their way: the isolate, its fetch's ticket and
    /// the isolate's clock when it was sent, the ranges (none: the call
    /// failed).
    in_flight: Vec<InFlightFetch>,
    minted: HashSet<u64>,
    served: HashSet<u64>,
}

/// A batch answer on its way: the isolate, its fetch, the ranges.
type InFlightFetch = (usize, Fetch, Vec<(u64, u64)>);

/// A fetch sent: its ticket, and its isolate's clock then.
#[derive(Debug, Clone, Copy)]
struct Fetch {
    ticket: u64,
    sent: u64,
}

impl World {
    /// Isolate n serves `count` IDs (checking each), and sends the fetch it
    /// asks for; returns how many it served.
    fn serve(&mut self, n: usize, count: usize) -> Result<usize, TestCaseError> {
        let (buf, offset) = &mut self.isolates[n];
        let clock = self.now.saturating_add_signed(*offset);
        let mut out = vec![0u64; count];
        let poll = buf.poll(clock, &mut out);
        self.last_served = out[..poll.filled].to_vec();
        for &id in &out[..poll.filled] {
            prop_assert!(self.minted.contains(&id), "served {id}, never minted");
            prop_assert!(self.served.insert(id), "served {id} twice");
            let ts = LAYOUT.decompose(id).unwrap().timestamp_ms;
            prop_assert!(
                clock.saturating_sub(ts) <= STALENESS_MS,
                "served {id} {} ms old",
                clock - ts
            );
            prop_assert!(LAYOUT.decompose(id).unwrap().worker_id < MINTERS);
        }
        let ask = match poll.next {
            MintStep::Done { prefetch } => prefetch,
            MintStep::FetchNow(ask) => Some(ask),
            MintStep::Wait => None,
        };
        if let Some(ask) = ask {
            // One fetch in flight at a time: the one before it was answered,
            // or presumed lost (take_over_ms old) — never closed by another's
            // answer (a late one's, whose fetch a later one took over from).
            let take_over = self.isolates[n].0.config().take_over_ms;
            let before = self.in_flight.iter().rev().find(|f| f.0 == n);
            if let Some((_, f, _)) = before.filter(|f| f.1.ticket + 1 == ask.ticket) {
                prop_assert!(
                    clock.abs_diff(f.sent) >= take_over,
                    "isolate {n}: fetch {} sent while fetch {} ({} ms old) is in flight",
                    ask.ticket,
                    f.ticket,
                    clock.abs_diff(f.sent)
                );
            }
            let m = self.builds[n] * MINTERS as usize + ask.minter as usize;
            let ids = if self.down.contains(&ask.minter) {
                Vec::new()
            } else {
                self.mint(m, ask.count as usize)?
            };
            let fetch = Fetch {
                ticket: ask.ticket,
                sent: clock,
            };
            self.in_flight.push((n, fetch, batch_ranges(&LAYOUT, &ids)));
        }
        Ok(poll.filled)
    }

    fn mint(&mut self, m: usize, count: usize) -> Result<Vec<u64>, TestCaseError> {
        let clock = self.now.saturating_add_signed(self.minters[m].offset);
        self.latest_clock = self.latest_clock.max(clock);
        let index = u32::try_from(m).unwrap() % MINTERS;
        let i = index as usize;
        if m < MINTERS as usize && self.succession.handed[i] {
            // Handed over: it never mints again (answers 503).
            return Ok(Vec::new());
        }
        if m >= MINTERS as usize && self.succession.enabled && !self.succession.took_over[i] {
            // A regional minter's first request: its predecessor's saved
            // state, once; the predecessor retires (durably) before
            // answering. A lost answer leaves it with nothing to prove.
            self.succession.took_over[i] = true;
            let handed = !self.succession.handed[i];
            self.succession.handed[i] = true;
            self.minters[i].holder = None;
            if handed && !self.succession.lost[i] {
                let state = self.minters[i].saved;
                let last_id = self.minters[i].last_id;
                let new = &mut self.minters[m];
                new.saved = state;
                new.holder = None;
                // It carries on from its predecessor's IDs.
                new.last_id = last_id;
            }
        }
        let ids = mint(&mut self.minters[m], index, &mut self.reg, self.now, count)?;
        for &id in &ids {
            prop_assert!(self.minted.insert(id), "minted {id} twice");
        }
        Ok(ids)
    }

    fn deliver(&mut self, k: usize) {
        let (n, fetch, ranges) = self.in_flight.remove(k % self.in_flight.len());
        let (buf, offset) = &mut self.isolates[n];
        let clock = self.now.saturating_add_signed(*offset);
        if ranges.is_empty() {
            // The call failed, as the Worker tells it: by its ticket.
            let _ = buf.fetch_refused(fetch.ticket, ErrorCode::StoreUnavailable, clock, 0);
        } else {
            buf.fetched(fetch.ticket, &ranges, clock).unwrap();
        }
    }

    /// A fetch is lost: its call fails (its answer never comes).
    fn lose(&mut self, k: usize) {
        let (n, fetch, _) = self.in_flight.remove(k % self.in_flight.len());
        let (buf, offset) = &mut self.isolates[n];
        let clock = self.now.saturating_add_signed(*offset);
        let _ = buf.fetch_refused(fetch.ticket, ErrorCode::StoreUnavailable, clock, 0);
    }

    /// Liveness: from `CALM_DEADLINE` on, each minter mints when asked and
    /// each isolate serves every request (trying the next minter after a
    /// failure, as a request does), though minter `lagging.0`'s clock lags
    /// theirs by `lagging.1` ms, more than the staleness bound.
    fn calm(&mut self, lagging: (usize, u64)) -> Result<(), TestCaseError> {
        while !self.in_flight.is_empty() {
            self.deliver(0);
        }
        for (_, offset) in &mut self.isolates {
            *offset = 0;
        }
        // Minters keep a lag of up to half the staleness bound (their
        // clocks still behind a reservation saved before a restart, until
        // time passes it); larger lags are set right, but for one minter
        // that lags the isolates' clocks by more than the staleness bound
        // (within the registry's skew bound, so it still leases and mints):
        // its batches are stale on arrival.
        for m in &mut self.minters {
            if m.offset.unsigned_abs() > STALENESS_MS / 2 {
                m.offset = 0;
            }
        }
        let (lagging, lag) = lagging;
        let first = self.calm_build * MINTERS as usize;
        self.minters[first + lagging].offset = -i64::try_from(lag).unwrap();
        // Past every reservation, lease, fence and grace period; a minter's
        // clock behind its reservation passes it too.
        self.now = self.now.max(self.latest_clock)
            + RESERVE_MS
            + LAYOUT.unit_ms()
            + REG.max_skew_ms
            + REG.ttl_ms
            + REG.grace_ms;
        for round in 0..CALM_ROUNDS {
            self.now += self.calm_step_ms;
            // An isolate that failed over just before comes back to its
            // region's minters within RETURN_HOME_MS.
            let settled = round >= CALM_DEADLINE
                && (round as u64) * self.calm_step_ms > RETURN_HOME_MS + self.calm_step_ms;
            for m in first..first + MINTERS as usize {
                if self.down.contains(&(u32::try_from(m).unwrap() % MINTERS)) {
                    continue;
                }
                let ids = self.mint(m, CALM_SERVE)?;
                prop_assert!(
                    round < CALM_DEADLINE || !ids.is_empty(),
                    "calm round {}: minter {} minted nothing",
                    round,
                    m
                );
            }
            for n in 0..self.isolates.len() {
                if self.builds[n] != self.calm_build {
                    continue;
                }
                let tries = self.isolates[n].0.config().tries_per_request() as usize;
                let mut served = 0;
                for _ in 0..=tries {
                    served += self.serve(n, CALM_SERVE - served)?;
                    if settled {
                        self.check_own_region(n, lagging)?;
                    }
                    while !self.in_flight.is_empty() {
                        self.deliver(0);
                    }
                    if served == CALM_SERVE {
                        break;
                    }
                }
                prop_assert!(
                    round < CALM_DEADLINE || served == CALM_SERVE,
                    "calm round {}: isolate {} served {} of {}",
                    round,
                    n,
                    served,
                    CALM_SERVE
                );
            }
        }
        Ok(())
    }

    /// In the calm phase, an isolate with a region's pool serves IDs of its
    /// region's minters (worker IDs in its pool), unless one of them lags
    /// (its batches are stale) or its region is down: then of another's.
    fn check_own_region(&self, n: usize, lagging: usize) -> Result<(), TestCaseError> {
        let pool = self.pools[n].clone();
        let lagging = u32::try_from(lagging).unwrap();
        let all_down = pool.clone().all(|m| self.down.contains(&m));
        if pool.is_empty() || pool.contains(&lagging) {
            return Ok(());
        }
        for &id in &self.last_served {
            let worker = LAYOUT.decompose(id).unwrap().worker_id;
            prop_assert_eq!(
                pool.contains(&worker),
                !all_down,
                "isolate {} (pool {:?}, down {:?}) served {} of worker ID {}",
                n,
                pool,
                self.down,
                id,
                worker
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(props::config(300))]

    #[test]
    fn minted_ids_are_served_once_fresh_and_from_reserved_ids(
        homes in prop::collection::vec(0u64..MINTERS as u64, 1..5),
        ops in prop::collection::vec(op(4), 1..300),
        lagging in (0..MINTERS as usize, STALENESS_MS + 1..=3 * STALENESS_MS),
    ) {
        let mut w = World {
            reg: Registry::new(REG).unwrap(),
            minters: (0..MINTERS).map(Minter::new).collect(),
            isolates: homes
                .iter()
                .map(|&h| {
                    let config = MintConfig { staleness_ms: STALENESS_MS, ..MintConfig::new(MINTERS, h) };
                    (MintedBuffer::new(LAYOUT, config).unwrap(), 0)
                })
                .collect(),
            builds: vec![0; homes.len()],
            pools: vec![0..0; homes.len()],
            calm_build: 0,
            down: Vec::new(),
            last_served: Vec::new(),
            calm_step_ms: CALM_STEP_MS,
            succession: Succession { handed: vec![false; MINTERS as usize], ..Succession::default() },
            now: T0,
            latest_clock: T0,
            in_flight: Vec::new(),
            minted: HashSet::new(),
            served: HashSet::new(),
        };
        let mut ordinary = 0;
        for op in ops {
            match op {
                Op::Tick(ms) => w.now += ms,
                Op::Step(n, d) => {
                    let n = n % w.isolates.len();
                    w.isolates[n].1 = (w.isolates[n].1 + d).clamp(-800, 800);
                }
                Op::Serve(n, count) => {
                    let n = n % w.isolates.len();
                    let _ = w.serve(n, count)?;
                }
                Op::Deliver(k) if !w.in_flight.is_empty() => w.deliver(k),
                Op::Lose(k) if !w.in_flight.is_empty() => w.lose(k),
                Op::Restart(m, back) => {
                    let minter = &mut w.minters[m];
                    minter.holder = None;
                    minter.offset = -i64::try_from(back).unwrap();
                }
                Op::Lease => {
                    ordinary += 1;
                    let key = format!("node-{ordinary}");
                    let ask = GrantRequest { owner: "", node_key: &key, node_now_ms: w.now, previous: None, secret_hash: SecretHash([0; 32]) };
                    if let Ok(l) = w.reg.lease(ask, w.now) {
                        prop_assert!(l.worker_id >= MINTERS, "an ordinary node got reserved ID {}", l.worker_id);
                    }
                }
                Op::Deliver(_) | Op::Lose(_) => {}
            }
        }
        w.calm(lagging)?;
    }
}

/// A minter mints, saves a reservation 3 s ahead, dies, and comes back with
/// its clock `back` ms behind: it mints nothing while its clock is at or
/// before the saved reservation (a restore `reserve_ms` or more behind it is
/// refused, and tried again at each request), no ID repeats, and it mints
/// again at the first request once its clock is a time unit past it.
#[test]
fn a_minter_back_behind_its_reservation_mints_again_once_its_clock_passes_it() {
    for back in [0u64, 800, 2_000, 2_999, 3_000, 4_500] {
        // A registry that tolerates the clock step, so that only the
        // reservation holds the minter back.
        let cfg = RegistryConfig {
            max_skew_ms: 5_000,
            grace_ms: 6_000,
            ..REG
        };
        let mut reg = Registry::new(cfg).unwrap();
        let mut m = Minter::new(1);
        let before = mint(&mut m, 1, &mut reg, T0, 10).unwrap();
        assert_eq!(before.len(), 10, "back {back}: a fresh minter mints");
        let reserved = m.saved.last_timestamp_ms;
        assert_eq!(reserved, T0 + RESERVE_MS);
        m.holder = None;
        m.offset = -i64::try_from(back).unwrap();
        let mut seen: HashSet<u64> = before.into_iter().collect();
        let mut resumed = None;
        for t in (T0..T0 + 10_000).step_by(10) {
            let ids = mint(&mut m, 1, &mut reg, t, 10).unwrap();
            let clock = t - back;
            assert_eq!(
                m.holder.is_none(),
                clock + RESERVE_MS < reserved,
                "back {back}: the restore at clock {clock} is refused exactly while more than reserve_ms behind {reserved}"
            );
            for &id in &ids {
                assert!(seen.insert(id), "back {back}: {id} twice");
            }
            if ids.is_empty() {
                assert!(
                    resumed.is_none(),
                    "back {back}: nothing at clock {clock} after resuming"
                );
            } else {
                assert!(clock > reserved, "back {back}: minted at clock {clock}");
                resumed.get_or_insert(clock);
            }
        }
        let resumed = resumed.expect("minted again");
        assert!(
            resumed <= reserved + LAYOUT.unit_ms() + 10,
            "back {back}: minted again only at {resumed}, reservation {reserved}"
        );
    }
}

/// Regions in the upgrade test (over `MINTERS` = 3: pools 0..2 and 2..3).
const REGIONS: u32 = 2;

proptest! {
    #![proptest_config(props::config(300))]

    /// An upgrade from minters `minter-{i}` to regional minters
    /// `minter-{region}-{i}` (new objects, same worker IDs): each new one
    /// takes its predecessor's saved state over at its first request (the
    /// old one retires first; an answer may be lost), or, without the
    /// hand-over, starts with no state, so no proof of the old grants.
    /// Isolates of the old build keep
    /// asking the old objects while the new build's ask the new ones
    /// (a rollout), minters restart, clocks step. No ID is minted or served
    /// twice: a new minter with the state restarts from it (proving the
    /// grant, after the reservation) while the old one mints no more; one
    /// without gets its worker ID only once the old grant is free (lapsed +
    /// grace), issuing after its end and after every timestamp the old one
    /// reported. Then, the old build gone: every new
    /// minter mints, every isolate is served, each from its own region's
    /// minters (worker IDs in its pool), and with one region's minters down
    /// its isolates from another region's, within each request.
    #[test]
    fn an_upgrade_to_regional_minters_never_mints_an_id_twice(
        old_homes in prop::collection::vec(0u64..MINTERS as u64, 1..4),
        new_isolates in prop::collection::vec((0..REGIONS, any::<u64>()), 1..5),
        prefix in prop::collection::vec(op(3), 0..100),
        ops in prop::collection::vec(op(7), 1..300),
        lagging in (0..MINTERS as usize, STALENESS_MS + 1..=3 * STALENESS_MS),
        down in prop::option::of(0..REGIONS),
        hand_over in any::<bool>(),
        lost in prop::collection::vec(any::<bool>(), MINTERS as usize),
    ) {
        let pools = MinterPools::new(MINTERS, REGIONS).unwrap();
        let config = |c: MintConfig| MintConfig { staleness_ms: STALENESS_MS, ..c };
        let mut isolates: Vec<(MintedBuffer, i64)> = old_homes
            .iter()
            .map(|&h| (MintedBuffer::new(LAYOUT, config(MintConfig::new(MINTERS, h))).unwrap(), 0))
            .collect();
        let mut builds = vec![0; isolates.len()];
        let mut own = vec![0..0; isolates.len()];
        for &(region, home) in &new_isolates {
            own.push(pools.pool(region));
            let c = config(MintConfig::in_pool(MINTERS, pools.pool(region), home));
            isolates.push((MintedBuffer::new(LAYOUT, c).unwrap(), 0));
            builds.push(1);
        }
        let mut w = World {
            reg: Registry::new(REG).unwrap(),
            minters: (0..2 * MINTERS).map(Minter::new).collect(),
            isolates,
            builds,
            pools: own,
            calm_build: 1,
            down: Vec::new(),
            last_served: Vec::new(),
            calm_step_ms: 400,
            succession: Succession {
                enabled: hand_over,
                handed: vec![false; MINTERS as usize],
                took_over: vec![false; MINTERS as usize],
                lost,
            },
            now: T0,
            latest_clock: T0,
            in_flight: Vec::new(),
            minted: HashSet::new(),
            served: HashSet::new(),
        };
        let old = old_homes.len();
        // The old build alone first (its minters hold grants and saved
        // reservations), then both builds at once.
        for (k, op) in prefix.into_iter().map(|o| (0, o)).chain(ops.into_iter().map(|o| (1, o))) {
            let isolates = if k == 0 { old } else { w.isolates.len() };
            match op {
                Op::Tick(ms) => w.now += ms,
                Op::Step(n, d) => {
                    let n = n % isolates;
                    w.isolates[n].1 = (w.isolates[n].1 + d).clamp(-800, 800);
                }
                Op::Serve(n, count) => {
                    let _ = w.serve(n % isolates, count)?;
                }
                Op::Deliver(k) if !w.in_flight.is_empty() => w.deliver(k),
                Op::Lose(k) if !w.in_flight.is_empty() => w.lose(k),
                Op::Restart(m, back) => {
                    let object = (m + (back as usize % 2) * MINTERS as usize * k) % w.minters.len();
                    let minter = &mut w.minters[object];
                    minter.holder = None;
                    minter.offset = -i64::try_from(back).unwrap();
                }
                Op::Deliver(_) | Op::Lose(_) | Op::Lease => {}
            }
        }
        w.down = down.map(|r| pools.pool(r).collect()).unwrap_or_default();
        // Some minter that is neither down nor lagging must be left.
        let (mut lagging, lag) = lagging;
        if (0..MINTERS).all(|m| w.down.contains(&m) || m as usize == lagging) {
            lagging = w.down[0] as usize;
        }
        w.calm((lagging, lag))?;
    }
}

#[test]
fn the_pool_split_is_disjoint_contiguous_and_even() {
    for regions in 1..=MAX_REGIONS_TESTED {
        for minters in 0..=200u32 {
            let p = MinterPools::new(minters, regions).unwrap();
            let h = p.hosting();
            assert_eq!(h, minters.min(regions));
            let mut next = 0;
            let mut sizes = Vec::new();
            for k in 0..regions + 2 {
                let pool = p.pool(k);
                if k >= h {
                    assert!(
                        pool.is_empty(),
                        "{minters} over {regions}: region {k} hosts {pool:?}"
                    );
                    continue;
                }
                assert_eq!(
                    pool.start, next,
                    "{minters} over {regions}: region {k} not contiguous"
                );
                next = pool.end;
                sizes.push(pool.len());
                for i in pool {
                    assert_eq!(p.host(i), Some(k));
                }
            }
            assert_eq!(
                next, minters,
                "{minters} over {regions}: not every minter hosted"
            );
            assert!(sizes.iter().all(|&n| n >= 1), "a hosting region hosts none");
            assert!(sizes.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
            assert_eq!(p.host(minters), None);
        }
    }
    assert!(MinterPools::new(4, 0).is_err());
    assert!(MinterPools::new(4, 65).is_err());
}

const MAX_REGIONS_TESTED: u32 = 12;

proptest! {
    #![proptest_config(props::config(256))]

    /// An isolate's order of minters: every minter once per turn, its
    /// region's pool first (from its home), then the others.
    #[test]
    fn an_isolate_asks_its_regions_minters_first_then_every_other(
        minters in 1u32..300,
        regions in 1u32..=16,
        region in 0u32..16,
        home in any::<u64>(),
    ) {
        let pools = MinterPools::new(minters, regions).unwrap();
        let pool = pools.pool(region % regions);
        let c = MintConfig::in_pool(minters, pool.clone(), home);
        prop_assert!(c.validate(&LAYOUT).is_ok());
        let order: Vec<u32> = (0..minters).map(|p| c.minter_at(p)).collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..minters).collect::<Vec<_>>());
        let len = pool.len();
        let first = len.min(MINTERS_PER_REQUEST as usize);
        prop_assert!(order[..first].iter().all(|m| pool.contains(m)));
        // The whole pool before any other region's but one.
        let others_early = order[..len.min(order.len())]
            .iter()
            .filter(|m| !pool.contains(m))
            .count();
        prop_assert!(others_early <= 1);
        prop_assert_eq!(order.first().copied(), Some(c.home));
        prop_assert_eq!(c.minter_at(minters), order[0]);
        // A request reaches another region's minter when the whole pool
        // fails, and never fans out past MINTERS_PER_REQUEST + 1.
        let tries = c.tries_per_request() as usize;
        prop_assert!(tries <= minters as usize);
        prop_assert!(tries <= MINTERS_PER_REQUEST as usize + 1);
        prop_assert!(
            order[..tries].iter().any(|m| !pool.contains(m)) || len == minters as usize
        );
    }
}

#[test]
fn the_services_minters_are_split_over_the_hosting_regions() {
    use edgeleaf::minted::MINTER_REGIONS;
    use edgeleaf::region::Region;
    let mut hosting = MINTER_REGIONS.to_vec();
    hosting.sort_unstable();
    let mut expected = Region::HOSTING.to_vec();
    expected.sort_unstable();
    assert_eq!(hosting, expected, "every region where objects live, once");
    // By share (enam, weur, apac, wnam, eeur, oc): one each, the rest by
    // MINTER_SHARES. 36, as shipped (worker/wrangler.toml, sized by make
    // sim): apac 17. 16 (the release before: 3, 3, 3, 3, 2, 2 evenly).
    let sizes = |n| {
        let p = MinterPools::over_regions(n);
        MINTER_REGIONS
            .iter()
            .map(|r| p.region_pool(*r).len())
            .collect::<Vec<usize>>()
    };
    assert_eq!(sizes(36), [5, 7, 17, 2, 4, 1]);
    assert_eq!(sizes(32), [4, 6, 15, 2, 4, 1]);
    assert_eq!(sizes(16), [2, 3, 7, 1, 2, 1]);
    assert_eq!(sizes(6), [1; 6]);
    assert_eq!(edgeleaf::minted::MINTER_SHARES.iter().sum::<u32>(), 100);
    // More minters never shrink a region's pool.
    for minters in 6..=512 {
        let (a, b) = (sizes(minters), sizes(minters + 1));
        assert!(
            a.iter().zip(&b).all(|(x, y)| x <= y),
            "{minters}: {a:?} -> {b:?}"
        );
        assert_eq!(b.iter().sum::<usize>(), minters as usize + 1);
    }
    for minters in 0..=64 {
        let p = MinterPools::over_regions(minters);
        for i in 0..minters {
            let r = p.minter_region(i).expect("hosted");
            assert!(p.region_pool(r).contains(&i));
        }
        for r in Region::ALL {
            let pool = p.region_pool(r);
            assert_eq!(pool, p.region_pool(r.hosting()));
            // Two regions' pools never share a minter (a worker ID).
            for o in Region::ALL
                .into_iter()
                .filter(|o| o.hosting() != r.hosting())
            {
                let other = p.region_pool(o);
                assert!(
                    pool.clone().all(|i| !other.contains(&i)),
                    "{r} and {o} share"
                );
            }
            let rank = MINTER_REGIONS
                .iter()
                .position(|h| *h == r.hosting())
                .unwrap();
            assert_eq!(pool.is_empty(), minters as usize <= rank);
        }
    }
    // Fewer minters than regions: the first host one each.
    let few = MinterPools::over_regions(2);
    assert_eq!(few.region_pool(Region::Enam), 0..1);
    assert_eq!(few.region_pool(Region::Afr), 1..2);
    assert!(few.region_pool(Region::Oc).is_empty());
}
