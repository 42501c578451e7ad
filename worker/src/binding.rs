//! The service binding: the ID operations a Worker of the same account calls
//! over RPC (`env.IDS.segment('order', 10)`), through the `Ids` entrypoint
//! of the entry module (worker/entry.mjs), which hands each call here as it
//! came. The same handlers as the HTTP routes, within the same budget
//! (`scope::RequestScope::for_binding`), counted in the same metrics; the
//! same answers: a route's JSON body, or its error as
//! `{"error":{"code","message"},"status","retryAfterMs"}`.
//!
//! Who calls is the binding (`BINDING_OWNER`): no token, since only a Worker
//! the account configured with the binding reaches the entrypoint. Every
//! such Worker is that one owner, a shared credential as the client token is
//! (no request IDs, no tails handed back; one share of worker IDs), and no
//! public request can become a call here (`BindingCalls` is not exported by
//! the entry module, and no route leads here). What it may do is the
//! operator's: `RPC_TAGS` and `RPC_REVEAL` (the rules' `BindingAccess`).

use edgeleaf::code::ErrorCode;
use edgeleaf::name::check_tag;
use edgeleaf_rules::access::Scope;
use edgeleaf_rules::binding::BINDING_OWNER;
use edgeleaf_rules::wire::api::{ErrorBody, ErrorDetail, IdList};
use edgeleaf_rules::wire::registry::{ClaimBody, WorkerLeaseBody};
use edgeleaf_rules::wire::tag::{LeaseBody, ReturnBody};
use serde::{de::DeserializeOwned, Serialize};
use wasm_bindgen::prelude::wasm_bindgen;
use worker::{worker_sys, Context, Env};

use crate::api::{checked_count, ApiError, ApiResult};
use crate::config::Config;
use crate::routes::{ids, tags, views, workers};
use crate::{isolate, scope};

/// The calls of the service binding. Not a route and not exported by the
/// entry module: only its `Ids` entrypoint calls it.
#[wasm_bindgen]
pub struct BindingCalls {
    _none: (),
}

#[wasm_bindgen]
impl BindingCalls {
    /// Answers the operation `op` with its arguments `args` (a JSON array,
    /// as the entrypoint's method took them) with JSON: the route's body, or
    /// its error.
    pub async fn answer(env: Env, ctx: worker_sys::Context, op: String, args: String) -> String {
        let ctx = Context::new(ctx);
        let answered = scope::RequestScope::for_binding(&env)
            .run(answer(&env, &ctx, &op, &args))
            .await;
        answered.unwrap_or_else(|e| {
            isolate::count_error();
            error_json(&e)
        })
    }
}

/// The arguments of an operation: a JSON array, read as a tuple (lighter in
/// the .wasm than a tagged enum of calls).
fn args<T: DeserializeOwned>(op: &str, raw: &str) -> ApiResult<T> {
    // The routes' bound on a body: no caller's arguments cost the isolate
    // more than a request's would.
    if raw.len() > crate::body::MAX_BODY_BYTES {
        return Err(ApiError::new(
            ErrorCode::BodyTooLarge,
            format!(
                "{op}: expected arguments of at most {} bytes as JSON, found {}",
                crate::body::MAX_BODY_BYTES,
                raw.len()
            ),
        ));
    }
    // From bytes, as the routes read their bodies: the same deserializers.
    serde_json::from_slice(raw.as_bytes()).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidJson,
            format!("{op}: expected the documented arguments, found an error: {e}"),
        )
    })
}

fn to_json<T: Serialize>(value: &T) -> ApiResult<String> {
    serde_json::to_string(value)
        .map_err(|e| ApiError::new(ErrorCode::Internal, format!("answer: {e}")))
}

/// One operation: what the route of the same name (in the comments) does,
/// as `BINDING_OWNER`, within `Config::binding`.
async fn answer(env: &Env, ctx: &Context, op: &str, raw: &str) -> ApiResult<String> {
    let config = Config::cached(env)?;
    let may = |need: Scope, tag: Option<&str>| config.binding.permits(need, tag).map(|_| ());
    let owner = BINDING_OWNER;
    let tagged = |need: Scope, tag: &str| -> ApiResult<()> {
        may(need, Some(tag))?;
        check_tag(tag)?;
        Ok(())
    };
    match op {
        // GET /v1/segment/{tag}?count=N
        "segment" => {
            let (tag, count): (String, u64) = args(op, raw)?;
            tagged(Scope::Ids, &tag)?;
            let ids = isolate::segment_ids(env, ctx, &tag, checked_count(count)?).await?;
            Ok(String::from_utf8(IdList::json_of(&ids)).unwrap_or_default())
        }
        // GET /v1/snowflake?count=N
        "snowflake" => {
            let (count,): (u64,) = args(op, raw)?;
            may(Scope::Ids, None)?;
            let ids = isolate::snowflake_ids(env, ctx, &config, checked_count(count)?).await?;
            Ok(String::from_utf8(IdList::json_of(&ids)).unwrap_or_default())
        }
        // POST /v1/segment/{tag}/lease
        "segmentLease" => {
            let (tag, body): (String, LeaseBody) = args(op, raw)?;
            tagged(Scope::Ids, &tag)?;
            to_json(&ids::lease(env, &tag, body, owner).await?)
        }
        // POST /v1/segment/{tag}/lease/return
        "segmentReturn" => {
            let (tag, body): (String, ReturnBody) = args(op, raw)?;
            tagged(Scope::Ids, &tag)?;
            to_json(&ids::take_back(env, &tag, body, owner).await?)
        }
        // GET /v1/snowflake/{id}
        "decode" => {
            let (id,): (String,) = args(op, raw)?;
            may(Scope::Ids, None)?;
            to_json(&views::decoded(config.layout, &id)?)
        }
        // POST /v1/tags/{tag}/reveal
        "reveal" => {
            let (tag, id): (String, serde_json::Value) = args(op, raw)?;
            tagged(Scope::Admin, &tag)?;
            to_json(&tags::revealed(env, &tag, &id).await?)
        }
        // POST /v1/workers/lease
        "workerLease" => {
            let (body,): (WorkerLeaseBody,) = args(op, raw)?;
            may(Scope::Registry, None)?;
            to_json(&workers::lease_for(env, &config, owner, body).await?)
        }
        // POST /v1/workers/{id}/renew
        "workerRenew" => {
            let (id, body): (u32, ClaimBody) = args(op, raw)?;
            may(Scope::Registry, None)?;
            to_json(&workers::renew_for(env, &config, owner, id, body).await?)
        }
        // DELETE /v1/workers/{id}
        "workerRelease" => {
            let (id, body): (u32, ClaimBody) = args(op, raw)?;
            may(Scope::Registry, None)?;
            to_json(&workers::release_for(env, owner, id, body).await?)
        }
        _ => Err(ApiError::not_found(format!(
            "operation: expected one of the binding's (worker/entry.mjs), found {op:?}"
        ))),
    }
}

/// An error as the binding answers it: the HTTP body's `error`, the status
/// the route would have answered, and `Retry-After` in ms (the HTTP error's
/// types, so that the .wasm carries one serializer of them).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Refusal {
    error: ErrorDetail,
    status: u16,
    retry_after_ms: Option<u64>,
}

fn error_json(e: &ApiError) -> String {
    let retry_s = e.retry_after_s.or_else(|| (e.status() == 503).then_some(1));
    let refusal = Refusal {
        error: ErrorBody::new(e.code, e.message.as_str()).error,
        status: e.status(),
        retry_after_ms: retry_s.map(|s| s * 1000),
    };
    serde_json::to_string(&refusal).unwrap_or_default()
}
