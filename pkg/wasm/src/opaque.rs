//! The engine of the JS `OpaqueIds` class and of `SegmentGenerator`'s
//! `opaque` option: the core's permutation.

use std::{format, vec::Vec};

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::error::{coded, from_core};
use super::options::Options;
use edgeleaf::{opaque::OpaqueDomain, opaque::OpaqueIds, opaque::OPAQUE_KEY_BYTES};

/// `{ key, bits } | { key, digits }`: the key as 16 bytes (a Uint8Array) or
/// 32 hex digits.
pub fn parse(value: &JsValue) -> Result<OpaqueIds, JsValue> {
    let o = Options::new("opaque options", value, &["key", "bits", "digits"])?;
    let domain = match (o.small("bits", u8::MAX)?, o.small("digits", u8::MAX)?) {
        (Some(b), None) => OpaqueDomain::Bits(b),
        (None, Some(d)) => OpaqueDomain::Digits(d),
        _ => {
            return Err(coded(
                "invalid_option",
                "opaque options: expected one of bits (32..=63) or digits (6..=18)",
                &[],
            ))
        }
    };
    let key = o.get("key");
    let bytes: Option<Vec<u8>> = match key.as_string() {
        Some(hex) => edgeleaf::opaque::key_from_hex(&hex).map(|k| k.to_vec()),
        None => key
            .dyn_ref::<js_sys::Uint8Array>()
            .map(js_sys::Uint8Array::to_vec),
    };
    let bytes = bytes.filter(|b| b.len() == OPAQUE_KEY_BYTES).ok_or_else(|| {
        coded(
            "invalid_option",
            &format!(
                "opaque options key: expected {OPAQUE_KEY_BYTES} bytes (a Uint8Array or {} hex digits), found {}",
                2 * OPAQUE_KEY_BYTES,
                super::error::describe(&key)
            ),
            &[],
        )
    })?;
    OpaqueIds::new(domain, &bytes).map_err(|e| from_core(&e))
}

/// A keyed permutation of an ID domain.
#[wasm_bindgen]
pub struct OpaqueCore {
    ids: OpaqueIds,
}

#[wasm_bindgen]
impl OpaqueCore {
    /// Validates `{ key, bits | digits }`.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<OpaqueCore, JsValue> {
        Ok(OpaqueCore {
            ids: parse(&options)?,
        })
    }

    /// The ID of counter `n`.
    pub fn encode(&self, n: u64) -> Result<u64, JsValue> {
        self.ids.encode(n).map_err(|e| from_core(&e))
    }

    /// The counter of `id`.
    pub fn decode(&self, id: u64) -> Result<u64, JsValue> {
        self.ids.decode(id).map_err(|e| from_core(&e))
    }

    /// The largest ID (and counter).
    #[wasm_bindgen(getter, js_name = maxId)]
    pub fn max_id(&self) -> u64 {
        self.ids.domain().max_id()
    }
}

/// The length of an opaque tag's key, bytes (the core's
/// `opaque::OPAQUE_KEY_BYTES`): `OpaqueIds.generateKey()` writes it in JS so
/// that it works before the wasm is loaded (edgeleaf/slim), and the
/// package's tests compare the two.
#[wasm_bindgen(js_name = opaqueKeyBytes)]
#[allow(clippy::cast_precision_loss)] // 16
pub fn opaque_key_bytes() -> f64 {
    edgeleaf::opaque::OPAQUE_KEY_BYTES as f64
}
