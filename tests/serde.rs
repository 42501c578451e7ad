//! Hosts persist state and hand it to JS through serde; what comes back in is
//! validated like anything else.

use edgeleaf::{
    registry::Registry, registry::RegistryConfig, segment::SegmentBuffer, segment::StepPolicy,
    snowflake::Next, snowflake::SnowflakeConfig, snowflake::SnowflakeGenerator,
    snowflake::SnowflakeState, tag::TagRecord, Layout,
};

#[test]
fn layouts_are_validated_when_deserialized() {
    let json = serde_json::to_string(&Layout::LEAF).unwrap();
    assert_eq!(
        json,
        r#"{"timestampBits":41,"workerBits":10,"sequenceBits":12,"epochMs":1288834974657,"unitMs":1}"#
    );
    assert_eq!(serde_json::from_str::<Layout>(&json).unwrap(), Layout::LEAF);
    let too_wide = json.replace(r#""sequenceBits":12"#, r#""sequenceBits":13"#);
    let err = serde_json::from_str::<Layout>(&too_wide).unwrap_err();
    assert!(err
        .to_string()
        .contains("expected timestamp + worker + sequence bits <= 63"));
}

#[test]
fn state_records_and_registries_round_trip() {
    let t = 1_735_689_600_000;
    let mut gen = SnowflakeGenerator::new(SnowflakeConfig::new(Layout::LEAF, 3)).unwrap();
    let Ok(Next::Id(_)) = gen.next_id(t) else {
        panic!()
    };
    let state: SnowflakeState =
        serde_json::from_str(&serde_json::to_string(&gen.state()).unwrap()).unwrap();
    assert_eq!(state, gen.state());

    let rec = TagRecord::new("order", 1000, 7, "orders", t).unwrap();
    let back: TagRecord = serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
    assert_eq!(back, rec);

    let mut reg = Registry::new(RegistryConfig::new(&Layout::LEAF)).unwrap();
    reg.lease(
        edgeleaf::registry::GrantRequest {
            owner: "",
            node_key: "n1",
            node_now_ms: t,
            previous: None,
            secret_hash: edgeleaf::secret::SecretHash([1; 32]),
        },
        t,
    )
    .unwrap();
    let back: Registry = serde_json::from_str(&serde_json::to_string(&reg).unwrap()).unwrap();
    assert_eq!(back, reg);

    let buf = SegmentBuffer::new(StepPolicy::new(10).unwrap());
    let snap = serde_json::to_value(buf.snapshot()).unwrap();
    assert_eq!(snap["initialized"], false);
    assert_eq!(snap["currentPos"], 0);
}
