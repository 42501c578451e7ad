use super::*;
use crate::error::Error;
use crate::opaque::OpaqueDomain;
use crate::segment::{Allocation, MAX_SEGMENT_ID, MAX_STEP};

#[test]
fn allocation_advances_max_id_like_leaf() {
    let r = TagRecord::new("order", 2000, 1, "orders", 5).unwrap();
    let (a, r2) = r.allocate(None, 10).unwrap();
    assert_eq!((a.start, a.end, a.step), (2, 2001, 2000));
    assert_eq!((r2.max_id, r2.update_time), (2001, 10));
    let (b, r3) = r2.allocate(Some(10), 11).unwrap();
    assert_eq!((b.start, b.end), (2002, 2011));
    assert_eq!(r3.max_id, 2011);
}

#[test]
fn allocation_stops_at_i64_max_with_a_shorter_last_segment() {
    let r = TagRecord::new("t", 10, MAX_SEGMENT_ID - 10, "", 0).unwrap();
    let (a, r2) = r.allocate(None, 0).unwrap();
    assert_eq!(a.end, MAX_SEGMENT_ID);
    assert_eq!(
        r2.allocate(Some(1), 0),
        Err(Error::TagExhausted {
            max_id: MAX_SEGMENT_ID,
            step: 1
        })
    );
    // Fewer IDs left than the step: the last segment has them all.
    let r = TagRecord::new("t", 10, MAX_SEGMENT_ID - 5, "", 0).unwrap();
    let (a, r2) = r.allocate(Some(1_000), 0).unwrap();
    assert_eq!(
        (a.start, a.end, a.step),
        (MAX_SEGMENT_ID - 4, MAX_SEGMENT_ID, 5)
    );
    assert_eq!(r2.max_id, MAX_SEGMENT_ID);
    assert!(matches!(
        r2.allocate(None, 0),
        Err(Error::TagExhausted { .. })
    ));
}

#[test]
fn an_opaque_tag_ends_at_its_domain() {
    let d = OpaqueDomain::Bits(32);
    let r = TagRecord::new("o", 10, d.max_id() - 10, "", 0)
        .unwrap()
        .with_kind(TagKind::Opaque(d))
        .unwrap();
    let (a, r2) = r.allocate(None, 0).unwrap();
    assert_eq!(a.end, d.max_id());
    assert!(matches!(
        r2.allocate(Some(1), 0),
        Err(Error::TagExhausted { .. })
    ));
    // A step grown past the IDs left: the last segment, short.
    let near = TagRecord::new("o", 10, d.max_id() - 7, "", 0)
        .unwrap()
        .with_kind(TagKind::Opaque(d))
        .unwrap();
    let (a, _) = near.allocate(Some(20), 0).unwrap();
    assert_eq!((a.start, a.end, a.step), (d.max_id() - 6, d.max_id(), 7));
    assert!(TagRecord::new("o", 10, d.max_id() + 1, "", 0)
        .unwrap()
        .with_kind(TagKind::Opaque(d))
        .is_err());
}

#[test]
fn records_are_validated() {
    assert!(TagRecord::new("bad tag", 10, 0, "", 0).is_err());
    assert!(TagRecord::new("t", 0, 0, "", 0).is_err());
    assert!(TagRecord::new("t", 1_000_001, 0, "", 0).is_err());
    assert!(TagRecord::new("t", 1, MAX_SEGMENT_ID + 1, "", 0).is_err());
    assert!(TagRecord::new("t", 1, 0, &"x".repeat(257), 0).is_err());
    let r = TagRecord::new("t", 10, 100, "", 0).unwrap();
    assert!(r.allocate(Some(0), 0).is_err());
    assert_eq!(r.grant_step(Some(1)), 10, "never below the tag's step");
    assert_eq!(r.grant_step(Some(5_000_000)), MAX_STEP);
    assert_eq!(r.grant_step(None), 10);
    let pinned = r.clone().with_max_step(Some(10)).unwrap();
    assert_eq!(
        pinned.grant_step(Some(5_000)),
        10,
        "never above the tag's max_step"
    );
    assert!(
        r.clone().with_max_step(Some(9)).is_err(),
        "max_step below the step"
    );
    assert!(r.clone().with_max_step(Some(MAX_STEP + 1)).is_err());
    assert!(
        r.update(10, Some(99), None, "", 1).is_err(),
        "max_id never goes back"
    );
    assert_eq!(r.update(20, Some(500), None, "d", 1).unwrap().max_id, 500);
}

#[test]
fn a_tags_kind_is_fixed_when_it_is_created() {
    let d = OpaqueDomain::Bits(40);
    let ask = |monotonic, opaque| TagChange {
        monotonic,
        opaque,
        ..TagChange::default()
    };
    let plain = TagRecord::create("p", &ask(None, None), 100, 0).unwrap();
    let mono = TagRecord::create("m", &ask(Some(true), None), 100, 0).unwrap();
    let opaque = TagRecord::create("o", &ask(Some(false), Some(d)), 100, 0).unwrap();
    assert_eq!(
        (plain.kind, mono.kind, opaque.kind, plain.step),
        (TagKind::Plain, TagKind::Monotonic, TagKind::Opaque(d), 100)
    );
    assert_eq!(
        TagRecord::create("b", &ask(Some(true), Some(d)), 100, 0),
        Err(Error::OpaqueAndMonotonic)
    );
    // Naming the kind it has (or none) changes the rest.
    let same = mono.change(&ask(Some(true), None), 1).unwrap();
    assert_eq!((same.kind, same.update_time), (TagKind::Monotonic, 1));
    assert_eq!(
        opaque.change(&ask(None, Some(d)), 1).unwrap().kind,
        opaque.kind
    );
    assert_eq!(
        plain.change(&ask(Some(true), None), 1),
        Err(Error::MonotonicImmutable {
            fixed: false,
            found: true
        })
    );
    assert_eq!(
        opaque.change(&ask(Some(true), None), 1),
        Err(Error::MonotonicImmutable {
            fixed: false,
            found: true
        })
    );
    assert_eq!(
        mono.change(&ask(None, Some(d)), 1),
        Err(Error::OpaqueImmutable {
            fixed: None,
            found: d
        })
    );
    assert_eq!(
        opaque.change(&ask(None, Some(OpaqueDomain::Digits(9))), 1),
        Err(Error::OpaqueImmutable {
            fixed: Some(d),
            found: OpaqueDomain::Digits(9)
        })
    );
    assert_eq!(mono.kind.check_monotonic(), Ok(()));
    assert_eq!(plain.kind.check_monotonic(), Err(Error::NotMonotonic));
    assert_eq!(opaque.kind.check_opaque(), Ok(d));
    assert_eq!(mono.kind.check_opaque(), Err(Error::NotOpaque));
}

#[test]
fn a_request_id_is_remembered_within_its_callers_own_names() {
    let ask = |caller, request_id| SegmentAsk {
        step: None,
        request_id,
        caller,
        for_isolate: false,
    };
    let key = |c, r| ask(Asker::Own(c), Some(r)).remembered_as();
    assert_eq!(key("a", "1"), key("a", "1"));
    assert_ne!(key("a", "1"), key("b", "1"));
    // No caller and request ID may be cut another way into the same key.
    assert_ne!(key("a:1", "2"), key("a", "1:2"));
    assert_eq!(ask(Asker::Own("a"), None).remembered_as(), None);
    // A caller without a credential of its own has no names: nothing
    // is remembered for it, and its request IDs are refused.
    assert_eq!(ask(Asker::Shared, Some("1")).remembered_as(), None);
    let plain = TagRecord::new("p", 100, 0, "", 0).unwrap();
    assert_eq!(
        plain.lease_segment(&ask(Asker::Shared, Some("1")), None),
        Err(Error::RequestIdNeedsKey)
    );
    assert_eq!(
        plain.lease_segment(&ask(Asker::Shared, None), None),
        Ok(SegmentAnswer::Allocate { step: 100 })
    );
}

#[test]
fn a_conditional_change_goes_through_only_on_the_tag_its_writer_read() {
    let r = TagRecord::new("t", 10, 500, "", 0).unwrap();
    let when = |expected| TagChange {
        expected,
        ..TagChange::default()
    };
    assert_eq!(when(None).check_expected(Some(&r)), Ok(()));
    assert_eq!(when(None).check_expected(None), Ok(()));
    let absent = when(Some(TagExpected::Absent));
    assert_eq!(absent.check_expected(None), Ok(()));
    assert_eq!(
        absent.check_expected(Some(&r)),
        Err(Error::TagChanged {
            expected: None,
            found: Some(500)
        })
    );
    let at = |m| when(Some(TagExpected::MaxId(m)));
    assert_eq!(at(500).check_expected(Some(&r)), Ok(()));
    assert_eq!(
        at(0).check_expected(Some(&r)),
        Err(Error::TagChanged {
            expected: Some(0),
            found: Some(500)
        })
    );
    assert_eq!(
        at(0).check_expected(None),
        Err(Error::TagChanged {
            expected: Some(0),
            found: None
        })
    );
}

// Long: one scenario over one record, each step reading the state the last left.
#[test]
fn segments_go_out_by_kind_and_a_request_id_is_answered_once() {
    let plain = TagRecord::new("p", 100, 0, "", 0).unwrap();
    let mono = plain.clone().with_kind(TagKind::Monotonic).unwrap();
    let opaque = plain
        .clone()
        .with_kind(TagKind::Opaque(OpaqueDomain::Bits(40)))
        .unwrap();
    let ask = |step, request_id, for_isolate| SegmentAsk {
        step,
        request_id,
        caller: Asker::Own("a"),
        for_isolate,
    };
    let new = |step| Ok(SegmentAnswer::Allocate { step });
    assert_eq!(plain.lease_segment(&ask(None, None, false), None), new(100));
    assert_eq!(opaque.lease_segment(&ask(None, None, true), None), new(100));
    assert_eq!(
        opaque.lease_segment(&ask(None, None, false), None),
        Err(Error::OpaqueTag)
    );
    assert_eq!(
        mono.lease_segment(&ask(None, None, true), None),
        Err(Error::MonotonicTag)
    );
    // A request ID: new, then a retry of the same request (the step as
    // granted: 50 is granted 100), then another request under it.
    let first = Remembered {
        segment: Allocation::new(1, 100).unwrap(),
        granted: 100,
    };
    let id = Some("r-1");
    assert_eq!(
        plain.lease_segment(&ask(Some(5), id, false), None),
        new(100)
    );
    assert_eq!(
        plain.lease_segment(&ask(Some(50), id, false), Some(&first)),
        Ok(SegmentAnswer::Again(first.segment))
    );
    // The tag's last segment, shorter than its step: a retry is still
    // the same request.
    let short = Remembered {
        segment: Allocation::new(1, 30).unwrap(),
        granted: 100,
    };
    assert_eq!(
        plain.lease_segment(&ask(Some(100), id, false), Some(&short)),
        Ok(SegmentAnswer::Again(short.segment))
    );
    assert_eq!(
        plain.lease_segment(&ask(Some(500), id, false), Some(&first)),
        Err(Error::RequestIdReused {
            granted: 100,
            asked: 500
        })
    );
    let long = "x".repeat(MAX_REQUEST_ID_LEN + 1);
    for bad in ["", long.as_str()] {
        assert_eq!(
            plain.lease_segment(&ask(None, Some(bad), false), None),
            Err(Error::InvalidRequestId {
                len: bad.len(),
                max: MAX_REQUEST_ID_LEN
            })
        );
    }
    let longest = &long[1..];
    assert_eq!(
        plain.lease_segment(&ask(None, Some(longest), false), None),
        new(100)
    );
    // The kind is checked first: a monotonic tag's store never answers
    // a segment, not even one it remembers.
    assert_eq!(
        mono.lease_segment(&ask(None, id, false), Some(&first)),
        Err(Error::MonotonicTag)
    );
}

// Long: one scenario over one record, each step reading the state the last left.
#[test]
fn a_tail_comes_back_only_last_and_only_from_its_asker() {
    let r = TagRecord::new("t", 10, 100, "", 0).unwrap();
    let leased = Remembered {
        segment: Allocation::new(101, 200).unwrap(),
        granted: 100,
    };
    let (_, r) = r.allocate(Some(100), 1).unwrap();
    let back = |start, caller| TailBack {
        tail: Allocation::new(start, 200).unwrap(),
        request_id: "b-1",
        caller,
        for_isolate: true,
    };
    let mine = back(151, Asker::Own("a@weur"));
    assert_eq!(
        r.take_back(&mine, Some(&leased), 2),
        Ok(TakeBack::Returned {
            record: TagRecord {
                max_id: 150,
                update_time: 2,
                ..r.clone()
            },
            remembered: RememberedChange::Shorten(Remembered {
                segment: Allocation::new(101, 150).unwrap(),
                granted: 100,
            }),
        })
    );
    assert_eq!(
        r.take_back(&back(101, Asker::Own("a@weur")), Some(&leased), 2)
            .map(|t| matches!(
                t,
                TakeBack::Returned {
                    remembered: RememberedChange::Remove,
                    ..
                }
            )),
        Ok(true)
    );
    // Something followed: skipped.
    let (_, later) = r.allocate(Some(10), 3).unwrap();
    assert_eq!(
        later.take_back(&mine, Some(&leased), 4),
        Ok(TakeBack::Closed {
            max_id: 210,
            remembered: RememberedChange::Shorten(Remembered {
                segment: Allocation::new(101, 150).unwrap(),
                granted: 100,
            }),
        })
    );
    // Nothing remembered for this caller, or not the end of its range.
    assert_eq!(
        r.take_back(&mine, None, 4),
        Ok(TakeBack::Skipped(TailSkipped::NotRemembered))
    );
    let shorter = Remembered {
        segment: Allocation::new(101, 150).unwrap(),
        granted: 100,
    };
    assert_eq!(
        r.take_back(&mine, Some(&shorter), 4),
        Ok(TakeBack::Skipped(TailSkipped::NotItsTail {
            remembered: shorter.segment
        }))
    );
    // Refused: a shared credential, a monotonic tag, an outside
    // caller's opaque tail.
    assert_eq!(
        r.take_back(&back(151, Asker::Shared), Some(&leased), 4),
        Err(Error::RequestIdNeedsKey)
    );
    let mono = r.clone().with_kind(TagKind::Monotonic).unwrap();
    assert_eq!(
        mono.take_back(&mine, Some(&leased), 4),
        Err(Error::MonotonicTag)
    );
    let opaque = r
        .clone()
        .with_kind(TagKind::Opaque(OpaqueDomain::Bits(40)))
        .unwrap();
    let outside = TailBack {
        for_isolate: false,
        ..mine
    };
    assert_eq!(
        opaque.take_back(&outside, Some(&leased), 4),
        Err(Error::OpaqueTag)
    );
    assert!(matches!(
        opaque.take_back(&mine, Some(&leased), 4),
        Ok(TakeBack::Returned { .. })
    ));
}

// Long: one scenario over one record, each step reading the state the last left.
#[test]
fn a_clients_tail_is_a_credit_of_its_own_asker_never_max_id_moved_back() {
    let r = TagRecord::new("t", 10, 0, "", 0).unwrap();
    let (range, r) = r.allocate(Some(100), 1).unwrap();
    let leased = Remembered {
        segment: range,
        granted: 100,
    };
    let mine = TailBack {
        tail: Allocation::new(28, 100).unwrap(),
        request_id: "job-1",
        caller: Asker::Own("lease:k1"),
        for_isolate: false,
    };
    // Never max_id back for a client, even with nothing after its tail.
    assert_eq!(
        r.take_back(&mine, Some(&leased), 2),
        Ok(TakeBack::Skipped(TailSkipped::FromClient))
    );
    let credit = Allocation::new(28, 100).unwrap();
    assert_eq!(
        r.credit_back(&mine, Some(&leased), &[]),
        Ok(CreditBack::Credited {
            credit,
            remembered: RememberedChange::Shorten(Remembered {
                segment: Allocation::new(1, 27).unwrap(),
                granted: 100,
            }),
        })
    );
    // An allocator's tail is `take_back`'s; full credits, an overlap, a
    // shared caller: no credit.
    let allocator = TailBack {
        for_isolate: true,
        ..mine
    };
    assert_eq!(
        r.credit_back(&allocator, Some(&leased), &[]),
        Ok(CreditBack::Skipped(TailSkipped::FromClient))
    );
    let full = [Allocation::new(500, 500).unwrap(); MAX_CREDITS];
    assert_eq!(
        r.credit_back(&mine, Some(&leased), &full),
        Ok(CreditBack::Skipped(TailSkipped::CreditsFull))
    );
    assert!(matches!(
        r.credit_back(&mine, Some(&leased), &[Allocation::new(90, 95).unwrap()]),
        Ok(CreditBack::Skipped(TailSkipped::NotItsTail { .. }))
    ));
    assert_eq!(
        r.credit_back(
            &TailBack {
                caller: Asker::Shared,
                ..mine
            },
            Some(&leased),
            &[]
        ),
        Err(Error::RequestIdNeedsKey)
    );
    // The same asker's next lease is answered from its lowest credit, at
    // most its step; the rest is kept. Another asker's is a new segment.
    let ask = |caller, step| SegmentAsk {
        step: Some(step),
        request_id: Some("job-2"),
        caller,
        for_isolate: false,
    };
    let credits = [Allocation::new(300, 400).unwrap(), credit];
    assert_eq!(
        r.lease_with_credits(&ask(Asker::Own("lease:k1"), 50), None, &credits, 0),
        Ok(CreditedAnswer::Credit {
            segment: Allocation::new(28, 77).unwrap(),
            granted: 50,
            taken: credit,
            rest: Some(Allocation::new(78, 100).unwrap()),
        })
    );
    assert_eq!(
        r.lease_with_credits(&ask(Asker::Own("lease:k1"), 100), None, &[credit], 0),
        Ok(CreditedAnswer::Credit {
            segment: credit,
            granted: 100,
            taken: credit,
            rest: None,
        })
    );
    assert_eq!(
        ask(Asker::Own("lease:k2"), 50).credit_owner(),
        Some("lease:k2")
    );
    assert_eq!(
        r.lease_with_credits(&ask(Asker::Own("lease:k2"), 50), None, &[], 0),
        Ok(CreditedAnswer::Segment(SegmentAnswer::Allocate {
            step: 50
        }))
    );
    // A retry is answered as first; an isolate never from credits.
    let first = Remembered {
        segment: Allocation::new(28, 77).unwrap(),
        granted: 50,
    };
    assert_eq!(
        r.lease_with_credits(&ask(Asker::Own("lease:k1"), 50), Some(&first), &credits, 0),
        Ok(CreditedAnswer::Segment(SegmentAnswer::Again(first.segment)))
    );
    // A client already holding IDs above a credit: the next one above.
    assert_eq!(
        r.lease_with_credits(&ask(Asker::Own("lease:k1"), 50), None, &credits, 200),
        Ok(CreditedAnswer::Credit {
            segment: Allocation::new(300, 349).unwrap(),
            granted: 50,
            taken: credits[0],
            rest: Some(Allocation::new(350, 400).unwrap()),
        })
    );
    assert_eq!(
        r.lease_with_credits(&ask(Asker::Own("lease:k1"), 50), None, &credits, 300),
        Ok(CreditedAnswer::Segment(SegmentAnswer::Allocate {
            step: 50
        }))
    );
    let isolate = SegmentAsk {
        for_isolate: true,
        ..ask(Asker::Own("lease:k1"), 50)
    };
    assert_eq!(isolate.credit_owner(), None);
    assert_eq!(
        r.lease_with_credits(&isolate, None, &credits, 0),
        Ok(CreditedAnswer::Segment(SegmentAnswer::Allocate {
            step: 50
        }))
    );
}

/// A tag's store as the tests keep it, written only as a plan says: its
/// `max_id`, its credit rows (owner and range, as the Worker's table), the
/// ranges remembered under request IDs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Store {
    max_id: u64,
    credits: alloc::vec::Vec<(String, Allocation)>,
    remembered: alloc::collections::BTreeMap<String, Remembered>,
}

impl Store {
    fn held(&self, owner: Option<&str>) -> alloc::vec::Vec<Allocation> {
        self.credits
            .iter()
            .filter(|(o, _)| Some(o.as_str()) == owner)
            .map(|(_, c)| *c)
            .collect()
    }

    fn add(&mut self, row: CreditRow<'_>) {
        self.credits.push((row.owner.into(), row.range));
    }

    fn lease(&mut self, r: &TagRecord, plan: &LeasePlan<'_>) -> Allocation {
        let answered = match plan.source {
            LeaseSource::Again(segment) => segment,
            LeaseSource::Allocate { step } => {
                let (segment, next) = r.allocate(Some(step), 0).unwrap();
                self.max_id = next.max_id;
                segment
            }
            LeaseSource::Credit {
                segment,
                taken,
                rest,
                ..
            } => {
                let rows = self.credits.len();
                self.credits
                    .retain(|(o, c)| (o.as_str(), *c) != (taken.owner, taken.range));
                assert_eq!(self.credits.len() + 1, rows, "{taken:?}: not one row");
                if let Some(rest) = rest {
                    self.add(rest);
                }
                segment
            }
        };
        if let Some((key, entry)) = plan.remembered(answered) {
            self.remembered.insert(key.into(), entry);
        }
        answered
    }

    fn tail(&mut self, plan: &TailPlan<'_>) {
        if let Some(record) = &plan.record {
            self.max_id = record.max_id;
        }
        if let Some(row) = plan.credit {
            self.add(row);
        }
        match &plan.remembered {
            Some((key, RememberedChange::Shorten(kept))) => {
                self.remembered.insert(key.clone(), *kept);
            }
            Some((key, RememberedChange::Remove)) => {
                self.remembered.remove(key);
            }
            None => {}
        }
    }
}

/// Every lease over a small grid (askers, request IDs, credits, `above`,
/// steps), its plan written: it says what `lease_with_credits` answers;
/// a credit's IDs are answered or kept, never both, never lost, only the
/// asker's own; the segment is remembered (a retry is answered it again)
/// exactly when it is new and asked under a request ID of the caller's
/// own.
#[test]
fn a_lease_plan_written_keeps_every_credit_and_answers_a_retry_the_same() {
    let r = TagRecord::new("t", 10, 1_000, "", 0).unwrap();
    let pool = [
        Allocation::new(100, 120).unwrap(),
        Allocation::new(300, 304).unwrap(),
        Allocation::new(500, 599).unwrap(),
    ];
    let askers = [
        (Asker::Own("lease:k1"), false),
        (Asker::Own("alloc:r1"), true),
        (Asker::Shared, true),
        (Asker::Shared, false),
    ];
    for (caller, for_isolate) in askers {
        for request_id in [None, Some("job")] {
            for subset in 0..8u8 {
                let credits: alloc::vec::Vec<Allocation> = (0..3)
                    .filter(|i| subset & (1 << i) != 0)
                    .map(|i| pool[i])
                    .collect();
                for above in [0, 110, 300, 600] {
                    for step in [None, Some(3), Some(10), Some(50), Some(200)] {
                        let ask = SegmentAsk {
                            step,
                            request_id,
                            caller,
                            for_isolate,
                        };
                        let mut store = Store {
                            max_id: r.max_id,
                            ..Store::default()
                        };
                        if let Some(owner) = ask.credit_owner() {
                            for &range in &credits {
                                store.add(CreditRow { owner, range });
                            }
                        }
                        let held = store.held(ask.credit_owner());
                        let Ok(plan) = r.plan_lease(&ask, None, &held, above) else {
                            assert!(r.lease_with_credits(&ask, None, &held, above).is_err());
                            continue;
                        };
                        let case = alloc::format!("{ask:?} {credits:?} above {above}: {plan:?}");
                        let before = store.clone();
                        let answered = store.lease(&r, &plan);
                        let granted = r.grant_step(step);
                        assert!(answered.step <= granted, "{case}");
                        // As `lease_with_credits` answers.
                        let expected = match r.lease_with_credits(&ask, None, &held, above) {
                            Ok(CreditedAnswer::Segment(SegmentAnswer::Allocate { step })) => {
                                LeaseSource::Allocate { step }
                            }
                            Ok(CreditedAnswer::Credit {
                                segment,
                                granted,
                                taken,
                                rest,
                            }) => {
                                let owner = ask.credit_owner().unwrap();
                                LeaseSource::Credit {
                                    segment,
                                    granted,
                                    taken: CreditRow {
                                        owner,
                                        range: taken,
                                    },
                                    rest: rest.map(|range| CreditRow { owner, range }),
                                }
                            }
                            other => panic!("{case}: {other:?}"),
                        };
                        assert_eq!(plan.source, expected, "{case}");
                        // The credit's IDs: answered or kept, and only the
                        // asker's own; a new segment only past every credit.
                        let ids = |s: &Store| -> alloc::vec::Vec<u64> {
                            let mut ids: alloc::vec::Vec<u64> = s
                                .credits
                                .iter()
                                .flat_map(|(_, c)| c.start..=c.end)
                                .collect();
                            ids.sort_unstable();
                            ids
                        };
                        let mut after = ids(&store);
                        if let LeaseSource::Credit { .. } = plan.source {
                            assert_eq!(store.max_id, before.max_id, "{case}");
                            after.extend(answered.start..=answered.end);
                            after.sort_unstable();
                            let lowest = held
                                .iter()
                                .filter(|c| c.start > above)
                                .map(|c| c.start)
                                .min();
                            assert_eq!(Some(answered.start), lowest, "{case}");
                        } else {
                            assert!(answered.start > before.max_id, "{case}");
                            assert!(
                                ask.credit_owner().is_none()
                                    || held.iter().all(|c| c.start <= above),
                                "{case}"
                            );
                        }
                        assert_eq!(after, ids(&before), "{case}");
                        // Remembered exactly when asked under a request ID
                        // of the caller's own; a retry is answered the same.
                        let key = ask.remembered_as();
                        assert_eq!(
                            key.as_ref().map(|k| store.remembered[k]),
                            key.as_ref().map(|_| Remembered {
                                segment: answered,
                                granted
                            }),
                            "{case}"
                        );
                        assert_eq!(store.remembered.len(), usize::from(key.is_some()), "{case}");
                        if let Some(k) = &key {
                            let retry = r
                                .plan_lease(
                                    &ask,
                                    store.remembered.get(k),
                                    &store.held(ask.credit_owner()),
                                    above,
                                )
                                .unwrap();
                            assert_eq!(retry.source, LeaseSource::Again(answered), "{case}");
                            assert_eq!(retry.remembered(answered), None, "{case}");
                        }
                    }
                }
            }
        }
    }
}

/// Every tail handed back over a small grid (an allocator's or a client's,
/// all or part of its range, IDs handed out after it or not, credits held):
/// the plan says what `answer_tail` answers, and written, a second copy of
/// the hand-back takes nothing; a client's IDs become its own credit and
/// never move `max_id`; an allocator's never become a credit.
#[test]
fn a_tail_plan_written_takes_a_tail_once() {
    let leased = Remembered {
        segment: Allocation::new(1_001, 1_100).unwrap(),
        granted: 100,
    };
    for (caller, for_isolate) in [
        (Asker::Own("lease:k1"), false),
        (Asker::Own("alloc:r1"), true),
    ] {
        for (start, end) in [(1_001, 1_100), (1_050, 1_100), (1_050, 1_099)] {
            for max_id in [1_100, 1_200] {
                for held in [
                    alloc::vec![],
                    alloc::vec![Allocation::new(2_000, 2_000).unwrap(); MAX_CREDITS],
                ] {
                    let r = TagRecord::new("t", 10, max_id, "", 0).unwrap();
                    let back = TailBack {
                        tail: Allocation::new(start, end).unwrap(),
                        request_id: "job",
                        caller,
                        for_isolate,
                    };
                    let key = back.remembered_as().unwrap();
                    let mut store = Store {
                        max_id,
                        ..Store::default()
                    };
                    store.remembered.insert(key.clone(), leased);
                    if let Some(owner) = back.credit_owner() {
                        for &range in &held {
                            store.add(CreditRow { owner, range });
                        }
                    }
                    let plan = r.plan_tail(&back, Some(&leased), &held, 7).unwrap();
                    let answer = r.answer_tail(&back, Some(&leased), &held, 7).unwrap();
                    let case = alloc::format!("{back:?} max_id {max_id} {held:?}: {plan:?}");
                    assert_eq!(plan.taken, answer.taken(), "{case}");
                    assert_eq!(plan.closed, answer.untaken(), "{case}");
                    assert_eq!(plan.max_id, answer.max_id(max_id), "{case}");
                    assert_eq!(
                        plan.remembered.as_ref().map(|(k, c)| (k.as_str(), *c)),
                        answer.remembered().map(|c| (key.as_str(), c)),
                        "{case}"
                    );
                    match (&answer, &plan.record, plan.credit) {
                        (TailBackAnswer::Returned { record, .. }, Some(stored), None) => {
                            assert_eq!(record, stored, "{case}");
                            assert!(for_isolate, "{case}");
                        }
                        (TailBackAnswer::Credited { credit, .. }, None, Some(row)) => {
                            assert_eq!((row.owner, row.range), ("lease:k1", *credit), "{case}");
                        }
                        (_, None, None) => assert!(!plan.taken, "{case}"),
                        other => panic!("{case}: {other:?}"),
                    }
                    store.tail(&plan);
                    if !for_isolate {
                        assert_eq!(store.max_id, max_id, "{case}");
                    }
                    // The range remembered ends before the tail once taken
                    // or closed; a second copy takes nothing.
                    if plan.taken || plan.closed {
                        let kept = store.remembered.get(&key).map(|k| k.segment);
                        assert!(kept.is_none_or(|k| k.end < start), "{case}");
                    }
                    let r = TagRecord {
                        max_id: store.max_id,
                        ..r
                    };
                    let held = store.held(back.credit_owner());
                    let again = r
                        .plan_tail(&back, store.remembered.get(&key), &held, 8)
                        .unwrap();
                    assert!(!again.taken || !plan.taken, "{case}: taken twice");
                    assert!(!again.taken || !plan.closed, "{case}: taken once closed");
                }
            }
        }
    }
}
