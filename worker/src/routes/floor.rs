//! TESTS ONLY: the same-bytes floor of the batch routes, for the HTTP bench
//! (tests/bench/http.bench.mjs). `GET /test/floor?count=C&bytes=B` answers
//! `{"ids":["…", …]}`, `C` decimal strings in `B` bytes (the digits spread
//! evenly) — a body of the size and shape a batch route answers — built once
//! per isolate and
//! then only copied out, so the bench can tell what the batch routes cost
//! beyond what workerd does with the same bytes. It is not a route of the
//! service (not in `ROUTES`, not in the API): it answers only when
//! `TEST_BENCH_FLOOR` is set (`Config::test_bench_floor`) and the request's
//! URL names a loopback host (as `TEST_OBJECT_DELAY_MS`: a deployed Worker
//! never receives such a request); otherwise the path is not found, as any
//! other unknown path.

use std::cell::RefCell;
use std::collections::HashMap;

use worker::{Env, Response, ResponseBuilder};

use crate::api::ApiResult;
use crate::config::Config;
use crate::incoming::Incoming;

/// The floor's path.
pub const PATH: &str = "/test/floor";

thread_local! {
    /// The bodies built so far, by (count, digits).
    static BODIES: RefCell<HashMap<(usize, usize), Vec<u8>>> = RefCell::new(HashMap::new());
}

/// The floor's answer to `req`, if this Worker serves it (else `None`: the
/// path is then an unknown one).
pub fn answer(req: &Incoming, env: &Env) -> Option<ApiResult<Response>> {
    let url = req.url();
    if !req.on_loopback() || !Config::cached(env).is_ok_and(|c| c.test_bench_floor) {
        return None;
    }
    let arg = |name: &str, default: usize, max: usize| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .map_or(default, |n| n.clamp(1, max))
    };
    let count = arg("count", 1000, 1000);
    // `{"ids":[` `]}`, and per ID two quotes and a comma but the first.
    let frame = 9 + 3 * count;
    let digits = arg("bytes", frame + 19 * count, frame + 20 * count).max(frame + count) - frame;
    let key = (count, digits);
    let body = BODIES.with(|b| {
        b.borrow_mut()
            .entry(key)
            .or_insert_with(|| body(key.0, key.1))
            .clone()
    });
    Some(bytes(body))
}

/// `{"ids":["…",…]}`: `count` decimal strings of `digits` digits in all
/// (each of 1..=20), the longer ones first.
fn body(count: usize, digits: usize) -> Vec<u8> {
    let ids: Vec<String> = (0..count)
        .map(|i| {
            let len = digits / count + usize::from(i < digits % count);
            let first = 10u64.pow(u32::try_from(len.clamp(1, 20) - 1).unwrap_or(0));
            (first + i as u64).to_string()[..len.clamp(1, 20)].to_owned()
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({ "ids": ids })).unwrap_or_default()
}

/// What `api::json` answers (status 200, `application/json`), with these
/// bytes as the body.
fn bytes(body: Vec<u8>) -> ApiResult<Response> {
    Ok(ResponseBuilder::new()
        .with_header("Content-Type", "application/json")?
        .fixed(body))
}
