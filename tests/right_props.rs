//! Rights to mint (docs/design.md; `src/minted/right.rs`), tested through
//! the public API against the real core: one `Registry`; minters, each a
//! batch holder (worker ID `i`, `minter_holder_config`) minting batches and
//! a rights holder (worker ID `N + i`, `lease_minter(N + i)`,
//! `rights_holder_config`) lending through a `RightLedger`, each holder
//! saved under its own row (`'holder'`, `'rights'`); isolates whose
//! `MintedBuffer`s (`MintConfig::rights`) fetch a batch and a right and
//! serve IDs from both.
//!
//! Random steps: time passes (a little, or past leases); a minter's or an
//! isolate's clock steps (forward and back, within and past the registry's
//! skew bound); an isolate serves 1..100 IDs (the minter answers at once;
//! the answer travels); an answer arrives (in any order: a late one is the
//! buffer's to drop), or is lost (the right lent, never delivered); a
//! minter restarts (a new instance restored from its rows, its ledger
//! lost, its clock perhaps set back); a minter shuts down (its holders
//! closed, what `state()` then says saved); a minter's store fails for a
//! while;
//! a minter is idle while time passes (the others keep their leases), so
//! its leases lapse and it leases again; a rollback (the minter's next
//! instance is of the release before: a batch holder alone, restored from
//! `'holder'`, answering batches only, until a restart brings the current
//! release back); time runs to just before an isolate's right ends; the
//! registry runs the release before rights (it reserves `N` worker IDs, so
//! it refuses `lease_minter(N + i)` and ordinary nodes may lease `N + i`
//! once free) or this release again; an ordinary node leases and mints at
//! once (under `N + i` too, from the registry of the release before).
//!
//! Properties: no ID issued twice across every minter and isolate (batch
//! IDs as minted, right IDs as the isolates mint them); every ID an isolate
//! mints under a right lies in that right (its worker ID, its window
//! `[from_ms, until_ms)`, its slice of the sequence); no minter instance
//! lends a (slice, time unit) any instance of it lent before; a batch ID
//! is served only once it was minted, and once. Work is done: after the
//! random steps, a calm phase (clocks agree, stores up, the current release
//! everywhere) in which every isolate's requests are served and at least
//! half of what each serves is minted under rights.
//!
//! `each_planted_fault_is_caught` shows the properties can fail: each
//! `Fault` is planted in the worlds drawn from the run's seed, one after
//! another, until one breaks (in a world that holds without it); the
//! smallest world found is printed. `planted_fault_rates` (ignored: it
//! measures) counts how many worlds each breaks.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, HashSet};

use edgeleaf::{
    code::ErrorCode,
    holder::{Grant, HolderConfig, HolderNext, HolderPoll, HolderState, Lendable, SnowflakeHolder},
    minted::{
        batch_beside_right, batch_ranges, minter_holder_config, rights_holder_config,
        rights_worker_index, BatchAsk, Fetched, MintConfig, MintRight, MintStep, MintedBuffer,
        RightLedger, MAX_RIGHT_MS,
    },
    rand::SplitMix64,
    registry::{GrantRequest, Registry, RegistryConfig},
    secret::LeaseSecret,
    snowflake::DEFAULT_MAX_BACKWARD_MS,
    Error, Layout,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestCaseError;

#[path = "support/props.rs"]
mod props;
#[path = "support/secrets.rs"]
mod secrets;
use secrets::sha256;

const T0: u64 = 1_735_689_600_000;
const LAYOUT: Layout = Layout::LEAF;
/// Minters (`N`): worker IDs `0..N` mint batches, `N..2N` lend rights.
const N: u32 = 2;
/// The service's TTL and grace; its rights holders lend (rights up to
/// `MAX_RIGHT_MS`: the lease's expiry and the saved reservation bound them).
const REG: RegistryConfig = RegistryConfig {
    capacity: 8,
    ttl_ms: 60_000,
    grace_ms: 10_000,
    max_skew_ms: 1_000,
    minters: 2 * N,
    per_owner: None,
    lenders: N,
    lender_ttl_ms: edgeleaf::registry::DEFAULT_LENDER_TTL_MS,
};
/// Clocks stay within this of the registry's (past its skew bound: the
/// registry refuses them for a while).
const MAX_OFFSET_MS: i64 = 1_500;

/// A fault planted in a minter's or an isolate's host, to show the
/// properties fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// The minter lends from a copy of its ledger: no slice's free time
    /// ever advances.
    LedgerCopy,
    /// The isolate's host hands its buffer a right one time unit longer
    /// than the one lent.
    PastUntil,
    /// The minter lends up to its lease's expiry, whatever reservation its
    /// store saved (`lendable`'s bound by the reservation ignored). Planted
    /// under a registry that does not know its lenders (`lenders` 0): one
    /// that does records each expiry it answers a lender as the ID's floor,
    /// which fences a restarted minter as well; the reservation is the
    /// second fence.
    IgnoreReservation,
    /// The minter never records a right it lent (`lent_until`): only what
    /// a holder saves once closed (its exact last timestamp, the
    /// reservation dropped) relies on it alone. Planted, as
    /// `IgnoreReservation`, under a registry without lenders.
    NoLentUntil,
}

const FAULTS: [Fault; 4] = [
    Fault::LedgerCopy,
    Fault::PastUntil,
    Fault::IgnoreReservation,
    Fault::NoLentUntil,
];

#[derive(Debug, Clone)]
enum Op {
    /// Time passes for everyone.
    Tick(u64),
    /// Minter m's clock steps (by ms, within `MAX_OFFSET_MS` of the
    /// registry's).
    MinterClock(usize, i64),
    /// Isolate n's clock steps.
    IsolateClock(usize, i64),
    /// Isolate n serves a request for this many IDs.
    Serve(usize, usize),
    /// The k-th answer in flight arrives.
    Deliver(usize),
    /// The k-th answer in flight is lost (its call fails).
    Lose(usize),
    /// Minter m restarts (the current release), its clock this far back.
    Restart(usize, u64),
    /// Minter m's next instance is of the release before.
    Rollback(usize),
    /// Minter m's store fails (or works again).
    Store(usize),
    /// Minter m is idle for this long; the others keep their leases.
    Idle(usize, u64),
    /// Time runs to `d` ms before isolate n's right ends (by its clock).
    NearEnd(usize, i64),
    /// The registry runs the release before rights (it reserves `N` worker
    /// IDs, so `N..2N` are ordinary nodes' once free, and refuses
    /// `lease_minter(N + i)`), or this release again.
    RegistryRelease { before: bool },
    /// An ordinary node leases and mints this many IDs at once (its grant
    /// then lapses).
    Node(usize),
    /// Minter m's instance shuts down: both holders close (their releases
    /// sent; the registry refuses a minter's), what each then says to save
    /// (`state()`: the exact last timestamp) saved unless the store is
    /// down; its next instance restores from that.
    Close(usize),
}

fn op(isolates: usize) -> impl Strategy<Value = Op> {
    let m = 0..N as usize;
    prop_oneof![
        4 => prop_oneof![0u64..50, 0u64..2_000, 5_000u64..25_000].prop_map(Op::Tick),
        3 => (m.clone(), -600i64..600).prop_map(|(m, d)| Op::MinterClock(m, d)),
        1 => (0..isolates, -600i64..600).prop_map(|(n, d)| Op::IsolateClock(n, d)),
        12 => (0..isolates, 1usize..=100).prop_map(|(n, k)| Op::Serve(n, k)),
        5 => any::<usize>().prop_map(Op::Deliver),
        1 => any::<usize>().prop_map(Op::Lose),
        2 => (m.clone(), prop_oneof![Just(0u64), 0u64..1_500]).prop_map(|(m, b)| Op::Restart(m, b)),
        1 => m.clone().prop_map(Op::Rollback),
        1 => m.clone().prop_map(Op::Store),
        1 => (m, prop_oneof![70_000u64..90_000, 360_000u64..400_000])
            .prop_map(|(m, ms)| Op::Idle(m, ms)),
        2 => (0..isolates, -4i64..=2).prop_map(|(n, d)| Op::NearEnd(n, d)),
        1 => any::<bool>().prop_map(|before| Op::RegistryRelease { before }),
        2 => (1usize..=64).prop_map(Op::Node),
        1 => (0..N as usize).prop_map(Op::Close),
    ]
}

#[derive(Debug, Clone)]
struct Plan {
    homes: Vec<u64>,
    /// Each minter's clock minus the registry's, at first.
    offsets: Vec<i64>,
    ops: Vec<Op>,
}

fn plan() -> impl Strategy<Value = Plan> {
    // Not flat-mapped from the isolates' count (ops name isolates modulo
    // it): shrinking the homes then leaves the ops as they are.
    (
        prop::collection::vec(0u64..u64::from(N), 1..=4),
        prop::collection::vec(-1_000i64..=1_000, N as usize),
        prop::collection::vec(op(4), 1..200),
    )
        .prop_map(|(homes, offsets, ops)| Plan {
            homes,
            offsets,
            ops,
        })
}

struct Minter {
    /// The instance's holders (`None`: restored at its next request; the
    /// rights holder also while restoring is refused).
    batch: Option<SnowflakeHolder<SplitMix64>>,
    rights: Option<SnowflakeHolder<SplitMix64>>,
    /// The instance's ledger (lost with it).
    ledger: RightLedger,
    /// The instance is of the release before: batches only.
    old: bool,
    /// Its store's rows.
    holder_row: HolderState,
    rights_row: HolderState,
    store_down: bool,
    /// Its clock minus the registry's.
    offset: i64,
    /// Every right any of its instances lent, by slice.
    lent: BTreeMap<u32, Vec<MintRight>>,
    /// Instances started (each draws another random stream).
    instances: u64,
}

impl Minter {
    fn new() -> Minter {
        Minter {
            batch: None,
            rights: None,
            ledger: RightLedger::new(LAYOUT),
            old: false,
            holder_row: HolderState::default(),
            rights_row: HolderState::default(),
            store_down: false,
            offset: 0,
            lent: BTreeMap::new(),
            instances: 0,
        }
    }

    /// A new instance (of the release before if `old`): its holders
    /// restored from the rows at its next request, its ledger empty.
    fn restart(&mut self, old: bool) {
        self.batch = None;
        self.rights = None;
        self.ledger = RightLedger::new(LAYOUT);
        self.old = old;
        self.instances += 1;
    }
}

fn batch_config() -> HolderConfig {
    minter_holder_config(DEFAULT_MAX_BACKWARD_MS)
}

fn rights_config() -> HolderConfig {
    rights_holder_config(DEFAULT_MAX_BACKWARD_MS)
}

/// A holder restored from `row` at `clock` (`None`: refused, its clock
/// further behind the saved reservation than `reserve_ms`).
fn restore(
    config: HolderConfig,
    row: HolderState,
    seed: u64,
    clock: u64,
) -> Result<Option<SnowflakeHolder<SplitMix64>>, TestCaseError> {
    match SnowflakeHolder::restore(config, SplitMix64::new(seed), row, clock) {
        Ok(h) => Ok(Some(h)),
        Err(Error::ClockBehindLastReport { .. }) => {
            prop_assert!(clock + config.reserve_ms < row.last_timestamp_ms);
            Ok(None)
        }
        Err(e) => panic!("restore: unexpected {e}"),
    }
}

/// A renewal, by this release's registry or by the release before's
/// (0.1.0, no lenders: `RegistryConfig::lenders` 0), whose `renew` sets the
/// expiry to its clock + its TTL, whatever it was, where this release's
/// never moves a minter's back: that rule applied by hand.
fn renew(
    reg: &mut Registry,
    renewal: &edgeleaf::holder::Renewal<edgeleaf::secret::Proof>,
    now: u64,
) -> Result<edgeleaf::registry::Lease, Error> {
    let mut lease = reg.renew("", renewal, now)?;
    let config = *reg.config();
    if config.lenders == 0 && lease.expires_at_ms != now + config.ttl_ms {
        lease.expires_at_ms = now + config.ttl_ms;
        let slots: Vec<_> = reg
            .slots()
            .cloned()
            .map(|mut s| {
                if s.worker_id == lease.worker_id {
                    s.expires_at_ms = lease.expires_at_ms;
                }
                s
            })
            .collect();
        *reg = Registry::from_parts(config, reg.next_generation(), slots).unwrap();
    }
    Ok(lease)
}

/// One holder's turn in a request, as the minter's Durable Object runs it:
/// save when due (to `row`, unless the store is down), poll (minting into
/// `out`), renew and lease at once (the registry answers synchronously),
/// never wait. `index`: the `lease_minter` index (`i` or `N + i`); `now`:
/// the registry's clock, `clock`: the minter's.
#[allow(clippy::too_many_arguments)]
fn drive(
    holder: &mut SnowflakeHolder<SplitMix64>,
    reg: &mut Registry,
    index: u32,
    row: &mut HolderState,
    store_down: bool,
    now: u64,
    clock: u64,
    out: &mut [u64],
) -> (usize, Option<ErrorCode>) {
    let mut save = |holder: &mut SnowflakeHolder<SplitMix64>, due: bool| {
        if due && holder.save_due_in(clock) != Some(0) {
            return;
        }
        if let Some(state) = holder.save_request(clock) {
            if store_down {
                holder.save_failed();
            } else {
                *row = state;
                holder.saved(&state);
            }
        }
    };
    let (mut filled, mut leased, mut refused) = (0, false, None);
    for _ in 0..8 {
        save(holder, true);
        let Ok(poll) = holder.poll(clock, &mut out[filled..]) else {
            break;
        };
        filled += poll.filled;
        if let Some(r) = poll.renew {
            match renew(reg, &r.proof(sha256), now) {
                Ok(l) => holder.renewed(Grant::from_lease(&l, None, LAYOUT), clock),
                Err(e) => holder.renewal_failed(r.claim.generation, Some(e.error_code()), clock),
            }
        }
        match poll.next {
            HolderNext::Done => break,
            HolderNext::Lease(ask) if !leased => {
                leased = true;
                let secret = LeaseSecret::from_random([(now % 251) as u8; 16]);
                let previous = ask.previous.map(|c| c.proof(sha256));
                match reg.lease_minter(index, ask.node_now_ms, previous, sha256(&secret), now) {
                    Ok(l) => {
                        assert_eq!(l.worker_id, index, "a minter got another worker ID");
                        if holder
                            .granted(Grant::from_lease(&l, Some(secret), LAYOUT), clock)
                            .is_err()
                        {
                            break;
                        }
                    }
                    Err(e) => {
                        refused = Some(e.error_code());
                        holder.lease_failed(refused, clock);
                        break;
                    }
                }
            }
            _ => {
                save(holder, false);
                break;
            }
        }
    }
    (filled, refused)
}

/// An answer on its way to isolate `n`: its fetch's ticket, and the batch
/// and right (`None`: the call failed).
type Answer = (usize, u64, Option<(Vec<(u64, u64)>, Option<MintRight>)>);

struct Isolate {
    buf: MintedBuffer,
    offset: i64,
    /// The right its buffer holds, as lent.
    right: Option<MintRight>,
}

struct World {
    fault: Fault,
    /// The registry's settings: `REG`, but without lenders under
    /// `Fault::IgnoreReservation` and `Fault::NoLentUntil` (see there),
    /// whose renewals then set the expiry as 0.1.0's do (`renew`).
    cfg: RegistryConfig,
    reg: Registry,
    minters: Vec<Minter>,
    isolates: Vec<Isolate>,
    now: u64,
    in_flight: Vec<Answer>,
    /// Every ID issued: batch IDs as minted, right IDs as minted by an
    /// isolate.
    issued: HashSet<u64>,
    /// Batch IDs served.
    served: HashSet<u64>,
    /// IDs minted under rights, rights lent.
    right_ids: u64,
    lent: u64,
    /// The rights holders' lease refusals, by code.
    rights_refused: BTreeMap<String, u64>,
    /// How far ahead of its isolate's clock a right ID was stamped, at most.
    ahead_ms: u64,
    /// Ordinary nodes, and the IDs they minted under a rights holder's
    /// worker ID (`N..2N`, leased from the registry of the release before).
    nodes: u64,
    node_ids: u64,
}

impl World {
    fn new(fault: Fault, homes: &[u64]) -> World {
        let cfg = RegistryConfig {
            lenders: if matches!(fault, Fault::IgnoreReservation | Fault::NoLentUntil) {
                0
            } else {
                REG.lenders
            },
            ..REG
        };
        World {
            fault,
            cfg,
            reg: Registry::new(cfg).unwrap(),
            minters: (0..N).map(|_| Minter::new()).collect(),
            isolates: homes
                .iter()
                .map(|&h| Isolate {
                    buf: MintedBuffer::new(
                        LAYOUT,
                        MintConfig {
                            rights: true,
                            ..MintConfig::new(N, h)
                        },
                    )
                    .unwrap(),
                    offset: 0,
                    right: None,
                })
                .collect(),
            now: T0,
            in_flight: Vec::new(),
            issued: HashSet::new(),
            served: HashSet::new(),
            right_ids: 0,
            lent: 0,
            rights_refused: BTreeMap::new(),
            ahead_ms: 0,
            nodes: 0,
            node_ids: 0,
        }
    }

    fn isolate_clock(&self, n: usize) -> u64 {
        self.now.saturating_add_signed(self.isolates[n].offset)
    }

    /// Minter m answers `ask`: a batch of up to `ask.count` IDs from its
    /// batch holder and, when asked and of the current release, a right
    /// its rights holder lends. `None`: nothing (a 503).
    #[allow(clippy::type_complexity)]
    fn answer(
        &mut self,
        m: usize,
        ask: BatchAsk,
    ) -> Result<Option<(Vec<(u64, u64)>, Option<MintRight>)>, TestCaseError> {
        let now = self.now;
        let fault = self.fault;
        let index = u32::try_from(m).unwrap();
        let w = &mut self.minters[m];
        let clock = now.saturating_add_signed(w.offset);
        let seed = w.instances * 2 * u64::from(N) + u64::from(index);
        let mut right = None;
        if ask.right && !w.old {
            let rights_index = rights_worker_index(N, index);
            if w.rights.is_none() {
                w.rights = restore(rights_config(), w.rights_row, seed + u64::from(N), clock)?;
            }
            if let Some(h) = &mut w.rights {
                let (_, refused) = drive(
                    h,
                    &mut self.reg,
                    rights_index,
                    &mut w.rights_row,
                    w.store_down,
                    now,
                    clock,
                    &mut [],
                );
                if let Some(code) = refused {
                    *self.rights_refused.entry(format!("{code:?}")).or_default() += 1;
                }
                let lendable = match (fault, h.lease()) {
                    (Fault::IgnoreReservation, Some(g)) => h.lendable(clock).map(|l| Lendable {
                        until_ms: g.expires_at_ms,
                        ..l
                    }),
                    _ => h.lendable(clock),
                };
                right = match fault {
                    Fault::LedgerCopy => w.ledger.clone().lend(clock, lendable),
                    _ => w.ledger.lend(clock, lendable),
                };
                if let Some(r) = right {
                    if fault != Fault::NoLentUntil {
                        h.lent_until(r.until_ms);
                    }
                    prop_assert!(r.validate(&LAYOUT).is_ok(), "{:?} outside the layout", r);
                    prop_assert_eq!(r.worker_id, rights_index);
                    prop_assert!(r.until_ms - r.from_ms <= MAX_RIGHT_MS);
                    let before = w.lent.entry(r.seq_start).or_default();
                    if let Some(o) = before
                        .iter()
                        .find(|o| o.from_ms < r.until_ms && r.from_ms < o.until_ms)
                    {
                        return Err(TestCaseError::fail(format!(
                            "minter {m} (instance {}) lent {r:?}, overlapping {o:?} lent before",
                            w.instances
                        )));
                    }
                    before.push(r);
                    self.lent += 1;
                }
            }
        }
        // As the Worker's minter: the right first, and no batch beside one
        // that serves the ask alone.
        let count = batch_beside_right(&LAYOUT, ask.count, right.as_ref());
        let w = &mut self.minters[m];
        if w.batch.is_none() {
            w.batch = restore(batch_config(), w.holder_row, seed, clock)?;
        }
        let mut ids = vec![0u64; count as usize];
        let (filled, _) = match &mut w.batch {
            _ if count == 0 => (0, None),
            Some(h) => drive(
                h,
                &mut self.reg,
                index,
                &mut w.holder_row,
                w.store_down,
                now,
                clock,
                &mut ids,
            ),
            None => (0, None),
        };
        ids.truncate(filled);
        for &id in &ids {
            let parts = LAYOUT.decompose(id).unwrap();
            prop_assert_eq!(parts.worker_id, index, "a batch under another worker ID");
            prop_assert!(self.issued.insert(id), "batch ID {} issued twice", id);
        }
        Ok((!ids.is_empty() || right.is_some()).then(|| (batch_ranges(&LAYOUT, &ids), right)))
    }

    /// Isolate n serves `count` IDs (checking each) and sends the fetch it
    /// asks for; returns how many it served.
    fn serve(&mut self, n: usize, count: usize) -> Result<usize, TestCaseError> {
        let clock = self.isolate_clock(n);
        let iso = &mut self.isolates[n];
        let mut out = vec![0u64; count];
        let poll = iso.buf.poll(clock, &mut out);
        for &id in &out[..poll.filled] {
            let p = LAYOUT.decompose(id).unwrap();
            if p.worker_id < N {
                prop_assert!(self.issued.contains(&id), "served {}, never minted", id);
                prop_assert!(self.served.insert(id), "batch ID {} served twice", id);
                continue;
            }
            let Some(r) = iso.right else {
                return Err(TestCaseError::fail(format!(
                    "isolate {n} minted {id} ({p:?}) under no right"
                )));
            };
            prop_assert!(
                p.worker_id == r.worker_id
                    && (r.from_ms..r.until_ms).contains(&p.timestamp_ms)
                    && (r.seq_start..r.seq_start + r.seq_len).contains(&p.sequence),
                "isolate {} minted {} ({:?}) outside its right {:?}",
                n,
                id,
                p,
                r
            );
            prop_assert!(
                self.issued.insert(id),
                "isolate {} minted {} ({:?}) under {:?}: issued twice",
                n,
                id,
                p,
                r
            );
            self.right_ids += 1;
            self.ahead_ms = self.ahead_ms.max(p.timestamp_ms.saturating_sub(clock));
        }
        let ask = match poll.next {
            MintStep::Done { prefetch } => prefetch,
            MintStep::FetchNow(ask) => Some(ask),
            MintStep::Wait => None,
        };
        if let Some(ask) = ask {
            let answer = self.answer(ask.minter as usize, ask)?;
            self.in_flight.push((n, ask.ticket, answer));
        }
        Ok(poll.filled)
    }

    fn deliver(&mut self, k: usize) -> Result<(), TestCaseError> {
        let (n, ticket, answer) = self.in_flight.remove(k % self.in_flight.len());
        let clock = self.isolate_clock(n);
        let fault = self.fault;
        let iso = &mut self.isolates[n];
        let Some((ranges, right)) = answer else {
            let _ = iso
                .buf
                .fetch_refused(ticket, ErrorCode::StoreUnavailable, clock, 0);
            return Ok(());
        };
        let handed = right.map(|r| match fault {
            Fault::PastUntil => MintRight {
                until_ms: r.until_ms + LAYOUT.unit_ms(),
                ..r
            },
            _ => r,
        });
        let fetched = iso.buf.fetched_with_right(ticket, &ranges, handed, clock);
        prop_assert!(fetched.is_ok(), "isolate {}: {:?}", n, fetched);
        if matches!(fetched, Ok(Fetched::Kept))
            && handed.is_some()
            && iso.buf.right() == handed.as_ref()
        {
            iso.right = right;
        }
        Ok(())
    }

    fn lose(&mut self, k: usize) {
        let (n, ticket, _) = self.in_flight.remove(k % self.in_flight.len());
        let clock = self.isolate_clock(n);
        let _ = self.isolates[n]
            .buf
            .fetch_refused(ticket, ErrorCode::StoreUnavailable, clock, 0);
    }

    /// An ordinary node (a new one each time) leases and mints `count` IDs
    /// at the registry's clock.
    fn node(&mut self, count: usize) -> Result<(), TestCaseError> {
        self.nodes += 1;
        let key = format!("node-{}", self.nodes);
        let mut h = SnowflakeHolder::new(HolderConfig::default()).unwrap();
        let now = self.now;
        let Ok(HolderPoll {
            next: HolderNext::Lease(ask),
            ..
        }) = h.poll(now, &mut [])
        else {
            panic!("a new holder leases");
        };
        let secret = LeaseSecret::from_random([(self.nodes % 251) as u8; 16]);
        let ask = GrantRequest::from_ask(&ask, "", &key, &secret, sha256);
        let Ok(l) = self.reg.lease(ask, now) else {
            return Ok(());
        };
        prop_assert!(
            l.worker_id >= self.reg.config().minters,
            "node {} got reserved worker ID {}",
            key,
            l.worker_id
        );
        h.granted(Grant::from_lease(&l, Some(secret), LAYOUT), now)
            .unwrap();
        let mut out = vec![0u64; count];
        let filled = h.poll(now, &mut out).map_or(0, |p| p.filled);
        for &id in &out[..filled] {
            prop_assert!(
                self.issued.insert(id),
                "node {} minted {} ({:?}): issued twice",
                key,
                id,
                LAYOUT.decompose(id).unwrap()
            );
        }
        if (N..2 * N).contains(&l.worker_id) {
            self.node_ids += filled as u64;
        }
        Ok(())
    }

    /// Minter m's holders renew and save, as at any request (a keep-alive).
    fn keep_alive(&mut self, m: usize) {
        let now = self.now;
        let index = u32::try_from(m).unwrap();
        let w = &mut self.minters[m];
        let clock = now.saturating_add_signed(w.offset);
        if let Some(h) = &mut w.batch {
            drive(
                h,
                &mut self.reg,
                index,
                &mut w.holder_row,
                w.store_down,
                now,
                clock,
                &mut [],
            );
        }
        if let Some(h) = &mut w.rights {
            let i = rights_worker_index(N, index);
            drive(
                h,
                &mut self.reg,
                i,
                &mut w.rights_row,
                w.store_down,
                now,
                clock,
                &mut [],
            );
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let isolates = self.isolates.len();
        match *op {
            Op::Tick(ms) => self.now += ms,
            Op::MinterClock(m, d) => {
                let w = &mut self.minters[m];
                w.offset = (w.offset + d).clamp(-MAX_OFFSET_MS, MAX_OFFSET_MS);
            }
            Op::IsolateClock(n, d) => {
                let iso = &mut self.isolates[n % isolates];
                iso.offset = (iso.offset + d).clamp(-MAX_OFFSET_MS, MAX_OFFSET_MS);
            }
            Op::Serve(n, count) => {
                self.serve(n % isolates, count)?;
            }
            Op::Deliver(k) if !self.in_flight.is_empty() => self.deliver(k)?,
            Op::Lose(k) if !self.in_flight.is_empty() => self.lose(k),
            Op::Deliver(_) | Op::Lose(_) => {}
            Op::Restart(m, back) => {
                let w = &mut self.minters[m];
                w.restart(false);
                w.offset = (w.offset - i64::try_from(back).unwrap()).max(-MAX_OFFSET_MS);
            }
            Op::Rollback(m) => self.minters[m].restart(true),
            Op::Store(m) => self.minters[m].store_down = !self.minters[m].store_down,
            Op::Idle(m, ms) => {
                let end = self.now + ms;
                while self.now < end {
                    self.now = (self.now + REG.ttl_ms / 4).min(end);
                    for other in (0..N as usize).filter(|&o| o != m) {
                        self.keep_alive(other);
                    }
                }
            }
            Op::RegistryRelease { before } => {
                let config = RegistryConfig {
                    minters: if before { N } else { 2 * N },
                    lenders: if before { 0 } else { self.cfg.lenders },
                    ..self.cfg
                };
                let slots: Vec<_> = self.reg.slots().cloned().collect();
                self.reg = Registry::from_parts(config, self.reg.next_generation(), slots).unwrap();
            }
            Op::Node(count) => self.node(count)?,
            Op::Close(m) => {
                let now = self.now;
                let w = &mut self.minters[m];
                let clock = now.saturating_add_signed(w.offset);
                for (h, row) in [
                    (&mut w.batch, &mut w.holder_row),
                    (&mut w.rights, &mut w.rights_row),
                ] {
                    if let Some(h) = h {
                        if let Some(r) = h.close(clock) {
                            let _ = self.reg.release("", &r.proof(sha256), now);
                        }
                        if !w.store_down {
                            *row = h.state();
                        }
                    }
                }
                w.restart(false);
            }
            Op::NearEnd(n, d) => {
                let n = n % isolates;
                if let Some(r) = self.isolates[n].right {
                    let target = r.until_ms.saturating_add_signed(d);
                    let clock = self.isolate_clock(n);
                    // Only forward, and not past every lease.
                    if target > clock && target - clock <= MAX_RIGHT_MS {
                        self.now += target - clock;
                    }
                }
            }
        }
        Ok(())
    }

    /// Liveness: clocks agree, stores work, every minter runs the current
    /// release, answers arrive at once; past every lease, grace period and
    /// reservation. From round `CALM_DEADLINE` on, every request is served,
    /// and at least half of what each isolate serves in the calm phase is
    /// minted under rights.
    fn calm(&mut self) -> Result<(), TestCaseError> {
        while !self.in_flight.is_empty() {
            self.deliver(0)?;
        }
        let slots: Vec<_> = self.reg.slots().cloned().collect();
        self.reg = Registry::from_parts(self.cfg, self.reg.next_generation(), slots).unwrap();
        for w in &mut self.minters {
            w.offset = 0;
            w.store_down = false;
            if w.old {
                w.restart(false);
            }
        }
        for iso in &mut self.isolates {
            iso.offset = 0;
        }
        self.now += MAX_RIGHT_MS.max(REG.lender_ttl_ms)
            + REG.ttl_ms
            + REG.grace_ms
            + 2 * MAX_OFFSET_MS as u64;
        let mut by_right = vec![0u64; self.isolates.len()];
        let mut served = vec![0u64; self.isolates.len()];
        for round in 0..CALM_ROUNDS {
            self.now += CALM_STEP_MS;
            for n in 0..self.isolates.len() {
                let before = self.right_ids;
                let mut got = 0;
                for _ in 0..=self.isolates[n].buf.config().tries_per_request() {
                    got += self.serve(n, CALM_SERVE - got)?;
                    while !self.in_flight.is_empty() {
                        self.deliver(0)?;
                    }
                    if got == CALM_SERVE {
                        break;
                    }
                }
                prop_assert!(
                    round < CALM_DEADLINE || got == CALM_SERVE,
                    "calm round {}: isolate {} served {} of {}",
                    round,
                    n,
                    got,
                    CALM_SERVE
                );
                by_right[n] += self.right_ids - before;
                served[n] += got as u64;
            }
        }
        for (n, (&r, &s)) in by_right.iter().zip(&served).enumerate() {
            prop_assert!(
                2 * r >= s,
                "calm: isolate {} minted {} of the {} IDs it served under rights",
                n,
                r,
                s
            );
        }
        Ok(())
    }
}

/// The calm phase: rounds this far apart, each isolate serving
/// `CALM_SERVE` IDs — fewer than a right mints at one clock reading
/// (`RIGHT_SEQUENCES` a unit, `MINTER_BORROW_MS` units ahead), so that a
/// right alone can serve each request and a batch is only for bursts.
const CALM_STEP_MS: u64 = 1_000;
const CALM_ROUNDS: usize = 30;
const CALM_SERVE: usize = 3 * edgeleaf::minted::RIGHT_SEQUENCES as usize;
/// From this round on, every request is served.
const CALM_DEADLINE: usize = 2;

/// The world of `plan` with `fault` planted: its first broken property, if
/// any, after the random steps or in the calm phase.
fn run(fault: Fault, plan: &Plan) -> Result<World, TestCaseError> {
    let mut w = World::new(fault, &plan.homes);
    for (m, &offset) in w.minters.iter_mut().zip(&plan.offsets) {
        m.offset = offset;
    }
    for op in &plan.ops {
        w.apply(op)?;
    }
    w.calm()?;
    Ok(w)
}

proptest! {
    #![proptest_config(props::config(CASES))]

    #[test]
    fn rights_to_mint_never_issue_an_id_twice(plan in plan()) {
        run(Fault::None, &plan)?;
    }
}

/// Worlds in `make test` (times `EDGELEAF_PROPTEST_SCALE`).
const CASES: u32 = 512;

/// Refusing everything would pass the properties: across worlds, rights are
/// lent and IDs minted under them in the random steps as well as the calm
/// phase, restarts and rollbacks included.
#[test]
fn the_worlds_lend_rights_and_mint_under_them() {
    let base = props::seed();
    let (mut lent, mut ids, mut restarts, mut ahead, mut nodes) = (0, 0, 0, 0, 0);
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..32 {
        let plan = props::draw(&plan(), base.wrapping_add(i)).current();
        let w = run(Fault::None, &plan).unwrap_or_else(|e| panic!("world {i}: {e}"));
        lent += w.lent;
        ids += w.right_ids;
        restarts += w.minters.iter().map(|m| m.instances).sum::<u64>();
        ahead = ahead.max(w.ahead_ms);
        nodes += w.node_ids;
        for (code, k) in w.rights_refused {
            *refused.entry(code).or_default() += k;
        }
    }
    println!(
        "32 worlds: {lent} rights lent, {ids} IDs minted under them, {restarts} restarts; \
         rights holders' leases refused: {refused:?}; a right ID at most {ahead} ms ahead of \
         its isolate's clock; {nodes} IDs minted by ordinary nodes under N..2N"
    );
    assert!(lent > 32 * 3, "rights lent: {lent}");
    assert!(ids > 32 * 500, "IDs minted under rights: {ids}");
    assert!(restarts > 32, "restarts: {restarts}");
}

/// The worlds a planted fault may take to be found.
const PLANTED_BOUND: u64 = 2_000;

/// Each planted fault breaks a property within `PLANTED_BOUND` worlds from
/// the run's seed, in a world that holds without it; the smallest world
/// found is printed.
#[test]
fn each_planted_fault_is_caught() {
    let base = props::seed();
    for fault in FAULTS {
        let started = std::time::Instant::now();
        let found = (0..PLANTED_BOUND).find_map(|i| {
            let seed = base.wrapping_add(i);
            let plan = props::draw(&plan(), seed).current();
            (run(fault, &plan).is_err() && run(Fault::None, &plan).is_ok()).then_some((i + 1, seed))
        });
        let Some((n, seed)) = found else {
            panic!("{fault:?} went unnoticed in {PLANTED_BOUND} worlds from seed {base}");
        };
        let mut tree = props::draw(&plan(), seed);
        let why = run(fault, &tree.current()).err().unwrap();
        let (simplest, why) = props::shrink(&mut tree, why, 500, |p| match run(fault, p) {
            Err(why) if run(Fault::None, p).is_ok() => Err(why),
            _ => Ok(()),
        });
        println!(
            "{fault:?}: world {n} (seed {seed}), {:.1} s; shrunk to {} ops: {why}\n  {simplest:?}",
            started.elapsed().as_secs_f64(),
            simplest.ops.len()
        );
    }
}

/// A minter that lent a right and renewed its rights holder's lease,
/// restarted: that lease's expiry is the floor of worker ID `N + i` (a
/// lender's), so its rights holder's lease is refused
/// (`clock_behind_last_report`: further ahead than the skew bound) until its
/// clock is within the skew of it, and its next right starts after it and
/// after its saved reservation, after every right lent before. Batches go
/// on meanwhile; rights stop for up to the lender's TTL, and the next right
/// starts ahead of the clock.
#[test]
fn a_restarted_minter_lends_again_after_every_right_it_lent() {
    let mut w = World::new(Fault::None, &[0]);
    let ask = BatchAsk {
        minter: 0,
        count: 1,
        ticket: 1,
        right: true,
    };
    let first = w
        .answer(0, ask)
        .unwrap()
        .and_then(|a| a.1)
        .expect("a right");
    assert_eq!(first.until_ms - first.from_ms, MAX_RIGHT_MS - 1);
    // Half the TTL on, a renewal: the new expiry is the floor.
    w.now += REG.lender_ttl_ms / 2 + 1_000;
    w.answer(0, ask).unwrap();
    let slot = w.reg.slot(rights_worker_index(N, 0)).unwrap();
    assert_eq!(slot.last_timestamp_ms, slot.expires_at_ms);
    let floor = slot.last_timestamp_ms;
    assert!(floor > first.until_ms);
    w.now += 1_000;
    let restarted = w.now;
    w.minters[0].restart(false);
    let mut batches = 0;
    let (next, at) = (0..=REG.lender_ttl_ms / 1_000 + 5)
        .find_map(|_| {
            let a = w.answer(0, ask).unwrap();
            batches += usize::from(a.as_ref().is_some_and(|a| !a.0.is_empty()));
            let at = w.now;
            w.now += 1_000;
            a.and_then(|a| a.1).map(|r| (r, at))
        })
        .expect("a right again within the lender's TTL");
    // (The batch holder waits out its own reservation, 3 s, first.)
    assert!(
        batches as u64 + 4 >= (at - restarted) / 1_000,
        "batches go on"
    );
    assert!(next.from_ms >= floor, "{next:?} after {floor}");
    assert!(at + REG.max_skew_ms >= floor);
    // An isolate given that right mints at its start, ahead of its clock.
    let config = MintConfig {
        rights: true,
        ..MintConfig::new(N, 0)
    };
    let mut b = MintedBuffer::new(LAYOUT, config).unwrap();
    let mut one = [0u64; 1];
    let MintStep::FetchNow(ask) = b.poll(at, &mut one).next else {
        panic!("a fetch")
    };
    b.fetched_with_right(ask.ticket, &[], Some(next), at)
        .unwrap();
    assert_eq!(b.poll(at, &mut one).filled, 1);
    let stamped = LAYOUT.decompose(one[0]).unwrap().timestamp_ms;
    assert_eq!(stamped, next.from_ms);
    let refused = w.rights_refused["ClockBehindLastReport"];
    println!(
        "restarted at +{} s: rights holder refused {refused} times, next right at +{} s, \
         from +{} s; an isolate's first ID under it stamped {} ms ahead of its clock",
        (restarted - T0) / 1_000,
        (at - T0) / 1_000,
        (next.from_ms - T0) / 1_000,
        stamped - at
    );
}

/// Each planted fault's rate over `EDGELEAF_PLANTED_PLANS` worlds (2,000
/// unless set) from the run's seed; every world must hold without a fault.
#[test]
#[ignore = "measures: cargo test --release --test right_props -- --ignored planted_fault_rates"]
fn planted_fault_rates() {
    let base = props::seed();
    let worlds: u64 = std::env::var("EDGELEAF_PLANTED_PLANS").map_or(2_000, |s| s.parse().unwrap());
    let mut caught = [0u64; FAULTS.len()];
    for i in 0..worlds {
        let plan = props::draw(&plan(), base.wrapping_add(i)).current();
        if let Err(e) = run(Fault::None, &plan) {
            panic!("world {i} fails without a fault: {e}");
        }
        for (k, &fault) in FAULTS.iter().enumerate() {
            caught[k] += u64::from(run(fault, &plan).is_err());
        }
    }
    for (fault, c) in FAULTS.iter().zip(caught) {
        println!("{fault:?}: {c} of {worlds} worlds");
    }
}

/// Rights that last minutes, and the registry of the release before
/// (0.1.0: a 60 s TTL, only the `N` batch IDs reserved, so the rights
/// holders' `N..2N` are anyone's there). It may take the registry's storage
/// over — a rollback, or a gradual deploy that hosts the registry on the
/// old version while a minter runs this one — and its renewal sets the
/// expiry to its clock + 60 s, whatever it was (applied by hand below, as
/// 0.1.0's `Registry::renew` does: this release's never moves a minter's
/// expiry back).
///
/// A grant of 300 s lent a right to +290 s; at +150 s the old registry
/// renews it. (a) With a long TTL alone and the renewal reporting the
/// holder's floor clamped to what any registry accepts (clock + 60 s), it
/// is accepted and the expiry moves back to +210 s: an outside node leases
/// the ID at +221 s and mints the very ID the right's isolate mints then —
/// the counter-example to that design. (b) Reporting the lease's expiry
/// instead, the old registry refuses the renewal and nothing moves back.
/// (c) The design built: the registry records a lender's expiry as the
/// ID's floor (`RegistryConfig::lenders`), so the clamped renewal moves the
/// expiry back but not the floor, and the outside node gets another ID.
#[test]
fn a_renewal_that_shortens_a_long_grant_fences_below_its_rights() {
    let w = rights_worker_index(N, 0);
    let outside_at = T0 + 221_000;
    // The isolate holding the right, at +221 s.
    let right = MintRight {
        worker_id: w,
        seq_start: 0,
        seq_len: 4,
        from_ms: T0 + 1_000,
        until_ms: T0 + 290_000,
    };
    let config = MintConfig {
        rights: true,
        ..MintConfig::new(N, 0)
    };
    let mut b = MintedBuffer::new(LAYOUT, config).unwrap();
    let mut one = [0u64; 1];
    let MintStep::FetchNow(ask) = b.poll(outside_at, &mut one).next else {
        panic!("a fetch")
    };
    b.fetched_with_right(ask.ticket, &[], Some(right), outside_at)
        .unwrap();
    assert_eq!(b.poll(outside_at, &mut one).filled, 1);
    let isolate_id = one[0];
    // The outside node's first ID at +221 s, after the old registry renewed
    // the rights holder's grant at +150 s with `report` (or refused it).
    let outside = |lenders: u32, report: u64| {
        let long = RegistryConfig {
            ttl_ms: 300_000,
            lenders,
            lender_ttl_ms: 300_000,
            ..REG
        };
        let secret = LeaseSecret::from_random([5; 16]);
        let mut reg = Registry::new(long).unwrap();
        let lease = reg.lease_minter(w, T0, None, sha256(&secret), T0).unwrap();
        assert_eq!(lease.expires_at_ms, T0 + 300_000);
        let at = T0 + 150_000;
        let refused = report > at + edgeleaf::snowflake::MAX_TOLERANCE_MS;
        let slots = reg.slots().cloned().map(|mut s| {
            if s.worker_id == w && !refused {
                s.last_timestamp_ms = s.last_timestamp_ms.max(report);
                s.expires_at_ms = at + 60_000;
                s.reported_clock_ms = at;
                s.reported_at_ms = at;
            }
            s
        });
        let old = RegistryConfig { minters: N, ..REG };
        let mut old = Registry::from_parts(old, reg.next_generation(), slots).unwrap();
        let s = LeaseSecret::from_random([6; 16]);
        let ask = GrantRequest {
            owner: "team",
            node_key: "10.0.0.9:80",
            node_now_ms: outside_at,
            previous: None,
            secret_hash: sha256(&s),
        };
        let got = old.lease(ask, outside_at).unwrap();
        let mut h = SnowflakeHolder::new(HolderConfig::default()).unwrap();
        h.granted(Grant::from_lease(&got, Some(s), LAYOUT), outside_at)
            .unwrap();
        let mut one = [0u64; 1];
        assert_eq!(h.poll(outside_at, &mut one).unwrap().filled, 1);
        (got.worker_id, one[0])
    };
    let clamped = T0 + 150_000 + edgeleaf::snowflake::MAX_TOLERANCE_MS;
    // (a) A long TTL, the report clamped: the same ID twice.
    assert_eq!(outside(0, clamped), (w, isolate_id), "the same ID twice");
    // (b) The expiry reported: refused, the outside node gets another ID.
    let (worker, id) = outside(0, T0 + 300_000);
    assert!(worker != w && id != isolate_id);
    // (c) The lender's expiry recorded as its floor: another ID too.
    let (worker, id) = outside(N, clamped);
    assert!(worker != w && id != isolate_id);
}

/// A lender's worker ID moves (`SNOWFLAKE_MINTERS` changes) while its old
/// rights holder, an instance of the old configuration, keeps running —
/// lending, saving and renewing from memory (a zombie) after a copy of it
/// lent too. Grown from 2 to 3 minters, ID 2 (minter 0's rights) is minter
/// 2's batch ID, under the same node key; shrunk to 1, it is an outside
/// node's. Either way its next holder gets it only once every grant the
/// old holders renewed ran out, and issues after every right they lent.
#[test]
fn a_lenders_id_that_moves_is_issued_after_every_right_lent_under_it() {
    let w = rights_worker_index(N, 0);
    for grown in [true, false] {
        let base = RegistryConfig {
            capacity: 16,
            ..REG
        };
        let mut reg = Registry::new(base).unwrap();
        let mut h = SnowflakeHolder::with_rand(
            rights_holder_config(DEFAULT_MAX_BACKWARD_MS),
            SplitMix64::new(3),
        )
        .unwrap();
        let mut ledger = RightLedger::new(LAYOUT);
        let mut rights: Vec<MintRight> = Vec::new();
        assert!(matches!(
            h.poll(T0, &mut []).unwrap().next,
            HolderNext::Lease(_)
        ));
        let secret = LeaseSecret::from_random([8; 16]);
        let l = reg.lease_minter(w, T0, None, sha256(&secret), T0).unwrap();
        h.granted(Grant::from_lease(&l, Some(secret), LAYOUT), T0)
            .unwrap();
        // Lend, save, renew when due, every 10 s for `until`; a renewal
        // refused ends the holder's lease (it then lends nothing).
        let run = |h: &mut SnowflakeHolder<SplitMix64>,
                   ledger: &mut RightLedger,
                   reg: &mut Registry,
                   rights: &mut Vec<MintRight>,
                   from: u64,
                   until: u64| {
            for now in (from..until).step_by(10_000) {
                if let Some(state) = h.save_request(now) {
                    h.saved(&state);
                }
                if let Some(r) = h.renewal(now) {
                    match reg.renew("", &r.proof(sha256), now) {
                        Ok(l) => h.renewed(Grant::from_lease(&l, None, LAYOUT), now),
                        Err(e) => h.renewal_failed(r.claim.generation, Some(e.error_code()), now),
                    }
                }
                rights.extend(ledger.lend_from(now, h));
            }
        };
        run(&mut h, &mut ledger, &mut reg, &mut rights, T0, T0 + 200_000);
        // A copy lends from the same state (one instance's memory, or a
        // second instance before the platform fenced it off).
        let mut copy = h.clone();
        let mut copy_ledger = ledger.clone();
        rights.extend(copy_ledger.lend_from(T0 + 200_000, &mut copy));
        // The deploy: the registry's minters change; the old holder runs on.
        let minters = if grown { 3 } else { 1 };
        let config = RegistryConfig {
            minters: 2 * minters,
            lenders: minters,
            ..base
        };
        let slots: Vec<_> = reg.slots().cloned().collect();
        reg = Registry::from_parts(config, reg.next_generation(), slots).unwrap();
        run(
            &mut h,
            &mut ledger,
            &mut reg,
            &mut rights,
            T0 + 200_000,
            T0 + 400_000,
        );
        assert!(rights.len() > 2, "{rights:?}");
        let end = rights.iter().map(|r| r.until_ms).max().unwrap();
        // ID 2's next holder, asking every 10 s from the deploy on.
        let secret = LeaseSecret::from_random([9; 16]);
        let next = (T0 + 200_000..T0 + 2_000_000)
            .step_by(10_000)
            .find_map(|now| {
                let got = if grown {
                    reg.lease_minter(w, now, None, sha256(&secret), now)
                } else {
                    let ask = GrantRequest {
                        owner: "team",
                        node_key: "10.0.0.9:80",
                        node_now_ms: now,
                        previous: None,
                        secret_hash: sha256(&secret),
                    };
                    // Asked of a copy: each ask the ID is not free, it gets
                    // another, which it would hold from then on.
                    reg.clone().lease(ask, now).and_then(|l| {
                        if l.worker_id == w {
                            Ok(l)
                        } else {
                            Err(Error::NoFreeWorkerId { capacity: 0 })
                        }
                    })
                };
                got.ok().map(|l| (now, l))
            });
        let (at, lease) = next.expect("ID 2 given again");
        assert!(lease.issue_after_ms >= end, "{lease:?} before {end}");
        assert!(at + REG.max_skew_ms >= end);
        println!(
            "minters {} -> {minters}: {} rights lent under ID {w}, the last to +{} s; its next \
             holder from +{} s, issuing after +{} s",
            N,
            rights.len(),
            (end - T0) / 1_000,
            (at - T0) / 1_000,
            (lease.issue_after_ms - T0) / 1_000
        );
    }
}
