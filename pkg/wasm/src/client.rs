//! What `EdgeleafClient` (pkg/client.mjs) follows of the core's and the
//! service's rules: how long to wait after a call to the service failed,
//! and whether a token owns its request IDs. The client only carries
//! requests and sets timers.

use wasm_bindgen::prelude::*;

use super::error::ms;
use edgeleaf::wait::{
    after_call_failed, after_told_to_wait, AfterFailure, CallFailure, WaitBudget,
};

/// The waiting of one call the client makes to the service (a segment
/// lease), retried as the core's `wait::after_call_failed` says: at most
/// `MAX_CALL_ATTEMPTS` calls, a jittered backoff from `RETRY_BACKOFF_MS`
/// doubling each time (or the wait a 503's `Retry-After` asks for),
/// within the budget of a call made outside any
/// request to the service (`WaitBudget::for_background`).
#[wasm_bindgen]
pub struct CallBudget {
    budget: WaitBudget,
}

#[wasm_bindgen]
impl CallBudget {
    /// A budget starting at clock reading `now` (Unix ms).
    #[wasm_bindgen(constructor)]
    pub fn new(now: f64) -> Result<CallBudget, JsValue> {
        Ok(CallBudget {
            budget: WaitBudget::for_background(ms("now()", now)?),
        })
    }

    /// After the `attempts`-th call (1 for the first) failed at `now`:
    /// the ms to wait before calling again (counted in the budget), or -1
    /// to give up. `retryable`: no answer came, or the service answered
    /// that it could not answer now (5xx); anything else is not called
    /// again. A lease may be asked twice: with a request ID the service
    /// answers the same range, without one a lost range is only skipped.
    /// `retryAfterMs` (> 0): the service said when to ask again (a 503's
    /// `Retry-After`): that wait, never less (`wait::after_told_to_wait`).
    #[wasm_bindgen(js_name = afterFailed)]
    pub fn after_failed(
        &mut self,
        retryable: bool,
        attempts: u32,
        now: f64,
        retry_after_ms: Option<f64>,
    ) -> Result<f64, JsValue> {
        let now = ms("now()", now)?;
        let remaining = self.budget.remaining_ms(now);
        let told = match retry_after_ms {
            Some(t) if retryable && t > 0.0 => Some(ms("retryAfterMs", t)?),
            _ => None,
        };
        let after = match told {
            Some(t) => after_told_to_wait(t, attempts, remaining),
            None => {
                let failure = if retryable {
                    CallFailure::Retryable
                } else {
                    CallFailure::Other
                };
                let mut rand = [0u8; 8];
                // Without randomness the backoff is its floor: still the core's.
                let _ = getrandom::fill(&mut rand);
                after_call_failed(failure, true, attempts, remaining, u64::from_le_bytes(rand))
            }
        };
        Ok(match after {
            AfterFailure::Retry { after_ms } if self.budget.wait(now, after_ms) => {
                // Within the budget (10 s): exact as a JS number.
                #[allow(clippy::cast_precision_loss)]
                let after = after_ms as f64;
                after
            }
            AfterFailure::Retry { .. } | AfterFailure::GiveUp { .. } => -1.0,
        })
    }
}

/// Whether `token` has the shape of an API key's (`elk_<id>_<secret>`, the
/// service's `access::token_key_id`): the only credential that owns its
/// request IDs (`access::lease_asker`), so the only one the client sends
/// them with.
#[wasm_bindgen(js_name = isKeyToken)]
pub fn is_key_token(token: &str) -> bool {
    edgeleaf_rules::access::token_key_id(token).is_some()
}
