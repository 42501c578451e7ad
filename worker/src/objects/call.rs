//! The Worker's side of every call to a Durable Object: one typed request
//! (each object's own enum, as JSON) to one path, and a JSON answer; an
//! error answer comes back as the same `ApiError` the object made (the
//! object's side is `serve`).
//!
//! Every call to an object (`call`, the only way the Worker reaches one) is
//! raced against what is left of the request's budget (`scope`). A call
//! that fails is made again or not as the core's `after_call_failed` says
//! (an overloaded object never is). Out of budget, or given up, the request
//! answers 503 `store_unavailable` with `Retry-After`. A call abandoned at
//! its deadline may still be carried out by its object; each object request
//! is one the service can afford to lose the answer of (a range or a worker
//! ID left unused until its lease lapses, never an ID handed out twice).

use edgeleaf::code::ErrorCode;
use edgeleaf::region::Region;
use edgeleaf::wait::{after_call_failed, AfterFailure, CallFailure, RETRY_AFTER_MS};
use edgeleaf_rules::wire::{allocator::AllocatorMiss, StoreRequest};
use futures::future::{self, Either, FutureExt};
use serde::{de::DeserializeOwned, Serialize};
use wasm_bindgen::JsValue;
use worker::{Env, Headers, Method, Request, RequestInit};

use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, random_u64, sleep_ms};
use crate::scope::{
    budget, RequestScope, ROOT_DELAY, ROOT_UNREACHABLE, TEST_COST_HEADER, TEST_COUNT_HEADER,
    TEST_DELAY_HEADER, TEST_FAULT_HEADER,
};

/// Which object to call.
#[derive(Clone, Copy)]
pub enum Store<'a> {
    /// The object that owns this tag.
    Tag(&'a str),
    /// The single catalog of tags.
    Catalog,
    /// The single worker-ID registry.
    Registry,
    /// Snowflake minter `i`, in its region (`None`: its object of before
    /// regions, which only its successor calls, to take its state over).
    Minter(u32, Option<Region>),
    /// The index of API keys.
    Keys,
    /// The own object of the API key with this ID.
    Key(&'a str),
    /// The regional allocator of this tag in this region (`"{tag}@{region}"`),
    /// created in the region (its location hint).
    Allocator(&'a str, Region),
}

/// Sends `request` (the object's request enum) to a Durable Object and
/// decodes its JSON answer, within what is left of the request's budget.
/// Only the object's own client functions call it.
pub async fn call<T: DeserializeOwned>(
    env: &Env,
    store: Store<'_>,
    request: &(impl Serialize + StoreRequest),
) -> ApiResult<T> {
    call_within(env, store, request, None)
        .await
        .map_err(|missed| missed.error)
}

/// An object's call that did not bring its answer: the error, and how.
pub struct Missed {
    pub error: ApiError,
    pub how: AllocatorMiss,
}

/// `call`, given at most `limit_ms` (if any) of what is left of the
/// request's budget (the rest is kept for another object: the tag's root,
/// when its region's allocator does not answer in time); a failure says
/// whether the object answered it or how the call missed.
pub async fn call_within<T: DeserializeOwned>(
    env: &Env,
    store: Store<'_>,
    request: &(impl Serialize + StoreRequest),
    limit_ms: Option<u64>,
) -> Result<T, Missed> {
    let answered = |error| Missed {
        error,
        how: AllocatorMiss::Answered,
    };
    let text = serde_json::to_string(request)
        .map_err(|e| answered(ApiError::store_error(format!("store request: {e}"))))?;
    let answer = send_within_budget(env, store, &text, request.repeatable(), limit_ms).await?;
    serde_json::from_str(&answer)
        .map_err(|e| answered(ApiError::store_error(format!("store answer: {e}"))))
}

/// The part of `call` that is the same for every request (not generic, so
/// compiled once): `text` to the object, raced against the request's
/// budget, made again as the core says when the platform fails it.
async fn send_within_budget(
    env: &Env,
    store: Store<'_>,
    text: &str,
    repeatable: bool,
    limit_ms: Option<u64>,
) -> Result<String, Missed> {
    let budget = budget();
    let deadline = limit_ms.map(|ms| now_ms().saturating_add(ms));
    let left = || {
        let left = budget.remaining_ms();
        deadline.map_or(left, |d| left.min(d.saturating_sub(now_ms())))
    };
    let late = || {
        let e = format!(
            "{}: expected an answer within what is left of the request's {} ms, found none",
            store.name(),
            budget.max_ms()
        );
        Missed {
            error: ApiError::unavailable(ErrorCode::StoreUnavailable, e, RETRY_AFTER_MS),
            how: AllocatorMiss::Late,
        }
    };
    let mut attempts = 0;
    loop {
        attempts += 1;
        let left_now = left();
        if left_now == 0 {
            return Err(late());
        }
        budget.scope().count_call();
        let sent = send(env, store, text, budget.scope()).boxed_local();
        let failed = match future::select(sent, sleep_ms(left_now).boxed_local()).await {
            Either::Left((Ok(Ok(answer)), _)) => return Ok(answer),
            Either::Left((Ok(Err(error)), _)) => {
                return Err(Missed {
                    error,
                    how: AllocatorMiss::Answered,
                })
            }
            Either::Left((Err(failed), _)) => failed,
            Either::Right(((), _)) => return Err(late()),
        };
        let failure = failure_kind(&failed);
        match after_call_failed(failure, repeatable, attempts, left(), random_u64()) {
            AfterFailure::Retry { after_ms } if budget.wait(after_ms) => sleep_ms(after_ms).await,
            AfterFailure::Retry { .. } => return Err(late()),
            AfterFailure::GiveUp { retry_after_ms } => {
                let how = match failure {
                    CallFailure::Overloaded => "overloaded: not called again".to_owned(),
                    CallFailure::Retryable => format!("retryable, called {attempts} times"),
                    CallFailure::Other => "not retryable".to_owned(),
                };
                let miss = AllocatorMiss::from(failure);
                let e = format!("{}: {failed} ({how})", store.name());
                return Err(Missed {
                    error: ApiError::unavailable(ErrorCode::StoreUnavailable, e, retry_after_ms),
                    how: miss,
                });
            }
        }
    }
}

/// How the platform failed a call: Cloudflare sets `overloaded` or
/// `retryable` on the JavaScript error a stub's `fetch` throws
/// (developers.cloudflare.com/durable-objects/best-practices/error-handling);
/// workers-rs 0.8.7 keeps that error as `UnknownJsError { original, .. }`.
fn failure_kind(e: &worker::Error) -> CallFailure {
    let original = match e {
        worker::Error::UnknownJsError { original, .. } | worker::Error::Internal(original) => {
            original
        }
        worker::Error::JsError(message) if message.contains("overloaded") => {
            return CallFailure::Overloaded
        }
        _ => return CallFailure::Other,
    };
    let flag = |name: &str| {
        js_sys::Reflect::get(original, &JsValue::from_str(name))
            .ok()
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    };
    if flag("overloaded") {
        CallFailure::Overloaded
    } else if flag("retryable") {
        CallFailure::Retryable
    } else {
        CallFailure::Other
    }
}

impl Store<'_> {
    /// The object's binding and name.
    fn binding(&self) -> (&'static str, String) {
        match self {
            Store::Tag(tag) => ("TAGS", (*tag).to_owned()),
            Store::Catalog => ("CATALOG", "catalog".to_owned()),
            Store::Registry => ("REGISTRY", "registry".to_owned()),
            Store::Keys => ("KEYS", "keys".to_owned()),
            Store::Key(id) => ("API_KEYS", (*id).to_owned()),
            Store::Minter(i, Some(r)) => ("MINTERS", format!("minter-{}-{i}", r.as_str())),
            Store::Minter(i, None) => ("MINTERS", format!("minter-{i}")),
            Store::Allocator(tag, region) => ("ALLOCATORS", format!("{tag}@{}", region.as_str())),
        }
    }

    /// How messages name it.
    fn name(&self) -> String {
        match self {
            Store::Tag(tag) => format!("tag {tag}"),
            Store::Catalog => "catalog".to_owned(),
            Store::Registry => "registry".to_owned(),
            Store::Keys => "key index".to_owned(),
            Store::Key(id) => format!("key {id}"),
            Store::Minter(i, _) => format!("minter {i}"),
            Store::Allocator(tag, region) => {
                format!("allocator of tag {tag} in {}", region.as_str())
            }
        }
    }
}

/// What an object that could not read the service's message (another
/// release's, during a deploy) is answered as: a 503 whose message says so.
const NOT_UNDERSTOOD: &str = "refused the service's message";

/// Whether `e` is an object's refusal of a message it cannot read (a new
/// request sent to the release before): the sender may fall back to what
/// that release understands.
pub fn not_understood(e: &ApiError) -> bool {
    e.code == ErrorCode::StoreUnavailable && e.message.contains(NOT_UNDERSTOOD)
}

/// One call: `text` to the object; the platform's failure (`Err`), or the
/// object's answer (its text, or the error it answered).
async fn send(
    env: &Env,
    store: Store<'_>,
    text: &str,
    scope: &RequestScope,
) -> worker::Result<ApiResult<String>> {
    let (binding, name) = store.binding();
    let unreachable = match store {
        Store::Tag(_) => scope.root_unreachable,
        Store::Allocator(..) => scope.allocators_unreachable,
        _ => false,
    };
    if unreachable {
        // TESTS ONLY (`Config::test_root_unreachable`,
        // `test_allocators_unreachable`): as the platform fails a call to an
        // object it cannot reach.
        return Err(worker::Error::RustError(format!(
            "{}: unreachable (test fault)",
            store.name()
        )));
    }
    let namespace = env.durable_object(binding)?;
    let stub = match store {
        // Created in its region (a hint the platform follows when the
        // object is first created; later calls find it where it is).
        Store::Allocator(_, region) | Store::Minter(_, Some(region)) => {
            namespace.get_by_name_with_location_hint(&name, region.as_str())?
        }
        _ => namespace.id_from_name(&name)?.get_stub()?,
    };
    let headers = Headers::new();
    headers.set("Content-Type", "application/json")?;
    let delay_ms = match store {
        Store::Allocator(..) => scope.test_delay_ms.max(scope.allocator_delay_ms),
        Store::Tag(_) => scope.test_delay_ms.max(scope.root_delay_ms),
        Store::Minter(i, _) => match scope.minter_delay {
            Some((slow, ms)) if slow == i => scope.test_delay_ms.max(ms),
            _ => scope.test_delay_ms,
        },
        _ => scope.test_delay_ms,
    };
    if delay_ms > 0 {
        headers.set(TEST_DELAY_HEADER, &delay_ms.to_string())?;
    }
    let faults: Vec<&str> = [
        (scope.root_unreachable, ROOT_UNREACHABLE),
        (scope.root_delay, ROOT_DELAY),
    ]
    .into_iter()
    .filter_map(|(on, fault)| on.then_some(fault))
    .collect();
    if !faults.is_empty() {
        headers.set(TEST_FAULT_HEADER, &faults.join(","))?;
    }
    if scope.counts() {
        headers.set(TEST_COUNT_HEADER, "1")?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(JsValue::from_str(text)));
    let req = Request::new_with_init(&format!("https://{binding}.internal/"), &init)?;
    let mut res = stub.fetch_with_request(req).await?;
    if scope.counts() {
        // TESTS ONLY: what the call made its object (and those it called) do.
        if let Ok(Some(cost)) = res.headers().get(TEST_COST_HEADER) {
            scope.count_answer(&cost);
        }
    }
    if res.status_code() >= 400 {
        let error = ApiError::from_response(res).await;
        if error.code == ErrorCode::InvalidJson {
            // The Worker wrote the message, so an object that cannot read it
            // runs another release (during a deploy): the service's trouble,
            // for a while, not the caller's (`not_understood` tells it).
            return Ok(Err(ApiError::unavailable(
                ErrorCode::StoreUnavailable,
                format!("{}: {NOT_UNDERSTOOD}: {}", store.name(), error.message),
                RETRY_AFTER_MS,
            )));
        }
        return Ok(Err(error));
    }
    Ok(res
        .text()
        .await
        .map_err(|e| ApiError::store_error(format!("store answer: {e}"))))
}
