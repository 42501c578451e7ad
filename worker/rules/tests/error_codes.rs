//! The one list of error codes (`ErrorCode`) against the two documents that
//! name them: `pkg/index.d.ts` (every code: the JS package sees them all) and
//! `worker/openapi.yaml` (the codes the HTTP API may answer).

#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeSet;

use edgeleaf::code::ErrorCode;
use edgeleaf_rules::status::on_wire;

fn read(path: &str) -> String {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The quoted snake_case names between `start` and the first `end` after it.
fn names(text: &str, start: &str, end: &str, quote: char) -> BTreeSet<String> {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} not found"));
    let rest = &text[from + start.len()..];
    let block = &rest[..rest.find(end).unwrap_or(rest.len())];
    block
        .split(quote)
        .skip(1)
        .step_by(2)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        .map(str::to_owned)
        .collect()
}

fn codes(wire_only: bool) -> BTreeSet<String> {
    ErrorCode::ALL
        .iter()
        .filter(|c| !wire_only || on_wire(**c))
        .map(|c| c.as_str().to_owned())
        .collect()
}

#[test]
fn index_d_ts_names_every_code() {
    let dts = read("pkg/index.d.ts");
    assert_eq!(
        names(&dts, "export type ErrorCode =", ";", '\''),
        codes(false)
    );
}

#[test]
fn openapi_names_the_codes_of_the_wire() {
    let yaml = read("worker/openapi.yaml");
    assert_eq!(
        names(&yaml, "error codes (src/code.rs", "message:", '\''),
        codes(true)
    );
}
