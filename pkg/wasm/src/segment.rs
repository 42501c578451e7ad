//! The engine of the JS `SegmentGenerator` class: the core's segment driver.

use std::{vec, vec::Vec};

use wasm_bindgen::prelude::*;

use super::error::{from_core, ms};
use super::options::{set, Options};
use edgeleaf::{
    block::HandBack, block::TailAnswer, driver::SegmentDriver, driver::SegmentStep,
    segment::Allocation, segment::SegmentBuffer, segment::SegmentView, segment::StepPolicy,
};

/// Bit 63 of `nextId()`'s answer: "start loading the next segment" (with
/// `loadStep`). Segment IDs never reach it (they stay below 2^63).
const LOAD: u64 = 1 << 63;

/// A segment driver.
#[wasm_bindgen]
pub struct SegmentCore {
    driver: SegmentDriver,
    /// With the `opaque` option: counters out of the driver become these IDs.
    opaque: Option<edgeleaf::opaque::OpaqueIds>,
    /// The step of the load the last call asked for; 0: none.
    load_step: u64,
    /// After `handBack()`: the core's hand-back, the tail sent and not yet
    /// answered, and every range offered with whether it was taken.
    closing: Option<Closing>,
}

/// A generator's hand-back under way (`close()`).
struct Closing {
    back: HandBack<Allocation>,
    sent: Option<Allocation>,
    report: Vec<(Allocation, bool)>,
}

#[wasm_bindgen]
impl SegmentCore {
    /// Validates `{ tag, fetchSegment, now?, step?, maxStep?, segmentDurationMs?, prefetchPercent?, opaque?, returnSegment? }`.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<SegmentCore, JsValue> {
        let o = Options::new(
            "SegmentGenerator options",
            &options,
            &[
                "tag",
                "fetchSegment",
                "now",
                "step",
                "maxStep",
                "segmentDurationMs",
                "prefetchPercent",
                "opaque",
                "returnSegment",
            ],
        )?;
        let opaque = o.get("opaque");
        let opaque = if opaque.is_undefined() {
            None
        } else {
            Some(super::opaque::parse(&opaque)?)
        };
        let tag = o.get("tag").as_string().ok_or_else(|| {
            super::error::coded(
                "invalid_key",
                &std::format!(
                    "biz_tag: expected a string, found {}",
                    super::error::describe(&o.get("tag"))
                ),
                &[],
            )
        })?;
        edgeleaf::name::check_tag(&tag).map_err(|e| from_core(&e))?;
        if o.get("fetchSegment").is_undefined() {
            return Err(super::error::invalid_option(
                "SegmentGenerator options",
                "expected fetchSegment, found none",
            ));
        }
        o.function("fetchSegment")?;
        o.function("now")?;
        o.function("returnSegment")?;
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
                .unwrap_or(edgeleaf::segment::DEFAULT_PREFETCH_PERCENT),
        )
        .map_err(|e| from_core(&e))?;
        Ok(SegmentCore {
            driver: SegmentDriver::with_buffer(buf),
            opaque,
            load_step: 0,
            closing: None,
        })
    }

    /// Fills `out` from the driver. An opaque generator's counters become
    /// IDs; should one fail to encode (`loaded` refuses segments past the
    /// domain, so none can), the call throws and the counters it took stay
    /// unused: a gap, never a made-up ID.
    fn poll(&mut self, now: f64, out: &mut [u64]) -> Result<(usize, SegmentStep), JsValue> {
        // A clock that is not whole ms reads as 0: it only shapes the
        // dynamic step and the take-over of a lost load, never an ID.
        let now = super::error::whole(now).unwrap_or(0);
        let poll = self.driver.poll(now, out);
        self.load_step = poll.next.load().unwrap_or(0);
        if let Some(ids) = &self.opaque {
            if let Err(e) = ids.encode_all(&mut out[..poll.filled]) {
                // The call throws, so the load it asked for never starts.
                if self.load_step > 0 {
                    self.driver.load_failed();
                    self.load_step = 0;
                }
                return Err(from_core(&e));
            }
        }
        Ok((poll.filled, poll.next))
    }

    /// An ID (`LOAD` bit set: also start a load with `loadStep`); 0: empty,
    /// start a load with `loadStep`; `LOAD` alone: empty, a load is in flight.
    #[wasm_bindgen(js_name = nextId)]
    pub fn next_id(&mut self, now: f64) -> Result<u64, JsValue> {
        let mut out = [0u64; 1];
        Ok(match self.poll(now, &mut out)? {
            (1, SegmentStep::Done { prefetch: None }) => out[0],
            (1, _) => out[0] | LOAD,
            (_, SegmentStep::Wait) => LOAD,
            _ => 0,
        })
    }

    /// Up to `n` IDs; afterwards `loadStep` says whether to start a load.
    pub fn take(&mut self, now: f64, n: u32) -> Result<Vec<u64>, JsValue> {
        let mut out = vec![0u64; n as usize];
        let (filled, _) = self.poll(now, &mut out)?;
        out.truncate(filled);
        Ok(out)
    }

    /// The step of the load the last call asked for, or 0 for none.
    #[wasm_bindgen(getter, js_name = loadStep)]
    #[allow(clippy::cast_precision_loss)] // steps are at most 1,000,000
    pub fn load_step(&self) -> f64 {
        self.load_step as f64
    }

    /// Starts a load nobody asked for (a warm-up): its step, or 0 when one
    /// is already in flight or there is no room.
    #[wasm_bindgen(js_name = warmUp)]
    #[allow(clippy::cast_precision_loss)] // steps are at most 1,000,000
    pub fn warm_up(&mut self, now: f64) -> Result<f64, JsValue> {
        let now = ms("now()", now)?;
        Ok(self.driver.warm_up(now).unwrap_or(0) as f64)
    }

    /// Installs the segment `start..=end` the store allocated.
    pub fn loaded(&mut self, start: u64, end: u64, now: f64) -> Result<(), JsValue> {
        let now = ms("now()", now)?;
        let in_domain = |alloc: Allocation| match &self.opaque {
            Some(ids) => ids.domain().check_segment(alloc),
            None => Ok(alloc),
        };
        let alloc = Allocation::new(start, end)
            .and_then(in_domain)
            .map_err(|e| {
                self.driver.load_failed();
                from_core(&e)
            })?;
        self.driver.loaded(alloc, now).map_err(|e| from_core(&e))
    }

    /// Gives up both halves (the generator closes) and starts the core's
    /// hand-back of their unused ranges (`SegmentDriver::hand_back`: last
    /// first, ending at the first tail not taken). Nothing is handed out
    /// from them afterwards. Only the first call starts one.
    #[wasm_bindgen(js_name = handBack)]
    pub fn hand_back(&mut self) {
        if self.closing.is_some() {
            return;
        }
        let back = self.driver.hand_back();
        let report = back.pending().map(|r| (*r, false)).collect();
        self.load_step = 0;
        self.closing = Some(Closing {
            back,
            sent: None,
            report,
        });
    }

    /// The tail to send now, `{ start, end }` (bigints: the store's own
    /// numbers, also for an opaque generator), or `undefined`: the
    /// hand-back is over.
    #[wasm_bindgen(js_name = tailToSend)]
    pub fn tail_to_send(&mut self) -> JsValue {
        let Some(closing) = &mut self.closing else {
            return JsValue::UNDEFINED;
        };
        let Some(tail) = closing.back.to_send() else {
            return JsValue::UNDEFINED;
        };
        closing.sent = Some(tail);
        let obj = js_sys::Object::new();
        set(&obj, "start", tail.start);
        set(&obj, "end", tail.end);
        obj.into()
    }

    /// `returnSegment`'s answer to the last tail sent: `{ taken: true }`
    /// took it, `{ taken: false }` refused it; anything else (nothing, a
    /// throw, which the caller passes as `undefined`) says nothing, as a
    /// lost answer does. Both of the last end the hand-back.
    #[wasm_bindgen(js_name = tailAnswered)]
    pub fn tail_answered(&mut self, answer: &JsValue) {
        let Some(closing) = &mut self.closing else {
            return;
        };
        let Some(tail) = closing.sent.take() else {
            return;
        };
        let taken = if answer.is_object() {
            js_sys::Reflect::get(answer, &JsValue::from_str("taken"))
                .ok()
                .and_then(|v| v.as_bool())
        } else {
            None
        };
        let answer = match taken {
            Some(true) => TailAnswer::Taken,
            Some(false) => TailAnswer::Refused { untaken: false },
            None => TailAnswer::Lost,
        };
        if answer == TailAnswer::Taken {
            if let Some(entry) = closing.report.iter_mut().find(|(r, _)| *r == tail) {
                entry.1 = true;
            }
        }
        closing.back.answered(tail, answer);
    }

    /// The ranges handed back, last first, as `[{ start, end, taken }]`.
    #[wasm_bindgen(js_name = handedBack)]
    pub fn handed_back(&self) -> js_sys::Array {
        let out = js_sys::Array::new();
        for (range, taken) in self.closing.iter().flat_map(|c| &c.report) {
            let obj = js_sys::Object::new();
            set(&obj, "start", range.start);
            set(&obj, "end", range.end);
            set(&obj, "taken", *taken);
            out.push(&obj);
        }
        out
    }

    /// The fence: the end of the last range loaded (0n: none). The
    /// generator never loads at or below it, so its client tells the store
    /// (the service's lease `after`).
    #[wasm_bindgen(getter)]
    pub fn fence(&self) -> u64 {
        self.driver.fence()
    }

    /// The load in flight failed.
    #[wasm_bindgen(js_name = loadFailed)]
    pub fn load_failed(&mut self) {
        self.driver.load_failed();
    }

    /// Leaf's cache view.
    /// `{ initialized, currentPos, nextReady, loading, step, segments }`, each
    /// segment `{ value, max, step }` (bigints) or `null`.
    #[allow(clippy::cast_precision_loss)] // steps are at most 1,000,000
    pub fn snapshot(&self) -> JsValue {
        let snap = self.driver.snapshot();
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
