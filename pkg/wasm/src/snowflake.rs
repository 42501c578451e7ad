//! The engine of the JS `Snowflake` class.

use std::{format, vec, vec::Vec};

use wasm_bindgen::prelude::*;

use super::error::{coded, from_core, whole};
use super::layout::{decompose_parts, info, resolve};
use super::options::{set, Options};
use edgeleaf::{
    rand::SplitMix64, snowflake::Next, snowflake::SnowflakeConfig, snowflake::SnowflakeGenerator,
    snowflake::Wait, Error,
};

/// The `max_borrow_ms` the npm package's `Snowflake` starts from. A JS
/// caller waits for the next time unit on a timer, and Node's timers fire
/// 0.1–0.3 ms late: without a lead that lateness is lost to the sequence
/// (`await nextIdsAsync(4096)` reached 72–88% of the layout's ceiling); 2 ms
/// of lead absorbs it (≥ 97%). Safe across restarts because a process cannot
/// die, start again and issue within 2 ms (README, "Borrowing by default").
pub const JS_DEFAULT_BORROW_MS: u64 = 2;

/// Why the last call gave no ID.
pub(crate) enum Outcome {
    None,
    Wait(u64, Wait),
    Failed(Error),
    BadClock(f64),
}

impl Outcome {
    /// Milliseconds to wait, or 0 when waiting will not help.
    #[allow(clippy::cast_precision_loss)] // waits are at most a minute
    pub(crate) fn retry_after_ms(&self) -> f64 {
        match self {
            Outcome::Wait(ms, _) => *ms as f64,
            _ => 0.0,
        }
    }

    /// The error a synchronous call throws.
    #[allow(clippy::cast_precision_loss)] // waits are at most a minute
    pub(crate) fn error(&self) -> JsValue {
        match self {
            Outcome::None => coded("internal", "no failure recorded", &[]),
            Outcome::Failed(e) => from_core(e),
            Outcome::BadClock(v) => coded(
                "invalid_clock",
                &format!(
                    "now(): expected whole Unix milliseconds in 0..=2^53, found {}",
                    super::error::describe(&JsValue::from_f64(*v))
                ),
                &[],
            ),
            Outcome::Wait(ms, Wait::SequenceExhausted) => coded(
                "sequence_exhausted",
                &format!("sequence: expected an unused number in this time unit, found all used; retry after {ms} ms (or await next())"),
                &[("retryAfterMs", *ms as f64)],
            ),
            Outcome::Wait(ms, Wait::Saving) => coded(
                "save_pending",
                &format!("store: expected a saved reservation past the clock, found the save still pending; retry after {ms} ms (or await next())"),
                &[("retryAfterMs", *ms as f64)],
            ),
            Outcome::Wait(ms, Wait::ClockBehind) => coded(
                "clock_behind",
                &format!("clock: expected at least the last issued time, found {ms} ms behind; retry after {ms} ms (or await next())"),
                &[("retryAfterMs", *ms as f64)],
            ),
        }
    }
}

/// A snowflake generator driven by a clock read in JS.
#[wasm_bindgen]
pub struct SnowflakeCore {
    gen: SnowflakeGenerator<SplitMix64>,
    outcome: Outcome,
}

#[wasm_bindgen]
impl SnowflakeCore {
    /// Validates the options object (less `now`, which stays in JS).
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<SnowflakeCore, JsValue> {
        let o = Options::new(
            "Snowflake options",
            &options,
            &[
                "workerId",
                "layout",
                "epoch",
                "maxBackwardMs",
                "sequenceStartBound",
                "maxBorrowMs",
                "resumeAfter",
                "now",
            ],
        )?;
        o.function("now")?;
        let layout = resolve(&o.get("layout"), o.number("epoch")?)?;
        let worker_id = o.required("workerId")?;
        let worker_id = u32::try_from(worker_id).map_err(|_| {
            from_core(&Error::OutOfRange {
                what: "worker_id",
                min: 0,
                max: layout.max_worker_id().into(),
                found: worker_id,
            })
        })?;
        let mut cfg = SnowflakeConfig::new(layout, worker_id);
        cfg.max_borrow_ms = JS_DEFAULT_BORROW_MS;
        if let Some(v) = o.number("maxBackwardMs")? {
            cfg.max_backward_ms = v;
        }
        if let Some(v) = o.small("sequenceStartBound", u32::MAX)? {
            cfg.sequence_start_bound = v;
        }
        if let Some(v) = o.number("maxBorrowMs")? {
            cfg.max_borrow_ms = v;
        }
        let mut seed = [0u8; 8];
        if cfg.sequence_start_bound > 0 {
            getrandom::fill(&mut seed).map_err(|e| {
                coded(
                    "random_unavailable",
                    &format!(
                        "crypto.getRandomValues: {e}; set sequenceStartBound: 0 to go without"
                    ),
                    &[],
                )
            })?;
        }
        let rand = SplitMix64::new(u64::from_le_bytes(seed));
        // Resuming after a persisted last timestamp (or a lease's issue_after)
        // issues only from later time units.
        let gen = match o.number("resumeAfter")? {
            Some(after) => {
                SnowflakeGenerator::resume_after(cfg, rand, after.max(layout.epoch_ms()))
            }
            None => SnowflakeGenerator::with_rand(cfg, rand),
        }
        .map_err(|e| from_core(&e))?;
        Ok(SnowflakeCore {
            gen,
            outcome: Outcome::None,
        })
    }

    /// The next ID at `now` (Unix ms), or 0 (never an ID): then
    /// `retryAfterMs()` / `failure()` say why.
    #[wasm_bindgen(js_name = nextId)]
    pub fn next_id(&mut self, now: f64) -> u64 {
        let Some(now_ms) = whole(now) else {
            self.outcome = Outcome::BadClock(now);
            return 0;
        };
        match self.gen.next_id(now_ms) {
            Ok(Next::Id(id)) => id.get(),
            Ok(Next::RetryAfter { ms, reason }) => {
                self.outcome = Outcome::Wait(ms, reason);
                0
            }
            Err(e) => {
                self.outcome = Outcome::Failed(e);
                0
            }
        }
    }

    /// Up to `n` IDs at `now`; fewer when the caller must wait (see
    /// `retryAfterMs()` / `failure()`).
    #[wasm_bindgen(js_name = nextIds)]
    pub fn next_ids(&mut self, now: f64, n: u32) -> Vec<u64> {
        let Some(now_ms) = whole(now) else {
            self.outcome = Outcome::BadClock(now);
            return Vec::new();
        };
        let mut out = vec![0u64; n as usize];
        match self.gen.fill(now_ms, &mut out) {
            Ok(fill) => {
                out.truncate(fill.filled);
                if let Some((ms, reason)) = fill.retry_after {
                    self.outcome = Outcome::Wait(ms, reason);
                }
            }
            Err(e) => {
                out.clear();
                self.outcome = Outcome::Failed(e);
            }
        }
        out
    }

    /// After a 0: milliseconds to wait, or 0 when waiting will not help.
    #[wasm_bindgen(js_name = retryAfterMs)]
    pub fn retry_after_ms(&self) -> f64 {
        self.outcome.retry_after_ms()
    }

    /// After a 0: the error to throw from a synchronous call.
    pub fn failure(&self) -> JsValue {
        self.outcome.error()
    }

    /// The worker ID.
    #[wasm_bindgen(getter, js_name = workerId)]
    pub fn worker_id(&self) -> u32 {
        self.gen.worker_id()
    }

    /// The layout, as `layoutInfo` gives it.
    pub fn layout(&self) -> Result<JsValue, JsValue> {
        info(self.gen.layout())
    }

    /// An ID's timestamp under this layout (see `layout::decompose_parts`).
    pub fn decompose(&self, id: u64) -> Result<f64, JsValue> {
        decompose_parts(self.gen.layout(), id)
    }

    /// `{ lastMs, sequence }` of the last issued ID, for persisting.
    #[allow(clippy::cast_precision_loss)] // Unix ms stay below 2^53
    pub fn state(&self) -> JsValue {
        let state = self.gen.state();
        let obj = js_sys::Object::new();
        set(&obj, "lastMs", state.last_ms as f64);
        set(&obj, "sequence", state.sequence);
        obj.into()
    }
}
