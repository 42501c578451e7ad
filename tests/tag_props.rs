//! A tag store's rules under random sequences of creates, changes, segment
//! leases (with and without request IDs, from isolates and from outside),
//! monotonic ID requests and reveals, run against a model of the store
//! (its record, and the segments it remembers under request IDs):
//! - a tag's kind is the one it was created with, for ever: a change that
//!   names another kind is refused (and changes nothing), one that names
//!   its kind or none goes through;
//! - who may take segments follows the kind: a monotonic tag's go to nobody,
//!   an opaque tag's to the service's isolates only;
//! - a request ID is answered once: sent again with the same request (as
//!   granted), the same segment comes back and nothing is allocated; with
//!   another, it is refused and nothing is allocated; an ID outside
//!   1..=128 bytes is refused;
//! - a request ID belongs to a credential of the caller's own: two callers
//!   never share a segment through one, and a caller without a credential of
//!   its own (none, or a shared token) may send none (`RequestIdNeedsKey`);
//! - a conditional change goes through exactly when the tag is as its
//!   writer read it (`TagChanged` otherwise, and nothing changes);
//! - no two segments handed out overlap;
//! - a tail handed back returns (`max_id` back to its start − 1) exactly when
//!   its caller leased it under its own request ID, it is the end of the
//!   range remembered there, and nothing was handed out after it; the
//!   remembered range is shortened in the same decision, so a retry of the
//!   lease answers only the IDs its caller kept; only from the service's
//!   own allocators (an outside client's is credited instead, never
//!   `max_id` moved back); never for a monotonic tag, nor an opaque tag's
//!   from outside;
//! - one caller's memory is one range of names (`remembered_range`, where
//!   the store forgets a caller's oldest beyond `MAX_REMEMBERED_PER_CALLER`):
//!   every name of its request IDs is in it, no other caller's is; and
//!   pruned as `remembered_prune` says, it never holds more than the cap
//!   and the margin, keeps its newest `MAX_REMEMBERED_PER_CALLER`, and is
//!   pruned once in a margin of leases, not at each.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, HashMap, VecDeque};

use edgeleaf::{
    opaque::OpaqueDomain, segment::Allocation, tag::remembered_prune, tag::Asker, tag::Remembered,
    tag::RememberedChange, tag::SegmentAnswer, tag::SegmentAsk, tag::TagChange, tag::TagExpected,
    tag::TagKind, tag::TagRecord, tag::TailBack, tag::TakeBack, tag::MAX_REMEMBERED_PER_CALLER,
    tag::MAX_REQUEST_ID_LEN, tag::REMEMBERED_PRUNE_MARGIN, Error,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

const DOMAINS: [OpaqueDomain; 2] = [OpaqueDomain::Bits(40), OpaqueDomain::Digits(9)];

#[derive(Debug, Clone)]
enum Op {
    /// `PUT` the tag: create it, or change it.
    Put {
        step: Option<u64>,
        raise_max_id: Option<u64>,
        monotonic: Option<bool>,
        opaque: Option<usize>,
        /// Conditional on the tag as read: `Some(true)` as it is,
        /// `Some(false)` as it was before it changed.
        expect: Option<bool>,
    },
    /// A segment lease by caller `caller` (of three: two with a credential
    /// of their own, one without). `request_id`: an index into the IDs
    /// below.
    Lease {
        step: Option<u64>,
        request_id: Option<usize>,
        caller: usize,
        for_isolate: bool,
    },
    /// IDs from a monotonic tag's store.
    Ids,
    /// An opaque ID's counter.
    Reveal,
    /// A tail handed back by caller `caller` under request ID `request_id`:
    /// from `from` IDs into the range remembered under that ID (for any
    /// caller), to its end or (`short`) one before.
    TakeBack {
        request_id: usize,
        caller: usize,
        from: u64,
        short: bool,
        for_isolate: bool,
    },
}

/// Two credentials whose request IDs are their own, and callers without one.
const CALLERS: [Asker<'static>; 3] = [Asker::Own("a"), Asker::Own("b"), Asker::Shared];

/// Three valid request IDs (the longest allowed among them) and two invalid.
fn request_ids() -> [String; 5] {
    [
        "r-1".into(),
        "r-2".into(),
        "x".repeat(MAX_REQUEST_ID_LEN),
        String::new(),
        "y".repeat(MAX_REQUEST_ID_LEN + 1),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (
            prop::option::of(1u64..1_000),
            prop::option::weighted(0.3, 0u64..10_000),
            prop::option::weighted(0.5, any::<bool>()),
            prop::option::weighted(0.3, 0..DOMAINS.len()),
            prop::option::weighted(0.4, any::<bool>()),
        )
            .prop_map(|(step, raise_max_id, monotonic, opaque, expect)| Op::Put { step, raise_max_id, monotonic, opaque, expect }),
        5 => (
            prop::option::of(1u64..3_000),
            prop::option::weighted(0.7, prop_oneof![8 => 0usize..3, 1 => 3usize..5]),
            0..CALLERS.len(),
            any::<bool>(),
        )
            .prop_map(|(step, request_id, caller, for_isolate)| Op::Lease { step, request_id, caller, for_isolate }),
        1 => Just(Op::Ids),
        1 => Just(Op::Reveal),
        3 => (0usize..5, 0..CALLERS.len(), 0u64..3_000, prop::bool::weighted(0.2), prop::bool::weighted(0.8))
            .prop_map(|(request_id, caller, from, short, for_isolate)| Op::TakeBack { request_id, caller, from, short, for_isolate }),
    ]
}

/// The store, as the model sees it.
#[derive(Default)]
struct Store {
    record: Option<TagRecord>,
    /// Segments by the key the core remembers them under, with their caller.
    remembered: HashMap<String, (Remembered, usize)>,
    /// The highest ID of any segment handed out.
    high_water: u64,
    /// The IDs held (start: end, the key of their lease, if any): segments
    /// handed out, less the tails that came back.
    held: BTreeMap<u64, (u64, Option<String>)>,
    now: u64,
}

impl Store {
    fn put(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let Op::Put {
            step,
            raise_max_id,
            monotonic,
            opaque,
            expect,
        } = *op
        else {
            unreachable!()
        };
        let opaque = opaque.map(|i| DOMAINS[i]);
        // What the writer read: the tag as it is, or as it was before.
        let now_read = match &self.record {
            None => TagExpected::Absent,
            Some(r) => TagExpected::MaxId(r.max_id),
        };
        let stale_read = match &self.record {
            None => TagExpected::MaxId(0),
            Some(r) if r.max_id > 0 => TagExpected::MaxId(r.max_id - 1),
            Some(_) => TagExpected::Absent,
        };
        let expected = expect.map(|fresh| if fresh { now_read } else { stale_read });
        let change = |max_id| TagChange {
            step,
            max_id,
            max_step: None,
            description: None,
            monotonic,
            opaque,
            expected,
        };
        let precondition = change(None).check_expected(self.record.as_ref());
        if expect == Some(false) {
            prop_assert!(
                matches!(precondition, Err(Error::TagChanged { .. })),
                "a stale read went through: {:?}",
                precondition
            );
            return Ok(());
        }
        prop_assert_eq!(
            precondition,
            Ok(()),
            "a read of the tag as it is was refused"
        );
        match &self.record {
            None => {
                let made = TagRecord::create("t", &change(raise_max_id), 100, self.now);
                match (monotonic, opaque) {
                    (Some(true), Some(_)) => prop_assert_eq!(made, Err(Error::OpaqueAndMonotonic)),
                    _ => {
                        let want = TagKind::new(monotonic == Some(true), opaque).unwrap();
                        let made = made.map_err(|e| TestCaseError::fail(format!("create: {e}")))?;
                        prop_assert_eq!(made.kind, want, "a new tag has the kind it asked for");
                        self.high_water = made.max_id;
                        self.record = Some(made);
                    }
                }
            }
            Some(r) => {
                let kind = r.kind;
                let max_id = raise_max_id.map(|d| r.max_id + d);
                let changed = r.change(&change(max_id), self.now);
                let other_monotonic = monotonic.is_some_and(|m| m != kind.is_monotonic());
                let other_opaque = opaque.is_some_and(|d| Some(d) != kind.opaque());
                if other_monotonic {
                    prop_assert!(
                        matches!(changed, Err(Error::MonotonicImmutable { .. })),
                        "{:?}: {:?}",
                        kind,
                        changed
                    );
                } else if other_opaque {
                    prop_assert!(
                        matches!(changed, Err(Error::OpaqueImmutable { .. })),
                        "{:?}: {:?}",
                        kind,
                        changed
                    );
                } else {
                    let next = changed.map_err(|e| TestCaseError::fail(format!("change: {e}")))?;
                    prop_assert_eq!(next.kind, kind, "a change kept the kind");
                    prop_assert!(next.max_id >= r.max_id, "max_id went back");
                    self.high_water = self.high_water.max(next.max_id);
                    self.record = Some(next);
                }
            }
        }
        Ok(())
    }

    fn lease(&mut self, ids: &[String; 5], op: &Op) -> Result<(), TestCaseError> {
        let Op::Lease {
            step,
            request_id,
            caller,
            for_isolate,
        } = *op
        else {
            unreachable!()
        };
        let Some(r) = &self.record else { return Ok(()) };
        let id = request_id.map(|i| ids[i].as_str());
        let asker = CALLERS[caller];
        let ask = SegmentAsk {
            step,
            request_id: id,
            caller: asker,
            for_isolate,
        };
        // The store looks the segment up where the core says; the core
        // decides. The model knows whose segment it is.
        let found = ask
            .remembered_as()
            .and_then(|k| self.remembered.get(&k))
            .copied();
        if let Some((_, whose)) = found {
            prop_assert_eq!(
                whose,
                caller,
                "a caller found another's segment under its request ID"
            );
        }
        let remembered = found.map(|(r, _)| r);
        let answer = r.lease_segment(&ask, remembered.as_ref());
        let granted = r.grant_step(step);
        let refused = match r.kind {
            TagKind::Monotonic => Some(Error::MonotonicTag),
            TagKind::Opaque(_) if !for_isolate => Some(Error::OpaqueTag),
            _ => None,
        };
        if let Some(e) = refused {
            prop_assert_eq!(answer, Err(e));
            return Ok(());
        }
        if id.is_some() && asker == Asker::Shared {
            prop_assert_eq!(answer, Err(Error::RequestIdNeedsKey));
            prop_assert_eq!(ask.remembered_as(), None);
            return Ok(());
        }
        if let Some(id) = id.filter(|id| id.is_empty() || id.len() > MAX_REQUEST_ID_LEN) {
            prop_assert_eq!(
                answer,
                Err(Error::InvalidRequestId {
                    len: id.len(),
                    max: MAX_REQUEST_ID_LEN
                })
            );
            return Ok(());
        }
        match (remembered, answer) {
            // A retry: the first answer again, and nothing allocated.
            (Some(first), Ok(SegmentAnswer::Again(again))) => {
                prop_assert_eq!(first.granted, granted);
                prop_assert_eq!(again, first.segment, "a retry got another segment");
                prop_assert_eq!(
                    self.held.get(&again.start),
                    Some(&(again.end, ask.remembered_as())),
                    "a retry answered IDs its lease does not hold"
                );
            }
            (Some(first), Err(Error::RequestIdReused { granted: g, asked })) => {
                prop_assert_eq!((g, asked), (first.granted, granted));
                prop_assert_ne!(
                    first.granted,
                    granted,
                    "a retry of the same request refused"
                );
            }
            (None, Ok(SegmentAnswer::Allocate { step: s })) => {
                prop_assert_eq!(s, granted);
                self.now += 1;
                if let Ok((alloc, next)) = r.allocate(Some(s), self.now) {
                    prop_assert!(
                        alloc.start > self.high_water,
                        "{:?} overlaps IDs up to {}",
                        alloc,
                        self.high_water
                    );
                    self.high_water = alloc.end;
                    self.held
                        .insert(alloc.start, (alloc.end, ask.remembered_as()));
                    if let Some(key) = ask.remembered_as() {
                        let r = Remembered {
                            segment: alloc,
                            granted: s,
                        };
                        self.remembered.insert(key, (r, caller));
                    }
                    self.record = Some(next);
                }
            }
            (remembered, answer) => {
                prop_assert!(false, "remembered {:?}: answered {:?}", remembered, answer)
            }
        }
        Ok(())
    }
}

impl Store {
    fn take_back(&mut self, ids: &[String; 5], op: &Op) -> Result<(), TestCaseError> {
        let Op::TakeBack {
            request_id,
            caller,
            from,
            short,
            for_isolate,
        } = *op
        else {
            unreachable!()
        };
        let Some(r) = &self.record else { return Ok(()) };
        let id = ids[request_id].as_str();
        let asker = CALLERS[caller];
        // The end of a range remembered under this ID (any caller's: not
        // always this one's), or of the last range handed out.
        let under_id = CALLERS
            .iter()
            .filter_map(|c| {
                SegmentAsk {
                    request_id: Some(id),
                    caller: *c,
                    ..SegmentAsk::default()
                }
                .remembered_as()
            })
            .find_map(|k| self.remembered.get(&k))
            .map(|(r, _)| r.segment);
        let Some(range) = under_id.or_else(|| Allocation::new(1, r.max_id).ok()) else {
            return Ok(());
        };
        let start = range.start.saturating_add(from).min(range.end);
        let end = if short && range.end > start {
            range.end - 1
        } else {
            range.end
        };
        let back = TailBack {
            tail: Allocation::new(start, end).unwrap(),
            request_id: id,
            caller: asker,
            for_isolate,
        };
        let key = back.remembered_as();
        let own = key
            .as_ref()
            .and_then(|k| self.remembered.get(k))
            .map(|(r, _)| *r);
        let answer = r.take_back(&back, own.as_ref(), self.now + 1);
        let refused = match r.kind {
            TagKind::Monotonic => Some(Error::MonotonicTag),
            TagKind::Opaque(_) if !for_isolate => Some(Error::OpaqueTag),
            _ if asker == Asker::Shared => Some(Error::RequestIdNeedsKey),
            _ if id.is_empty() || id.len() > MAX_REQUEST_ID_LEN => Some(Error::InvalidRequestId {
                len: id.len(),
                max: MAX_REQUEST_ID_LEN,
            }),
            _ => None,
        };
        if let Some(e) = refused {
            prop_assert_eq!(answer, Err(e));
            return Ok(());
        }
        // Only the service's own allocators move max_id back; an outside
        // client's tail is credited instead (`credit_back`, segment_props).
        let returns = own.is_some_and(|o| o.segment.end == end && start >= o.segment.start)
            && r.max_id == end
            && for_isolate;
        let answer = answer.map_err(|e| TestCaseError::fail(format!("take-back: {e}")))?;
        let TakeBack::Returned { record, remembered } = answer else {
            prop_assert!(!returns, "a tail that may return was skipped: {:?}", answer);
            return Ok(());
        };
        prop_assert!(returns, "{:?} returned against the rule", back.tail);
        let (key, own) = (key.unwrap(), own.unwrap());
        // Nothing was handed out after it, and its caller holds it.
        prop_assert!(
            self.held.range(end + 1..).next().is_none(),
            "IDs held above {}",
            end
        );
        let (held_start, (held_end, held_key)) = self
            .held
            .range(..=start)
            .next_back()
            .map(|(s, v)| (*s, v.clone()))
            .unwrap();
        prop_assert_eq!((held_end, held_key.as_deref()), (end, Some(key.as_str())));
        prop_assert_eq!(record.max_id, start - 1);
        self.held.remove(&held_start);
        if held_start < start {
            self.held.insert(held_start, (start - 1, Some(key.clone())));
        }
        match remembered {
            RememberedChange::Remove => {
                prop_assert_eq!(start, own.segment.start);
                self.remembered.remove(&key);
            }
            RememberedChange::Shorten(kept) => {
                prop_assert_eq!(
                    kept.segment,
                    Allocation::new(own.segment.start, start - 1).unwrap()
                );
                self.remembered.get_mut(&key).unwrap().0 = kept;
            }
        }
        self.now += 1;
        self.high_water = record.max_id;
        self.record = Some(record);
        Ok(())
    }
}

proptest! {
    #![proptest_config(props::config(256))]

    #[test]
    fn a_tags_kind_is_fixed_and_a_request_id_is_answered_once(ops in prop::collection::vec(op(), 1..80)) {
        let ids = request_ids();
        let mut store = Store::default();
        let mut created = None;
        for op in &ops {
            match op {
                Op::Put { .. } => store.put(op)?,
                Op::Lease { .. } => store.lease(&ids, op)?,
                Op::Ids => if let Some(r) = &store.record {
                    let want = if r.kind == TagKind::Monotonic { Ok(()) } else { Err(Error::NotMonotonic) };
                    prop_assert_eq!(r.kind.check_monotonic(), want);
                },
                Op::Reveal => if let Some(r) = &store.record {
                    prop_assert_eq!(r.kind.check_opaque(), r.kind.opaque().ok_or(Error::NotOpaque));
                },
                Op::TakeBack { .. } => store.take_back(&ids, op)?,
            }
            // The kind never changes once the tag exists.
            if let Some(r) = &store.record {
                prop_assert_eq!(*created.get_or_insert(r.kind), r.kind, "after {:?}", op);
            }
        }
    }

    // Callers of one and two digits of length: "1:" against "10:".
    #[test]
    fn a_callers_memory_is_one_range_of_its_own_names(
        a in prop_oneof!["[a-z:;0-9]{1,6}", "[a-z:;0-9]{8,15}"], b in prop_oneof!["[a-z:;0-9]{1,6}", "[a-z:;0-9]{8,15}"],
        ids in prop::collection::vec("[a-z:;0-9]{1,4}", 1..6),
    ) {
        let ask = |caller, id| SegmentAsk { step: None, request_id: Some(id), caller: Asker::Own(caller), for_isolate: false };
        let (from, to) = ask(&a, "x").remembered_range().expect("a caller's own request ID has a range");
        for id in &ids {
            let own = ask(&a, id).remembered_as().expect("remembered");
            prop_assert!(from <= own && own < to, "{own:?} outside [{from:?}, {to:?})");
            let other = ask(&b, id).remembered_as().expect("remembered");
            prop_assert_eq!(from <= other && other < to, a == b, "{:?} of caller {:?} against {:?}'s range", other, b, a);
        }
    }

        /// A store keeping one caller's count as `remembered_prune` says,
        /// through leases remembered and leases forgotten otherwise (the
        /// hour, a tail handed back: the count is not told): the caller
        /// never holds more than the cap and the margin, a prune keeps at
        /// least its newest `MAX_REMEMBERED_PER_CALLER`, and the count
        /// never falls below what it holds.
        #[test]
        fn a_callers_memory_is_pruned_to_its_newest_within_cap_and_margin(
            ops in proptest::collection::vec((0u8..100, 0usize..2_000), 0..4_000),
        ) {
            let mut held: VecDeque<u64> = VecDeque::new(); // oldest first
            let mut counted = 0u64;
            let mut prunes = 0;
            for (i, (op, at)) in (0u64..).zip(ops) {
                if op < 95 {
                    held.push_back(i);
                    counted += 1;
                    if let Some(keep) = remembered_prune(counted) {
                        // The newest `keep` stay (the store's statement).
                        prop_assert!(keep >= MAX_REMEMBERED_PER_CALLER);
                        while held.len() as u64 > keep {
                            held.pop_front();
                        }
                        counted = keep;
                        prunes += 1;
                    }
                } else if !held.is_empty() {
                    held.remove(at % held.len());
                }
                prop_assert!(held.len() as u64 <= counted);
                prop_assert!(held.len() as u64 <= MAX_REMEMBERED_PER_CALLER + REMEMBERED_PRUNE_MARGIN);
            }
            // Pruned once in a margin of leases at most, not at each.
            prop_assert!(prunes <= 4_000 / REMEMBERED_PRUNE_MARGIN);
        }
}
