//! The core's public parsing and decoding entry points over arbitrary input:
//! none panics, and each accepts exactly what it documents.

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{
    code::ErrorCode, layout::LayoutSpec, layout::Parts, layout::MAX_UNIT_MS, name::check_name,
    opaque::key_from_hex, opaque::OpaqueDomain, opaque::OpaqueIds, registry::Registry,
    registry::RegistryConfig, registry::WorkerSlot, tag::TagKind, tag::TagRecord, Layout,
};
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "support/props.rs"]
mod props;

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
    #![proptest_config(props::config(2000))]

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

    /// Stored rows are checked, not trusted: exactly the valid ones load.
    /// The generators reach both sides (valid worker IDs, generations below
    /// the next, steps of 1..=1,000,000, tags of the allowed characters),
    /// and the test counts that they did.
    #[test]
    fn stored_rows_are_checked_not_trusted(
        worker in prop_oneof![0u32..1024, any::<u32>()],
        (next, generation) in prop_oneof![
            (1u64..1_000).prop_flat_map(|next| (Just(next), 0..next)),
            (any::<u64>(), any::<u64>()),
        ],
        max_id in prop_oneof![Just(0u64), 0..=i64::MAX as u64, any::<u64>()],
        step in prop_oneof![1u64..=1_000_000, Just(1_000_000), any::<u64>()],
        tag in prop_oneof!["[A-Za-z0-9._:-]{1,10}", "\\PC{0,10}"],
    ) {
        let cfg = RegistryConfig::new(&Layout::LEAF);
        let slot = WorkerSlot {
            worker_id: worker, node_key: "n".into(), generation, expires_at_ms: 0, released: false,
            last_timestamp_ms: 0, reported_clock_ms: 0, reported_at_ms: 0, owner: String::new(),
            secret: None, evicted: false,
        };
        let slot_valid = worker < cfg.capacity && generation < next.max(1);
        match Registry::from_parts(cfg, next, [slot]) {
            Ok(reg) => {
                prop_assert!(slot_valid, "loaded worker {} generation {} (next {})", worker, generation, next);
                prop_assert!(generation < reg.next_generation());
                VALID_SLOTS.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => prop_assert!(!slot_valid, "refused worker {} generation {} (next {})", worker, generation, next),
        }
        let record = TagRecord { biz_tag: tag.clone(), max_id, step, description: String::new(), update_time: 0, kind: TagKind::Plain, max_step: None };
        let record_valid = max_id <= i64::MAX as u64 && (1..=1_000_000).contains(&step) && check_name("biz_tag", &tag).is_ok();
        prop_assert_eq!(record.validate().is_ok(), record_valid, "{:?}", record);
        if record_valid {
            VALID_RECORDS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

static VALID_SLOTS: AtomicUsize = AtomicUsize::new(0);
static VALID_RECORDS: AtomicUsize = AtomicUsize::new(0);

/// The generators above reach valid rows, not only refusals: run after the
/// property (the counts are shared), and on its own it runs it first.
#[test]
fn the_row_generators_reach_valid_rows() {
    stored_rows_are_checked_not_trusted();
    let (slots, records) = (
        VALID_SLOTS.load(Ordering::Relaxed),
        VALID_RECORDS.load(Ordering::Relaxed),
    );
    assert!(
        slots >= 200 && records >= 200,
        "valid slots {slots}, valid records {records} of 2000 cases"
    );
}
