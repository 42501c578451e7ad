//! Properties of segment mode: the store never hands out overlapping ranges,
//! and a buffer fed from it never yields an ID twice or outside what it loaded,
//! and yields them ascending (one by one, in slices, or in ranges that are
//! shorter than asked only at a segment's end, each signalling its load as
//! the others do);
//! the tag's last segment is the IDs left (shorter than the step), and only
//! then is the tag exhausted. A monotonic tag's store running twice (an old
//! instance beside its replacement, over one storage, each write a
//! compare-and-set on the record that instance read, reads possibly stale)
//! never answers an ID twice, and its answers, in the order they leave, are
//! strictly increasing; a request on a fresh read always answers.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;

use edgeleaf::{
    driver::IssuedMark, driver::MonotonicIssuer, driver::SegmentStep, opaque::OpaqueDomain,
    segment::Allocation, segment::SegmentBuffer, segment::SegmentNext, segment::StepPolicy,
    segment::MAX_SEGMENT_ID, segment::MAX_STEP, tag::Asker, tag::CreditBack, tag::LeaseSource,
    tag::Remembered, tag::RememberedChange, tag::SegmentAsk, tag::TagKind, tag::TagRecord,
    tag::TailBack, tag::TailPlan, tag::TailSkipped, tag::TakeBack, tag::MAX_CREDITS, Error,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

#[derive(Debug, Clone)]
enum Op {
    Next,
    Take(usize),
    /// A contiguous range of at most this many IDs (`take_range`).
    TakeRange(u64),
    /// Deliver the load in flight, if any; `true` makes the store fail it.
    Deliver(bool),
    /// Another node takes a segment from the same tag in between.
    Interleave(u64),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => Just(Op::Next),
        3 => (1usize..50).prop_map(Op::Take),
        3 => (0u64..50).prop_map(Op::TakeRange),
        4 => Just(Op::Deliver(false)),
        1 => Just(Op::Deliver(true)),
        1 => (1u64..100).prop_map(Op::Interleave),
        2 => (0u64..3_600_000).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(props::config(300))]

    #[test]
    fn buffer_never_repeats_and_stays_inside_loaded_segments(
        min_step in 1u64..40,
        percent in 0u8..=100,
        start_max in prop_oneof![0u64..1000, (MAX_SEGMENT_ID - 5_000)..MAX_SEGMENT_ID],
        ops in prop::collection::vec(op(), 1..400),
    ) {
        let policy = StepPolicy::new(min_step).unwrap();
        let mut buf = SegmentBuffer::with_prefetch_percent(policy, percent).unwrap();
        let mut store = TagRecord::new("prop", min_step, start_max, "", 0).unwrap();
        let mut now = 0u64;
        let mut in_flight = false;
        let mut loaded: Vec<Allocation> = Vec::new();
        let mut seen = HashSet::new();
        let mut last = 0u64;
        let mut check = |id: u64, loaded: &[Allocation]| {
            assert!(seen.insert(id), "duplicate {id}");
            assert!(id > last, "{id} after {last}: IDs ascend");
            last = id;
            assert!(loaded.iter().any(|a| (a.start..=a.end).contains(&id)), "{id} outside");
        };
        for op in ops {
            match op {
                Op::Next => match buf.next_id() {
                    SegmentNext::Id { id, prefetch } => {
                        check(id, &loaded);
                        if prefetch { assert!(!in_flight); in_flight = true; }
                    }
                    SegmentNext::Exhausted { load } => {
                        assert_eq!(load, !in_flight, "asked to load exactly when none in flight");
                        in_flight = true;
                    }
                },
                Op::Take(n) => {
                    let mut out = vec![0; n];
                    let t = buf.take(&mut out);
                    for &id in &out[..t.filled] { check(id, &loaded); }
                    if t.load { assert!(!in_flight); in_flight = true; }
                }
                Op::TakeRange(max) => {
                    let mut twin = buf.clone();
                    let t = buf.take_range(max);
                    // The same as `take` of as many IDs: IDs, signal, state.
                    let len = t.range.map_or(max, |r| r.step);
                    let mut out = vec![0; usize::try_from(len).unwrap()];
                    let tt = twin.take(&mut out);
                    let ids: Vec<u64> = t.range.map_or(vec![], |r| (r.start..=r.end).collect());
                    prop_assert_eq!(&out[..tt.filled], &ids[..]);
                    prop_assert_eq!(tt.load, t.load);
                    prop_assert_eq!(&twin, &buf);
                    match t.range {
                        Some(r) => {
                            prop_assert!(r.step >= 1 && r.step <= max && r.end - r.start + 1 == r.step);
                            for id in r.start..=r.end { check(id, &loaded); }
                            // Shorter than asked only at a segment's end.
                            prop_assert!(r.step == max || loaded.iter().any(|a| a.end == r.end));
                            if t.load { prop_assert!(!in_flight); in_flight = true; }
                        }
                        None if max == 0 => prop_assert!(!t.load),
                        None => {
                            prop_assert_eq!(buf.available(), 0);
                            prop_assert_eq!(t.load, !in_flight, "asked to load exactly when none in flight");
                            in_flight = true;
                        }
                    }
                }
                Op::Deliver(fail) if in_flight => {
                    in_flight = false;
                    let step = buf.step_for_next_load(now);
                    assert!(step >= min_step && step <= 1_000_000);
                    match store.allocate(Some(step), now) {
                        Ok((alloc, next)) if !fail => {
                            store = next;
                            buf.load(alloc, now).unwrap();
                            loaded.push(alloc);
                        }
                        _ => buf.load_failed(),
                    }
                }
                Op::Deliver(_) => {}
                Op::Interleave(step) => {
                    if let Ok((_, next)) = store.allocate(Some(step), now) { store = next; }
                }
                Op::Advance(ms) => now += ms,
            }
        }
        let snap = buf.snapshot();
        prop_assert_eq!(snap.loading, in_flight);
    }

    /// Any interleaving of allocations and updates on one tag yields disjoint,
    /// positive segments in increasing order.
    #[test]
    fn allocator_never_overlaps(
        initial in 0u64..1_000_000,
        ops in prop::collection::vec((1u64..=1_000_000, prop::option::of(0u64..5000)), 1..200),
    ) {
        let mut rec = TagRecord::new("alloc", 1000, initial, "", 0).unwrap();
        let mut last_end = initial;
        for (i, (step, bump)) in ops.into_iter().enumerate() {
            if let Some(bump) = bump.filter(|_| i % 7 == 0) {
                // An admin update may raise max_id, never lower it.
                rec = rec.update(rec.step, Some(rec.max_id + bump), None, "x", i as u64).unwrap();
                prop_assert!(rec.update(rec.step, Some(rec.max_id.saturating_sub(1)), None, "", 0).is_err()
                    || rec.max_id == 0);
            }
            let (a, next) = rec.allocate(Some(step), i as u64).unwrap();
            prop_assert!(a.start > last_end);
            prop_assert!(a.start >= 1 && a.end <= MAX_SEGMENT_ID);
            prop_assert_eq!(a.end - a.start + 1, step);
            prop_assert_eq!(next.max_id, a.end);
            last_end = a.end;
            rec = next;
        }
    }

    /// A tag's `max_step` bounds every step granted, survives updates that
    /// do not set it, and is never below the step: whatever step a caller
    /// asks for and however the admin changes the tag.
    #[test]
    fn granted_steps_stay_within_step_and_max_step(
        step in 1u64..=2000,
        max_step in prop::option::of(1u64..=4000),
        ops in prop::collection::vec((0u64..3_000_000, prop::option::of(1u64..=2000), prop::option::of(1u64..=4000)), 1..100),
    ) {
        let Ok(mut rec) = TagRecord::new("pinned", step, 0, "", 0).unwrap().with_max_step(max_step) else {
            prop_assert!(max_step.is_some_and(|m| m < step));
            return Ok(());
        };
        for (i, (asked, new_step, new_max)) in ops.into_iter().enumerate() {
            let granted = rec.grant_step(Some(asked));
            let cap = rec.max_step.unwrap_or(MAX_STEP);
            prop_assert!(rec.step <= granted && granted <= cap);
            let (a, next) = rec.allocate(Some(granted), i as u64).unwrap();
            prop_assert!(a.end - a.start < cap);
            rec = next;
            if let Some(new_step) = new_step.filter(|_| i % 5 == 0) {
                let kept = rec.max_step;
                match rec.update(new_step, None, new_max, "", i as u64) {
                    Ok(updated) => {
                        prop_assert_eq!(updated.max_step, new_max.or(kept));
                        prop_assert!(updated.max_step.is_none_or(|m| m >= updated.step));
                        rec = updated;
                    }
                    Err(_) => prop_assert!(new_max.or(kept).is_some_and(|m| m < new_step)),
                }
            }
        }
    }

    /// Near a tag's end, any step: the segment is the step's IDs or, when
    /// fewer are left, all of them; exhausted exactly when none is left.
    #[test]
    fn the_last_segment_is_the_ids_left(
        opaque in any::<bool>(),
        left in 0u64..3_000,
        steps in prop::collection::vec(1u64..=MAX_STEP, 1..20),
    ) {
        let kind = if opaque { TagKind::Opaque(OpaqueDomain::Digits(6)) } else { TagKind::Plain };
        let last = if opaque { 999_999 } else { MAX_SEGMENT_ID };
        let mut rec = TagRecord::new("end", 1, last - left, "", 0).unwrap().with_kind(kind).unwrap();
        for step in steps {
            let before = rec.max_id;
            match rec.allocate(Some(step), 0) {
                Ok((a, next)) => {
                    prop_assert_eq!(a.start, before + 1);
                    prop_assert_eq!(a.step, step.min(last - before));
                    prop_assert!(a.end <= last);
                    prop_assert_eq!(next.max_id, a.end);
                    rec = next;
                }
                Err(e) => {
                    prop_assert_eq!(e, Error::TagExhausted { max_id: last, step });
                    prop_assert_eq!(before, last, "exhausted with IDs left");
                }
            }
        }
    }

    #[test]
    fn a_monotonic_store_running_twice_never_answers_twice_nor_out_of_order(
        step in 1u64..20,
        ops in prop::collection::vec(mono_op(), 1..200),
    ) {
        let mut store = MonoStore {
            record: TagRecord::new("mono", step, 0, "", 0).unwrap().with_kind(TagKind::Monotonic).unwrap(),
            issued: 0,
        };
        let policy = StepPolicy::new(step).unwrap();
        let mut instances = [MonotonicIssuer::new(policy), MonotonicIssuer::new(policy)];
        let mut answered: Vec<u64> = Vec::new();
        let mut now = 0u64;
        let (mut fresh_asks, mut fresh_answers) = (0, 0);
        for op in ops {
            match op {
                MonoOp::Serve { instance, count, fresh } => {
                    let issuer = &mut instances[instance];
                    // A stale read: what this instance last saw (an old
                    // instance does not see its replacement's writes).
                    let read = match issuer.expected() {
                        Some(seen) if !fresh => seen,
                        _ => store.mark(),
                    };
                    let fresh = read == store.mark();
                    if let Some(ids) = serve(&mut store, issuer, read, count, now) {
                        for id in ids {
                            prop_assert!(answered.last().is_none_or(|prev| id > *prev),
                                "{} answered after {:?}", id, answered.last());
                            answered.push(id);
                        }
                        fresh_answers += usize::from(fresh);
                    }
                    fresh_asks += usize::from(fresh);
                }
                // An admin raises max_id (skipping IDs), through the current instance.
                MonoOp::Raise(by) => store.record.max_id += by,
                MonoOp::Advance(ms) => now += ms,
            }
        }
        // Liveness: a request on the record as it stands always answers.
        prop_assert_eq!(fresh_answers, fresh_asks);
    }
}

#[derive(Debug, Clone)]
enum MonoOp {
    /// A request of `count` IDs to instance `instance` (of two), reading the
    /// record from storage (`fresh`) or from its own last view.
    Serve {
        instance: usize,
        count: usize,
        fresh: bool,
    },
    Raise(u64),
    Advance(u64),
}

fn mono_op() -> impl Strategy<Value = MonoOp> {
    prop_oneof![
        10 => (0usize..2, 1usize..40, prop::bool::weighted(0.6))
            .prop_map(|(instance, count, fresh)| MonoOp::Serve { instance, count, fresh }),
        1 => (1u64..500).prop_map(MonoOp::Raise),
        2 => (0u64..2_000_000).prop_map(MonoOp::Advance),
    ]
}

/// One storage under both instances.
struct MonoStore {
    record: TagRecord,
    issued: u64,
}

impl MonoStore {
    fn mark(&self) -> IssuedMark {
        IssuedMark {
            max_id: self.record.max_id,
            issued: self.issued,
        }
    }

    /// Compare-and-set: `write` only if the record is still `expected`.
    fn cas(&mut self, expected: Option<IssuedMark>, write: impl FnOnce(&mut Self)) -> bool {
        if expected != Some(self.mark()) {
            return false;
        }
        write(self);
        true
    }
}

/// One request as the Durable Object serves it: the IDs answered, or
/// `None` when a write was refused (nothing leaves).
fn serve(
    store: &mut MonoStore,
    issuer: &mut MonotonicIssuer,
    read: IssuedMark,
    count: usize,
    now: u64,
) -> Option<Vec<u64>> {
    issuer.begin(read);
    // The record as this instance read it.
    let mut record = TagRecord {
        max_id: read.max_id,
        ..store.record.clone()
    };
    let mut out = vec![0u64; count];
    let mut filled = 0;
    loop {
        let poll = issuer.poll(now, &mut out[filled..]);
        filled += poll.filled;
        let step = match poll.next {
            SegmentStep::Done { prefetch: None } => break,
            SegmentStep::Done {
                prefetch: Some(step),
            }
            | SegmentStep::LoadNow { step } => step,
            SegmentStep::Wait => unreachable!("a load in flight in a synchronous store"),
        };
        let Ok((alloc, next)) = record.allocate(Some(step), now) else {
            issuer.load_failed();
            return None;
        };
        let expected = issuer.expected();
        let max_id = next.max_id;
        if !store.cas(expected, |s| s.record.max_id = max_id) {
            issuer.write_failed();
            return None;
        }
        record = next;
        issuer
            .loaded(alloc, now)
            .expect("a segment the store allocated above the record");
    }
    let mark = issuer.answer(out[count - 1]);
    if !store.cas(issuer.expected(), |s| s.issued = mark.issued) {
        issuer.write_failed();
        return None;
    }
    issuer.written(mark);
    Some(out)
}

/// A client's buffer, closed: what it hands back (`SegmentBuffer::retire`).
#[derive(Debug, Clone)]
enum CloseOp {
    /// An ID from client `.0`.
    Next(usize),
    /// Up to `.1` IDs from client `.0`.
    Take(usize, usize),
    /// The load client `.0` has in flight arrives (leased under its own
    /// request ID).
    Deliver(usize),
    /// Someone without a request ID leases a segment in between.
    Interleave(u64),
    /// Client `.0` closes and hands its unused ranges back, last first; a
    /// new client of the same key takes its place.
    Close(usize),
    /// Client `.0` names client `.1`'s last lease (its request ID and range
    /// end) as its own: never taken.
    Impostor(usize, usize),
    /// Client `.0` hands back its last lease whole, IDs it handed out
    /// included (a bug, a crash mid-use, a snapshot-restored copy, a hostile
    /// key holder), and goes on serving from it.
    Lie(usize),
}

fn close_op() -> impl Strategy<Value = CloseOp> {
    prop_oneof![
        10 => (0usize..4).prop_map(CloseOp::Next),
        4 => (0usize..4, 1usize..40).prop_map(|(c, n)| CloseOp::Take(c, n)),
        6 => (0usize..4).prop_map(CloseOp::Deliver),
        1 => (1u64..30).prop_map(CloseOp::Interleave),
        2 => (0usize..4).prop_map(CloseOp::Close),
        1 => (0usize..4, 0usize..4).prop_map(|(a, b)| CloseOp::Impostor(a, b)),
        1 => (0usize..4).prop_map(CloseOp::Lie),
    ]
}

/// Clients 0 and 2 use one API key, 1 and 3 another (two processes of one
/// key, and their restarts).
const KEYS: usize = 2;

struct Client {
    name: String,
    buf: SegmentBuffer,
    in_flight: bool,
    handed: Vec<u64>,
    loaded: Vec<Allocation>,
    /// Request ID of each lease, by its range's end.
    leases: std::collections::BTreeMap<u64, String>,
    /// It handed back IDs it used.
    lied: bool,
}

proptest! {
    #![proptest_config(props::config(300))]

    /// A buffer's unused ranges are exactly the IDs it loaded and did not
    /// hand out, last first; closed (`retire`), it hands out nothing more and
    /// never loads them again. Handed back to the tag's store under their
    /// leases' request IDs, a client's tail never moves `max_id` back
    /// (`TagRecord::take_back` skips it): it becomes a credit of its key
    /// (`TagRecord::credit_back`, at most `MAX_CREDITS`), which only the
    /// same key leases again (`TagRecord::lease_with_credits`, lowest
    /// first). Across clients of two keys that close, are replaced, and
    /// falsely hand back IDs they used: an ID never goes to two keys; with
    /// honest clients no ID is handed out twice and every tail is credited
    /// (credits permitting), so the key's next lease goes on at its lowest
    /// credit (Leaf's issues #15/#78: no gap for the key). Another client
    /// naming the same request ID and range takes nothing.
    #[test]
    fn unused_ranges_go_back_as_credits_and_no_id_crosses_keys(
        min_step in 1u64..40,
        percent in 0u8..=100,
        start_max in 0u64..1000,
        ops in prop::collection::vec(close_op(), 1..300),
    ) {
        let policy = StepPolicy::new(min_step).unwrap();
        let fresh = |n: usize| Client {
            name: format!("lease:key-{}", n % KEYS),
            buf: SegmentBuffer::with_prefetch_percent(policy, percent).unwrap(),
            in_flight: false,
            handed: Vec::new(),
            loaded: Vec::new(),
            leases: std::collections::BTreeMap::new(),
            lied: false,
        };
        let mut clients: Vec<Client> = (0..4).map(fresh).collect();
        let mut store = TagRecord::new("prop", min_step, start_max, "", 0).unwrap();
        let mut remembered: std::collections::HashMap<String, Remembered> = Default::default();
        let mut credits: std::collections::HashMap<String, Vec<Allocation>> = Default::default();
        // Each ID handed out, and the key it went to.
        let mut seen: std::collections::HashMap<u64, String> = Default::default();
        let mut lies = false;
        let mut leased = 0u64;
        for op in ops {
            match op {
                CloseOp::Next(c) | CloseOp::Take(c, _) => {
                    let n = if let CloseOp::Take(_, n) = op { n } else { 1 };
                    let cl = &mut clients[c];
                    let mut out = vec![0; n];
                    let t = cl.buf.take(&mut out);
                    for &id in &out[..t.filled] {
                        if let Some(key) = seen.insert(id, cl.name.clone()) {
                            prop_assert_eq!(&key, &cl.name, "{} went to two keys", id);
                            prop_assert!(lies, "{} handed out twice with honest clients", id);
                        }
                        prop_assert!(id <= store.max_id, "{} above max_id", id);
                        cl.handed.push(id);
                    }
                    if t.load { prop_assert!(!cl.in_flight); cl.in_flight = true; }
                }
                CloseOp::Deliver(c) if clients[c].in_flight => {
                    let cl = &mut clients[c];
                    cl.in_flight = false;
                    leased += 1;
                    let request_id = format!("r{leased}");
                    let ask = SegmentAsk {
                        step: Some(cl.buf.step_for_next_load(0)),
                        request_id: Some(&request_id),
                        caller: Asker::Own(&cl.name),
                        for_isolate: false,
                    };
                    let mine = credits.entry(cl.name.clone()).or_default();
                    // The highest ID it holds (as the npm client sends it).
                    let above = cl.loaded.iter().map(|a| a.end).max().unwrap_or(0);
                    let plan = store.plan_lease(&ask, None, mine, above).unwrap();
                    let got = match plan.source {
                        LeaseSource::Allocate { step } => {
                            prop_assert!(mine.iter().all(|c| c.start <= above), "a new segment while the key holds credits above {}", above);
                            store.allocate(Some(step), 0).map(|(alloc, next)| {
                                store = next;
                                alloc
                            })
                        }
                        LeaseSource::Credit { segment, granted, taken, rest } => {
                            let lowest = mine.iter().map(|c| c.start).filter(|s| *s > above).min();
                            prop_assert_eq!(Some(segment.start), lowest, "not the lowest credit");
                            prop_assert!(segment.step <= granted);
                            prop_assert_eq!((taken.owner, rest.map(|a| a.owner).unwrap_or(taken.owner)), (cl.name.as_str(), cl.name.as_str()));
                            let i = mine.iter().position(|c| *c == taken.range).unwrap();
                            mine.remove(i);
                            mine.extend(rest.map(|a| a.range));
                            Ok(segment)
                        }
                        other => panic!("a new request ID answered {other:?}"),
                    };
                    match got {
                        Ok(alloc) => {
                            let (key, entry) = plan.remembered(alloc).expect("a request ID of its own");
                            remembered.insert(key.into(), entry);
                            // Never a credit below what this client holds: its
                            // buffer loads every answer.
                            prop_assert!(cl.buf.load(alloc, 0).is_ok(), "{:?} refused above {}", alloc, above);
                            cl.loaded.push(alloc);
                            cl.leases.insert(alloc.end, request_id);
                        }
                        Err(_) => cl.buf.load_failed(),
                    }
                }
                CloseOp::Deliver(_) => {}
                CloseOp::Interleave(step) => {
                    if let Ok((_, next)) = store.allocate(Some(step), 0) { store = next; }
                }
                CloseOp::Impostor(a, b) if clients[a].name != clients[b].name => {
                    let Some((&end, id)) = clients[b].leases.iter().next_back() else { continue };
                    let back = TailBack {
                        tail: Allocation::new(end, end).unwrap(),
                        request_id: id,
                        caller: Asker::Own(&clients[a].name),
                        for_isolate: false,
                    };
                    let own = back.remembered_as().and_then(|k| remembered.get(&k).copied());
                    let held = credits.get(&clients[a].name).cloned().unwrap_or_default();
                    let answer = store.credit_back(&back, own.as_ref(), &held).unwrap();
                    prop_assert!(matches!(answer, CreditBack::Skipped(_)), "{:?}: another's range taken", answer);
                }
                CloseOp::Impostor(..) => {}
                CloseOp::Lie(c) => {
                    let cl = &mut clients[c];
                    let Some(&range) = cl.loaded.last() else { continue };
                    let id = cl.leases[&range.end].clone();
                    let back = TailBack { tail: range, request_id: &id, caller: Asker::Own(&cl.name), for_isolate: false };
                    let own = remembered.get(&back.remembered_as().unwrap()).copied();
                    let held = credits.get(&cl.name).cloned().unwrap_or_default();
                    let before = store.max_id;
                    prop_assert_eq!(store.take_back(&back, own.as_ref(), 0).unwrap(), TakeBack::Skipped(TailSkipped::FromClient));
                    let plan = store.plan_tail(&back, own.as_ref(), &held, 0).unwrap();
                    if plan.taken {
                        lies = true;
                        cl.lied = true;
                    }
                    write_tail(plan, &mut credits, &mut remembered);
                    prop_assert_eq!(store.max_id, before);
                }
                CloseOp::Close(c) => {
                    let mut cl = std::mem::replace(&mut clients[c], fresh(c));
                    // Unused: exactly the loaded IDs not handed out, last first.
                    let unused = cl.buf.unused();
                    let mut expect: Vec<u64> = cl.loaded.iter().flat_map(|a| a.start..=a.end)
                        .filter(|id| !cl.handed.contains(id)).collect();
                    expect.sort_unstable();
                    let mut got: Vec<u64> = unused.iter().flatten().flat_map(|a| a.start..=a.end).collect();
                    got.sort_unstable();
                    prop_assert_eq!(&got, &expect);
                    let ends: Vec<u64> = unused.iter().flatten().map(|a| a.end).collect();
                    prop_assert!(ends.windows(2).all(|w| w[0] > w[1]), "last first: {:?}", unused);
                    prop_assert!(unused[0].is_some() || unused[1].is_none());
                    let retired = cl.buf.retire();
                    prop_assert_eq!(retired, unused);
                    prop_assert_eq!(cl.buf.available(), 0);
                    prop_assert_eq!(cl.buf.next_id(), SegmentNext::Exhausted { load: true });
                    if let Some(r) = unused[0] {
                        prop_assert!(cl.buf.load(r, 0).is_err(), "a closed buffer loads what it handed back");
                    }
                    for r in unused.iter().flatten() {
                        let id = cl.leases.get(&r.end).expect("each unused range is a lease's end");
                        let back = TailBack {
                            tail: *r,
                            request_id: id,
                            caller: Asker::Own(&cl.name),
                            for_isolate: false,
                        };
                        let own = remembered.get(&back.remembered_as().unwrap()).copied();
                        let held = credits.get(&cl.name).cloned().unwrap_or_default();
                        let before = store.max_id;
                        // Never max_id moved back for a client.
                        prop_assert_eq!(store.take_back(&back, own.as_ref(), 0).unwrap(), TakeBack::Skipped(TailSkipped::FromClient));
                        let full = held.len() >= MAX_CREDITS;
                        let plan = store.plan_tail(&back, own.as_ref(), &held, 0).unwrap();
                        if plan.taken {
                            prop_assert_eq!(plan.credit.map(|c| c.range), Some(*r));
                            prop_assert!(!full);
                        } else {
                            // Honest and room left: a tail of the key is
                            // never lost.
                            prop_assert!(full || cl.lied, "{:?} skipped: {:?}", r, store.credit_back(&back, own.as_ref(), &held));
                        }
                        write_tail(plan, &mut credits, &mut remembered);
                        prop_assert_eq!(store.max_id, before);
                    }
                }
            }
            // Credits never overlap one another, and lie below max_id.
            let mut all: Vec<Allocation> = credits.values().flatten().copied().collect();
            all.sort_by_key(|a| a.start);
            prop_assert!(all.windows(2).all(|w| w[0].end < w[1].start), "credits overlap: {:?}", all);
            prop_assert!(all.iter().all(|a| a.end <= store.max_id));
            prop_assert!(credits.values().all(|c| c.len() <= MAX_CREDITS));
        }
    }
}

/// A client's tail handed back, written to the test's store as the core
/// planned it (`TagRecord::plan_tail`; a client's never moves `max_id`).
fn write_tail(
    plan: TailPlan<'_>,
    credits: &mut std::collections::HashMap<String, Vec<Allocation>>,
    remembered: &mut std::collections::HashMap<String, Remembered>,
) {
    assert_eq!(plan.record, None, "a client's tail moved max_id back");
    if let Some(credit) = plan.credit {
        credits
            .entry(credit.owner.into())
            .or_default()
            .push(credit.range);
    }
    match plan.remembered {
        Some((key, RememberedChange::Remove)) => {
            remembered.remove(&key);
        }
        Some((key, RememberedChange::Shorten(kept))) => {
            remembered.insert(key, kept);
        }
        None => {}
    }
}
