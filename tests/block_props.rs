//! Regional allocators (src/block.rs) and the tag's root (src/tag.rs) over
//! one tag, with the hosts played as the Worker plays them (read the state
//! once, call, persist, then answer or send), under random sequences of:
//! isolates served in several regions; block asks and their answers
//! delivered late, out of order, twice or never; asks given up and sent
//! again under their request ID; allocators killed, or replaced while the
//! old instance still runs (its writes fail), each replacement restored
//! from the last persisted state (through serde); transient write failures;
//! allocators retired with their tails handed back (all at once, or as the
//! Worker does, through the core's `HandBack`: last first, one at a time,
//! its tails and answers lost, late or copied, the host giving up waiting);
//! an outside client that leases under its own request IDs, uses part and
//! hands the rest back; isolates that lease from the root directly (the
//! fallback); and a caller that hands back tails that are not its own.
//! Properties:
//! - no ID is handed out twice (to an isolate by an allocator, by the root to
//!   an isolate, or used by the client);
//! - the root's `max_id` is never below an ID handed out;
//! - a tail comes back only when nothing followed it: it holds no ID handed
//!   out, and the root's `max_id` was its end;
//! - a lease answered again under its request ID answers only IDs that
//!   request still holds (never IDs handed back, nor another's);
//! - a block ask is sent only once it is in the stored state;
//! - blocks are served: the run hands out IDs.
//!
//! Each property is shown to fail by a planted fault (`Fault`):
//! `each_planted_fault_is_caught` runs the worlds drawn from the run's seed
//! (fixed in `make test`), one after another, with one fault each, until the
//! fault is caught; not within `PLANTED_BOUND` worlds is a failure (at the
//! rarest fault's rate, a miss by luck has a chance below 1e-8). The
//! rarest faults' smallest worlds are also kept as written.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, HashMap};

use edgeleaf::block::{BlockAllocator, BlockAsk, BlockLoad, HandBack, Serve, Tail, TailAnswer};
use edgeleaf::rand::SplitMix64;
use edgeleaf::segment::Allocation;
use edgeleaf::tag::{
    Asker, Remembered, RememberedChange, SegmentAnswer, SegmentAsk, TagRecord, TailBack, TakeBack,
};
use edgeleaf::Error;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

#[path = "support/props.rs"]
mod props;

const SITES: usize = 3;
const CLIENT: &str = "client";
const INTRUDER: &str = "intruder";

#[path = "support/segment_faults.rs"]
mod segment_faults;
use segment_faults::Fault;
#[path = "support/ranges.rs"]
mod ranges;
use ranges::overlaps;

#[derive(Debug, Clone)]
enum Op {
    /// An isolate of region `site` asks for `step` IDs: of the current
    /// instance, or of an old one still running; `write_fails`: the
    /// current instance's write fails (the host drops its memory copy).
    Serve {
        site: usize,
        old: bool,
        step: u64,
        write_fails: bool,
    },
    /// Delivers the `pick`-th message in flight.
    Deliver { pick: usize },
    /// Loses it.
    Lose { pick: usize },
    /// Sends it twice (a retry the network made).
    Duplicate { pick: usize },
    /// An instance gives up waiting for its block ask (it will send it again).
    AskFailed { site: usize, old: bool },
    /// The platform replaces the allocator: a new instance from storage;
    /// the old one dies (`keep_old: false`) or runs on, its writes failing.
    Replace { site: usize, keep_old: bool },
    /// The allocator retires its blocks and hands their tails back: all at
    /// once (`ordered: false`), or as the Worker does, through the core's
    /// `HandBack` (last first, one at a time, stopping at the first not
    /// taken or unanswered).
    Retire {
        site: usize,
        old: bool,
        ordered: bool,
    },
    /// An instance gives up waiting for the root's answer to the tail it
    /// handed back (`HandBack`: lost; it may have been taken).
    HandBackLost { site: usize, old: bool },
    /// The outside client leases `step` IDs under a new request ID.
    ClientLease { step: u64 },
    /// The client sends an unanswered lease again.
    ClientRetry { pick: usize },
    /// An isolate leases a segment from the root directly (no request ID).
    RootLease { step: u64 },
    /// Another caller hands back the tail of a range remembered for
    /// someone else, under that range's request ID.
    Intrude { pick: usize, from: u64 },
    /// Time passes.
    Tick { ms: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let site = 0..SITES;
    prop_oneof![
        8 => (site.clone(), prop::bool::weighted(0.2), 1..40u64, prop::bool::weighted(0.05))
            .prop_map(|(site, old, step, write_fails)| Op::Serve { site, old, step, write_fails }),
        12 => any::<usize>().prop_map(|pick| Op::Deliver { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Lose { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Duplicate { pick }),
        1 => (site.clone(), any::<bool>()).prop_map(|(site, old)| Op::AskFailed { site, old }),
        1 => (site.clone(), any::<bool>()).prop_map(|(site, keep_old)| Op::Replace { site, keep_old }),
        2 => (site.clone(), prop::bool::weighted(0.3), any::<bool>())
            .prop_map(|(site, old, ordered)| Op::Retire { site, old, ordered }),
        1 => (site, any::<bool>()).prop_map(|(site, old)| Op::HandBackLost { site, old }),
        1 => (1..60u64).prop_map(|step| Op::ClientLease { step }),
        1 => any::<usize>().prop_map(|pick| Op::ClientRetry { pick }),
        1 => (1..30u64).prop_map(|step| Op::RootLease { step }),
        1 => (any::<usize>(), 0..100u64).prop_map(|(pick, from)| Op::Intrude { pick, from }),
        2 => (0..5_000u64).prop_map(|ms| Op::Tick { ms }),
    ]
}

#[derive(Debug, Clone)]
enum Msg {
    /// A block ask, from instance `epoch` of allocator `site`.
    Ask {
        site: usize,
        epoch: u32,
        ask: BlockAsk,
    },
    /// The root's answer to it.
    Answer {
        site: usize,
        epoch: u32,
        request_id: String,
        block: Allocation,
        tag_step: u64,
    },
    /// The client's lease.
    ClientAsk { request_id: String, step: u64 },
    /// Its answer.
    ClientAnswer {
        request_id: String,
        range: Allocation,
    },
    /// A tail handed back by `caller` (from instance `epoch` of allocator
    /// `site`, or the client: `None`); `ordered`: by a `HandBack`, which
    /// waits for the answer.
    TakeBack {
        caller: String,
        tail: Tail,
        from: Option<(usize, u32)>,
        ordered: bool,
    },
    /// The root's answer to an ordered hand-back, back to its instance.
    BackAnswer {
        site: usize,
        epoch: u32,
        tail: Tail,
        answer: TailAnswer,
    },
    /// The root's refusal of a tail (it wrote nothing), back to instance
    /// `epoch` of allocator `site`, which serves it again.
    Refused { site: usize, epoch: u32, tail: Tail },
}

struct Instance {
    epoch: u32,
    alloc: BlockAllocator,
    /// A `HandBack` under way, and the tail it waits for an answer to.
    back: Option<(HandBack, Tail)>,
}

/// An allocator object: its storage and the instances running.
struct Site {
    name: String,
    epoch: u32,
    saved: Option<String>,
    current: Option<Instance>,
    /// An old instance still running; its writes fail.
    old: Option<Instance>,
}

struct World {
    fault: Fault,
    /// How many of the sites are used (1..=SITES).
    active: usize,
    now: u64,
    rand: SplitMix64,
    record: TagRecord,
    /// What the root remembers under each lease's key.
    remembered: HashMap<String, Remembered>,
    /// Which lease's key each ID allocated by the root belongs to (by range
    /// start: end, key); a returned tail is removed.
    owners: BTreeMap<u64, (u64, String)>,
    sites: Vec<Site>,
    net: Vec<Msg>,
    /// IDs handed out (start: end, by whom).
    handed: BTreeMap<u64, (u64, String)>,
    /// The client's leases not yet answered, with their steps.
    client_waiting: Vec<(String, u64)>,
    client_leases: u32,
    /// Tails the root refused that their allocator serves again.
    kept: u64,
    /// `HandBack`s finished, and those that ended on a lost answer.
    hand_backs: (u64, u64),
    /// Ranges answered without a write (within the stored reservation),
    /// and those by an old instance whose writes fail.
    unwritten: u64,
    zombie_unwritten: u64,
}

type Verdict = Result<(), String>;

impl World {
    fn new(fault: Fault, step: u64, pinned: bool, seed: u64, active: usize) -> World {
        let record = TagRecord::new("t", step, 0, "", 0)
            .unwrap()
            .with_max_step(pinned.then_some(step))
            .unwrap();
        World {
            fault,
            active,
            now: 1_000_000,
            rand: SplitMix64::new(seed),
            record,
            remembered: HashMap::new(),
            owners: BTreeMap::new(),
            sites: (0..SITES)
                .map(|i| Site {
                    name: format!("t@region{i}"),
                    epoch: 0,
                    saved: None,
                    current: Some(Instance {
                        epoch: 0,
                        alloc: BlockAllocator::new(),
                        back: None,
                    }),
                    old: None,
                })
                .collect(),
            net: Vec::new(),
            kept: 0,
            hand_backs: (0, 0),
            unwritten: 0,
            zombie_unwritten: 0,
            handed: BTreeMap::new(),
            client_waiting: Vec::new(),
            client_leases: 0,
        }
    }

    fn hand_out(&mut self, range: Allocation, by: &str) -> Verdict {
        if let Some((s, e, who)) = overlaps(&self.handed, range.start, range.end) {
            return Err(format!(
                "ID handed out twice: {}..={} by {by} overlaps {s}..={e} by {who}",
                range.start, range.end
            ));
        }
        self.handed.insert(range.start, (range.end, by.into()));
        let highest = self.handed.last_key_value().map_or(0, |(_, (e, _))| *e);
        if self.record.max_id < highest {
            return Err(format!(
                "max_id {} below {highest} handed out",
                self.record.max_id
            ));
        }
        Ok(())
    }

    /// The root's `max_id` against every ID handed out.
    fn check_max_id(&self) -> Verdict {
        let highest = self.handed.last_key_value().map_or(0, |(_, (e, _))| *e);
        if self.record.max_id < highest {
            return Err(format!(
                "max_id {} below {highest} handed out",
                self.record.max_id
            ));
        }
        Ok(())
    }

    fn instance(&mut self, site: usize, old: bool) -> Option<&mut Instance> {
        let s = &mut self.sites[site];
        if old {
            s.old.as_mut()
        } else {
            s.current.as_mut()
        }
    }

    /// Persists `site`'s instance (`old` or current): only the current
    /// epoch's write succeeds, unless `fails`. A failed write drops the
    /// instance (the host reads storage again next time).
    fn persist(&mut self, site: usize, old: bool, fails: bool) -> bool {
        let s = &mut self.sites[site];
        let slot = if old { &mut s.old } else { &mut s.current };
        let Some(inst) = slot else { return false };
        if inst.epoch == s.epoch && !fails {
            s.saved = Some(serde_json::to_string(&inst.alloc).unwrap());
            return true;
        }
        *slot = None;
        false
    }

    /// The current instance, read from storage if the host has none.
    fn ensure_current(&mut self, site: usize) {
        let s = &mut self.sites[site];
        if s.current.is_none() {
            s.current = Some(Instance {
                epoch: s.epoch,
                alloc: restore(s.saved.as_deref()),
                back: None,
            });
        }
    }

    fn serve(&mut self, site: usize, old: bool, step: u64, write_fails: bool) -> Verdict {
        if !old {
            self.ensure_current(site);
        }
        let (now, mut rand) = (self.now, self.rand);
        let Some(inst) = self.instance(site, old) else {
            return Ok(());
        };
        let epoch = inst.epoch;
        let answer = inst.alloc.serve(step, now, &mut rand);
        let write = inst.alloc.persist_first(&answer);
        self.rand = rand;
        // Written when the core says (a range within the reservation the
        // stored state holds is answered from memory: an old instance whose
        // writes fail still answers those).
        let persisted = !write || self.persist(site, old, write_fails);
        if !persisted && self.fault != Fault::ServeBeforePersist {
            return Ok(());
        }
        let ask =
            match answer {
                Serve::Range { range, ask, .. } => {
                    let by = format!("{} epoch {epoch}", self.sites[site].name);
                    // The stored state counts every ID answered handed on: a
                    // replacement restored from it, of this release or the one
                    // before (both serve from its blocks' cursors), never
                    // serves it or hands it back.
                    let stored = restore(self.sites[site].saved.as_deref());
                    if stored.served_high() < range.end {
                        return Err(format!(
                            "{by} answered {range:?} past the stored state's {}",
                            stored.served_high()
                        ));
                    }
                    if let Some(next) =
                        stored.snapshot().segments.iter().flatten().find(|h| {
                            h.value <= h.max && h.value <= range.end && range.start <= h.max
                        })
                    {
                        return Err(format!(
                            "{by} answered {range:?}, which the stored state still serves from {}",
                            next.value
                        ));
                    }
                    self.hand_out(range, &by)?;
                    self.unwritten += u64::from(!write);
                    self.zombie_unwritten += u64::from(!write && old);
                    ask
                }
                Serve::Load(ask) => Some(ask),
                Serve::Wait => None,
            };
        if let Some(ask) = ask {
            // Sent only once it is in the stored state: a replacement sends
            // it again under the same request ID (but an allocator's first,
            // which the core sends unwritten: it never held a block).
            let stored = restore(self.sites[site].saved.as_deref());
            if write && persisted && stored.pending() != Some(&ask) {
                return Err(format!("block ask {ask:?} sent before it was stored"));
            }
            self.net.push(Msg::Ask { site, epoch, ask });
        }
        Ok(())
    }

    fn retire(&mut self, site: usize, old: bool, ordered: bool) -> Verdict {
        let Some(inst) = self.instance(site, old) else {
            return Ok(());
        };
        if inst.back.is_some() {
            // One retirement at a time (the Worker's is one request).
            return Ok(());
        }
        let tails = inst.alloc.retire();
        let persisted = self.persist(site, old, false);
        if !persisted && self.fault != Fault::HandBackBeforePersist {
            return Ok(());
        }
        let caller = self.sites[site].name.clone();
        let epoch = self.sites[site].epoch - u32::from(old);
        if ordered {
            return self.hand_back_next(site, epoch, HandBack::new(tails));
        }
        for tail in tails {
            self.net.push(Msg::TakeBack {
                caller: caller.clone(),
                tail,
                from: Some((site, epoch)),
                ordered: false,
            });
        }
        Ok(())
    }

    /// The instance `epoch` of `site` (current or old), if it still runs.
    fn instance_of(&mut self, site: usize, epoch: u32) -> Option<(&mut Instance, bool)> {
        let s = &mut self.sites[site];
        let old = s.old.as_ref().is_some_and(|i| i.epoch == epoch);
        [s.current.as_mut(), s.old.as_mut()]
            .into_iter()
            .flatten()
            .find(|i| i.epoch == epoch)
            .map(|i| (i, old))
    }

    /// Sends `back`'s next tail, or finishes it: the tails still this
    /// allocator's served again, and its state persisted.
    fn hand_back_next(&mut self, site: usize, epoch: u32, mut back: HandBack) -> Verdict {
        let (now, caller) = (self.now, self.sites[site].name.clone());
        let Some((inst, old)) = self.instance_of(site, epoch) else {
            return Ok(());
        };
        if let Some(tail) = back.to_send() {
            inst.back = Some((back, tail.clone()));
            self.net.push(Msg::TakeBack {
                caller,
                tail,
                from: Some((site, epoch)),
                ordered: true,
            });
            return Ok(());
        }
        let (_, kept) = back.finish(&mut inst.alloc, now);
        self.kept += kept as u64;
        self.hand_backs.0 += 1;
        self.persist(site, old, false);
        Ok(())
    }

    /// The answer to the tail instance `epoch` of `site` waits for.
    fn hand_back_answered(
        &mut self,
        site: usize,
        epoch: u32,
        tail: &Tail,
        answer: TailAnswer,
    ) -> Verdict {
        let Some((inst, _)) = self.instance_of(site, epoch) else {
            return Ok(());
        };
        // An answer to a copy it no longer waits for goes nowhere.
        let Some((mut back, waiting)) = inst.back.take_if(|(_, t)| t == tail) else {
            return Ok(());
        };
        back.answered(waiting, answer);
        self.hand_back_next(site, epoch, back)
    }

    fn replace(&mut self, site: usize, keep_old: bool) {
        let s = &mut self.sites[site];
        s.epoch += 1;
        let previous = s.current.take();
        s.old = if keep_old { previous } else { None };
        s.current = Some(Instance {
            epoch: s.epoch,
            alloc: restore(s.saved.as_deref()),
            back: None,
        });
    }

    /// The root answers a lease (`request_id` under `caller`'s own names,
    /// or none): again, or a new range it remembers.
    fn root_lease(&mut self, ask: &SegmentAsk<'_>, caller: &str) -> Result<Allocation, String> {
        let key = ask.remembered_as();
        let remembered = key.as_ref().and_then(|k| self.remembered.get(k)).copied();
        match self.record.lease_segment(ask, remembered.as_ref()) {
            Ok(SegmentAnswer::Again(range)) => {
                let key = key.expect("answered again under a key");
                self.check_owned(range, &key)?;
                Ok(range)
            }
            Ok(SegmentAnswer::Allocate { step }) => {
                let (range, next) = self.record.allocate(Some(step), self.now).unwrap();
                self.record = next;
                let owner = key
                    .clone()
                    .unwrap_or_else(|| format!("{caller}, no request ID"));
                if let Some((s, e, k)) = overlaps(&self.owners, range.start, range.end) {
                    return Err(format!(
                        "root allocated {}..={} already held by {k} ({s}..={e})",
                        range.start, range.end
                    ));
                }
                self.owners.insert(range.start, (range.end, owner));
                if let Some(k) = key {
                    self.remembered.insert(
                        k,
                        Remembered {
                            segment: range,
                            granted: step,
                        },
                    );
                }
                Ok(range)
            }
            Err(e) => Err(format!("lease refused: {e}")),
        }
    }

    /// A range answered again under `key` holds only IDs that key holds.
    fn check_owned(&self, range: Allocation, key: &str) -> Verdict {
        let mut at = range.start;
        while at <= range.end {
            match overlaps(&self.owners, at, at) {
                Some((_, e, k)) if k == key => at = e + 1,
                found => {
                    return Err(format!(
                        "lease {key} answered again {}..={}, but ID {at} is held by {found:?}",
                        range.start, range.end
                    ))
                }
            }
        }
        Ok(())
    }

    /// Whether the root took `tail` back (`Some(true)`), refused it with
    /// proof it never took it (`Some(false)`), or refused it without.
    fn take_back(&mut self, caller: &str, tail: &Tail) -> Result<Option<bool>, String> {
        let back = TailBack {
            for_isolate: caller != CLIENT,
            ..tail.as_back(caller)
        };
        let key = if self.fault == Fault::RememberedByRequestIdOnly {
            self.remembered
                .keys()
                .find(|k| k.ends_with(&format!(":{}", tail.request_id)))
                .cloned()
        } else {
            back.remembered_as()
        };
        let remembered = key.as_ref().and_then(|k| self.remembered.get(k)).copied();
        let mut answer = self
            .record
            .take_back(&back, remembered.as_ref(), self.now)
            .map_err(|e| format!("take-back refused: {e}"))?;
        if let (Fault::TakeBackWithoutCondition, TakeBack::Closed { .. }, Some(r)) =
            (self.fault, &answer, remembered)
        {
            answer = TagRecord {
                max_id: r.segment.end,
                ..self.record.clone()
            }
            .take_back(&back, Some(&r), self.now)
            .unwrap();
        }
        let (record, remembered) = match answer {
            TakeBack::Returned { record, remembered } => (record, remembered),
            TakeBack::Closed { remembered, .. } => {
                // Refused with proof, and closed in the same write (the
                // allocator still holds the tail: it may serve it again).
                if let Some(key) = key {
                    self.remember(&key, remembered);
                }
                return Ok(Some(false));
            }
            TakeBack::Skipped(_) => return Ok(None),
        };
        if self.record.max_id != tail.range.end {
            return Err(format!(
                "tail {:?} came back with max_id {} past its end",
                tail.range, self.record.max_id
            ));
        }
        if let Some((s, e, who)) = overlaps(&self.handed, tail.range.start, tail.range.end) {
            return Err(format!(
                "tail {:?} came back holding {s}..={e} handed out by {who}",
                tail.range
            ));
        }
        self.record = record;
        let key = key.expect("returned under a key");
        if self.fault != Fault::KeepRemembered {
            self.remember(&key, remembered);
        }
        self.release(tail.range, &key)?;
        self.check_max_id()?;
        Ok(Some(true))
    }

    /// The root's memory of `key` after a take-back or a close.
    fn remember(&mut self, key: &str, change: RememberedChange) {
        match change {
            RememberedChange::Shorten(r) => {
                self.remembered.insert(key.to_owned(), r);
            }
            RememberedChange::Remove => {
                self.remembered.remove(key);
            }
        }
    }

    /// The root no longer holds `range` for `key`.
    fn release(&mut self, range: Allocation, key: &str) -> Verdict {
        let held = self
            .owners
            .range(..=range.start)
            .next_back()
            .map(|(s, v)| (*s, v.clone()));
        let Some((s, (e, k))) = held
            .clone()
            .filter(|(_, (e, k))| k == key && *e == range.end)
        else {
            return Err(format!(
                "tail {range:?} came back for {key}, which does not hold it: {held:?}"
            ));
        };
        self.owners.remove(&s);
        if s < range.start {
            self.owners.insert(s, (range.start - 1, k));
        }
        let _ = e;
        Ok(())
    }

    fn deliver(&mut self, msg: Msg) -> Verdict {
        match msg {
            Msg::Ask { site, epoch, ask } => {
                let name = self.sites[site].name.clone();
                let block = self.root_lease(&ask.as_lease(&name), &name)?;
                self.net.push(Msg::Answer {
                    site,
                    epoch,
                    request_id: ask.request_id,
                    block,
                    tag_step: self.record.step,
                });
            }
            Msg::Answer {
                site,
                epoch,
                request_id,
                block,
                tag_step,
            } => {
                let now = self.now;
                let s = &mut self.sites[site];
                let current = s.epoch;
                let old = s.old.as_ref().is_some_and(|i| i.epoch == epoch);
                let inst = [s.current.as_mut(), s.old.as_mut()]
                    .into_iter()
                    .flatten()
                    .find(|i| i.epoch == epoch);
                if let Some(inst) = inst {
                    match inst.alloc.loaded(&request_id, block, tag_step, now) {
                        // Written, as the Worker writes every answer.
                        Ok(BlockLoad::Installed) => {
                            self.persist(site, old, false);
                        }
                        Ok(BlockLoad::Ignored) => {}
                        // An old instance's ask, abandoned by its
                        // replacement's retirement: the root may answer it
                        // below the old instance's blocks (their tails came
                        // back). Its fence refuses it (it could not serve
                        // it anyway).
                        Err(Error::SegmentOverlap { .. }) if epoch < current => {}
                        Err(e) => return Err(format!("block {block:?} refused: {e}")),
                    }
                }
            }
            Msg::ClientAsk { request_id, step } => {
                let ask = SegmentAsk {
                    step: Some(step),
                    request_id: Some(&request_id),
                    caller: Asker::Own(CLIENT),
                    for_isolate: false,
                };
                let range = self.root_lease(&ask, CLIENT)?;
                self.net.push(Msg::ClientAnswer { request_id, range });
            }
            Msg::ClientAnswer { request_id, range } => {
                let Some(i) = self
                    .client_waiting
                    .iter()
                    .position(|(r, _)| *r == request_id)
                else {
                    return Ok(());
                };
                self.client_waiting.swap_remove(i);
                // Uses the first third, hands the rest back.
                let used = range.step.div_ceil(3);
                self.hand_out(
                    Allocation::new(range.start, range.start + used - 1).unwrap(),
                    CLIENT,
                )?;
                if used < range.step {
                    self.net.push(Msg::TakeBack {
                        caller: CLIENT.into(),
                        tail: Tail {
                            range: Allocation::new(range.start + used, range.end).unwrap(),
                            request_id,
                        },
                        from: None,
                        ordered: false,
                    });
                }
            }
            Msg::TakeBack {
                caller,
                tail,
                from,
                ordered,
            } => {
                let answer = self.take_back(&caller, &tail)?;
                let keep = match answer {
                    Some(false) => true,
                    Some(true) => self.fault == Fault::KeepTakenTail,
                    None => self.fault == Fault::KeepUnprovenRefusal,
                };
                match (ordered, from) {
                    (true, Some((site, epoch))) => {
                        let answer = match (answer, keep) {
                            (_, true) => TailAnswer::Refused { untaken: true },
                            (Some(true), false) => TailAnswer::Taken,
                            (_, false) => TailAnswer::Refused { untaken: false },
                        };
                        self.net.push(Msg::BackAnswer {
                            site,
                            epoch,
                            tail,
                            answer,
                        });
                    }
                    (false, Some((site, epoch))) if keep => {
                        self.net.push(Msg::Refused { site, epoch, tail });
                    }
                    _ => {}
                }
            }
            Msg::BackAnswer {
                site,
                epoch,
                tail,
                answer,
            } => self.hand_back_answered(site, epoch, &tail, answer)?,
            Msg::Refused { site, epoch, tail } => {
                let now = self.now;
                let s = &mut self.sites[site];
                let old = s.old.as_ref().is_some_and(|i| i.epoch == epoch);
                let inst = [s.current.as_mut(), s.old.as_mut()]
                    .into_iter()
                    .flatten()
                    .find(|i| i.epoch == epoch);
                if let Some(inst) = inst {
                    if inst.alloc.keep(vec![tail], now) > 0 {
                        self.kept += 1;
                    }
                    self.persist(site, old, false);
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Verdict {
        let pick = |n: usize, p: usize| (n > 0).then(|| p % n);
        let op = &op.on_sites(self.active);
        match *op {
            Op::Serve {
                site,
                old,
                step,
                write_fails,
            } => self.serve(site, old, step, write_fails && !old)?,
            Op::Deliver { pick: p } => {
                if let Some(i) = pick(self.net.len(), p) {
                    let msg = self.net.remove(i);
                    self.deliver(msg)?;
                }
            }
            Op::Lose { pick: p } => {
                if let Some(i) = pick(self.net.len(), p) {
                    self.net.remove(i);
                }
            }
            Op::Duplicate { pick: p } => {
                if let Some(i) = pick(self.net.len(), p) {
                    self.net.push(self.net[i].clone());
                }
            }
            Op::AskFailed { site, old } => {
                if let Some(inst) = self.instance(site, old) {
                    if let Some(id) = inst.alloc.pending().map(|a| a.request_id.clone()) {
                        inst.alloc.load_failed(&id);
                    }
                }
            }
            Op::Replace { site, keep_old } => self.replace(site, keep_old),
            Op::Retire { site, old, ordered } => self.retire(site, old, ordered)?,
            Op::HandBackLost { site, old } => {
                let waiting = self
                    .instance(site, old)
                    .and_then(|i| i.back.as_ref().map(|(_, t)| (i.epoch, t.clone())));
                if let Some((epoch, tail)) = waiting {
                    self.hand_backs.1 += 1;
                    self.hand_back_answered(site, epoch, &tail, TailAnswer::Lost)?;
                }
            }
            Op::ClientLease { step } => {
                self.client_leases += 1;
                let request_id = format!("c-{}", self.client_leases);
                self.client_waiting.push((request_id.clone(), step));
                self.net.push(Msg::ClientAsk { request_id, step });
            }
            Op::ClientRetry { pick: p } => {
                if let Some(i) = pick(self.client_waiting.len(), p) {
                    // A retry asks for the step first asked for.
                    let (request_id, step) = self.client_waiting[i].clone();
                    self.net.push(Msg::ClientAsk { request_id, step });
                }
            }
            Op::RootLease { step } => {
                let ask = SegmentAsk {
                    step: Some(step),
                    for_isolate: true,
                    ..SegmentAsk::default()
                };
                let range = self.root_lease(&ask, "isolate")?;
                self.hand_out(range, "an isolate, from the root")?;
            }
            Op::Intrude { pick: p, from } => {
                let mut keys: Vec<(&String, &Remembered)> = self.remembered.iter().collect();
                keys.sort_by_key(|(k, _)| *k);
                if let Some(i) = pick(keys.len(), p) {
                    let (key, r) = keys[i];
                    let request_id = key.rsplit(':').next().unwrap().to_string();
                    let start = (r.segment.start + from).min(r.segment.end);
                    let tail = Tail {
                        range: Allocation::new(start, r.segment.end).unwrap(),
                        request_id,
                    };
                    self.take_back(INTRUDER, &tail)?;
                }
            }
            Op::Tick { ms } => self.now += ms,
        }
        self.check_max_id()
    }
}

fn restore(saved: Option<&str>) -> BlockAllocator {
    saved.map_or_else(BlockAllocator::new, |s| serde_json::from_str(s).unwrap())
}

impl Op {
    /// The same op on one of the `active` sites.
    fn on_sites(&self, active: usize) -> Op {
        let mut op = self.clone();
        match &mut op {
            Op::Serve { site, .. }
            | Op::AskFailed { site, .. }
            | Op::Replace { site, .. }
            | Op::Retire { site, .. }
            | Op::HandBackLost { site, .. } => *site %= active,
            _ => {}
        }
        op
    }
}

/// A world: the tag's step, whether it pins it (`max_step == step`), a
/// seed for request IDs, how many regions, and what happens.
#[derive(Debug, Clone)]
struct Plan {
    step: u64,
    pinned: bool,
    seed: u64,
    active: usize,
    ops: Vec<Op>,
}

/// Runs a plan; the first violation, if any.
fn run(fault: Fault, plan: &Plan) -> Verdict {
    let Plan {
        step,
        pinned,
        seed,
        active,
        ref ops,
    } = *plan;
    let mut world = World::new(fault, step, pinned, seed, active);
    for (i, op) in ops.iter().enumerate() {
        world
            .apply(op)
            .map_err(|e| format!("after op {i} ({op:?}): {e}"))?;
    }
    // Then every message is delivered and every region served once more.
    while let Some(msg) = world.net.pop() {
        world.deliver(msg)?;
    }
    // Hand-backs whose tail or answer was lost give up (and finish).
    for site in 0..active {
        for old in [true, false] {
            world.apply(&Op::HandBackLost { site, old })?;
        }
    }
    while let Some(msg) = world.net.pop() {
        world.deliver(msg)?;
    }
    for site in 0..active {
        world.serve(site, false, step, false)?;
    }
    Ok(())
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        1..20u64,
        prop::bool::weighted(0.2),
        any::<u64>(),
        1..=SITES,
        prop::collection::vec(op(), 1..200),
    )
        .prop_map(|(step, pinned, seed, active, ops)| Plan {
            step,
            pinned,
            seed,
            active,
            ops,
        })
}

proptest! {
    #![proptest_config(props::config(512))]

    #[test]
    fn no_id_twice_max_id_covers_all_and_tails_return_only_when_last(plan in plan()) {
        if let Err(e) = run(Fault::None, &plan) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The worlds hand IDs out, hand tails back, and see them return: the
/// properties are not vacuous.
#[test]
fn the_worlds_serve_ids_and_take_tails_back() {
    let mut runner = TestRunner::new(props::config(256));
    let (mut served, mut returned, mut kept, mut backs) = (0u64, 0u64, 0u64, (0u64, 0u64));
    let (mut unwritten, mut zombie) = (0u64, 0u64);
    for _ in 0..256 {
        let plan = plan().new_tree(&mut runner).unwrap().current();
        let mut w = World::new(Fault::None, plan.step, plan.pinned, plan.seed, plan.active);
        let before = w.record.max_id;
        for op in &plan.ops {
            let max_id = w.record.max_id;
            w.apply(op).unwrap();
            returned += u64::from(w.record.max_id < max_id);
        }
        served += w.handed.values().count() as u64;
        kept += w.kept;
        backs = (backs.0 + w.hand_backs.0, backs.1 + w.hand_backs.1);
        (unwritten, zombie) = (unwritten + w.unwritten, zombie + w.zombie_unwritten);
        assert!(w.record.max_id >= before);
    }
    println!(
        "256 worlds: {served} ranges handed out, {returned} tails returned, {kept} refused tails \
         served again, {} hand-backs finished ({} after a lost answer); {unwritten} ranges \
         answered without a write, {zombie} of them by an old instance whose writes fail",
        backs.0, backs.1
    );
    assert!(
        zombie > 0,
        "old instances serving within their reservation: {zombie}"
    );
    assert!(served > 300, "ranges handed out: {served}");
    // Allocators' tails only: a client's never moves max_id back (it is
    // credited to its own key, `TagRecord::credit_back`).
    assert!(returned > 10, "tails returned: {returned}");
    assert!(kept > 0, "refused tails served again: {kept}");
    assert!(backs.1 > 0, "hand-backs after a lost answer: {backs:?}");
}

const FAULTS: [Fault; 7] = [
    Fault::TakeBackWithoutCondition,
    Fault::KeepRemembered,
    Fault::RememberedByRequestIdOnly,
    Fault::ServeBeforePersist,
    Fault::HandBackBeforePersist,
    Fault::KeepTakenTail,
    Fault::KeepUnprovenRefusal,
];

/// The plans a planted fault may take to be found. The rarest are caught by
/// about 1 plan in 970 (`HandBackBeforePersist`; 1 in 1,333 from the least
/// lucky of 3 seeds) and 1 in 750 (`KeepUnprovenRefusal`), over 120,000
/// plans from 3 seeds (`planted_fault_rates`): a fault that rare is missed
/// by 24,000 plans with a chance of 1e-11 (1.5e-8 at 1 in 1,333), so a miss
/// is a property gone blind, not bad luck.
const PLANTED_BOUND: u64 = 24_000;

/// The first plan (counting from 1) of the plans drawn from `base`,
/// `base + 1`, ... that `fault` breaks and that holds without it, within
/// `bound`. (A plan that fails without a fault is the main property's to
/// report, not evidence that this fault is seen.)
fn first_catch(fault: Fault, base: u64, bound: u64) -> Option<(u64, u64)> {
    (0..bound).find_map(|i| {
        let seed = base.wrapping_add(i);
        let plan = props::draw(&plan(), seed).current();
        (run(fault, &plan).is_err() && run(Fault::None, &plan).is_ok()).then_some((i + 1, seed))
    })
}

/// Each planted fault breaks a property the worlds check, within
/// `PLANTED_BOUND` plans from the run's seed (fixed in `make test`).
#[test]
fn each_planted_fault_is_caught() {
    let base = props::seed();
    for fault in FAULTS {
        let started = std::time::Instant::now();
        let Some((n, seed)) = first_catch(fault, base, PLANTED_BOUND) else {
            panic!("{fault:?} went unnoticed in {PLANTED_BOUND} plans from seed {base}");
        };
        let mut tree = props::draw(&plan(), seed);
        let why = run(fault, &tree.current()).unwrap_err();
        let (simplest, why) = props::shrink(&mut tree, why, 2_000, |p| match run(fault, p) {
            Err(why) if run(Fault::None, p).is_ok() => Err(why),
            _ => Ok(()),
        });
        println!(
            "{fault:?}: plan {n} (seed {seed}), {:.1} s; shrunk to {} ops: {why}\n  {simplest:?}",
            started.elapsed().as_secs_f64(),
            simplest.ops.len()
        );
    }
}

/// The smallest worlds found for the two rarest planted faults, kept as
/// written: a change to `plan()` changes what every seed draws, and must
/// not lose them.
#[test]
fn the_rarest_faults_are_caught_in_their_smallest_worlds() {
    let serve = |site| Op::Serve {
        site,
        old: false,
        step: 1,
        write_fails: false,
    };
    let deliver = || Op::Deliver { pick: 0 };
    let world = |ops| Plan {
        step: 1,
        pinned: false,
        seed: 0,
        active: 1,
        ops,
    };
    let cases = [
        // The first copy of a hand-back is taken, the second refused
        // without proof: the allocator serves the tail anyway.
        (
            Fault::KeepUnprovenRefusal,
            world(vec![
                serve(0),
                deliver(),
                deliver(),
                Op::Retire {
                    site: 0,
                    old: false,
                    ordered: false,
                },
                Op::Duplicate { pick: 0 },
            ]),
        ),
        // An old instance hands its tail back though its write failed; its
        // replacement, restored with the block, serves from it. (The block
        // is installed before the replacement: an allocator's first ask is
        // sent unwritten, so a replacement would not know it.)
        (
            Fault::HandBackBeforePersist,
            world(vec![
                serve(0),
                deliver(),
                deliver(),
                Op::Replace {
                    site: 0,
                    keep_old: true,
                },
                Op::Retire {
                    site: 0,
                    old: true,
                    ordered: false,
                },
                deliver(),
                serve(0),
            ]),
        ),
    ];
    for (fault, plan) in cases {
        assert_eq!(run(Fault::None, &plan), Ok(()), "{plan:?}");
        let why = run(fault, &plan).expect_err("the fault is caught");
        println!("{fault:?}: {why}");
    }
}

/// Found on 2026-11-27 while shrinking the planted faults' worlds (and by 1
/// of 120,000 plans from the fixed seed before hand-backs through
/// `HandBack` were drawn too, seed 20262692): region 1 hands its
/// unused block 1..=6 back, and the network copies it; the first copy is
/// refused because region 2's block 7..=12 followed (which proves the root
/// did not take it), so region 1 serves the tail; region 2 then retires, its
/// tail comes back and `max_id` falls to 6; the second copy arrives and the
/// root takes 1..=6 back, though it was handed out: the next lease would
/// answer those IDs again. Fixed in the core: the refusal with proof closes
/// the tail (`TakeBack::Closed`: the range remembered under its request ID
/// ends before it, written with the answer), so no later copy is taken.
#[test]
fn a_copy_of_a_hand_back_refused_with_proof_is_never_taken_later() {
    let serve = |site| Op::Serve {
        site,
        old: false,
        step: 1,
        write_fails: false,
    };
    let deliver = |pick| Op::Deliver { pick };
    let plan = Plan {
        step: 6,
        pinned: false,
        seed: 0,
        active: 3,
        ops: vec![
            serve(1),
            deliver(0),
            deliver(0),
            serve(2),
            deliver(0),
            deliver(0),
            Op::Retire {
                site: 1,
                old: false,
                ordered: false,
            },
            Op::Duplicate { pick: 0 },
            deliver(0),
            deliver(1),
            serve(1),
            Op::Retire {
                site: 2,
                old: false,
                ordered: false,
            },
            deliver(2),
            deliver(0),
        ],
    };
    assert_eq!(run(Fault::None, &plan), Ok(()));
    // The same within one region (1 of 40,000 worlds from the fixed seed,
    // seed 20300540): its two tails go back at once and the lower is
    // copied; the first copy is refused (the upper tail followed it), so
    // the tail is served again; the upper is taken, `max_id` falls to the
    // lower tail's end, and the second copy is taken.
    let plan = Plan {
        step: 7,
        pinned: false,
        seed: 0,
        active: 1,
        ops: vec![
            serve(0),
            deliver(0),
            deliver(0),
            serve(0),
            deliver(0),
            deliver(0),
            Op::Serve {
                site: 0,
                old: false,
                step: 8,
                write_fails: false,
            },
            deliver(0),
            deliver(0),
            Op::Retire {
                site: 0,
                old: false,
                ordered: false,
            },
            Op::Duplicate { pick: 1 },
            deliver(1),
            deliver(0),
        ],
    };
    assert_eq!(run(Fault::None, &plan), Ok(()));
}

/// How often each planted fault is caught: `EDGELEAF_PLANTED_PLANS` plans
/// (24,000 unless set) from the run's seed, counting the plans that hold
/// without a fault (all of them, or the property is broken). `make proof`
/// runs it.
#[test]
#[ignore = "long: make proof"]
fn planted_fault_rates() {
    let base = props::seed();
    let plans: u64 = std::env::var("EDGELEAF_PLANTED_PLANS").map_or(24_000, |s| s.parse().unwrap());
    let (sound, broken): (Vec<Plan>, Vec<(u64, String)>) =
        (0..plans).fold((Vec::new(), Vec::new()), |(mut sound, mut broken), i| {
            let plan = props::draw(&plan(), base.wrapping_add(i)).current();
            match run(Fault::None, &plan) {
                Ok(()) => sound.push(plan),
                Err(why) => broken.push((base.wrapping_add(i), why)),
            }
            (sound, broken)
        });
    let mut too_rare = Vec::new();
    for fault in FAULTS {
        let caught = sound.iter().filter(|p| run(fault, p).is_err()).count() as u64;
        let rate = caught as f64 / plans as f64;
        // The chance that PLANTED_BOUND plans drawn at this rate all miss.
        let miss = (1.0 - rate).powf(PLANTED_BOUND as f64);
        println!(
            "{fault:?}: {caught} of {plans} plans ({:.3}%), about 1 in {:.0}; \
             missed by {PLANTED_BOUND} plans with chance {miss:.1e}",
            rate * 100.0,
            1.0 / rate
        );
        if miss > 1e-6 {
            too_rare.push(fault);
        }
    }
    assert!(
        too_rare.is_empty(),
        "PLANTED_BOUND too small for the rates of {too_rare:?}"
    );
    assert!(
        broken.is_empty(),
        "{} of {plans} plans fail without a fault, first (seed {}): {}",
        broken.len(),
        broken[0].0,
        broken[0].1
    );
}

#[derive(Debug, Clone)]
enum SoloOp {
    Serve(u64),
    /// The root answers the ask in flight.
    Answer,
    /// The root's record goes back by this many IDs (a store restored from
    /// an old copy: a fault outside the rules, which the allocator's fence
    /// must not turn into a repeated ID).
    RootGoesBack(u64),
    Retire,
    /// A replacement restored from the stored state.
    Restore,
    Tick(u64),
}

proptest! {
    #![proptest_config(props::config(512))]

    /// One allocator never serves an ID twice, whatever its root answers:
    /// across retirements and restores, it refuses a block at or below the
    /// highest ID it served (the state's high-water).
    #[test]
    fn an_allocator_never_serves_below_its_high_water(
        step in 1..20u64,
        seed in any::<u64>(),
        ops in prop::collection::vec(prop_oneof![
            4 => (1..40u64).prop_map(SoloOp::Serve),
            4 => Just(SoloOp::Answer),
            1 => (0..200u64).prop_map(SoloOp::RootGoesBack),
            1 => Just(SoloOp::Retire),
            1 => Just(SoloOp::Restore),
            1 => (0..5_000u64).prop_map(SoloOp::Tick),
        ], 1..200),
    ) {
        let mut rand = SplitMix64::new(seed);
        let mut record = TagRecord::new("t", step, 0, "", 0).unwrap();
        let mut alloc = BlockAllocator::new();
        let mut saved = serde_json::to_string(&alloc).unwrap();
        let mut sent: Option<BlockAsk> = None;
        let mut served: BTreeMap<u64, (u64, String)> = BTreeMap::new();
        let mut now = 0u64;
        for op in ops {
            match op {
                SoloOp::Serve(n) => {
                    let answer = alloc.serve(n, now, &mut rand);
                    if alloc.persist_first(&answer) {
                        saved = serde_json::to_string(&alloc).unwrap();
                    }
                    match answer {
                        Serve::Range { range, ask, .. } => {
                            prop_assert!(overlaps(&served, range.start, range.end).is_none(),
                                "{:?} served twice", range);
                            served.insert(range.start, (range.end, String::new()));
                            sent = ask.or(sent);
                        }
                        Serve::Load(ask) => sent = Some(ask),
                        Serve::Wait => {}
                    }
                }
                SoloOp::Answer => if let Some(ask) = sent.take() {
                    let (block, next) = record.allocate(Some(record.grant_step(ask.step)), now).unwrap();
                    record = next;
                    let _ = alloc.loaded(&ask.request_id, block, step, now);
                    saved = serde_json::to_string(&alloc).unwrap();
                },
                SoloOp::RootGoesBack(n) => record.max_id = record.max_id.saturating_sub(n),
                SoloOp::Retire => {
                    let _ = alloc.retire();
                    saved = serde_json::to_string(&alloc).unwrap();
                    sent = None;
                }
                SoloOp::Restore => {
                    alloc = serde_json::from_str(&saved).unwrap();
                    sent = None;
                }
                SoloOp::Tick(ms) => now += ms,
            }
        }
    }
}
