//! Layout options from JS (`"leaf"`, `"jsSafe"`, or an object) and the
//! compose/decompose functions.

use wasm_bindgen::prelude::*;

use super::error::{from_core, invalid_option, ms};
use super::options::{set, Options};
use edgeleaf::{layout::LayoutSpec, layout::Parts, Layout};

/// The layout named by a JS value, with `epoch` (ms) overriding its epoch.
pub fn resolve(layout: &JsValue, epoch: Option<u64>) -> Result<Layout, JsValue> {
    let expected = || {
        invalid_option(
            "layout",
            "expected \"leaf\", \"jsSafe\" or { timestampBits, workerBits, sequenceBits, epoch?, unitMs? }",
        )
    };
    let base = if layout.is_undefined() || layout.is_null() {
        Layout::LEAF
    } else if let Some(name) = layout.as_string() {
        match name.as_str() {
            "leaf" => Layout::LEAF,
            "jsSafe" => Layout::JS_SAFE,
            _ => return Err(expected()),
        }
    } else if layout.is_object() {
        let o = Options::new(
            "layout",
            layout,
            &[
                "timestampBits",
                "workerBits",
                "sequenceBits",
                "epoch",
                "unitMs",
            ],
        )?;
        let bits = |key| -> Result<u8, JsValue> {
            o.small(key, u8::MAX)?
                .ok_or_else(|| invalid_option("layout", format_args!("expected {key}, found none")))
        };
        Layout::new(LayoutSpec {
            timestamp_bits: bits("timestampBits")?,
            worker_bits: bits("workerBits")?,
            sequence_bits: bits("sequenceBits")?,
            epoch_ms: o.number("epoch")?.unwrap_or(Layout::LEAF.epoch_ms()),
            unit_ms: o.number("unitMs")?.unwrap_or(1),
        })
        .map_err(|e| from_core(&e))?
    } else {
        return Err(expected());
    };
    match epoch {
        None => Ok(base),
        Some(epoch_ms) => Layout::new(LayoutSpec {
            epoch_ms,
            ..base.spec()
        })
        .map_err(|e| from_core(&e)),
    }
}

/// A layout as the object `resolve` reads back: widths, `epoch`, `unitMs`.
#[allow(clippy::cast_precision_loss)] // epochs are below 2^53 ms for real layouts
pub(crate) fn spec_object(layout: &Layout) -> js_sys::Object {
    let obj = js_sys::Object::new();
    set(&obj, "timestampBits", layout.timestamp_bits());
    set(&obj, "workerBits", layout.worker_bits());
    set(&obj, "sequenceBits", layout.sequence_bits());
    set(&obj, "epoch", layout.epoch_ms() as f64);
    set(&obj, "unitMs", layout.unit_ms() as f64);
    obj
}

/// A layout as a JS object: its spec, `expiresAt` (Unix ms, a number) and
/// `maxId` (bigint).
#[allow(clippy::cast_precision_loss)] // expiry is below 2^53 ms for real layouts
pub(crate) fn info(layout: &Layout) -> Result<JsValue, JsValue> {
    let obj = spec_object(layout);
    set(&obj, "expiresAt", layout.expires_at() as f64);
    set(&obj, "maxWorkerId", layout.max_worker_id());
    set(&obj, "maxSequence", layout.max_sequence());
    set(&obj, "maxId", layout.max_id());
    Ok(obj.into())
}

/// The layout's widths, epoch, unit, `expiresAt` (ms) and `maxId` (bigint).
#[wasm_bindgen(js_name = layoutInfo)]
pub fn layout_info(layout: JsValue, epoch: Option<f64>) -> Result<JsValue, JsValue> {
    let epoch = epoch.map(|e| ms("epoch", e)).transpose()?;
    info(&resolve(&layout, epoch)?)
}

/// An ID from its parts under a layout.
#[wasm_bindgen]
pub fn compose(
    layout: JsValue,
    epoch: Option<f64>,
    timestamp: f64,
    worker_id: f64,
    sequence: f64,
) -> Result<u64, JsValue> {
    let epoch = epoch.map(|e| ms("epoch", e)).transpose()?;
    let layout = resolve(&layout, epoch)?;
    let whole = |what: &'static str, v: f64| -> Result<u32, JsValue> {
        let n = ms(what, v)?;
        u32::try_from(n).map_err(|_| {
            from_core(&edgeleaf::Error::OutOfRange {
                what,
                min: 0,
                max: u32::MAX.into(),
                found: n,
            })
        })
    };
    let parts = Parts {
        timestamp_ms: ms("timestamp", timestamp)?,
        worker_id: whole("workerId", worker_id)?,
        sequence: whole("sequence", sequence)?,
    };
    layout
        .compose(parts)
        .map(|id| id.get())
        .map_err(|e| from_core(&e))
}

/// An ID's timestamp (ms) under a layout; its worker ID and sequence follow
/// from [`decomposed_worker_id`] and [`decomposed_sequence`].
#[wasm_bindgen]
pub fn decompose(layout: JsValue, epoch: Option<f64>, id: u64) -> Result<f64, JsValue> {
    let epoch = epoch.map(|e| ms("epoch", e)).transpose()?;
    decompose_parts(&resolve(&layout, epoch)?, id)
}

std::thread_local! {
    // The worker ID and sequence of the last ID decomposed. Handing the parts
    // back as numbers (the timestamp returned, these two read by two calls)
    // lets JS build the parts object as a literal: building it from inside
    // wasm, one property at a time, cost ~2.5 µs per ID (issue 10).
    static DECOMPOSED: core::cell::Cell<(u32, u32)> = const { core::cell::Cell::new((0, 0)) };
}

/// Decomposes `id`: returns its timestamp (ms) and keeps its worker ID and sequence for the two readers below.
pub(crate) fn decompose_parts(layout: &Layout, id: u64) -> Result<f64, JsValue> {
    let parts = layout.decompose(id).map_err(|e| from_core(&e))?;
    DECOMPOSED.with(|d| d.set((parts.worker_id, parts.sequence)));
    // Timestamps of real layouts are below 2^53 ms.
    #[allow(clippy::cast_precision_loss)]
    Ok(parts.timestamp_ms as f64)
}

/// The worker ID of the ID last decomposed.
#[wasm_bindgen(js_name = decomposedWorkerId)]
pub fn decomposed_worker_id() -> u32 {
    DECOMPOSED.with(|d| d.get().0)
}

/// The sequence of the ID last decomposed.
#[wasm_bindgen(js_name = decomposedSequence)]
pub fn decomposed_sequence() -> u32 {
    DECOMPOSED.with(|d| d.get().1)
}

/// Throws `invalid_key` (naming the node key) unless `key` follows the key rule.
#[wasm_bindgen(js_name = checkNodeKey)]
pub fn check_node_key(key: &str) -> Result<(), JsValue> {
    edgeleaf::name::check_name("node_key", key).map_err(|e| from_core(&e))
}

/// Throws `invalid_key` unless `tag` is 1–128 characters of `[A-Za-z0-9._:-]`.
#[wasm_bindgen(js_name = checkTag)]
pub fn check_tag(tag: &str) -> Result<(), JsValue> {
    edgeleaf::name::check_tag(tag).map_err(|e| from_core(&e))
}
