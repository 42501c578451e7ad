//! The core's public parsing and decoding entry points over arbitrary input:
//! none panics, and each accepts exactly what it documents.

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{
    code::ErrorCode, layout::LayoutSpec, layout::Parts, layout::MAX_UNIT_MS, name::check_name,
    opaque::key_from_hex, opaque::OpaqueDomain, opaque::OpaqueIds, registry::Registry,
    registry::RegistryConfig, registry::WorkerSlot, tag::TagKind, tag::TagRecord, Layout,
};
use proptest::prelude::*;

fn spec() -> impl Strategy<Value = LayoutSpec> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u8>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(t, w, s, e, u)| LayoutSpec {
            timestamp_bits: t % 70,
            worker_bits: w % 70,
            sequence_bits: s % 70,
            epoch_ms: e,
            unit_ms: u % (2 * MAX_UNIT_MS + 2),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn layouts_accept_exactly_the_valid_specs_and_decode_any_id(s in spec(), id in any::<u64>()) {
        let width = u32::from(s.timestamp_bits) + u32::from(s.worker_bits) + u32::from(s.sequence_bits);
        match Layout::new(s) {
            Ok(l) => {
                prop_assert!(width <= 63);
                prop_assert_eq!(l.spec(), s);
                match l.decompose(id) {
                    Ok(p) => {
                        prop_assert!(id <= l.max_id());
                        prop_assert_eq!(l.compose(p).map(|x| x.get()), Ok(id));
                    }
                    Err(e) => prop_assert!(id > l.max_id() || e.code() == "layout_expired", "{e}"),
                }
            }
            Err(_) => {
                // Refused: exactly the documented rules.
                let span = (1u64 << (s.timestamp_bits % 64)).checked_mul(s.unit_ms);
                let valid = width <= 63
                    && (1..=62).contains(&s.timestamp_bits)
                    && (1..=31).contains(&s.sequence_bits)
                    && s.worker_bits <= 31
                    && (1..=MAX_UNIT_MS).contains(&s.unit_ms)
                    && span.is_some_and(|span| s.epoch_ms <= u64::MAX - span);
                prop_assert!(!valid, "refused a valid spec {s:?}");
            }
        }
    }

    #[test]
    fn compose_refuses_parts_outside_the_layout(ts in any::<u64>(), w in any::<u32>(), seq in any::<u32>()) {
        let l = Layout::LEAF;
        let parts = Parts { timestamp_ms: ts, worker_id: w, sequence: seq };
        if let Ok(id) = l.compose(parts) {
            prop_assert!(w <= l.max_worker_id() && seq <= l.max_sequence());
            prop_assert!(id.get() <= i64::MAX as u64);
            prop_assert_eq!(l.decompose(id.get()).unwrap().worker_id, w);
        }
    }

    #[test]
    fn keys_follow_the_rule(key in prop_oneof!["\\PC{0,140}", "[A-Za-z0-9._:/ -]{0,130}"]) {
        let expected = !key.is_empty() && key.len() <= 128
            && key.chars().all(|c| c.is_ascii_alphanumeric() || ".:_-".contains(c));
        prop_assert_eq!(check_name("node_key", &key).is_ok(), expected);
    }

    #[test]
    fn hex_keys_round_trip_and_nothing_else_parses(bytes in any::<[u8; 16]>(), junk in prop_oneof!["\\PC{0,40}", "[0-9a-fA-Fg]{30,34}"]) {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        prop_assert_eq!(key_from_hex(&hex), Some(bytes));
        prop_assert_eq!(key_from_hex(&hex.to_uppercase()), Some(bytes));
        if let Some(k) = key_from_hex(&junk) {
            prop_assert_eq!(junk.len(), 32);
            let back: String = k.iter().map(|b| format!("{b:02x}")).collect();
            prop_assert_eq!(back, junk.to_lowercase());
        }
    }

    #[test]
    fn opaque_decode_takes_any_id(bits in 32u8..=63, key in any::<[u8; 16]>(), id in any::<u64>()) {
        let ids = OpaqueIds::new(OpaqueDomain::Bits(bits), &key).unwrap();
        match ids.decode(id) {
            Ok(n) => prop_assert_eq!(ids.encode(n), Ok(id)),
            Err(_) => prop_assert!(id == 0 || id > OpaqueDomain::Bits(bits).max_id()),
        }
    }

    #[test]
    fn error_codes_parse_only_their_names(text in "[a-z_]{0,30}") {
        if let Some(code) = ErrorCode::parse(&text) {
            prop_assert_eq!(code.as_str(), text.as_str());
        }
    }

    #[test]
    fn stored_rows_are_checked_not_trusted(
        worker in any::<u32>(), generation in any::<u64>(), next in any::<u64>(),
        max_id in any::<u64>(), step in any::<u64>(), tag in "\\PC{0,10}",
    ) {
        let cfg = RegistryConfig::new(&Layout::LEAF);
        let slot = WorkerSlot {
            worker_id: worker, node_key: "n".into(), generation, expires_at_ms: 0, released: false,
            last_timestamp_ms: 0, reported_clock_ms: 0, reported_at_ms: 0, owner: String::new(),
            secret: None, evicted: false,
        };
        if let Ok(reg) = Registry::from_parts(cfg, next, [slot]) {
            prop_assert!(worker < cfg.capacity);
            prop_assert!(generation < reg.next_generation());
        }
        let record = TagRecord { biz_tag: tag.clone(), max_id, step, description: String::new(), update_time: 0, kind: TagKind::Plain, max_step: None };
        if record.validate().is_ok() {
            prop_assert!(max_id <= i64::MAX as u64 && (1..=1_000_000).contains(&step));
            prop_assert!(check_name("biz_tag", &tag).is_ok());
        }
    }
}
