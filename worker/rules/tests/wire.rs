//! The wire types (`edgeleaf_rules::wire`): every Durable Object's request
//! enum round-trips through JSON; a body refuses a field it does not name (a
//! caller can never name the owner or what only the service sets); the JSON
//! the public API answers is exactly what it has always answered (the shapes
//! asserted by tests/service/*.test.mjs and written in docs/service.md, byte
//! for byte where the handlers used to build them with `json!`); and the
//! conversions do what they say.

#![cfg(not(target_arch = "wasm32"))]

use std::fmt::Debug;

use edgeleaf::{
    code::ErrorCode,
    holder::Renewal,
    layout::Parts,
    minted::MintRight,
    opaque::OpaqueDomain,
    registry::Lease,
    secret::{Claim, LeaseSecret},
    segment::{Allocation, MAX_STEP},
    tag::{Asker, TagChange, TagRecord},
    Layout,
};
use edgeleaf_rules::{
    access::{KeySpec, Scope},
    history::AllocationEvent,
    lease::secret_hash,
    wire::{
        api::{Decoded, ErrorBody, Health, IdList, LayoutView, Ping},
        catalog::{CatalogRequest, Done, PageQuery, TagList, TagStats, TagSummary},
        keys::{
            ApiKeyRequest, CreatedKey, KeyBody, KeyEntry, KeyList, KeyRequest, KeyView, Lookup,
            NewKey, Revoked, StoredKey,
        },
        minter::{Batch, HandOverRequest, MintRequest, MinterRequest},
        registry::{
            ClaimBody, EventList, EventView, Evicted, Granted, LeaseRequest, LeaseView,
            MinterLeaseRequest, Previous, RegistryRequest, Released, RenewRequest, WorkerLeaseBody,
            WorkerList, WorkerView,
        },
        tag::{
            AllocateRequest, Deleted, Expect, GivenId, HistoryEvent, LeaseBody, LeasedSegment,
            OpaqueGrant, ReturnBody, Returner, RevealBody, Revealed, SegmentLease, TagHistory,
            TagPut, TagRequest, TagUpsert, TagView, TagViews, TailReturned, TakeBackRequest,
            TakenBack,
        },
        StoreRequest, WireError,
    },
};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Value};

// ---- helpers

fn text(v: &impl Serialize) -> String {
    serde_json::to_string(v).expect("serializes")
}

fn parse<T: DeserializeOwned>(s: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(s)
}

/// `v` written, read back and written again is the same JSON text; returns it.
/// (Text, not `==`: a lease secret has no `PartialEq`, by design.)
fn round_trip<T: Serialize + DeserializeOwned>(v: &T) -> String {
    let first = text(v);
    let back: T = parse(&first).unwrap_or_else(|e| panic!("{first}: {e}"));
    assert_eq!(text(&back), first, "round trip changed the JSON");
    first
}

/// `body` is refused, with serde's "unknown field" naming `field`.
fn refuses_field<T: DeserializeOwned + Debug>(body: &str, field: &str) {
    match parse::<T>(body) {
        Ok(v) => panic!("{body} was accepted as {v:?}"),
        Err(e) => assert!(
            e.to_string().contains(&format!("unknown field `{field}`")),
            "{body}: {e}"
        ),
    }
}

fn secret(b: u8) -> LeaseSecret {
    LeaseSecret::from_random([b; 16])
}

fn previous() -> Previous {
    Previous {
        worker_id: 7,
        generation: 3,
        secret: Some(secret(0xab)),
    }
}

fn tag_view() -> TagView {
    TagView {
        biz_tag: "order".into(),
        max_id: "9007199254740993".into(),
        step: 1000,
        description: "orders".into(),
        update_time: 1_700_000_000_000,
        monotonic: false,
        opaque: Some(OpaqueDomain::Bits(53)),
        max_step: 1_000_000,
    }
}

fn key_view() -> KeyView {
    KeyView {
        created_ms: 1_700_000_000_000,
        id: "3f9a00112233".into(),
        last_used_ms: None,
        name: "order-service nodes".into(),
        scopes: vec!["registry".into()],
        tags: "*".into(),
    }
}

fn lease() -> Lease {
    Lease {
        worker_id: 12,
        generation: 5,
        node_key: "app-a-1".into(),
        expires_at_ms: 1_700_000_060_000,
        issue_after_ms: 1_700_000_000_000,
        ttl_ms: 60_000,
    }
}

// ---- every request enum round-trips

#[test]
fn every_tag_request_round_trips() {
    let requests = [
        TagRequest::Put(TagUpsert {
            biz_tag: "order".into(),
            step: Some(10),
            max_id: Some("9223372036854775807".into()),
            description: Some("d".into()),
            monotonic: Some(true),
            opaque: Some(OpaqueDomain::Digits(12)),
            max_step: Some(500),
            default_step: 1000,
            expect: Some(Expect::MaxId(9_007_199_254_740_993)),
        }),
        TagRequest::Get,
        TagRequest::Delete,
        TagRequest::History,
        TagRequest::Allocate(AllocateRequest {
            step: Some(5000),
            request_id: Some("r-1".into()),
            for_isolate: true,
            by: "isolate:abc".into(),
            own_credential: false,
            after: None,
        }),
        TagRequest::Allocate(AllocateRequest {
            step: None,
            request_id: Some("r-1".into()),
            for_isolate: false,
            by: "lease:0123456789ab".into(),
            own_credential: true,
            after: Some("2000".into()),
        }),
        TagRequest::Allocate(AllocateRequest::default()),
        TagRequest::Reveal {
            id: GivenId::Id(u64::MAX),
        },
        TagRequest::Reveal {
            id: GivenId::Not("\"ten\"".into()),
        },
        TagRequest::Ids { count: 1000 },
        TagRequest::Report,
    ];
    for r in &requests {
        round_trip(r);
    }
    // The variants as they travel: camelCase names, camelCase fields.
    assert_eq!(text(&TagRequest::Get), r#""get""#);
    assert_eq!(text(&TagRequest::Report), r#""report""#);
    assert_eq!(
        text(&TagRequest::Ids { count: 3 }),
        r#"{"ids":{"count":3}}"#
    );
    assert_eq!(
        text(&TagRequest::Reveal { id: GivenId::Id(5) }),
        r#"{"reveal":{"id":{"id":5}}}"#
    );
    assert_eq!(
        text(&TagRequest::Allocate(AllocateRequest::default())),
        r#"{"allocate":{"step":null,"requestId":null,"forIsolate":false,"by":""}}"#
    );
}

#[test]
fn every_registry_request_round_trips() {
    let requests = [
        RegistryRequest::Lease(LeaseRequest {
            node_key: "app-a-1".into(),
            node_time: 1_700_000_000_000,
            previous: Some(previous()),
            owner: "3f9a00112233".into(),
        }),
        RegistryRequest::Lease(LeaseRequest {
            node_key: "isolate-1".into(),
            node_time: 1,
            previous: None,
            owner: String::new(),
        }),
        RegistryRequest::LeaseMinter(MinterLeaseRequest {
            index: 2,
            node_time: 1_700_000_000_000,
            previous: Some(Previous {
                secret: None,
                ..previous()
            }),
        }),
        RegistryRequest::Renew(RenewRequest {
            owner: "root".into(),
            claim: previous(),
            node_time: 10,
            last_timestamp: 9,
        }),
        RegistryRequest::Release(RenewRequest {
            owner: String::new(),
            claim: previous(),
            node_time: 0,
            last_timestamp: 0,
        }),
        RegistryRequest::Evict { worker_id: 1023 },
        RegistryRequest::List,
        RegistryRequest::Events,
    ];
    for r in &requests {
        round_trip(r);
    }
    // Only a renewal and the reads may run twice: a grant made again leaves
    // the first live with a secret nobody holds.
    let repeatable: Vec<bool> = requests.iter().map(StoreRequest::repeatable).collect();
    assert_eq!(
        repeatable,
        [false, false, false, true, false, false, true, true]
    );
    assert_eq!(
        text(&RegistryRequest::Evict { worker_id: 4 }),
        r#"{"evict":{"workerId":4}}"#
    );
    assert_eq!(
        text(&RegistryRequest::LeaseMinter(MinterLeaseRequest {
            index: 1,
            node_time: 2,
            previous: None
        })),
        r#"{"leaseMinter":{"index":1,"nodeTime":2,"previous":null}}"#
    );
    // A claim without a secret leaves the field out.
    let bare = Previous {
        secret: None,
        ..previous()
    };
    assert_eq!(text(&bare), r#"{"workerId":7,"generation":3}"#);
}

#[test]
fn every_key_request_round_trips() {
    let requests = [
        KeyRequest::Create(NewKey {
            id: "3f9a00112233".into(),
            name: "orders".into(),
            scopes: vec!["ids".into(), "monitor".into()],
            tags: "order*".into(),
            hash: "00".repeat(32),
        }),
        KeyRequest::Lookup {
            id: "3f9a00112233".into(),
        },
        KeyRequest::List,
        KeyRequest::Revoke {
            id: "3f9a00112233".into(),
        },
        KeyRequest::Adopt {
            id: "3f9a00112233".into(),
        },
        KeyRequest::Used {
            id: "3f9a00112233".into(),
            at_ms: 1,
        },
    ];
    for r in &requests {
        round_trip(r);
    }
    let entry = KeyEntry {
        id: "3f9a00112233".into(),
        name: "orders".into(),
        scopes: vec!["ids".into()],
        tags: "*".into(),
        hash: "00".repeat(32),
        created_ms: 1,
        last_used_ms: None,
    };
    for r in &[
        ApiKeyRequest::Create(entry.clone()),
        ApiKeyRequest::Lookup { id: "k".into() },
        ApiKeyRequest::Revoke { id: "k".into() },
    ] {
        round_trip(r);
    }
    assert_eq!(
        text(&KeyRequest::Used {
            id: "k".into(),
            at_ms: 5
        }),
        r#"{"used":{"id":"k","atMs":5}}"#
    );
    assert_eq!(
        text(&ApiKeyRequest::Create(entry)),
        r#"{"create":{"id":"3f9a00112233","name":"orders","scopes":["ids"],"tags":"*","hash":"0000000000000000000000000000000000000000000000000000000000000000","createdMs":1,"lastUsedMs":null}}"#
    );
    assert_eq!(
        text(&KeyRequest::Revoke { id: "k".into() }),
        r#"{"revoke":{"id":"k"}}"#
    );
}

#[test]
fn every_catalog_and_minter_request_round_trips() {
    for r in &[
        CatalogRequest::List,
        CatalogRequest::Add {
            biz_tag: "order".into(),
        },
        CatalogRequest::Remove {
            biz_tag: "order".into(),
        },
        CatalogRequest::Report {
            summaries: vec![
                TagSummary {
                    tag: tag_view(),
                    stats: None,
                },
                TagSummary {
                    tag: tag_view(),
                    stats: Some(TagStats {
                        allocations: 3,
                        ids_per_hour: 3000,
                        remaining: "9007199254740993".into(),
                        exhausted_at_ms: Some(1_800_000_000_000),
                        at_ms: 1_700_000_000_000,
                        minutes: vec![(1_699_999_990_000, 3000)],
                    }),
                },
            ],
        },
        CatalogRequest::Page(PageQuery {
            after: Some("order".into()),
            limit: 100,
            prefix: Some("ord".into()),
            contains: Some("r".into()),
            ..PageQuery::default()
        }),
    ] {
        round_trip(r);
    }
    // A page query as the catalog reads it.
    assert_eq!(
        text(&CatalogRequest::Page(PageQuery {
            limit: 2,
            ..PageQuery::default()
        })),
        r#"{"page":{"after":null,"limit":2,"exact":null,"prefix":null,"contains":null,"byRate":false}}"#
    );
    assert_eq!(
        text(&CatalogRequest::Add {
            biz_tag: "a".into()
        }),
        r#"{"add":{"bizTag":"a"}}"#
    );
    let mint = MinterRequest::Mint(MintRequest {
        index: 3,
        count: 4096,
        regional: false,
        right: false,
    });
    assert_eq!(round_trip(&mint), r#"{"mint":{"index":3,"count":4096}}"#);
    let regional = MinterRequest::Mint(MintRequest {
        index: 3,
        count: 1,
        regional: true,
        right: false,
    });
    assert_eq!(
        round_trip(&regional),
        r#"{"mint":{"index":3,"count":1,"regional":true}}"#
    );
    // An isolate that mints under rights asks for one along with its batch.
    let with_right = MinterRequest::Mint(MintRequest {
        index: 3,
        count: 1,
        regional: true,
        right: true,
    });
    assert_eq!(
        round_trip(&with_right),
        r#"{"mint":{"index":3,"count":1,"regional":true,"right":true}}"#
    );
    let hand_over = MinterRequest::HandOver(HandOverRequest { index: 3 });
    assert_eq!(round_trip(&hand_over), r#"{"handOver":{"index":3}}"#);
}

#[test]
fn every_object_answer_round_trips() {
    round_trip(&tag_view());
    round_trip(&TagHistory {
        tag: tag_view(),
        allocations: 2,
        events: vec![HistoryEvent {
            at_ms: 1,
            start: "1".into(),
            end: "1000".into(),
            by: "lease:root".into(),
        }],
    });
    round_trip(&SegmentLease {
        start: "1".into(),
        end: "1000".into(),
        step: 1000,
        min_step: 1000,
        opaque: Some(OpaqueGrant {
            domain: OpaqueDomain::Bits(53),
            key: "00".repeat(16),
        }),
    });
    round_trip(&Granted {
        lease: lease(),
        secret: secret(1),
    });
    round_trip(&lease());
    round_trip(&Lookup {
        key: Some(StoredKey {
            hash: "ab".repeat(32),
            scopes: vec!["ids".into()],
            tags: "*".into(),
        }),
    });
    round_trip(&Lookup { key: None });
    round_trip(&TagList {
        tags: vec!["a".into(), "b".into()],
    });
    assert_eq!(round_trip(&Done {}), "{}");
    // A batch alone is written as before rights (an isolate of 0.1.0
    // refuses an unknown field, and never asks for a right).
    assert_eq!(
        round_trip(&Batch {
            worker_id: 2,
            ranges: vec![("10".into(), "20".into())],
            right: None,
        }),
        r#"{"workerId":2,"ranges":[["10","20"]]}"#
    );
    // With a right lent, its numbers as JSON numbers (all below 2^53).
    assert_eq!(
        round_trip(&Batch {
            worker_id: 2,
            ranges: vec![("10".into(), "20".into())],
            right: Some(MintRight {
                worker_id: 38,
                seq_start: 16,
                seq_len: 16,
                from_ms: 1_700_000_000_001,
                until_ms: 1_700_000_060_000,
            }),
        }),
        r#"{"workerId":2,"ranges":[["10","20"]],"right":{"workerId":38,"seqStart":16,"seqLen":16,"fromMs":1700000000001,"untilMs":1700000060000}}"#
    );
    // A grant's lease fields and its secret side by side.
    assert_eq!(
        text(&Granted {
            lease: lease(),
            secret: secret(0),
        }),
        format!(
            r#"{{"workerId":12,"generation":5,"nodeKey":"app-a-1","expiresAtMs":1700000060000,"issueAfterMs":1700000000000,"ttlMs":60000,"secret":"{}"}}"#,
            "0".repeat(32)
        )
    );
}

// ---- a body names only what its caller may name

#[test]
fn a_renew_or_release_body_cannot_name_an_owner_or_a_worker_id() {
    // The owner is the credential's, the worker ID the route's.
    refuses_field::<ClaimBody>(r#"{"generation":1,"owner":"root"}"#, "owner");
    refuses_field::<ClaimBody>(r#"{"generation":1,"workerId":3}"#, "workerId");
    refuses_field::<ClaimBody>(r#"{"generation":1,"claim":{}}"#, "claim");
    let ok: ClaimBody = parse(r#"{"generation":1,"secret":null}"#).unwrap();
    assert_eq!((ok.node_time, ok.last_timestamp), (0, 0));
}

#[test]
fn a_worker_lease_body_cannot_name_an_owner() {
    refuses_field::<WorkerLeaseBody>(
        r#"{"nodeKey":"n","nodeTime":1,"owner":"someone-else"}"#,
        "owner",
    );
    refuses_field::<WorkerLeaseBody>(r#"{"nodeKey":"n","nodeTime":1,"index":0}"#, "index");
    // Nor can a claim it carries.
    refuses_field::<WorkerLeaseBody>(
        r#"{"nodeKey":"n","nodeTime":1,"previous":{"workerId":1,"generation":1,"owner":"x"}}"#,
        "owner",
    );
}

#[test]
fn a_segment_lease_body_cannot_ask_for_what_only_isolates_get() {
    refuses_field::<LeaseBody>(r#"{"step":5,"forIsolate":true}"#, "forIsolate");
    refuses_field::<LeaseBody>(r#"{"by":"isolate:x"}"#, "by");
    refuses_field::<LeaseBody>(r#"{"unknown":1}"#, "unknown");
    assert_eq!(parse::<LeaseBody>("{}").unwrap(), LeaseBody::default());
}

#[test]
fn the_tag_key_and_reveal_bodies_refuse_unknown_fields() {
    refuses_field::<TagPut>(r#"{"stepp":5}"#, "stepp");
    // What the Worker fills in from the route and its settings.
    refuses_field::<TagPut>(r#"{"bizTag":"other"}"#, "bizTag");
    refuses_field::<TagPut>(r#"{"defaultStep":1}"#, "defaultStep");
    refuses_field::<KeyBody>(r#"{"name":"n","scopes":[],"hash":"00"}"#, "hash");
    refuses_field::<KeyBody>(r#"{"name":"n","scopes":[],"id":"mine"}"#, "id");
    refuses_field::<RevealBody>(r#"{"id":"1","tag":"x"}"#, "tag");
}

#[test]
fn the_objects_read_unknown_fields_tolerantly() {
    // A message from another release may carry a field this one does not
    // know: it is read as if the field were absent (docs/design.md, "Two
    // releases at once"), in a request enum's struct variants and in its
    // bodies. The public routes' bodies still refuse one (above).
    fn same<T: serde::de::DeserializeOwned + core::fmt::Debug>(with: &str, without: &str) {
        let a = parse::<T>(with).unwrap_or_else(|e| panic!("{with}: {e}"));
        let b = parse::<T>(without).unwrap();
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{with}");
    }
    same::<RegistryRequest>(
        r#"{"evict":{"workerId":1,"owner":"x"}}"#,
        r#"{"evict":{"workerId":1}}"#,
    );
    same::<RegistryRequest>(
        r#"{"renew":{"owner":"","claim":{"workerId":1,"generation":1},"nodeTime":0,"lastTimestamp":0,"extra":1}}"#,
        r#"{"renew":{"owner":"","claim":{"workerId":1,"generation":1},"nodeTime":0,"lastTimestamp":0}}"#,
    );
    same::<TagRequest>(r#"{"ids":{"count":1,"tag":"x"}}"#, r#"{"ids":{"count":1}}"#);
    same::<TagRequest>(
        r#"{"allocate":{"forIsolate":true,"fromRelease":"9.9.9"}}"#,
        r#"{"allocate":{"forIsolate":true}}"#,
    );
    same::<KeyRequest>(
        r#"{"lookup":{"id":"k","hash":"h"}}"#,
        r#"{"lookup":{"id":"k"}}"#,
    );
    same::<CatalogRequest>(
        r#"{"add":{"bizTag":"a","x":1}}"#,
        r#"{"add":{"bizTag":"a"}}"#,
    );
    same::<MinterRequest>(
        r#"{"mint":{"index":0,"count":1,"workerId":2}}"#,
        r#"{"mint":{"index":0,"count":1}}"#,
    );
    // Rights (two releases at once): an isolate of before rights asks
    // without the field (no right asked), a minter of before rights answers
    // without one (none lent), and a right of a later release with a field
    // this one does not know is read without it.
    let old: MinterRequest = parse(r#"{"mint":{"index":0,"count":1,"regional":true}}"#).unwrap();
    assert!(matches!(
        old,
        MinterRequest::Mint(MintRequest { right: false, .. })
    ));
    let old: Batch = parse(r#"{"workerId":2,"ranges":[["10","20"]]}"#).unwrap();
    assert_eq!(old.right, None);
    same::<Batch>(
        r#"{"workerId":2,"ranges":[],"x":1,"right":{"workerId":38,"seqStart":0,"seqLen":16,"fromMs":1,"untilMs":2,"y":1}}"#,
        r#"{"workerId":2,"ranges":[],"right":{"workerId":38,"seqStart":0,"seqLen":16,"fromMs":1,"untilMs":2}}"#,
    );
    // An unknown request is refused as such: its sender must know better.
    assert!(parse::<TagRequest>(r#""drop""#).is_err());
    assert!(
        parse::<RegistryRequest>(r#"{"lease":{"nodeKey":"n","nodeTime":1,"previous":null}}"#)
            .is_err(),
        "a node lease names its owner"
    );
}

// ---- the public API's JSON, exactly

#[test]
fn a_tag_answers_in_its_own_field_order() {
    // `GET`/`PUT /v1/tags/{tag}`: maxId a decimal string (exact above 2^53).
    assert_eq!(
        text(&tag_view()),
        r#"{"bizTag":"order","maxId":"9007199254740993","step":1000,"description":"orders","updateTime":1700000000000,"monotonic":false,"opaque":{"bits":53},"maxStep":1000000}"#
    );
    let plain = TagView {
        opaque: None,
        ..tag_view()
    };
    assert!(text(&plain).contains(r#""opaque":null"#));
}

#[test]
fn the_tag_list_and_a_deleted_tag_keep_each_tag_alphabetical() {
    // As the handlers wrote them (`json!`, whose maps sort their keys).
    let old_list = json!({ "tags": [tag_view()] });
    let old_deleted = json!({ "deleted": tag_view() });
    let list = text(&TagViews {
        tags: vec![tag_view()],
        unavailable: vec![],
        next: None,
        total: None,
    });
    assert_eq!(list, old_list.to_string());
    assert_eq!(
        list,
        r#"{"tags":[{"bizTag":"order","description":"orders","maxId":"9007199254740993","maxStep":1000000,"monotonic":false,"opaque":{"bits":53},"step":1000,"updateTime":1700000000000}]}"#
    );
    // A tag whose object did not answer is named, never silently left out.
    let partial = text(&TagViews {
        tags: vec![],
        unavailable: vec!["order".into()],
        next: None,
        total: None,
    });
    assert_eq!(partial, r#"{"tags":[],"unavailable":["order"]}"#);
    assert_eq!(
        text(&Deleted {
            deleted: tag_view()
        }),
        old_deleted.to_string()
    );
    // And they read back.
    let back: TagViews = parse(&list).unwrap();
    assert_eq!(back.tags, vec![tag_view()]);
}

#[test]
fn ids_are_decimal_strings() {
    // docs/service.md: curl …/v1/segment/order?count=3  # {"ids":["2","3","4"]}
    assert_eq!(text(&IdList::of(&[2, 3, 4])), r#"{"ids":["2","3","4"]}"#);
    assert_eq!(
        text(&IdList::of(&[i64::MAX as u64])),
        r#"{"ids":["9223372036854775807"]}"#
    );
    assert_eq!(text(&IdList::of(&[])), r#"{"ids":[]}"#);
}

#[test]
fn a_client_lease_is_the_segment_without_the_isolates_key() {
    let from_store = SegmentLease {
        start: "1001".into(),
        end: "6000".into(),
        step: 5000,
        min_step: 100,
        opaque: Some(OpaqueGrant {
            domain: OpaqueDomain::Bits(53),
            key: "ff".repeat(16),
        }),
    };
    // The handler's `json!` of before.
    let old = json!({ "start": from_store.start, "end": from_store.end, "step": from_store.step, "minStep": from_store.min_step });
    let answer = text(&LeasedSegment::from(from_store));
    assert_eq!(answer, old.to_string());
    assert_eq!(
        answer,
        r#"{"end":"6000","minStep":100,"start":"1001","step":5000}"#
    );
    assert!(
        !answer.contains("ff"),
        "the opaque key never reaches a client"
    );
}

#[test]
fn a_worker_lease_answer_is_as_before_and_only_the_lease_carries_the_secret() {
    let config_layout = Layout::LEAF;
    // The handler's `lease_json` and `layout_json` of before.
    let layout_json = |l: &Layout| {
        json!({
            "timestampBits": l.timestamp_bits(), "workerBits": l.worker_bits(), "sequenceBits": l.sequence_bits(),
            "epoch": l.epoch_ms(), "unitMs": l.unit_ms(), "expiresAt": l.expires_at(),
        })
    };
    let lease_json = |lease: &Lease| {
        json!({
            "workerId": lease.worker_id, "generation": lease.generation, "nodeKey": lease.node_key,
            "expiresAtMs": lease.expires_at_ms, "issueAfterMs": lease.issue_after_ms, "ttlMs": lease.ttl_ms,
            "layout": layout_json(&config_layout),
        })
    };
    let layout = LayoutView::from(&config_layout);
    assert_eq!(text(&layout), layout_json(&config_layout).to_string());
    assert_eq!(
        text(&layout),
        format!(
            r#"{{"epoch":1288834974657,"expiresAt":{},"sequenceBits":12,"timestampBits":41,"unitMs":1,"workerBits":10}}"#,
            config_layout.expires_at()
        )
    );
    // Renew: the lease, no secret.
    let renewed = text(&LeaseView::new(&lease(), layout));
    assert_eq!(renewed, lease_json(&lease()).to_string());
    assert!(!renewed.contains("secret"));
    // Lease: with the secret, as hex.
    let granted = Granted {
        lease: lease(),
        secret: secret(0x5a),
    };
    let mut old = lease_json(&granted.lease);
    old["secret"] = json!(&*granted.secret.to_hex());
    let answer = text(&LeaseView::granted(&granted, layout));
    assert_eq!(answer, old.to_string());
    assert!(answer.contains(&format!(r#""secret":"{}""#, "5a".repeat(16))));
    // docs/service.md names these fields.
    let fields: Value = serde_json::from_str(&answer).unwrap();
    for f in [
        "workerId",
        "generation",
        "expiresAtMs",
        "issueAfterMs",
        "ttlMs",
        "layout",
        "secret",
        "nodeKey",
    ] {
        assert!(fields.get(f).is_some(), "{f} in {answer}");
    }
}

#[test]
fn the_registrys_answers_are_alphabetical() {
    assert_eq!(text(&Released { released: true }), r#"{"released":true}"#);
    assert_eq!(
        text(&Evicted {
            evicted: true,
            issue_after_ms: 1_700_000_075_000,
            worker_id: 4
        }),
        r#"{"evicted":true,"issueAfterMs":1700000075000,"workerId":4}"#
    );
    let list = WorkerList {
        capacity: 1024,
        live: 1,
        workers: vec![WorkerView {
            evicted: false,
            expires_at_ms: 2,
            generation: 3,
            last_timestamp_ms: 4,
            node_key: "app-a-1".into(),
            owner: "3f9a00112233".into(),
            released: false,
            status: "live".into(),
            worker_id: 12,
        }],
    };
    assert_eq!(
        text(&list),
        r#"{"capacity":1024,"live":1,"workers":[{"evicted":false,"expiresAtMs":2,"generation":3,"lastTimestampMs":4,"nodeKey":"app-a-1","owner":"3f9a00112233","released":false,"status":"live","workerId":12}]}"#
    );
    round_trip(&list);
    let events = EventList {
        events: vec![EventView {
            at_ms: 1,
            generation: 2,
            kind: "granted".into(),
            node_key: "ev-a".into(),
            owner: "root".into(),
            seq: 9,
            worker_id: 3,
        }],
    };
    assert_eq!(
        text(&events),
        r#"{"events":[{"atMs":1,"generation":2,"kind":"granted","nodeKey":"ev-a","owner":"root","seq":9,"workerId":3}]}"#
    );
    round_trip(&events);
}

#[test]
fn a_key_is_shown_without_its_hash_and_its_token_only_once() {
    // docs/service.md: {"id":"3f9a…","name":…,"scopes":["registry"],"tags":"*","createdMs":…,"lastUsedMs":null, …
    let view = text(&key_view());
    assert_eq!(
        view,
        r#"{"createdMs":1700000000000,"id":"3f9a00112233","lastUsedMs":null,"name":"order-service nodes","scopes":["registry"],"tags":"*"}"#
    );
    assert!(!view.contains("hash") && !view.contains("token"));
    // `POST /v1/keys`: the view and its token, as the handler's
    // `to_value(view)` + `["token"]` of before.
    let token = "elk_3f9a00112233_".to_owned() + &"0".repeat(64);
    let mut old = serde_json::to_value(key_view()).unwrap();
    old["token"] = json!(token);
    let created = text(&CreatedKey {
        key: key_view(),
        token: token.clone(),
    });
    assert_eq!(created, old.to_string());
    let back: CreatedKey = parse(&created).unwrap();
    assert_eq!((back.key, back.token), (key_view(), token));
    assert_eq!(
        text(&KeyList {
            keys: vec![key_view()]
        }),
        format!(r#"{{"keys":[{view}]}}"#)
    );
    assert_eq!(
        text(&Revoked {
            revoked: key_view()
        }),
        format!(r#"{{"revoked":{view}}}"#)
    );
}

#[test]
fn reveal_decode_ping_and_health_are_as_before() {
    // docs/service.md: # {"belongs":true,"counter":"1","id":"818140752648"}
    assert_eq!(
        text(&Revealed {
            belongs: true,
            counter: Some("1".into()),
            id: "818140752648".into()
        }),
        r#"{"belongs":true,"counter":"1","id":"818140752648"}"#
    );
    assert_eq!(
        text(&Revealed {
            belongs: false,
            counter: None,
            id: "12345".into()
        }),
        r#"{"belongs":false,"counter":null,"id":"12345"}"#
    );
    let parts = Parts {
        timestamp_ms: 1_700_000_000_123,
        worker_id: 12,
        sequence: 7,
    };
    let date = "2023-11-14T22:13:20.123Z".to_owned();
    let old = json!({
        "id": 42u64.to_string(), "timestamp": parts.timestamp_ms,
        "date": date, "workerId": parts.worker_id, "sequence": parts.sequence,
    });
    assert_eq!(
        text(&Decoded::new(42, &parts, date.clone())),
        old.to_string()
    );
    assert_eq!(text(&Ping { ok: true }), json!({ "ok": true }).to_string());
    let layout = LayoutView::from(&Layout::LEAF);
    let routes = vec!["GET /".to_owned(), "GET /v1/health".to_owned()];
    let old =
        json!({ "ok": true, "layout": serde_json::to_value(layout).unwrap(), "routes": routes });
    assert_eq!(
        text(&Health {
            layout,
            ok: true,
            routes
        }),
        old.to_string()
    );
}

#[test]
fn every_error_body_is_as_before() {
    // docs/service.md: {"error":{"code":"…","message":"…"}}, the code's
    // snake_case name from the one list.
    for &code in ErrorCode::ALL {
        let old =
            json!({ "error": { "code": code.as_str(), "message": "m: expected x, found y" } });
        let body = ErrorBody::new(code, "m: expected x, found y");
        assert_eq!(text(&body), old.to_string(), "{code:?}");
        assert_eq!(round_trip(&body), old.to_string());
    }
}

// ---- the conversions

#[test]
fn renewal_hashes_the_secret_and_keeps_the_numbers() {
    let body: ClaimBody =
        parse(r#"{"generation":3,"secret":"abababababababababababababababab","nodeTime":10,"lastTimestamp":9}"#)
            .unwrap();
    let request = RenewRequest::from_body("key-1", 7, body);
    assert_eq!(request.owner, "key-1");
    assert_eq!(request.claim.worker_id, 7, "the route's worker ID");
    let r = request.renewal();
    assert_eq!(r.claim.worker_id, 7);
    assert_eq!(r.claim.generation, 3);
    assert_eq!(r.claim.secret_hash, Some(secret_hash(&secret(0xab))));
    assert_eq!((r.node_now_ms, r.last_timestamp_ms), (10, 9));
    // No secret presented: no hash (the registry refuses it where one is due).
    let bare = RenewRequest::from_body("key-1", 7, parse(r#"{"generation":3}"#).unwrap());
    assert_eq!(bare.renewal().claim.secret_hash, None);
    assert_eq!((bare.node_time, bare.last_timestamp), (0, 0));
}

#[test]
fn a_holders_renewal_is_sent_as_the_service_with_its_claim() {
    let claim = Claim {
        worker_id: 7,
        generation: 3,
        secret: Some(secret(0xab)),
    };
    let renewal = Renewal {
        claim,
        node_now_ms: 20,
        last_timestamp_ms: 19,
    };
    let request = RenewRequest::from(renewal);
    assert_eq!(request.owner, "", "the service's own holders have no owner");
    assert_eq!((request.node_time, request.last_timestamp), (20, 19));
    // What the registry checks is what the holder would prove.
    assert_eq!(request.renewal(), renewal.proof(secret_hash));
    let back = Claim::from(request.claim);
    assert_eq!(back, claim);
    assert_eq!(Claim::from(Previous::from(claim)), claim);
    assert_eq!(Previous::from(claim).proof(), claim.proof(secret_hash));
}

#[test]
fn a_node_lease_gets_its_owner_from_the_credential() {
    let body: WorkerLeaseBody =
        parse(r#"{"nodeKey":"app-a-1","nodeTime":5,"previous":{"workerId":7,"generation":3}}"#)
            .unwrap();
    let r = LeaseRequest::from_body("key-1", body);
    assert_eq!(
        (r.owner.as_str(), r.node_key.as_str(), r.node_time),
        ("key-1", "app-a-1", 5)
    );
    let p = r.previous.unwrap();
    assert_eq!(
        (p.worker_id, p.generation, p.secret.is_none()),
        (7, 3, true)
    );
}

#[test]
fn a_client_allocation_is_never_an_isolates() {
    let body = LeaseBody {
        step: Some(5000),
        request_id: Some("lease-1".into()),
        after: Some("7".into()),
    };
    let r = AllocateRequest::for_client(body, "client");
    assert_eq!(
        r,
        AllocateRequest {
            step: Some(5000),
            request_id: Some("lease-1".into()),
            for_isolate: false,
            by: "lease:client".into(),
            own_credential: false,
            after: Some("7".into()),
        }
    );
    assert_eq!(r.asker(), Asker::Shared, "the client token is shared");
    let key = AllocateRequest::for_client(LeaseBody::default(), "0123456789ab");
    assert!(key.own_credential);
    assert_eq!(key.asker(), Asker::Own("lease:0123456789ab"));
}

#[test]
fn a_client_tail_is_named_as_its_lease_and_never_an_allocators() {
    let body: ReturnBody =
        parse(r#"{"requestId":"job-1","start":"28","end":"2000"}"#).expect("the documented body");
    // A caller can never name who it is, nor pass for an allocator.
    for extra in [r#""by":"lease:x""#, r#""from":"allocator""#, r#""step":1"#] {
        let j = format!(r#"{{"requestId":"job-1","start":"28","end":"2000",{extra}}}"#);
        assert!(parse::<ReturnBody>(&j).is_err(), "{j}");
    }
    let key = TakeBackRequest::for_client(body, "0123456789ab");
    assert_eq!(
        key.by, "lease:0123456789ab",
        "the lease's own name for its asker"
    );
    let lease = AllocateRequest::for_client(LeaseBody::default(), "0123456789ab");
    assert_eq!(key.asker(), lease.asker(), "the same asker as the lease's");
    assert!(!key.for_isolate());
    let back: TagRequest = parse(&round_trip(&TagRequest::TakeBack(key))).unwrap();
    let TagRequest::TakeBack(back) = back else {
        panic!("a take-back")
    };
    assert_eq!(back.asker(), Asker::Own("lease:0123456789ab"));
    for shared in ["client", "root", "anonymous"] {
        let r = TakeBackRequest::for_client(ReturnBody::default(), shared);
        assert_eq!(r.asker(), Asker::Shared, "{shared}: a shared credential");
    }
    // An allocator's hand-back reads as it always did (no `from`).
    let allocator: TakeBackRequest =
        parse(r#"{"requestId":"ab","by":"allocator:weur","start":"5","end":"9"}"#).unwrap();
    assert_eq!(allocator.from, Returner::Allocator);
    assert_eq!(allocator.asker(), Asker::Own("allocator:weur"));
    assert!(allocator.for_isolate());
    assert!(!text(&allocator).contains("from"));
    assert_eq!(
        text(&TailReturned::from(TakenBack {
            taken: true,
            untaken: false,
            closed: false,
            max_id: "27".into()
        })),
        r#"{"taken":true}"#,
        "a client is not shown the tag's max_id"
    );
}

#[test]
fn a_given_id_is_a_decimal_string_or_a_whole_number() {
    let given = |j: &str| GivenId::from_json(&serde_json::from_str::<Value>(j).unwrap());
    assert_eq!(given(r#""818140752648""#), GivenId::Id(818_140_752_648));
    assert_eq!(given("42"), GivenId::Id(42));
    assert_eq!(given(r#""0""#), GivenId::Id(0));
    assert_eq!(given(r#""18446744073709551615""#), GivenId::Id(u64::MAX));
    // Anything else is kept as the client wrote it, for the error.
    for not in [
        r#""""#,
        r#""ten""#,
        r#""+1""#,
        r#""-1""#,
        r#"" 1""#,
        r#""0x10""#,
        r#""18446744073709551616""#,
        "-3",
        "1.5",
        "null",
        "true",
        r#"{"id":1}"#,
    ] {
        assert_eq!(given(not), GivenId::Not(not.to_owned()), "{not}");
    }
    let RevealBody { id } = parse(r#"{"id":"7"}"#).unwrap();
    assert_eq!(GivenId::from_json(&id), GivenId::Id(7));
}

#[test]
fn a_tag_put_becomes_the_objects_upsert() {
    let put: TagPut = parse(r#"{"step":50,"maxId":"9007199254740993","description":"a","monotonic":true,"maxStep":500}"#).unwrap();
    assert_eq!(
        put.upsert("admin-a".into(), 1000).unwrap(),
        TagUpsert {
            biz_tag: "admin-a".into(),
            step: Some(50),
            max_id: Some("9007199254740993".into()),
            description: Some("a".into()),
            monotonic: Some(true),
            opaque: None,
            max_step: Some(500),
            default_step: 1000,
            expect: None,
        }
    );
    // A conditional PUT: null is "no live tag", a decimal string its maxId.
    let when = |j: &str| parse::<TagPut>(j).unwrap().upsert("t".into(), 1);
    assert_eq!(
        when(r#"{"expectMaxId":null}"#).unwrap().expect,
        Some(Expect::Absent)
    );
    assert_eq!(
        when(r#"{"expectMaxId":"9223372036854775807"}"#)
            .unwrap()
            .expect,
        Some(Expect::MaxId(9_223_372_036_854_775_807))
    );
    assert_eq!(
        when(r#"{"expectMaxId":7}"#).unwrap().expect,
        Some(Expect::MaxId(7))
    );
    assert_eq!(when("{}").unwrap().expect, None);
    for bad in [
        r#""""#,
        r#""x1""#,
        r#""18446744073709551616""#,
        "-1",
        "true",
        "[]",
    ] {
        assert!(
            matches!(
                when(&format!(r#"{{"expectMaxId":{bad}}}"#)),
                Err(WireError::Invalid(ErrorCode::OutOfRange, _))
            ),
            "{bad}"
        );
    }
    // A whole number becomes a decimal string; a string is the store's to check.
    let num: TagPut = parse(r#"{"maxId":7}"#).unwrap();
    assert_eq!(
        num.upsert("t".into(), 1).unwrap().max_id.as_deref(),
        Some("7")
    );
    let ten: TagPut = parse(r#"{"maxId":"ten"}"#).unwrap();
    assert_eq!(
        ten.upsert("t".into(), 1).unwrap().max_id.as_deref(),
        Some("ten")
    );
    // Anything else is out_of_range, naming what was given.
    for (bad, shown) in [
        ("-1", "-1"),
        ("1.5", "1.5"),
        ("true", "true"),
        ("[1]", "[1]"),
    ] {
        let put: TagPut = parse(&format!(r#"{{"maxId":{bad}}}"#)).unwrap();
        assert_eq!(
            put.upsert("t".into(), 1),
            Err(WireError::Invalid(
                ErrorCode::OutOfRange,
                format!("maxId: expected a decimal string, found {shown}")
            ))
        );
    }
    // The opaque domain is the core's to check.
    let put: TagPut = parse(r#"{"opaque":{"bits":20}}"#).unwrap();
    match put.upsert("t".into(), 1) {
        Err(WireError::Core(e)) => assert_eq!(e.error_code(), ErrorCode::OutOfRange),
        other => panic!("{other:?}"),
    }
    let put: TagPut = parse(r#"{"opaque":{"digits":12}}"#).unwrap();
    assert_eq!(
        put.upsert("t".into(), 1).unwrap().opaque,
        Some(OpaqueDomain::Digits(12))
    );
}

#[test]
fn a_tag_record_is_viewed_with_decimal_ids_and_its_step_cap() {
    let change = TagChange {
        step: Some(50),
        max_id: Some(9_007_199_254_740_993),
        description: Some("d"),
        ..TagChange::default()
    };
    let record = TagRecord::create("order", &change, 1000, 123).unwrap();
    let view = TagView::from(&record);
    assert_eq!(view.max_id, "9007199254740993");
    assert_eq!((view.step, view.update_time), (50, 123));
    assert_eq!(view.max_step, MAX_STEP, "1,000,000 unless set");
    assert!(!view.monotonic && view.opaque.is_none());
}

#[test]
fn a_segment_reads_as_the_cores_checked_range() {
    let s = |start: &str, end: &str| SegmentLease {
        start: start.into(),
        end: end.into(),
        step: 0,
        min_step: 0,
        opaque: None,
    };
    assert_eq!(
        s("1001", "6000").allocation(),
        Ok(Allocation::new(1001, 6000).unwrap())
    );
    assert_eq!(
        s("x", "6000").allocation(),
        Err(WireError::Unreadable(
            r#"store: segment bound "x" is not a number"#.into()
        ))
    );
    match s("6000", "1001").allocation() {
        Err(WireError::Core(e)) => assert_eq!(e.error_code(), ErrorCode::InvalidSegment),
        other => panic!("{other:?}"),
    }
}

#[test]
fn id_lists_batches_and_histories_read_back_as_numbers() {
    assert_eq!(IdList::of(&[1, u64::MAX]).numbers(), Ok(vec![1, u64::MAX]));
    let bad = IdList {
        ids: vec!["1".into(), "two".into()],
    };
    assert_eq!(
        bad.numbers(),
        Err(WireError::Unreadable(
            r#"store: ID "two" is not a number"#.into()
        ))
    );
    let batch = Batch {
        worker_id: 1,
        ranges: vec![("10".into(), "20".into()), ("30".into(), "31".into())],
        right: None,
    };
    assert_eq!(batch.numbers(), Ok(vec![(10, 20), (30, 31)]));
    let broken = Batch {
        worker_id: 1,
        ranges: vec![("10".into(), "x".into())],
        right: None,
    };
    assert_eq!(
        broken.numbers().unwrap_err().to_string(),
        "range [10, x) is not two integers"
    );
    let history = TagHistory {
        tag: tag_view(),
        allocations: 5,
        events: vec![HistoryEvent {
            at_ms: 7,
            start: "1".into(),
            end: "1000".into(),
            by: "isolate:a".into(),
        }],
    };
    assert_eq!(
        history.allocation_events(),
        Ok(vec![AllocationEvent {
            at_ms: 7,
            start: 1,
            end: 1000
        }])
    );
}

#[test]
fn an_opaque_grant_is_the_cores_permutation_and_a_bad_key_the_stores_fault() {
    let grant = OpaqueGrant {
        domain: OpaqueDomain::Bits(53),
        key: "0123456789abcdef".repeat(2),
    };
    let ids = grant.ids().unwrap();
    let id = ids.encode(1).unwrap();
    assert_eq!(ids.decode(id), Ok(1));
    let short = OpaqueGrant {
        key: "0123".into(),
        ..grant
    };
    assert_eq!(
        short.ids().err(),
        Some(WireError::Unreadable(
            "store: opaque key is not 32 hex digits".into()
        ))
    );
}

#[test]
fn keys_are_stored_as_checked_and_read_back_by_the_access_rules() {
    let spec = KeySpec::new("orders", ["monitor", "ids"], Some("order*")).unwrap();
    let new = NewKey::new("3f9a00112233".into(), spec, "ab".repeat(32));
    assert_eq!(new.scopes, ["ids", "monitor"], "in the rules' order");
    assert_eq!(new.tags, "order*");
    let stored = StoredKey {
        hash: new.hash.clone(),
        scopes: new.scopes.clone(),
        tags: new.tags.clone(),
    };
    let record = stored.record().unwrap();
    assert!(record.access.scopes.iter().eq([Scope::Ids, Scope::Monitor]));
    assert!(record.access.sees_tag("order-eu") && !record.access.sees_tag("billing"));
    let broken = StoredKey {
        scopes: vec!["root".into()],
        ..stored
    };
    match broken.record() {
        Err(WireError::Unreadable(m)) => assert!(m.starts_with("key store: row: "), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_id_lists_json_written_directly_is_serde_jsons_bytes() {
    // The batch routes answer `IdList::json_of`; it must be byte for byte
    // what serde_json made of `IdList::of` (the answers of before).
    let same = |ids: &[u64]| {
        assert_eq!(
            String::from_utf8(IdList::json_of(ids)).unwrap(),
            text(&IdList::of(ids)),
            "{ids:?}"
        );
    };
    same(&[]);
    same(&[0]);
    let mut edges = vec![0, u64::MAX, i64::MAX as u64, 1 << 53];
    for p in 0..20 {
        let t = 10u64.pow(p);
        edges.extend([t - 1, t, t + 1, t.saturating_mul(5)]);
    }
    same(&edges);
    // Every length of 1..=20 digits, many values each (xorshift).
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let ids: Vec<u64> = (0..100_000)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x >> (i % 64)
        })
        .collect();
    same(&ids);
    // Runs of consecutive IDs (written from the last one's digits), across
    // carries and lengths, and runs broken.
    for start in [
        0,
        1,
        7,
        9,
        95,
        999,
        1_000_000 - 3,
        (1 << 53) - 5,
        10u64.pow(19) - 2,
    ] {
        let run: Vec<u64> = (start..start + 30).collect();
        same(&run);
        let broken: Vec<u64> = run
            .iter()
            .map(|&n| if n % 7 == 0 { n + 2 } else { n })
            .collect();
        same(&broken);
    }
    same(&[u64::MAX - 2, u64::MAX - 1, u64::MAX]);
    same(&(u64::MAX - 29..=u64::MAX).collect::<Vec<_>>());
    same(&[u64::MAX, 0, 1, 2]);
    same(&[5, 6, 5, 6, 7, 7, 8]);
}
