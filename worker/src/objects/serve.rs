//! The object's side of every call to a Durable Object: its request enum
//! decoded from a JSON body, its answer (or its error) as JSON.

use serde::de::DeserializeOwned;
use worker::{Env, Request, Response};

use crate::api::{ApiError, ApiResult};
use crate::body::{body_within, MAX_STORE_BODY_BYTES};
use crate::clock::sleep_ms;
use crate::scope::{RequestScope, TEST_COST_HEADER, TEST_DELAY_HEADER};

/// An object's `fetch`: `broken` (tables that could not be made) answers
/// every call; otherwise the request enum is decoded and `handle` answers it,
/// in the call's scope (`RequestScope::for_object`: the background budget
/// for its own calls, its caller's test faults and count).
pub async fn serve<R: DeserializeOwned>(
    env: &Env,
    broken: Option<&ApiError>,
    req: &Request,
    handle: impl AsyncFnOnce(R) -> ApiResult<Response>,
) -> worker::Result<Response> {
    if let Some(e) = broken {
        return Ok(e.response());
    }
    let scope = RequestScope::for_object(req, env);
    let cost = scope.cost();
    let answered = scope
        .run(async {
            // TESTS ONLY: an object made slow on purpose (the header is only
            // ever set by `send`, under `Config::test_object_delay_ms`).
            if let Some(ms) = req
                .headers()
                .get(TEST_DELAY_HEADER)
                .ok()
                .flatten()
                .and_then(|v| v.parse::<u64>().ok())
            {
                sleep_ms(ms.min(60_000)).await;
            }
            match body_within::<R>(req.inner(), req.headers(), MAX_STORE_BODY_BYTES).await {
                Ok(request) => handle(request).await,
                Err(e) => Err(e),
            }
        })
        .await;
    let mut res = answered.unwrap_or_else(|e| e.response());
    if let Some(cost) = cost {
        // TESTS ONLY: what this call made the object (and those it called)
        // do, for a caller that counts (`TEST_COUNT_HEADER`).
        let _ = res
            .headers_mut()
            .set(TEST_COST_HEADER, &cost.get().header());
    }
    Ok(res)
}
