//! The engine of the JS client's leased snowflake: the core's
//! `SnowflakeHolder`. JS carries its requests to the service and the answers
//! back, saves its state, and sets the renewal timer; every rule is the core's.

use std::{format, string::String, vec, vec::Vec};

use wasm_bindgen::prelude::*;

use super::error::{coded, from_core, ms, whole};
use super::layout::{decompose_parts, info, resolve, spec_object};
use super::options::{set, Options};
use super::snowflake::Outcome;
use edgeleaf::{
    code::ErrorCode, holder::Grant, holder::HolderConfig, holder::HolderNext, holder::HolderState,
    holder::Renewal, holder::SavedLease, holder::SnowflakeHolder, rand::SplitMix64, secret::Claim,
    secret::LeaseSecret,
};

/// A leased snowflake holder driven from JS.
#[wasm_bindgen]
pub struct HolderCore {
    holder: SnowflakeHolder<SplitMix64>,
    outcome: Outcome,
    /// A renewal a mint call claimed; the JS timer sends it.
    pending: Option<Renewal>,
    /// The state handed to the store by the last `saveRequest`.
    saving: Option<HolderState>,
}

fn seed() -> Result<SplitMix64, JsValue> {
    let mut seed = [0u8; 8];
    getrandom::fill(&mut seed).map_err(|e| {
        coded(
            ErrorCode::RandomUnavailable.as_str(),
            &format!("crypto.getRandomValues: {e}"),
            &[],
        )
    })?;
    Ok(SplitMix64::new(u64::from_le_bytes(seed)))
}

fn whole_u32(o: &Options, key: &'static str) -> Result<Option<u32>, JsValue> {
    o.small(key, u32::MAX)
}

/// An optional lease secret: 32 hex digits.
fn secret(o: &Options, what: &str) -> Result<Option<LeaseSecret>, JsValue> {
    let value = o.get("secret");
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    value
        .as_string()
        .and_then(|s| LeaseSecret::from_hex(&s))
        .map(Some)
        .ok_or_else(|| {
            coded(
                ErrorCode::InvalidOption.as_str(),
                &format!("{what} secret: expected 32 hex digits, found another value"),
                &[],
            )
        })
}

/// `{ workerId, generation, expiresAtMs, issueAfterMs, ttlMs, layout, secret? }`
/// (a grant carries its secret; a renewal's answer does not).
fn grant(value: &JsValue) -> Result<Grant, JsValue> {
    let o = Options::new(
        "lease",
        value,
        &[
            "workerId",
            "generation",
            "expiresAtMs",
            "issueAfterMs",
            "ttlMs",
            "layout",
            "secret",
        ],
    )?;
    Ok(Grant {
        worker_id: whole_u32(&o, "workerId")?.unwrap_or(0),
        generation: o.required("generation")?,
        expires_at_ms: o.required("expiresAtMs")?,
        issue_after_ms: o.number("issueAfterMs")?.unwrap_or(0),
        ttl_ms: o.required("ttlMs")?,
        layout: resolve(&o.get("layout"), None)?,
        secret: secret(&o, "lease")?,
    })
}

/// A saved state: `{ lastTimestamp, workerId?, generation?, expiresAtMs?, ttlMs?, layout?, secret? }`
/// (no `secret`: saved before grants had secrets).
fn saved_state(value: &JsValue) -> Result<HolderState, JsValue> {
    let o = Options::new(
        "saved snowflake state",
        value,
        &[
            "lastTimestamp",
            "workerId",
            "generation",
            "expiresAtMs",
            "ttlMs",
            "layout",
            "secret",
        ],
    )?;
    let layout = o.get("layout");
    let lease = match whole_u32(&o, "workerId")? {
        None => None,
        Some(worker_id) => Some(SavedLease {
            worker_id,
            generation: o.number("generation")?.unwrap_or(0),
            expires_at_ms: o.number("expiresAtMs")?.unwrap_or(0),
            ttl_ms: o.number("ttlMs")?.unwrap_or(0),
            layout: if layout.is_undefined() || layout.is_null() {
                None
            } else {
                Some(resolve(&layout, None)?)
            },
            secret: secret(&o, "saved snowflake state")?,
        }),
    };
    Ok(HolderState {
        last_timestamp_ms: o.number("lastTimestamp")?.unwrap_or(0),
        lease,
    })
}

/// `{ workerId, generation, secret? }` into `obj`.
#[allow(clippy::cast_precision_loss)] // generations stay below 2^53
fn set_claim(obj: &js_sys::Object, c: &Claim) {
    set(obj, "workerId", c.worker_id);
    set(obj, "generation", c.generation as f64);
    if let Some(secret) = c.secret {
        set(obj, "secret", &*secret.to_hex());
    }
}

#[allow(clippy::cast_precision_loss)] // Unix ms stay below 2^53
fn renewal_object(r: &Renewal) -> JsValue {
    let obj = js_sys::Object::new();
    set_claim(&obj, &r.claim);
    set(&obj, "nodeTime", r.node_now_ms as f64);
    set(&obj, "lastTimestamp", r.last_timestamp_ms as f64);
    obj.into()
}

fn code(code: Option<String>) -> Option<ErrorCode> {
    // An unknown code (a newer service) is not a refusal the holder knows:
    // it retries, and the lease still lapses on time.
    code.map(|c| ErrorCode::parse(&c).unwrap_or(ErrorCode::HttpError))
}

/// A holder state as the store keeps it.
#[allow(clippy::cast_precision_loss)] // Unix ms, generations and TTLs stay below 2^53
fn state_object(state: &HolderState) -> JsValue {
    let obj = js_sys::Object::new();
    set(&obj, "lastTimestamp", state.last_timestamp_ms as f64);
    if let Some(l) = state.lease {
        set_claim(&obj, &l.claim());
        set(&obj, "expiresAtMs", l.expires_at_ms as f64);
        set(&obj, "ttlMs", l.ttl_ms as f64);
        if let Some(layout) = l.layout {
            set(&obj, "layout", spec_object(&layout));
        }
    }
    obj.into()
}

#[wasm_bindgen]
impl HolderCore {
    /// A holder; with `saved` (from the store), restarted from it at `now`.
    /// `withStore`: its state is saved, so it keeps a reservation ahead.
    #[wasm_bindgen(constructor)]
    pub fn new(saved: JsValue, now: f64, with_store: bool) -> Result<HolderCore, JsValue> {
        let now = ms("now()", now)?;
        let config = HolderConfig {
            reserve_ms: if with_store {
                edgeleaf::holder::DEFAULT_RESERVE_MS
            } else {
                0
            },
            ..HolderConfig::default()
        };
        let holder = if saved.is_undefined() || saved.is_null() {
            SnowflakeHolder::with_rand(config, seed()?)
        } else {
            SnowflakeHolder::restore(config, seed()?, saved_state(&saved)?, now)
        }
        .map_err(|e| from_core(&e))?;
        Ok(HolderCore {
            holder,
            outcome: Outcome::None,
            pending: None,
            saving: None,
        })
    }

    /// The lease request to send now, `{ nodeTime, previous? }` (`previous`:
    /// `{ workerId, generation, secret? }`), or null.
    #[wasm_bindgen(js_name = leaseAsk)]
    #[allow(clippy::cast_precision_loss)] // Unix ms and generations stay below 2^53
    pub fn lease_ask(&mut self, now: f64) -> Result<JsValue, JsValue> {
        let now = ms("now()", now)?;
        let poll = self.holder.poll(now, &mut []).map_err(|e| from_core(&e))?;
        let HolderNext::Lease(ask) = poll.next else {
            return Ok(JsValue::NULL);
        };
        let obj = js_sys::Object::new();
        set(&obj, "nodeTime", ask.node_now_ms as f64);
        if let Some(claim) = ask.previous {
            let prev = js_sys::Object::new();
            set_claim(&prev, &claim);
            set(&obj, "previous", prev);
        }
        Ok(obj.into())
    }

    /// The registry granted `lease`.
    pub fn granted(&mut self, lease: JsValue, now: f64) -> Result<(), JsValue> {
        let now = ms("now()", now)?;
        self.holder
            .granted(grant(&lease)?, now)
            .map_err(|e| from_core(&e))
    }

    /// The lease request failed with `code` (undefined: no answer). The
    /// holder holds no lease then: a saved one is never minted under
    /// without the registry's answer.
    #[wasm_bindgen(js_name = leaseFailed)]
    pub fn lease_failed(&mut self, code_: Option<String>, now: f64) -> Result<(), JsValue> {
        let now = ms("now()", now)?;
        self.holder.lease_failed(code(code_), now);
        Ok(())
    }

    fn mint(&mut self, now: f64, out: &mut [u64]) -> usize {
        let Some(now_ms) = whole(now) else {
            self.outcome = Outcome::BadClock(now);
            return 0;
        };
        match self.holder.poll(now_ms, out) {
            Ok(poll) => {
                if poll.renew.is_some() {
                    self.pending = poll.renew;
                }
                self.outcome = match poll.next {
                    HolderNext::RetryAfter { ms, reason } => Outcome::Wait(ms, reason),
                    HolderNext::Done => Outcome::None,
                    // Holders of the JS client stop rather than lease again.
                    HolderNext::Lease(_) | HolderNext::LeaseInFlight => {
                        Outcome::Failed(edgeleaf::Error::LeaseLost {
                            worker_id: 0,
                            generation: 0,
                            cause: None,
                        })
                    }
                };
                poll.filled
            }
            Err(e) => {
                self.outcome = Outcome::Failed(e);
                0
            }
        }
    }

    /// The next ID at `now`, or 0: then `retryAfterMs()` / `failure()` say why.
    #[wasm_bindgen(js_name = nextId)]
    pub fn next_id(&mut self, now: f64) -> u64 {
        let mut out = [0u64; 1];
        match self.mint(now, &mut out) {
            1 => out[0],
            _ => 0,
        }
    }

    /// Up to `n` IDs at `now`.
    #[wasm_bindgen(js_name = nextIds)]
    pub fn next_ids(&mut self, now: f64, n: u32) -> Vec<u64> {
        let mut out = vec![0u64; n as usize];
        let filled = self.mint(now, &mut out);
        out.truncate(filled);
        out
    }

    /// After a 0: milliseconds to wait, or 0 when waiting will not help.
    #[wasm_bindgen(js_name = retryAfterMs)]
    pub fn retry_after_ms(&self) -> f64 {
        self.outcome.retry_after_ms()
    }

    /// After a 0: the error to throw.
    pub fn failure(&self) -> JsValue {
        self.outcome.error()
    }

    /// The renewal to send now, `{ workerId, generation, secret?, nodeTime, lastTimestamp }`,
    /// or null; with `force`, even before it is due.
    #[wasm_bindgen(js_name = takeRenewal)]
    pub fn take_renewal(&mut self, now: f64, force: bool) -> Result<JsValue, JsValue> {
        let now = ms("now()", now)?;
        let r = self.pending.take().or_else(|| {
            if force {
                self.holder.renewal_now(now)
            } else {
                self.holder.renewal(now)
            }
        });
        Ok(r.as_ref().map_or(JsValue::NULL, renewal_object))
    }

    /// Milliseconds until the next renewal is due, or -1 with no lease.
    #[wasm_bindgen(js_name = renewDueIn)]
    #[allow(clippy::cast_precision_loss)] // at most a TTL
    pub fn renew_due_in(&self, now: f64) -> Result<f64, JsValue> {
        let now = ms("now()", now)?;
        Ok(self.holder.renew_due_in(now).map_or(-1.0, |d| d as f64))
    }

    /// The registry renewed the lease.
    pub fn renewed(&mut self, lease: JsValue, now: f64) -> Result<(), JsValue> {
        let now = ms("now()", now)?;
        self.holder.renewed(grant(&lease)?, now);
        Ok(())
    }

    /// A renewal of `generation` failed with `code` (undefined: no answer).
    #[wasm_bindgen(js_name = renewalFailed)]
    pub fn renewal_failed(
        &mut self,
        generation: f64,
        code_: Option<String>,
        now: f64,
    ) -> Result<(), JsValue> {
        let now = ms("now()", now)?;
        let generation = ms("generation", generation)?;
        self.holder.renewal_failed(generation, code(code_), now);
        Ok(())
    }

    /// Stops for good: the release to send, or null.
    pub fn close(&mut self, now: f64) -> Result<JsValue, JsValue> {
        let now = ms("now()", now)?;
        Ok(self
            .holder
            .close(now)
            .as_ref()
            .map_or(JsValue::NULL, renewal_object))
    }

    /// The state to save now (with a reservation ahead, while holding), or
    /// null while a save is in flight; then `saved()` or `saveFailed()`.
    #[wasm_bindgen(js_name = saveRequest)]
    pub fn save_request(&mut self, now: f64) -> Result<JsValue, JsValue> {
        let now = ms("now()", now)?;
        self.saving = self.holder.save_request(now);
        Ok(self.saving.as_ref().map_or(JsValue::NULL, state_object))
    }

    /// The store saved what `saveRequest` gave.
    pub fn saved(&mut self) {
        if let Some(state) = self.saving.take() {
            self.holder.saved(&state);
        }
    }

    /// The store failed to save.
    #[wasm_bindgen(js_name = saveFailed)]
    pub fn save_failed(&mut self) {
        self.saving = None;
        self.holder.save_failed();
    }

    /// Milliseconds until the next save is due, or -1 when none is needed.
    #[wasm_bindgen(js_name = saveDueIn)]
    #[allow(clippy::cast_precision_loss)] // at most a reservation
    pub fn save_due_in(&self, now: f64) -> Result<f64, JsValue> {
        let now = ms("now()", now)?;
        Ok(self.holder.save_due_in(now).map_or(-1.0, |d| d as f64))
    }

    /// The current state: `{ lastTimestamp, workerId?, generation?, secret?, expiresAtMs?, ttlMs?, layout? }`.
    pub fn state(&self) -> JsValue {
        state_object(&self.holder.state())
    }

    /// The layout minted under (as `layoutInfo` gives it), or null.
    pub fn layout(&self) -> Result<JsValue, JsValue> {
        match self.layout_of() {
            Some(l) => info(&l),
            None => Ok(JsValue::NULL),
        }
    }

    fn layout_of(&self) -> Option<edgeleaf::Layout> {
        self.holder.state().lease.and_then(|l| l.layout)
    }

    /// An ID's timestamp under the lease's layout (see `layout::decompose_parts`).
    pub fn decompose(&self, id: u64) -> Result<f64, JsValue> {
        decompose_parts(&self.layout_of().unwrap_or(edgeleaf::Layout::LEAF), id)
    }
}
