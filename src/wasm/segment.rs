//! The engine of the JS `SegmentGenerator` class: the core's double buffer.

use std::{vec, vec::Vec};

use wasm_bindgen::prelude::*;

use super::error::{from_core, ms};
use super::options::{set, Options};
use crate::{Allocation, SegmentBuffer, SegmentNext, SegmentView, StepPolicy};

/// Bit 63 of `nextId()`'s answer: "start loading the next segment". Segment
/// IDs never reach it (they stay below 2^63).
const LOAD: u64 = 1 << 63;

/// A segment double buffer.
#[wasm_bindgen]
pub struct SegmentCore {
    buf: SegmentBuffer,
    load_requested: bool,
}

#[wasm_bindgen]
impl SegmentCore {
    /// Validates `{ step?, maxStep?, segmentDurationMs?, prefetchPercent? }`.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<SegmentCore, JsValue> {
        let o = Options::new(
            "SegmentGenerator options",
            &options,
            &["step", "maxStep", "segmentDurationMs", "prefetchPercent"],
        )?;
        let mut policy =
            StepPolicy::new(o.number("step")?.unwrap_or(1000)).map_err(|e| from_core(&e))?;
        if let Some(v) = o.number("maxStep")? {
            policy.max_step = v;
        }
        if let Some(v) = o.number("segmentDurationMs")? {
            policy.duration_ms = v;
        }
        let buf = SegmentBuffer::with_prefetch_percent(
            policy,
            o.small("prefetchPercent", 100u8)?
                .unwrap_or(crate::DEFAULT_PREFETCH_PERCENT),
        )
        .map_err(|e| from_core(&e))?;
        Ok(SegmentCore {
            buf,
            load_requested: false,
        })
    }

    /// An ID (`LOAD` bit set: also start the next load); 0: empty, start a
    /// load; `LOAD` alone: empty, a load is in flight.
    #[wasm_bindgen(js_name = nextId)]
    pub fn next_id(&mut self) -> u64 {
        match self.buf.next_id() {
            SegmentNext::Id {
                id,
                prefetch: false,
            } => id,
            SegmentNext::Id { id, prefetch: true } => id | LOAD,
            SegmentNext::Exhausted { load: true } => 0,
            SegmentNext::Exhausted { load: false } => LOAD,
        }
    }

    /// Up to `n` IDs; afterwards `loadRequested` says whether to start a load.
    pub fn take(&mut self, n: u32) -> Vec<u64> {
        let mut out = vec![0u64; n as usize];
        let t = self.buf.take(&mut out);
        out.truncate(t.filled);
        self.load_requested = t.load;
        out
    }

    /// Whether the last `take` asked for a load.
    #[wasm_bindgen(getter, js_name = loadRequested)]
    pub fn load_requested(&self) -> bool {
        self.load_requested
    }

    /// The step to ask the store for (Leaf's dynamic step).
    #[wasm_bindgen(js_name = stepForNextLoad)]
    #[allow(clippy::cast_precision_loss)] // steps are at most 1,000,000
    pub fn step_for_next_load(&self, now: f64) -> Result<f64, JsValue> {
        let now = ms("now()", now)?;
        Ok(self.buf.step_for_next_load(now) as f64)
    }

    /// Marks a load in flight (a warm-up nobody asked for); false if one is
    /// already in flight or there is no room.
    #[wasm_bindgen(js_name = beginLoad)]
    pub fn begin_load(&mut self) -> bool {
        self.buf.begin_load()
    }

    /// Installs the segment `start..=end` the store allocated.
    pub fn load(&mut self, start: u64, end: u64, now: f64) -> Result<(), JsValue> {
        let now = ms("now()", now)?;
        let alloc = Allocation::new(start, end).map_err(|e| {
            self.buf.load_failed();
            from_core(&e)
        })?;
        self.buf.load(alloc, now).map_err(|e| from_core(&e))
    }

    /// The load in flight failed.
    #[wasm_bindgen(js_name = loadFailed)]
    pub fn load_failed(&mut self) {
        self.buf.load_failed();
    }

    /// Leaf's cache view.
    /// `{ initialized, currentPos, nextReady, loading, step, segments }`, each
    /// segment `{ value, max, step }` (bigints) or `null`.
    #[allow(clippy::cast_precision_loss)] // steps are at most 1,000,000
    pub fn snapshot(&self) -> JsValue {
        let snap = self.buf.snapshot();
        let obj = js_sys::Object::new();
        set(&obj, "initialized", snap.initialized);
        set(&obj, "currentPos", snap.current_pos);
        set(&obj, "nextReady", snap.next_ready);
        set(&obj, "loading", snap.loading);
        set(&obj, "step", snap.step as f64);
        let view = |v: Option<SegmentView>| -> JsValue {
            v.map_or(JsValue::NULL, |v| {
                let seg = js_sys::Object::new();
                set(&seg, "value", v.value);
                set(&seg, "max", v.max);
                set(&seg, "step", v.step as f64);
                seg.into()
            })
        };
        let segments = js_sys::Array::of2(&view(snap.segments[0]), &view(snap.segments[1]));
        set(&obj, "segments", segments);
        obj.into()
    }
}
