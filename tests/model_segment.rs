//! The segment protocol, model-checked: every interleaving, up to the
//! bounds of `Bounds`, of a tag's root (`TagRecord`), two regional
//! allocators (`BlockAllocator`, each object possibly running twice: a
//! replacement restored from storage beside the old instance, whose writes
//! fail), an isolate (`TagSources`, fed by both regions and by the root when
//! an allocator misses) and an outside client with a key of its own (a
//! `SegmentDriver` leasing under request IDs, closing and handing its tails
//! back as the npm package does, restarting as a new generator that leases
//! its credits), over an unordered network that loses and duplicates any
//! message, with crashes that keep only what was stored. The hosts are
//! played as the Worker plays them (read, call the core, write, then answer
//! or send); every rule is the core's. The model adds only delivery, loss,
//! duplication, crashes, replacements and the order of spontaneous steps.
//!
//! Properties, in every state reached:
//! - no ID handed out twice: ranges an allocator or the root answered to the
//!   isolate, and IDs the client's generators used;
//! - the root's `max_id` is never below an ID handed out;
//! - the IDs an allocator's stored state holds unserved are the root's to no
//!   one else: at or below `max_id`, in no credit (a tail kept only with the
//!   root's proof, `TakeBack::Closed`; one taken back is never served);
//! - a lease answered again under its request ID answers only IDs that
//!   request still holds, and the root never allocates an ID held by a lease;
//! - liveness (a network that delivers, no crash): the isolate is served in
//!   both regions, and the client's second generator is served after the
//!   first closed.
//!
//! Each planted fault of `tests/block_props.rs` (`Fault`, the same seven,
//! planted the same way: in the model's root and hosts) is found by the
//! checker, breadth first on one thread, so its counterexample is short and
//! the same every run; it is printed one step a line.
//!
//! Monotonic tags (`mod monotonic`): a tag's store serving from memory
//! (`MonotonicIssuer`), an old instance answering beside its replacement and
//! a crash, interleaved one storage turn at a time, searched whole: the
//! answers, in the order they leave, never go back; and with the store's
//! writes made unconditional (a planted fault) they do.

#![cfg(not(target_arch = "wasm32"))]
// The model's match arms read as the hosts' steps.
#![allow(clippy::collapsible_match, clippy::large_enum_variant)]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use edgeleaf::block::{BlockAllocator, BlockLoad, HandBack, Serve, Tail, TailAnswer};
use edgeleaf::code::ErrorCode;
use edgeleaf::driver::SegmentDriver;
use edgeleaf::rand::SplitMix64;
use edgeleaf::region::Region;
use edgeleaf::segment::{Allocation, StepPolicy, DEFAULT_SEGMENT_DURATION_MS, MAX_STEP};
use edgeleaf::sources::TagSources;
use edgeleaf::tag::{
    Asker, LeaseSource, Remembered, RememberedChange, SegmentAsk, TagRecord, TailBack,
};
use edgeleaf::Error;
use stateright::actor::{
    model_timeout, Actor, ActorModel, ActorModelAction, ActorModelState, Id, LossyNetwork, Network,
    Out,
};
use stateright::{Checker, Expectation, HasDiscoveries, Model};

/// Every clock reads this: the model's steps are not timed (a call that
/// takes too long is a step of its own: `LoadLost`, `AskLost`, ...).
const NOW: u64 = 1_000_000;

const ROOT: usize = 0;
const ALLOCATORS: [usize; 2] = [1, 2];
const ISOLATE: usize = 3;
const CLIENT: usize = 4;
const NAMES: [&str; 5] = [
    "root",
    "allocator wnam",
    "allocator weur",
    "isolate",
    "client",
];
/// The allocators' own names, as the root knows them (their credentials).
const ALLOCATOR_NAMES: [&str; 2] = ["t@wnam", "t@weur"];
const REGIONS: [Region; 2] = [Region::Wnam, Region::Weur];
const CLIENT_KEY: &str = "client";
const INTRUDER: &str = "intruder";

#[path = "support/segment_faults.rs"]
mod segment_faults;
use segment_faults::Fault;
#[path = "support/ranges.rs"]
mod ranges;
use ranges::overlaps;

const FAULTS: [Fault; 7] = [
    Fault::TakeBackWithoutCondition,
    Fault::KeepRemembered,
    Fault::RememberedByRequestIdOnly,
    Fault::ServeBeforePersist,
    Fault::HandBackBeforePersist,
    Fault::KeepTakenTail,
    Fault::KeepUnprovenRefusal,
];

/// How far the checker looks: which spontaneous steps happen and how
/// often, and the highest ID the root may allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Bounds {
    /// Regions with an allocator (1 or 2).
    sites: usize,
    /// Requests the isolate serves (each asks for one ID).
    requests: u8,
    /// Requests routed to an allocator's old instance (after a replacement
    /// that kept it running).
    stale: bool,
    /// The isolate's calls may get no answer.
    load_lost: bool,
    /// Fallbacks to the root when an allocator misses.
    fallbacks: u8,
    /// Isolate evictions (its memory lost).
    evictions: u8,
    /// Replacements of each allocator.
    replacements: u8,
    /// A replaced instance runs on (its writes fail); else it dies.
    keep_old: bool,
    /// Retirements of each allocator (tails handed back).
    retirements: u8,
    /// Block asks and hand-backs may get no answer.
    calls_lost: bool,
    /// Polls of each client generator (each asks for one ID); 0: no client.
    polls: u8,
    /// Client generators (a restart after a close, or a crash).
    generations: u8,
    /// The client's leases and tails may get no answer, and it may crash.
    client_faults: bool,
    /// Hand-backs by an intruder that knows every request ID.
    intrusions: u8,
    /// The highest `max_id` the root may reach.
    max_id: u64,
    /// Every message may be delivered again, at any later time.
    duplicating: bool,
    /// The longest run of steps looked at (0: no bound but the others).
    depth: usize,
    /// The isolate's requests and the client's polls go on, past their
    /// bounds, until they are served (the liveness run: a request that is
    /// not served is asked again).
    until_served: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Cfg {
    fault: Fault,
    bounds: Bounds,
    /// Whether to check liveness (the network delivers, nothing crashes).
    liveness: bool,
}

/// Who sends a lease or a tail to the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Who {
    /// The allocator of a region (index), instance `epoch`.
    Allocator(usize, u32),
    /// The isolate, falling back to the root for a region's request.
    Isolate(usize),
    Client,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Msg {
    /// Isolate → allocator: a range of `step` IDs; `stale`: routed to the
    /// old instance if one still runs.
    Serve { step: u64, stale: bool },
    /// → isolate: a range for the region's request, from the root or its
    /// allocator.
    Range {
        region: usize,
        root: bool,
        start: u64,
        end: u64,
    },
    /// Allocator → isolate: no range now (503: a block is on its way).
    Unavailable { region: usize },
    /// → root: a segment lease.
    Lease {
        who: Who,
        request_id: Option<String>,
        step: Option<u64>,
        above: u64,
    },
    /// Root → allocator instance `epoch`: its block.
    Block {
        epoch: u32,
        request_id: String,
        start: u64,
        end: u64,
        tag_step: u64,
    },
    /// Root → allocator: its ask refused.
    Refused {
        epoch: u32,
        request_id: String,
        code: ErrorCode,
    },
    /// Root → client: its lease.
    Leased {
        request_id: String,
        start: u64,
        end: u64,
    },
    /// → root: a tail handed back.
    TakeBack {
        who: Who,
        request_id: String,
        start: u64,
        end: u64,
    },
    /// Root → allocator or client: the tail's answer.
    TailAnswered {
        epoch: u32,
        start: u64,
        end: u64,
        taken: bool,
        /// `untaken && closed`, as the Worker reads the root's answer.
        proof: bool,
    },
}

/// A spontaneous step of an actor (a request arriving, a call given up, a
/// crash); each re-armed for ever, a no-op once its bound is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Timer {
    /// The isolate serves a request of a region.
    Request { region: usize, stale: bool },
    /// The isolate's call for a region's range gets no answer.
    LoadLost { region: usize },
    /// The region's allocator missed: the isolate asks the root.
    Fallback { region: usize },
    /// The isolate is evicted (its memory lost).
    Evict,
    /// The platform replaces the allocator; the old instance dies or runs on.
    Replace { keep_old: bool },
    /// The allocator retires (its alarm) and hands its tails back.
    Retire { old: bool },
    /// The allocator's block ask gets no answer (its call fails).
    AskLost { old: bool },
    /// The allocator gives up waiting for a tail's answer.
    HandBackLost { old: bool },
    /// An intruder hands back the newest allocator block under its request ID.
    Intrude,
    /// The client's generator hands out an ID.
    Poll,
    /// The client sends its lease again (the npm client retries).
    Retry,
    /// The client's lease gets no answer.
    LeaseLost,
    /// The client's generator closes (its tails go back).
    Close,
    /// The client's tail gets no answer.
    CloseLost,
    /// A new generator of the same key (after a close, or a crash).
    Restart,
}

/// One allocator instance in memory.
#[derive(Debug, Clone, PartialEq)]
struct Instance {
    epoch: u32,
    alloc: BlockAllocator,
    /// Random draws so far (a request ID's randomness: each instance's own).
    draws: u64,
    /// A `HandBack` under way, and the tail it waits for.
    back: Option<(HandBack, Tail)>,
}

#[derive(Debug, Clone, PartialEq)]
struct RootState {
    record: TagRecord,
    remembered: BTreeMap<String, Remembered>,
    credits: BTreeMap<String, Vec<Allocation>>,
    intrusions: u8,
    /// Ghost: which lease holds each ID allocated (start: end, key).
    owners: BTreeMap<u64, (u64, String)>,
    /// Ghost: ranges answered to the isolate directly.
    handed: Vec<(u64, u64)>,
    /// Ghost: what the root's own checks found wrong.
    wrong: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct AllocatorState {
    /// Its storage: the state as last written (JSON, as the Worker stores it).
    saved: Option<String>,
    epoch: u32,
    current: Option<Instance>,
    /// The old instance, still running beside its replacement.
    old: Option<Instance>,
    replacements: u8,
    retirements: u8,
    /// Ghost: ranges it answered to the isolate.
    handed: Vec<(u64, u64)>,
    /// Ghost: what its host found wrong.
    wrong: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
struct IsolateState {
    sources: TagSources,
    /// Each region's call in flight: its step, and whether it went to the
    /// root (the allocator missed).
    calls: [Option<(u64, bool)>; 2],
    requests: u8,
    fallbacks: u8,
    evictions: u8,
    /// Ghost: the IDs it served.
    served: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq)]
enum Closing {
    Open,
    /// Ranges still to offer (last first), and the one sent.
    Offering {
        left: Vec<(u64, u64)>,
        sent: Option<(u64, u64)>,
    },
    Closed,
}

#[derive(Debug, Clone, PartialEq)]
struct ClientState {
    generation: u8,
    driver: SegmentDriver,
    /// Each lease's request ID by its range's end.
    leases: Vec<(u64, String)>,
    /// The highest ID leased by this generator.
    high: u64,
    asked: u32,
    /// The lease out: its request ID, step and `above`.
    out: Option<(String, u64, u64)>,
    closing: Closing,
    polls: u8,
    /// Ghost: the IDs used, with their generation.
    used: Vec<(u64, u8)>,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Root(RootState),
    Allocator(AllocatorState),
    Isolate(IsolateState),
    Client(ClientState),
}

/// The core's types derive no `Hash`: a state hashes as its `Debug` text
/// (equal states, equal text).
impl Hash for State {
    fn hash<H: Hasher>(&self, h: &mut H) {
        format!("{self:?}").hash(h);
    }
}

#[derive(Clone)]
struct Node {
    index: usize,
    cfg: Cfg,
}

fn alloc(start: u64, end: u64) -> Allocation {
    Allocation::new(start, end).expect("a range the model built")
}

fn restore(saved: Option<&str>) -> BlockAllocator {
    saved.map_or_else(BlockAllocator::new, |s| {
        serde_json::from_str(s).expect("a state the model stored")
    })
}

fn new_driver() -> SegmentDriver {
    SegmentDriver::new(StepPolicy {
        min_step: 1,
        max_step: MAX_STEP,
        duration_ms: DEFAULT_SEGMENT_DURATION_MS,
    })
}

impl Instance {
    fn new(epoch: u32, alloc: BlockAllocator) -> Self {
        Instance {
            epoch,
            alloc,
            draws: 0,
            back: None,
        }
    }

    /// This instance's randomness for its next draw: no two instances
    /// draw the same request ID (as 128 random bits never do). Counted
    /// only when an ask is drawn (`drew`), so a serve that draws nothing
    /// leaves the state as it was.
    fn rand(&self, site: usize) -> SplitMix64 {
        SplitMix64::new(((site as u64) << 48) ^ (u64::from(self.epoch) << 32) ^ self.draws)
    }

    fn drew(&mut self, before: Option<String>) {
        if self.alloc.pending().map(|a| &a.request_id) != before.as_ref() {
            self.draws += 1;
        }
    }
}

impl Node {
    fn timers(&self) -> Vec<Timer> {
        let b = self.cfg.bounds;
        let mut t = Vec::new();
        match self.index {
            ROOT => {
                if b.intrusions > 0 {
                    t.push(Timer::Intrude);
                }
            }
            ISOLATE => {
                for region in 0..b.sites {
                    t.push(Timer::Request {
                        region,
                        stale: false,
                    });
                    if b.stale {
                        t.push(Timer::Request {
                            region,
                            stale: true,
                        });
                    }
                    if b.load_lost {
                        t.push(Timer::LoadLost { region });
                    }
                    if b.fallbacks > 0 {
                        t.push(Timer::Fallback { region });
                    }
                }
                if b.evictions > 0 {
                    t.push(Timer::Evict);
                }
            }
            CLIENT => {
                if b.polls > 0 {
                    t.extend([Timer::Poll, Timer::Close, Timer::Restart]);
                    if b.client_faults {
                        t.extend([Timer::Retry, Timer::LeaseLost, Timer::CloseLost]);
                    }
                }
            }
            index if index - ALLOCATORS[0] < b.sites => {
                if b.replacements > 0 {
                    t.push(Timer::Replace {
                        keep_old: b.keep_old,
                    });
                }
                for old in [false, true] {
                    if old && !b.keep_old {
                        continue;
                    }
                    if b.retirements > 0 {
                        t.push(Timer::Retire { old });
                    }
                    if b.calls_lost {
                        t.push(Timer::AskLost { old });
                        t.push(Timer::HandBackLost { old });
                    }
                }
            }
            _ => {}
        }
        t
    }
}

impl Actor for Node {
    type Msg = Msg;
    type State = State;
    type Timer = Timer;
    type Random = ();
    type Storage = ();

    fn on_start(&self, _id: Id, _storage: &Option<()>, o: &mut Out<Self>) -> State {
        for t in self.timers() {
            o.set_timer(t, model_timeout());
        }
        match self.index {
            ROOT => State::Root(RootState {
                // Step 1, blocks of at most 2: tails within a block.
                record: TagRecord::new("t", 1, 0, "", 0)
                    .and_then(|r| r.with_max_step(Some(2)))
                    .expect("the model's tag"),
                remembered: BTreeMap::new(),
                credits: BTreeMap::new(),
                intrusions: 0,
                owners: BTreeMap::new(),
                handed: Vec::new(),
                wrong: Vec::new(),
            }),
            ISOLATE => State::Isolate(IsolateState {
                sources: TagSources::new(),
                calls: [None, None],
                requests: 0,
                fallbacks: 0,
                evictions: 0,
                served: Vec::new(),
            }),
            CLIENT => State::Client(ClientState::fresh(1, Vec::new())),
            _ => State::Allocator(AllocatorState {
                saved: None,
                epoch: 0,
                current: Some(Instance::new(0, BlockAllocator::new())),
                old: None,
                replacements: 0,
                retirements: 0,
                handed: Vec::new(),
                wrong: Vec::new(),
            }),
        }
    }

    fn on_msg(&self, _id: Id, state: &mut Cow<State>, src: Id, msg: Msg, o: &mut Out<Self>) {
        let mut next = state.as_ref().clone();
        match &mut next {
            State::Root(r) => r.on_msg(&self.cfg, usize::from(src), msg, o),
            State::Allocator(a) => a.on_msg(&self.cfg, self.index, msg, o),
            State::Isolate(i) => i.on_msg(msg),
            State::Client(c) => c.on_msg(msg, o),
        }
        if next != **state {
            *state = Cow::Owned(next);
        }
    }

    fn on_timeout(&self, _id: Id, state: &mut Cow<State>, timer: &Timer, o: &mut Out<Self>) {
        o.set_timer(timer.clone(), model_timeout());
        let mut next = state.as_ref().clone();
        let b = &self.cfg.bounds;
        match &mut next {
            State::Root(r) => r.on_timer(&self.cfg, timer),
            State::Allocator(a) => a.on_timer(&self.cfg, self.index, timer, o),
            State::Isolate(i) => i.on_timer(b, timer, o),
            State::Client(c) => c.on_timer(b, timer, o),
        }
        if next != **state {
            *state = Cow::Owned(next);
        }
    }
}

impl RootState {
    fn asker(who: Who) -> (Asker<'static>, bool) {
        match who {
            Who::Allocator(site, _) => (Asker::Own(ALLOCATOR_NAMES[site]), true),
            Who::Isolate(_) => (Asker::Shared, true),
            Who::Client => (Asker::Own(CLIENT_KEY), false),
        }
    }

    /// A lease, as the tag's object answers it (`handlers.rs` `lease`).
    fn lease(
        &mut self,
        who: Who,
        request_id: Option<&str>,
        step: Option<u64>,
        above: u64,
    ) -> Result<Allocation, Error> {
        let (caller, for_isolate) = Self::asker(who);
        let ask = SegmentAsk {
            step,
            request_id,
            caller,
            for_isolate,
        };
        let key = ask.remembered_as();
        let remembered = key.as_ref().and_then(|k| self.remembered.get(k)).copied();
        let credits = ask
            .credit_owner()
            .and_then(|o| self.credits.get(o).cloned())
            .unwrap_or_default();
        let plan = self
            .record
            .plan_lease(&ask, remembered.as_ref(), &credits, above)?;
        let range = match plan.source {
            LeaseSource::Again(range) => {
                if let (Who::Allocator(..), Some(key)) = (who, &key) {
                    self.check_owned(range, key);
                }
                range
            }
            LeaseSource::Allocate { step } => {
                let (range, next) = self.record.allocate(Some(step), NOW)?;
                self.record = next;
                let owner = key.clone().unwrap_or_else(|| format!("{who:?}"));
                if let Some((s, e, k)) = overlaps(&self.owners, range.start, range.end) {
                    self.wrong.push(format!(
                        "root allocated {}..={} already held by {k} ({s}..={e})",
                        range.start, range.end
                    ));
                }
                self.owners.insert(range.start, (range.end, owner));
                range
            }
            LeaseSource::Credit {
                segment,
                taken,
                rest,
                ..
            } => {
                let held = self.credits.entry(taken.owner.into()).or_default();
                held.retain(|c| *c != taken.range);
                if let Some(rest) = rest {
                    self.credits
                        .entry(rest.owner.into())
                        .or_default()
                        .push(rest.range);
                }
                segment
            }
        };
        if let Some((k, r)) = plan.remembered(range) {
            self.remembered.insert(k.into(), r);
        }
        Ok(range)
    }

    /// A range answered again under `key` holds only IDs that key holds.
    fn check_owned(&mut self, range: Allocation, key: &str) {
        let mut at = range.start;
        while at <= range.end {
            match overlaps(&self.owners, at, at) {
                Some((_, e, k)) if k == key => at = e + 1,
                found => {
                    self.wrong.push(format!(
                        "lease {key} answered again {}..={}, but ID {at} is held by {found:?}",
                        range.start, range.end
                    ));
                    return;
                }
            }
        }
    }

    /// A tail handed back, as the tag's object answers it (`handlers.rs`
    /// `take_back`): whether it was taken, and whether the refusal proves
    /// it never was.
    fn take_back(
        &mut self,
        fault: Fault,
        caller: Asker<'_>,
        for_isolate: bool,
        request_id: &str,
        tail: Allocation,
    ) -> (bool, bool) {
        let back = TailBack {
            tail,
            request_id,
            caller,
            for_isolate,
        };
        let key = if fault == Fault::RememberedByRequestIdOnly {
            let suffix = format!(":{request_id}");
            self.remembered
                .keys()
                .find(|k| k.ends_with(&suffix))
                .cloned()
        } else {
            back.remembered_as()
        };
        let remembered = key.as_ref().and_then(|k| self.remembered.get(k)).copied();
        let credits = back
            .credit_owner()
            .and_then(|o| self.credits.get(o).cloned())
            .unwrap_or_default();
        let Ok(mut plan) = self
            .record
            .plan_tail(&back, remembered.as_ref(), &credits, NOW)
        else {
            return (false, false);
        };
        if let (Fault::TakeBackWithoutCondition, true, Some(r)) = (fault, plan.closed, remembered) {
            plan = TagRecord {
                max_id: r.segment.end,
                ..self.record.clone()
            }
            .plan_tail(&back, Some(&r), &credits, NOW)
            .expect("answered once already");
        }
        let returned = plan.record.is_some();
        if let Some(record) = plan.record {
            if let Some(k) = &key {
                self.release(tail, k);
            }
            self.record = record;
        }
        if let Some(credit) = plan.credit {
            self.credits
                .entry(credit.owner.into())
                .or_default()
                .push(credit.range);
        }
        if let Some((at, change)) = plan.remembered {
            // The faulty root writes where it read, whoever asked.
            let at = match (fault, key) {
                (Fault::RememberedByRequestIdOnly, Some(read)) => read,
                _ => at,
            };
            if !(returned && fault == Fault::KeepRemembered) {
                match change {
                    RememberedChange::Shorten(r) => {
                        self.remembered.insert(at, r);
                    }
                    RememberedChange::Remove => {
                        self.remembered.remove(&at);
                    }
                }
            }
        }
        (plan.taken, plan.closed)
    }

    /// The ghost ledger: `key` no longer holds `range`.
    fn release(&mut self, range: Allocation, key: &str) {
        let held = self
            .owners
            .range(..=range.start)
            .next_back()
            .map(|(s, v)| (*s, v.clone()));
        match held {
            Some((s, (e, k))) if k == key && e == range.end => {
                self.owners.remove(&s);
                if s < range.start {
                    self.owners.insert(s, (range.start - 1, k));
                }
            }
            other => self.wrong.push(format!(
                "tail {range:?} came back for {key}, which does not hold it: {other:?}"
            )),
        }
    }

    fn on_msg(&mut self, cfg: &Cfg, src: usize, msg: Msg, o: &mut Out<Node>) {
        match msg {
            Msg::Lease {
                who,
                request_id,
                step,
                above,
            } => {
                let answer = self.lease(who, request_id.as_deref(), step, above);
                let to = Id::from(src);
                match (who, answer) {
                    (Who::Allocator(_, epoch), Ok(b)) => o.send(
                        to,
                        Msg::Block {
                            epoch,
                            request_id: request_id.unwrap_or_default(),
                            start: b.start,
                            end: b.end,
                            tag_step: self.record.step,
                        },
                    ),
                    (Who::Allocator(_, epoch), Err(e)) => o.send(
                        to,
                        Msg::Refused {
                            epoch,
                            request_id: request_id.unwrap_or_default(),
                            code: e.error_code(),
                        },
                    ),
                    (Who::Isolate(region), Ok(r)) => {
                        self.handed.push((r.start, r.end));
                        o.send(
                            to,
                            Msg::Range {
                                region,
                                root: true,
                                start: r.start,
                                end: r.end,
                            },
                        );
                    }
                    (Who::Client, Ok(r)) => o.send(
                        to,
                        Msg::Leased {
                            request_id: request_id.unwrap_or_default(),
                            start: r.start,
                            end: r.end,
                        },
                    ),
                    // Refused: the caller's call fails (its `...Lost` step).
                    (_, Err(_)) => {}
                }
            }
            Msg::TakeBack {
                who,
                request_id,
                start,
                end,
            } => {
                let (caller, for_isolate) = Self::asker(who);
                let (taken, proof) = self.take_back(
                    cfg.fault,
                    caller,
                    for_isolate,
                    &request_id,
                    alloc(start, end),
                );
                let epoch = match who {
                    Who::Allocator(_, epoch) => epoch,
                    _ => 0,
                };
                o.send(
                    Id::from(src),
                    Msg::TailAnswered {
                        epoch,
                        start,
                        end,
                        taken,
                        proof,
                    },
                );
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, cfg: &Cfg, timer: &Timer) {
        if *timer != Timer::Intrude || self.intrusions >= cfg.bounds.intrusions {
            return;
        }
        // The newest block an allocator leased: the one whose tail could
        // return. The intruder knows its request ID (a hostile node that
        // knows every public value), not the allocator's credential.
        let newest = self
            .remembered
            .iter()
            .filter(|(k, _)| ALLOCATOR_NAMES.iter().any(|n| k.contains(n)))
            .max_by_key(|(_, r)| r.segment.end)
            .map(|(k, r)| (k.rsplit(':').next().unwrap_or_default().to_owned(), *r));
        let Some((request_id, r)) = newest else {
            return;
        };
        self.intrusions += 1;
        let _ = self.take_back(
            cfg.fault,
            Asker::Own(INTRUDER),
            true,
            &request_id,
            r.segment,
        );
    }
}

impl AllocatorState {
    fn slot(&mut self, old: bool) -> &mut Option<Instance> {
        if old {
            &mut self.old
        } else {
            &mut self.current
        }
    }

    /// The instance `epoch`, and whether it is the old one.
    fn instance_of(&mut self, epoch: u32) -> Option<bool> {
        if self.current.as_ref().is_some_and(|i| i.epoch == epoch) {
            Some(false)
        } else if self.old.as_ref().is_some_and(|i| i.epoch == epoch) {
            Some(true)
        } else {
            None
        }
    }

    /// The host writes the instance's state: only the current epoch's
    /// write succeeds; a failed write drops the instance (the host reads
    /// storage again next time).
    fn write(&mut self, old: bool) -> bool {
        let epoch = self.epoch;
        let slot = self.slot(old);
        let Some(inst) = slot else { return false };
        if inst.epoch == epoch {
            let json = serde_json::to_string(&inst.alloc).expect("serialisable");
            self.saved = Some(json);
            return true;
        }
        *slot = None;
        false
    }

    /// A range for the isolate, as `serve_range` answers it (without
    /// waiting: a serve without a range answers 503 at once).
    fn serve(&mut self, cfg: &Cfg, site: usize, step: u64, stale: bool, o: &mut Out<Node>) {
        let old = stale && self.old.is_some();
        if !old && self.current.is_none() {
            self.current = Some(Instance::new(self.epoch, restore(self.saved.as_deref())));
        }
        let Some(inst) = self.slot(old).as_mut() else {
            return;
        };
        let epoch = inst.epoch;
        let mut rand = inst.rand(site);
        let before = inst.alloc.pending().map(|a| a.request_id.clone());
        let next = inst.alloc.serve(step, NOW, &mut rand);
        inst.drew(before);
        let wrote = !inst.alloc.persist_first(&next) || self.write(old);
        if !wrote && cfg.fault != Fault::ServeBeforePersist {
            // A failed write answers nothing (the isolate's call fails).
            return;
        }
        let to_root = |o: &mut Out<Node>, ask: edgeleaf::block::BlockAsk| {
            o.send(
                Id::from(ROOT),
                Msg::Lease {
                    who: Who::Allocator(site, epoch),
                    request_id: Some(ask.request_id),
                    step: ask.step,
                    above: 0,
                },
            );
        };
        let isolate = Id::from(ISOLATE);
        match next {
            Serve::Range { range, ask, .. } => {
                self.handed.push((range.start, range.end));
                o.send(
                    isolate,
                    Msg::Range {
                        region: site,
                        root: false,
                        start: range.start,
                        end: range.end,
                    },
                );
                if let Some(ask) = ask {
                    to_root(o, ask);
                }
            }
            Serve::Load(ask) => {
                to_root(o, ask);
                o.send(isolate, Msg::Unavailable { region: site });
            }
            Serve::Wait => o.send(isolate, Msg::Unavailable { region: site }),
        }
    }

    /// Sends the hand-back's next tail, or finishes it (the tails still
    /// this allocator's served again) and writes the state.
    fn hand_back_next(&mut self, site: usize, old: bool, mut back: HandBack, o: &mut Out<Node>) {
        let Some(inst) = self.slot(old).as_mut() else {
            return;
        };
        if let Some(tail) = back.to_send() {
            o.send(
                Id::from(ROOT),
                Msg::TakeBack {
                    who: Who::Allocator(site, inst.epoch),
                    request_id: tail.request_id.clone(),
                    start: tail.range.start,
                    end: tail.range.end,
                },
            );
            inst.back = Some((back, tail));
            return;
        }
        let _ = back.finish(&mut inst.alloc, NOW);
        self.write(old);
    }

    fn on_msg(&mut self, cfg: &Cfg, index: usize, msg: Msg, o: &mut Out<Node>) {
        let site = index - ALLOCATORS[0];
        match msg {
            Msg::Serve { step, stale } => self.serve(cfg, site, step, stale, o),
            Msg::Block {
                epoch,
                request_id,
                start,
                end,
                tag_step,
            } => {
                let Some(old) = self.instance_of(epoch) else {
                    return;
                };
                let current = self.epoch;
                let inst = self.slot(old).as_mut().expect("found");
                match inst
                    .alloc
                    .loaded(&request_id, alloc(start, end), tag_step, NOW)
                {
                    Ok(BlockLoad::Installed) => {
                        self.write(old);
                    }
                    Ok(BlockLoad::Ignored) => {}
                    // An old instance's ask, abandoned by its replacement's
                    // retirement: its fence refuses it.
                    Err(Error::SegmentOverlap { .. }) if epoch < current => {}
                    Err(e) => self
                        .wrong
                        .push(format!("block {start}..={end} refused: {e}")),
                }
            }
            Msg::Refused {
                epoch,
                request_id,
                code,
            } => {
                if let Some(old) = self.instance_of(epoch) {
                    let inst = self.slot(old).as_mut().expect("found");
                    if inst.alloc.load_refused(&request_id, code) {
                        self.write(old);
                    }
                }
            }
            Msg::TailAnswered {
                epoch,
                start,
                end,
                taken,
                proof,
            } => {
                let Some(old) = self.instance_of(epoch) else {
                    return;
                };
                let inst = self.slot(old).as_mut().expect("found");
                let waits = inst
                    .back
                    .as_ref()
                    .is_some_and(|(_, t)| (t.range.start, t.range.end) == (start, end));
                if !waits {
                    // An answer to a copy it no longer waits for.
                    return;
                }
                let (mut back, tail) = inst.back.take().expect("waits");
                // As the Worker reads the root's answer; the planted faults
                // keep what they must not.
                let answer = match (taken, proof, cfg.fault) {
                    (true, _, Fault::KeepTakenTail) => TailAnswer::Refused { untaken: true },
                    (true, _, _) => TailAnswer::Taken,
                    (false, false, Fault::KeepUnprovenRefusal) => {
                        TailAnswer::Refused { untaken: true }
                    }
                    (false, untaken, _) => TailAnswer::Refused { untaken },
                };
                back.answered(tail, answer);
                self.hand_back_next(site, old, back, o);
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, cfg: &Cfg, index: usize, timer: &Timer, o: &mut Out<Node>) {
        let site = index - ALLOCATORS[0];
        let b = &cfg.bounds;
        match *timer {
            Timer::Replace { keep_old } => {
                if self.replacements >= b.replacements {
                    return;
                }
                self.replacements += 1;
                self.epoch += 1;
                let previous = self.current.take();
                self.old = if keep_old { previous } else { None };
                self.current = Some(Instance::new(self.epoch, restore(self.saved.as_deref())));
            }
            Timer::Retire { old } => {
                if self.retirements >= b.retirements {
                    return;
                }
                let Some(inst) = self.slot(old).as_mut() else {
                    return;
                };
                if inst.back.is_some() {
                    return;
                }
                let epoch = inst.epoch;
                let tails = inst.alloc.retire();
                self.retirements += 1;
                if self.write(old) {
                    self.hand_back_next(site, old, HandBack::new(tails), o);
                } else if cfg.fault == Fault::HandBackBeforePersist {
                    // Its write failed (the instance is gone), yet it sends
                    // the first tail.
                    if let Some(tail) = HandBack::new(tails).to_send() {
                        o.send(
                            Id::from(ROOT),
                            Msg::TakeBack {
                                who: Who::Allocator(site, epoch),
                                request_id: tail.request_id,
                                start: tail.range.start,
                                end: tail.range.end,
                            },
                        );
                    }
                }
            }
            Timer::AskLost { old } => {
                if let Some(inst) = self.slot(old).as_mut() {
                    if let Some(id) = inst.alloc.pending().map(|a| a.request_id.clone()) {
                        inst.alloc.load_failed(&id);
                    }
                }
            }
            Timer::HandBackLost { old } => {
                let Some(inst) = self.slot(old).as_mut() else {
                    return;
                };
                if let Some((mut back, tail)) = inst.back.take() {
                    back.answered(tail, TailAnswer::Lost);
                    self.hand_back_next(site, old, back, o);
                }
            }
            _ => {}
        }
    }
}

impl IsolateState {
    fn on_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Range {
                region,
                root,
                start,
                end,
            } => {
                // Only the call in flight reads an answer (an abandoned
                // call's answer goes nowhere).
                if self.calls[region].map(|(_, r)| r) != Some(root) {
                    return;
                }
                self.calls[region] = None;
                let r = Some(REGIONS[region]);
                let from = if root { None } else { r };
                if let Err(e) = self.sources.loaded(r, from, alloc(start, end), NOW) {
                    let _ = self.sources.load_failed(r, e.error_code());
                }
            }
            Msg::Unavailable { region } => {
                if matches!(self.calls[region], Some((_, false))) {
                    self.calls[region] = None;
                    let _ = self
                        .sources
                        .load_failed(Some(REGIONS[region]), ErrorCode::StoreUnavailable);
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, b: &Bounds, timer: &Timer, o: &mut Out<Node>) {
        match *timer {
            Timer::Request { region, stale } => {
                let unserved = b.requests > 0 && b.until_served && self.served.len() < 2;
                if self.requests >= b.requests && !unserved {
                    return;
                }
                self.requests = (self.requests + 1).min(b.requests);
                let mut out = [0u64; 1];
                let Some(p) = self.sources.poll(Some(REGIONS[region]), NOW, &mut out) else {
                    return;
                };
                self.served.extend_from_slice(&out[..p.filled]);
                if let Some(step) = p.next.load() {
                    self.calls[region] = Some((step, false));
                    o.send(Id::from(ALLOCATORS[region]), Msg::Serve { step, stale });
                }
            }
            Timer::LoadLost { region } => {
                if self.calls[region].take().is_some() {
                    let _ = self
                        .sources
                        .load_failed(Some(REGIONS[region]), ErrorCode::StoreUnavailable);
                }
            }
            Timer::Fallback { region } => {
                let Some((step, false)) = self.calls[region] else {
                    return;
                };
                if self.fallbacks >= b.fallbacks {
                    return;
                }
                self.fallbacks += 1;
                self.calls[region] = Some((step, true));
                o.send(
                    Id::from(ROOT),
                    Msg::Lease {
                        who: Who::Isolate(region),
                        request_id: None,
                        step: Some(step),
                        above: 0,
                    },
                );
            }
            Timer::Evict => {
                if self.evictions < b.evictions {
                    self.evictions += 1;
                    self.sources = TagSources::new();
                    self.calls = [None, None];
                }
            }
            _ => {}
        }
    }
}

impl ClientState {
    /// A client's generator as it starts (generation `generation`), keeping
    /// the ghost record of the IDs its earlier generations used.
    fn fresh(generation: u8, used: Vec<(u64, u8)>) -> ClientState {
        ClientState {
            generation,
            driver: new_driver(),
            leases: Vec::new(),
            high: 0,
            asked: 0,
            out: None,
            closing: Closing::Open,
            polls: 0,
            used,
        }
    }

    fn send_lease(&self, o: &mut Out<Node>) {
        if let Some((id, step, above)) = &self.out {
            o.send(
                Id::from(ROOT),
                Msg::Lease {
                    who: Who::Client,
                    request_id: Some(id.clone()),
                    step: Some(*step),
                    above: *above,
                },
            );
        }
    }

    /// Offers the next tail (last first); a range without its lease's
    /// request ID is not taken, and ends the close (as `returnSegment`).
    fn offer_next(&mut self, o: &mut Out<Node>) {
        let Closing::Offering { left, sent } = &mut self.closing else {
            return;
        };
        if left.is_empty() {
            self.closing = Closing::Closed;
            return;
        }
        let (start, end) = left.remove(0);
        let Some((_, request_id)) = self.leases.iter().find(|(e, _)| *e == end) else {
            self.closing = Closing::Closed;
            return;
        };
        o.send(
            Id::from(ROOT),
            Msg::TakeBack {
                who: Who::Client,
                request_id: request_id.clone(),
                start,
                end,
            },
        );
        *sent = Some((start, end));
    }

    fn on_msg(&mut self, msg: Msg, o: &mut Out<Node>) {
        match msg {
            Msg::Leased {
                request_id,
                start,
                end,
            } => {
                if self.out.as_ref().map(|(id, ..)| id) != Some(&request_id) {
                    return;
                }
                self.out = None;
                self.high = self.high.max(end);
                self.leases.push((end, request_id));
                if self.driver.loaded(alloc(start, end), NOW).is_err() {
                    self.driver.load_failed();
                }
            }
            Msg::TailAnswered {
                start, end, taken, ..
            } => {
                let Closing::Offering { sent, .. } = &self.closing else {
                    return;
                };
                if *sent != Some((start, end)) {
                    return;
                }
                if taken {
                    self.offer_next(o);
                } else {
                    // Not taken: none before it can be.
                    self.closing = Closing::Closed;
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, b: &Bounds, timer: &Timer, o: &mut Out<Node>) {
        match *timer {
            Timer::Poll => {
                let unserved = !self.used.iter().any(|(_, g)| *g == self.generation);
                if self.closing != Closing::Open
                    || (self.polls >= b.polls && !(b.until_served && unserved))
                {
                    return;
                }
                self.polls = (self.polls + 1).min(b.polls);
                let mut out = [0u64; 1];
                let p = self.driver.poll(NOW, &mut out);
                for id in &out[..p.filled] {
                    self.used.push((*id, self.generation));
                }
                if let Some(step) = p.next.load() {
                    self.asked += 1;
                    let id = format!("c{}-{}", self.generation, self.asked);
                    self.out = Some((id, step, self.high));
                    self.send_lease(o);
                }
            }
            Timer::Retry => self.send_lease(o),
            Timer::LeaseLost => {
                if self.out.take().is_some() {
                    self.driver.load_failed();
                }
            }
            Timer::Close => {
                // A load in flight lands first (`close()` awaits it).
                let unused = !self.used.iter().any(|(_, g)| *g == self.generation);
                if self.closing != Closing::Open || self.out.is_some() || unused {
                    return;
                }
                let left = self
                    .driver
                    .retire()
                    .into_iter()
                    .flatten()
                    .map(|r| (r.start, r.end))
                    .collect();
                self.closing = Closing::Offering { left, sent: None };
                self.offer_next(o);
            }
            Timer::CloseLost => {
                if matches!(self.closing, Closing::Offering { sent: Some(_), .. }) {
                    self.closing = Closing::Closed;
                }
            }
            Timer::Restart => {
                // After a close, or a crash (without the fault steps, only
                // after a close).
                if self.generation >= b.generations
                    || (!b.client_faults && self.closing != Closing::Closed)
                {
                    return;
                }
                *self = ClientState::fresh(self.generation + 1, std::mem::take(&mut self.used));
            }
            _ => {}
        }
    }
}

type Sys = ActorModelState<Node>;
type SegmentModel = ActorModel<Node, Cfg>;

fn root(s: &Sys) -> &RootState {
    match &*s.actor_states[ROOT] {
        State::Root(r) => r,
        _ => unreachable!("actor 0 is the root"),
    }
}

fn allocator(s: &Sys, site: usize) -> &AllocatorState {
    match &*s.actor_states[ALLOCATORS[site]] {
        State::Allocator(a) => a,
        _ => unreachable!("actors 1 and 2 are allocators"),
    }
}

fn isolate(s: &Sys) -> &IsolateState {
    match &*s.actor_states[ISOLATE] {
        State::Isolate(i) => i,
        _ => unreachable!("actor 3 is the isolate"),
    }
}

fn client(s: &Sys) -> &ClientState {
    match &*s.actor_states[CLIENT] {
        State::Client(c) => c,
        _ => unreachable!("actor 4 is the client"),
    }
}

/// Every ID handed out, as ranges with who handed them out.
fn handed_out(s: &Sys) -> Vec<(u64, u64, String)> {
    let mut all: Vec<(u64, u64, String)> = root(s)
        .handed
        .iter()
        .map(|(a, b)| (*a, *b, "the root".to_owned()))
        .collect();
    for site in 0..2 {
        for (a, b) in &allocator(s, site).handed {
            all.push((*a, *b, NAMES[ALLOCATORS[site]].to_owned()));
        }
    }
    for (id, generation) in &client(s).used {
        all.push((*id, *id, format!("client generation {generation}")));
    }
    all.sort();
    all
}

fn no_id_twice(_: &SegmentModel, s: &Sys) -> bool {
    handed_out(s).windows(2).all(|w| w[0].1 < w[1].0)
}

fn max_id_covers_every_id(_: &SegmentModel, s: &Sys) -> bool {
    handed_out(s)
        .iter()
        .all(|(_, e, _)| *e <= root(s).record.max_id)
}

/// The IDs an allocator's stored state holds unserved.
fn stored_blocks(a: &AllocatorState) -> Vec<(u64, u64)> {
    let stored = restore(a.saved.as_deref());
    stored
        .blocks()
        .iter()
        .map(|b| (b.range.start.max(stored.served_high() + 1), b.range.end))
        .filter(|(s, e)| s <= e)
        .collect()
}

fn stored_blocks_are_the_roots(_: &SegmentModel, s: &Sys) -> bool {
    let r = root(s);
    (0..2).all(|site| {
        stored_blocks(allocator(s, site)).iter().all(|&(a, b)| {
            b <= r.record.max_id
                && r.credits
                    .values()
                    .flatten()
                    .all(|c| c.end < a || b < c.start)
        })
    })
}

fn root_and_hosts_find_nothing_wrong(_: &SegmentModel, s: &Sys) -> bool {
    root(s).wrong.is_empty() && (0..2).all(|site| allocator(s, site).wrong.is_empty())
}

/// The isolate served twice (when it makes requests), and the client's
/// second generator served (when there is a client).
fn served_everywhere(m: &SegmentModel, s: &Sys) -> bool {
    let b = &m.cfg.bounds;
    let i = isolate(s);
    let c = client(s);
    (b.requests == 0 || i.served.len() >= 2)
        && (b.polls == 0 || c.used.iter().any(|(_, g)| *g == 2))
}

const SAFETY: [&str; 4] = [
    "no ID handed out twice",
    "max_id covers every ID handed out",
    "an allocator's stored blocks are the root's alone",
    "the root's and hosts' own checks hold",
];

fn model(cfg: Cfg) -> SegmentModel {
    let actors = (0..5).map(|index| Node { index, cfg });
    let network = if cfg.bounds.duplicating {
        Network::new_unordered_duplicating([])
    } else {
        Network::new_unordered_nonduplicating([])
    };
    let model = ActorModel::new(cfg, ())
        .actors(actors)
        .init_network(network)
        // A message lost is one never delivered: with delivery in any
        // order, every state a loss leads to is reached without it (the
        // message still in flight, never taken); the calls that wait for
        // an answer give up by steps of their own.
        .lossy_network(LossyNetwork::No)
        .property(Expectation::Always, SAFETY[0], no_id_twice)
        .property(Expectation::Always, SAFETY[1], max_id_covers_every_id)
        .property(Expectation::Always, SAFETY[2], stored_blocks_are_the_roots)
        .property(
            Expectation::Always,
            SAFETY[3],
            root_and_hosts_find_nothing_wrong,
        )
        .within_boundary(|cfg, s| root(s).record.max_id <= cfg.bounds.max_id);
    if cfg.liveness {
        model.property(Expectation::Eventually, LIVENESS, served_everywhere)
    } else {
        model
    }
}

const LIVENESS: &str = "the isolate and the client's next generator are served";

/// One step of a counterexample, as a line.
fn step(action: &ActorModelAction<Msg, Timer, ()>) -> String {
    let name = |id: &Id| NAMES[usize::from(*id)];
    match action {
        ActorModelAction::Deliver { src, dst, msg } => {
            format!("{} → {}: {msg:?}", name(src), name(dst))
        }
        ActorModelAction::Drop(env) => {
            format!(
                "lost: {} → {}: {:?}",
                name(&env.src),
                name(&env.dst),
                env.msg
            )
        }
        ActorModelAction::Timeout(id, timer) => format!("{}: {timer:?}", name(id)),
        other => format!("{other:?}"),
    }
}

struct Run {
    states: usize,
    unique: usize,
    depth: usize,
    seconds: f64,
    /// The properties broken, with their counterexample's steps.
    broken: Vec<(&'static str, Vec<String>)>,
}

fn check(cfg: Cfg, stop_at_first: bool) -> Run {
    let started = Instant::now();
    let m = model(cfg);
    let mut names: Vec<&'static str> = m.properties().iter().map(|p| p.name).collect();
    names.sort();
    let checker = m
        .checker()
        .threads(1)
        .target_state_count(
            std::env::var("MODEL_STATES").map_or(usize::MAX, |s| s.parse().unwrap()),
        )
        .finish_when(if stop_at_first {
            HasDiscoveries::AnyFailures
        } else {
            HasDiscoveries::AllFailures
        })
        .target_max_depth(if cfg.bounds.depth == 0 {
            usize::MAX
        } else {
            cfg.bounds.depth
        })
        .spawn_bfs()
        .join();
    let broken = names
        .into_iter()
        .filter_map(|name| {
            let path = checker.discovery(name)?;
            let steps = path.into_actions().iter().map(step).collect();
            Some((name, steps))
        })
        .collect();
    Run {
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
        seconds: started.elapsed().as_secs_f64(),
        broken,
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} states ({} unique), depth {}, {:.1} s",
            self.states, self.unique, self.depth, self.seconds
        )?;
        for (name, steps) in &self.broken {
            writeln!(f, "\n{name}: broken in {} steps", steps.len())?;
            for (i, s) in steps.iter().enumerate() {
                writeln!(f, "  {:>2}. {s}", i + 1)?;
            }
        }
        Ok(())
    }
}

/// Nothing spontaneous but the isolate's requests of one region.
const QUIET: Bounds = Bounds {
    sites: 1,
    requests: 2,
    stale: false,
    load_lost: false,
    fallbacks: 0,
    evictions: 0,
    replacements: 0,
    keep_old: false,
    retirements: 0,
    calls_lost: false,
    polls: 0,
    generations: 1,
    client_faults: false,
    intrusions: 0,
    max_id: 4,
    duplicating: false,
    until_served: false,
    depth: 0,
};

/// The bounds each planted fault is looked for within (the steps it
/// needs, and no more: each step allowed multiplies the states).
fn bounds_for(fault: Fault) -> Bounds {
    let retiring = Bounds {
        retirements: 1,
        ..QUIET
    };
    match fault {
        Fault::None => QUIET,
        Fault::TakeBackWithoutCondition => Bounds {
            sites: 2,
            requests: 2,
            ..retiring
        },
        Fault::KeepRemembered | Fault::KeepTakenTail | Fault::KeepUnprovenRefusal => Bounds {
            requests: 1,
            duplicating: true,
            ..retiring
        },
        Fault::RememberedByRequestIdOnly => Bounds {
            requests: 1,
            intrusions: 1,
            ..QUIET
        },
        Fault::ServeBeforePersist => Bounds {
            requests: 3,
            stale: true,
            replacements: 1,
            keep_old: true,
            ..QUIET
        },
        Fault::HandBackBeforePersist => Bounds {
            requests: 2,
            stale: true,
            replacements: 1,
            keep_old: true,
            ..retiring
        },
    }
}

fn explore(name: &str, fault: Fault, bounds: Bounds, stop_at_first: bool) -> Run {
    let run = check(
        Cfg {
            fault,
            bounds,
            liveness: false,
        },
        stop_at_first,
    );
    println!("{name} ({fault:?}): {run}");
    run
}

/// Each planted fault breaks a safety property within its bounds, where
/// the same bounds without it hold.
#[test]
fn each_planted_fault_is_found() {
    let wanted = std::env::var("MODEL_FAULT").ok();
    for fault in FAULTS {
        if wanted.as_ref().is_some_and(|w| *w != format!("{fault:?}")) {
            continue;
        }
        let run = explore("planted", fault, bounds_for(fault), true);
        assert!(
            run.broken.iter().any(|(n, _)| SAFETY.contains(n)),
            "{fault:?} went unnoticed: {run}"
        );
    }
}

/// The bounds of the safety runs: every fault the model plays, a little.
const SAFETY_BOUNDS: Bounds = Bounds {
    sites: 2,
    requests: 2,
    stale: true,
    load_lost: true,
    fallbacks: 1,
    evictions: 0,
    replacements: 1,
    keep_old: true,
    retirements: 1,
    calls_lost: true,
    polls: 0,
    generations: 1,
    client_faults: false,
    intrusions: 1,
    max_id: 4,
    duplicating: true,
    until_served: false,
    depth: 9,
};

/// Without a fault, no safety property breaks in any state within the
/// bounds of every planted fault's run, and within `SAFETY_BOUNDS` (every
/// fault the model plays, a little of each).
#[test]
fn the_segment_protocol_holds_in_every_state() {
    let mut runs: Vec<(String, Bounds)> = FAULTS
        .iter()
        .map(|f| (format!("the bounds of {f:?}"), bounds_for(*f)))
        .collect();
    // Deeper by hand: `MODEL_DEPTH=10` (1,341,717 states, about 2 minutes).
    let depth = std::env::var("MODEL_DEPTH").map_or(SAFETY_BOUNDS.depth, |d| {
        d.parse().expect("MODEL_DEPTH: a number of steps")
    });
    runs.push((
        "every fault the model plays".into(),
        Bounds {
            depth,
            ..SAFETY_BOUNDS
        },
    ));
    runs.push(("the client".into(), CLIENT_BOUNDS));
    let wanted = std::env::var("MODEL_RUN").ok();
    for (name, bounds) in runs {
        if wanted.as_ref().is_some_and(|w| !name.contains(w.as_str())) {
            continue;
        }
        // A duplicating network redelivers every message at any later
        // time: those runs are bounded in steps too.
        let bounds = Bounds {
            depth: match bounds.depth {
                0 if bounds.duplicating => 14,
                d => d,
            },
            ..bounds
        };
        let run = explore(&name, Fault::None, bounds, false);
        assert!(run.broken.is_empty(), "{name}: {run}");
    }
}

/// The client's leases, close and tails, and its next generator's credits,
/// with lost answers, retries (copies) and crashes.
const CLIENT_BOUNDS: Bounds = Bounds {
    requests: 0,
    polls: 2,
    generations: 2,
    client_faults: true,
    duplicating: true,
    max_id: 4,
    ..QUIET
};

/// The network delivers (each message once, in any order) and nothing
/// crashes: every run ends with the isolate served in both regions, and
/// (a run of its own) with the client's second generator, after the first
/// closed, served. No bound on `max_id` here: the checker takes a state
/// whose every next state lies past a bound for the end of a run.
#[test]
fn the_isolate_and_the_client_are_served() {
    let unbounded = Bounds {
        max_id: u64::MAX,
        until_served: true,
        ..QUIET
    };
    let runs = [
        (
            "the isolate",
            Bounds {
                sites: 2,
                requests: 2,
                ..unbounded
            },
        ),
        (
            "the client",
            Bounds {
                requests: 0,
                polls: 1,
                generations: 2,
                ..unbounded
            },
        ),
    ];
    for (name, bounds) in runs {
        let run = check(
            Cfg {
                fault: Fault::None,
                bounds,
                liveness: true,
            },
            false,
        );
        println!("liveness, {name}: {run}");
        assert!(run.broken.is_empty(), "{name}: {run}");
    }
}

/// Monotonic tags (issue 34: "monotonic tags never go back"): a tag's store
/// serving from memory (`MonotonicIssuer`), an old instance answering beside
/// its replacement, each write conditional on the record as the instance last
/// read or wrote it, interleaved one storage turn at a time.
mod monotonic {
    use super::*;
    use edgeleaf::driver::{IssuedMark, MonotonicIssuer, SegmentStep};

    /// IDs a request asks for, requests each instance serves, and the step.
    const ASK: usize = 1;
    const REQUESTS: u8 = 3;
    const STEP: u64 = 2;

    fn policy() -> StepPolicy {
        StepPolicy {
            min_step: STEP,
            max_step: STEP,
            duration_ms: DEFAULT_SEGMENT_DURATION_MS,
        }
    }

    /// Where an instance's request stands: its next storage turn.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Turn {
        Idle,
        /// A segment of this step to allocate and write (`needed`: the
        /// answer waits for it; else a prefetch).
        Load {
            step: u64,
            needed: bool,
            ids: Vec<u64>,
        },
        /// The record to write before `ids` leave.
        Answer {
            mark: IssuedMark,
            ids: Vec<u64>,
        },
    }

    #[derive(Debug, Clone)]
    pub struct Inst {
        issuer: MonotonicIssuer,
        turn: Turn,
        requests: u8,
    }

    #[derive(Debug, Clone)]
    pub struct Mono {
        record: IssuedMark,
        insts: Vec<Inst>,
        crashes: u8,
        /// The last ID that left, and the first answer that went back.
        last_left: u64,
        back: Option<String>,
    }

    impl Hash for Mono {
        fn hash<H: Hasher>(&self, h: &mut H) {
            format!("{self:?}").hash(h);
        }
    }
    impl PartialEq for Mono {
        fn eq(&self, o: &Self) -> bool {
            format!("{self:?}") == format!("{o:?}")
        }
    }
    impl Eq for Mono {}

    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Act {
        /// Instance i starts a request (reads the record) or takes its next
        /// storage turn.
        Step(usize),
        /// Instance i dies (its memory lost; a new one starts empty).
        Crash(usize),
    }

    #[derive(Clone)]
    pub struct MonoModel {
        /// The planted fault: writes not conditional on the record the
        /// instance knew (the store's `put` without its check).
        pub unconditional: bool,
        pub depth: usize,
    }

    impl MonoModel {
        /// The request goes on from a poll to its next storage turn.
        fn next_turn(inst: &mut Inst, mut ids: Vec<u64>) {
            let mut out = [0u64; ASK];
            let want = ASK - ids.len();
            let poll = inst.issuer.poll(0, &mut out[..want]);
            ids.extend_from_slice(&out[..poll.filled]);
            inst.turn = match poll.next {
                SegmentStep::LoadNow { step } => Turn::Load {
                    step,
                    needed: true,
                    ids,
                },
                SegmentStep::Done {
                    prefetch: Some(step),
                } => Turn::Load {
                    step,
                    needed: false,
                    ids,
                },
                SegmentStep::Done { prefetch: None } => Turn::Answer {
                    mark: inst.issuer.answer(*ids.last().expect("an ID")),
                    ids,
                },
                SegmentStep::Wait => unreachable!("a synchronous store"),
            };
        }

        fn write_ok(&self, w: &Mono, i: usize) -> bool {
            self.unconditional || w.insts[i].issuer.expected() == Some(w.record)
        }
    }

    impl Model for MonoModel {
        type State = Mono;
        type Action = Act;

        fn init_states(&self) -> Vec<Mono> {
            let inst = Inst {
                issuer: MonotonicIssuer::new(policy()),
                turn: Turn::Idle,
                requests: 0,
            };
            vec![Mono {
                record: IssuedMark::default(),
                insts: vec![inst.clone(), inst],
                crashes: 1,
                last_left: 0,
                back: None,
            }]
        }

        fn actions(&self, w: &Mono, actions: &mut Vec<Act>) {
            if w.back.is_some() {
                return;
            }
            for (i, inst) in w.insts.iter().enumerate() {
                if inst.turn != Turn::Idle || inst.requests < REQUESTS {
                    actions.push(Act::Step(i));
                }
                if w.crashes > 0 {
                    actions.push(Act::Crash(i));
                }
            }
        }

        fn next_state(&self, w: &Mono, a: Act) -> Option<Mono> {
            let mut w = w.clone();
            match a {
                Act::Crash(i) => {
                    w.crashes -= 1;
                    w.insts[i].issuer = MonotonicIssuer::new(policy());
                    w.insts[i].turn = Turn::Idle;
                }
                Act::Step(i) => match w.insts[i].turn.clone() {
                    Turn::Idle => {
                        let inst = &mut w.insts[i];
                        inst.requests += 1;
                        inst.issuer.begin(w.record);
                        Self::next_turn(inst, Vec::new());
                    }
                    Turn::Load { step, needed, ids } => {
                        if self.write_ok(&w, i) {
                            let start = w.record.max_id + 1;
                            w.record.max_id += step;
                            let alloc = Allocation::new(start, w.record.max_id).expect("alloc");
                            let inst = &mut w.insts[i];
                            if inst.issuer.loaded(alloc, 0).is_ok() {
                                Self::next_turn(inst, ids);
                            } else {
                                // A range the driver refuses (below what
                                // it loaded): the request fails.
                                inst.issuer.write_failed();
                                inst.turn = Turn::Idle;
                            }
                        } else if needed {
                            let inst = &mut w.insts[i];
                            inst.issuer.write_failed();
                            inst.turn = Turn::Idle;
                        } else {
                            // A prefetch refused: the answer goes on (its
                            // own write is refused in turn).
                            let inst = &mut w.insts[i];
                            inst.issuer.load_failed();
                            inst.turn = Turn::Answer {
                                mark: inst.issuer.answer(*ids.last().expect("an ID")),
                                ids,
                            };
                        }
                    }
                    Turn::Answer { mark, ids } => {
                        if self.write_ok(&w, i) {
                            w.record = mark;
                            w.insts[i].issuer.written(mark);
                            for &id in &ids {
                                if id <= w.last_left && w.back.is_none() {
                                    w.back = Some(format!(
                                        "instance {i} answered {id} after {} had left",
                                        w.last_left
                                    ));
                                }
                                w.last_left = w.last_left.max(id);
                            }
                        } else {
                            w.insts[i].issuer.write_failed();
                        }
                        w.insts[i].turn = Turn::Idle;
                    }
                },
            }
            Some(w)
        }

        fn properties(&self) -> Vec<stateright::Property<Self>> {
            vec![stateright::Property::always(
                "monotonic tags never go back",
                |_, w: &Mono| w.back.is_none(),
            )]
        }

        fn within_boundary(&self, _: &Mono) -> bool {
            true
        }
    }

    /// Explores within `depth`: states, the trace of a broken property.
    pub fn explore(m: MonoModel) -> (usize, Option<String>) {
        // Depth 0: until no new state.
        let mut checker = m.clone().checker().finish_when(HasDiscoveries::Any);
        if m.depth > 0 {
            checker = checker.target_max_depth(m.depth);
        }
        let checker = checker.spawn_bfs().join();
        let trace = checker
            .discovery("monotonic tags never go back")
            .map(|path| {
                let steps = path.clone().into_vec();
                let mut t = String::new();
                for (n, (w, a)) in steps.iter().enumerate() {
                    if let Some(a) = a {
                        t += &format!(
                            "  {:>2}. record {:?}: {a:?} ({:?})\n",
                            n + 1,
                            w.record,
                            match a {
                                Act::Step(i) | Act::Crash(i) => &w.insts[*i].turn,
                            }
                        );
                    }
                }
                t += &format!(
                    "  => {}\n",
                    path.last_state().back.clone().unwrap_or_default()
                );
                t
            });
        (checker.unique_state_count(), trace)
    }
}

/// A monotonic tag's answers, in the order they leave, never go back: two
/// instances (an old one and its replacement) interleaved a storage turn at
/// a time, with a crash; and with the store's writes made unconditional (a
/// planted fault) they do.
#[test]
fn monotonic_tags_never_go_back() {
    use monotonic::{explore, MonoModel};
    let started = Instant::now();
    let (states, trace) = explore(MonoModel {
        unconditional: false,
        depth: 0,
    });
    println!(
        "monotonic: {states} states, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if let Some(t) = &trace {
        println!("{t}");
    }
    assert!(trace.is_none(), "a monotonic tag went back (above)");
    let started = Instant::now();
    let (states, trace) = explore(MonoModel {
        unconditional: true,
        depth: 16,
    });
    println!(
        "UnconditionalWrite: {states} states, {:.1} s\n{}",
        started.elapsed().as_secs_f64(),
        trace.clone().unwrap_or_default()
    );
    assert!(
        trace.is_some(),
        "the planted fault UnconditionalWrite was not found"
    );
}
