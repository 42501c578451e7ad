//! The Worker's side and the objects' side of every call to a Durable
//! Object: one typed request (each object's own enum, as JSON) to one path,
//! and a JSON answer; an error answer comes back as the same `ApiError` the
//! object made.
//!
//! Every request answers within a bound: [`RequestScope::run`] gives the
//! handling of each request one budget, the core's `WaitBudget` (sized by
//! the core), and every call to an object (`call`, the only way the Worker
//! reaches one) is raced against what is left of it; so is every wait of
//! the isolate's loop (`isolate::run`). A call that fails is made again or
//! not as the core's `after_call_failed` says (an overloaded object never
//! is). Out of budget, or given up, the request answers 503
//! `store_unavailable` with `Retry-After`. A call abandoned at its deadline
//! may still be carried out by its object; each object request is one the
//! service can afford to lose the answer of (a range or a worker ID left
//! unused until its lease lapses, never an ID handed out twice).

use std::cell::{Cell, OnceCell, RefCell};
use std::future::Future;
use std::rc::Rc;

use edgeleaf::code::ErrorCode;
use edgeleaf::region::{colo_region, Region};
use edgeleaf::wait::{after_call_failed, AfterFailure, CallFailure, WaitBudget, RETRY_AFTER_MS};
use edgeleaf_rules::wire::{allocator::AllocatorMiss, StoreRequest};
use futures::future::{self, Either, FutureExt};
use serde::{de::DeserializeOwned, Serialize};
use wasm_bindgen::JsValue;
use worker::worker_sys::web_sys;
use worker::{Env, Headers, Method, Request, RequestInit, Response, SqlStorage, SqlStorageValue};

use crate::api::{body_within, ApiError, ApiResult, MAX_STORE_BODY_BYTES};
use crate::clock::{now_ms, random_u64, sleep_ms};
use crate::config::Config;
use crate::incoming::Incoming;

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

/// The header that carries a test's object delay to the object (only ever
/// set by `send`, for a request with a `RequestScope` that has one).
const TEST_DELAY_HEADER: &str = "Edgeleaf-Test-Delay-Ms";

/// The header that carries a test's fault to an object that calls others on
/// the request's behalf (a regional allocator calling its tag's root): only
/// ever set by `send`, for a request whose `RequestScope` has one.
const TEST_FAULT_HEADER: &str = "Edgeleaf-Test-Fault";

/// A fault `TEST_FAULT_HEADER` names (its value: faults, comma-separated;
/// an object honours each only with its own `Config::test_*` setting).
const ROOT_UNREACHABLE: &str = "root-unreachable";

/// The other: the object's calls to the root are slow
/// (`Config::test_root_delay_ms`).
const ROOT_DELAY: &str = "root-delay";

/// TESTS ONLY: the header that sets a request's colo (honoured on a
/// loopback host with `TEST_COLO_HEADER = "1"`, never otherwise).
pub const TEST_COLO_HEADER: &str = "Edgeleaf-Test-Colo";

/// What one request to the Worker may still wait, shared by everything its
/// handling awaits.
pub struct RequestScope {
    budget: Cell<WaitBudget>,
    /// TESTS ONLY: how long each object it calls waits before answering
    /// (`Config::test_object_delay_ms`; 0 but on a loopback host).
    test_delay_ms: u64,
    /// The isolate's region (`isolate_region`; in tests the request's
    /// `Edgeleaf-Test-Colo` header), if the colo is a known one.
    region: Option<Region>,
    /// TESTS ONLY: every call to a tag's root object fails
    /// (`Config::test_root_unreachable`, loopback hosts only).
    root_unreachable: bool,
    /// TESTS ONLY: every call to a regional allocator fails
    /// (`Config::test_allocators_unreachable`, loopback hosts only).
    allocators_unreachable: bool,
    /// TESTS ONLY: how long each regional allocator waits before answering
    /// (`Config::test_allocator_delay_ms`; 0 but on a loopback host).
    allocator_delay_ms: u64,
    /// TESTS ONLY: how long each tag's root waits before answering this
    /// scope's calls (an object's scope: `Config::test_root_delay_ms`).
    root_delay_ms: u64,
    /// TESTS ONLY: the objects this scope calls on its behalf delay their
    /// calls to the root (`Config::test_root_delay_ms`, loopback hosts only).
    root_delay: bool,
}

thread_local! {
    /// The scope of the request being polled (`RequestScope::run`).
    static CURRENT: RefCell<Option<Rc<RequestScope>>> = const { RefCell::new(None) };
}

impl RequestScope {
    /// The scope of `req`, which starts now: a fresh budget of the core's
    /// size; the test delay only for a URL on a loopback host (see
    /// `Config::test_object_delay_ms`: never the case of a deployed Worker).
    pub fn for_request(req: &Incoming, env: &Env) -> RequestScope {
        // Test settings only on a loopback host (never a deployed Worker's).
        let test = Config::cached(env).ok().filter(|_| req.on_loopback());
        let test_delay_ms = test.as_ref().map_or(0, |c| c.test_object_delay_ms);
        let test_colo = test
            .as_ref()
            .filter(|c| c.test_colo_header)
            .and_then(|_| req.headers().get(TEST_COLO_HEADER).ok().flatten());
        let region = match test_colo {
            Some(colo) => colo_region(&colo),
            None => isolate_region(req),
        };
        RequestScope {
            budget: Cell::new(WaitBudget::for_request(now_ms())),
            test_delay_ms,
            region,
            root_unreachable: test.as_ref().is_some_and(|c| c.test_root_unreachable),
            allocators_unreachable: test.as_ref().is_some_and(|c| c.test_allocators_unreachable),
            allocator_delay_ms: test.as_ref().map_or(0, |c| c.test_allocator_delay_ms),
            root_delay_ms: 0,
            root_delay: test.is_some_and(|c| c.test_root_delay_ms > 0),
        }
    }

    /// The scope of an object's request that calls other objects on its
    /// caller's behalf (a regional allocator): the background budget (its
    /// handler narrows it to the caller's limit: `limit_budget`), and the
    /// caller's test faults (a header only `send` sets), each honoured only
    /// when the object's own config allows it too.
    pub fn for_object(req: &Request, env: &Env) -> RequestScope {
        let header = req.headers().get(TEST_FAULT_HEADER).ok().flatten();
        let faults: Vec<&str> = header
            .as_deref()
            .map_or(Vec::new(), |h| h.split(',').collect());
        let test = Config::cached(env).ok();
        let named = |fault: &str| faults.contains(&fault);
        RequestScope {
            budget: Cell::new(WaitBudget::for_background(now_ms())),
            test_delay_ms: 0,
            region: None,
            root_unreachable: named(ROOT_UNREACHABLE)
                && test.as_ref().is_some_and(|c| c.test_root_unreachable),
            allocators_unreachable: false,
            allocator_delay_ms: 0,
            root_delay_ms: test
                .as_ref()
                .filter(|_| named(ROOT_DELAY))
                .map_or(0, |c| c.test_root_delay_ms),
            root_delay: false,
        }
    }

    /// Runs `handling` (all of one request's) within this scope: whenever
    /// it is polled, `budget()` is this one. Requests interleave at every
    /// await, so the scope is set for each poll, not once.
    pub async fn run<T>(self, handling: impl Future<Output = T>) -> T {
        let scope = Rc::new(self);
        let mut handling = std::pin::pin!(handling);
        future::poll_fn(|cx| {
            let outer = CURRENT.with(|c| c.replace(Some(scope.clone())));
            let polled = handling.as_mut().poll(cx);
            CURRENT.with(|c| *c.borrow_mut() = outer);
            polled
        })
        .await
    }
}

/// The budget of the request being handled; outside one (a call in
/// `waitUntil`, an object's own call to another: a minter's lease from the
/// registry, which a cut-off would leave granted and unusable), the core's
/// longer background budget, so that no wait is ever unbounded.
pub fn budget() -> Budget {
    Budget(CURRENT.with(|c| c.borrow().clone()).unwrap_or_else(|| {
        Rc::new(RequestScope {
            budget: Cell::new(WaitBudget::for_background(now_ms())),
            test_delay_ms: 0,
            region: None,
            root_unreachable: false,
            allocators_unreachable: false,
            allocator_delay_ms: 0,
            root_delay_ms: 0,
            root_delay: false,
        })
    }))
}

/// Narrows the budget of the request being handled to at most `ms` from
/// now (an object's request whose caller gives up sooner than the
/// object's own budget: a regional allocator's serve).
pub fn limit_budget(ms: u64) {
    let scope = budget().0;
    let now = now_ms();
    let left = scope.budget.get().remaining_ms(now);
    scope.budget.set(WaitBudget::new(now, left.min(ms)));
}

thread_local! {
    /// The isolate's region (`None` in it: a colo the table lacks), set by
    /// the first request whose `cf` has a colo; unset, `cf` is read again.
    static ISOLATE_REGION: OnceCell<Option<Region>> = const { OnceCell::new() };
}

/// The region of the isolate's colo (`request.cf.colo`), read from the first
/// request that has one and kept: an isolate runs in one data centre, and
/// each read of `cf` builds the object anew from the platform's JSON
/// (`incoming`). `None`: no request said, or a colo the table lacks.
fn isolate_region(req: &Incoming) -> Option<Region> {
    if let Some(region) = ISOLATE_REGION.with(|r| r.get().copied()) {
        return region;
    }
    let region = colo_region(&request_colo(req.inner())?);
    ISOLATE_REGION.with(|r| r.set(region).ok());
    region
}

/// `request.cf.colo`, if the platform set it (read without `Cf::colo`,
/// which panics when it is missing).
fn request_colo(req: &web_sys::Request) -> Option<String> {
    let cf = js_sys::Reflect::get(req, &JsValue::from_str("cf")).ok()?;
    if !cf.is_object() {
        return None;
    }
    js_sys::Reflect::get(&cf, &JsValue::from_str("colo"))
        .ok()?
        .as_string()
}

/// The region of the request being handled (`request.cf.colo` through the
/// core's colo → region table), if known; `None` outside a request.
pub fn region() -> Option<Region> {
    CURRENT.with(|c| c.borrow().as_ref().and_then(|s| s.region))
}

/// A request's budget, as its awaits draw on it.
#[derive(Clone)]
pub struct Budget(Rc<RequestScope>);

impl Budget {
    /// Ms it may still wait now.
    pub fn remaining_ms(&self) -> u64 {
        self.0.budget.get().remaining_ms(now_ms())
    }

    /// Before waiting `ms` more: `true` (and counted) if it fits.
    pub fn wait(&self, ms: u64) -> bool {
        let mut b = self.0.budget.get();
        let fits = b.wait(now_ms(), ms);
        self.0.budget.set(b);
        fits
    }

    /// The most the request may wait in all.
    pub fn max_ms(&self) -> u64 {
        self.0.budget.get().max_ms()
    }
}

/// For a call in the background of the request being handled
/// (`ctx.wait_until`): its region and test settings with the background
/// budget. Run the background call in it (`RequestScope::run`).
pub fn background() -> RequestScope {
    let scope = budget().0;
    RequestScope {
        budget: Cell::new(WaitBudget::for_background(now_ms())),
        test_delay_ms: scope.test_delay_ms,
        region: scope.region,
        root_unreachable: scope.root_unreachable,
        allocators_unreachable: scope.allocators_unreachable,
        allocator_delay_ms: scope.allocator_delay_ms,
        root_delay_ms: scope.root_delay_ms,
        root_delay: scope.root_delay,
    }
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
        let sent = send(env, store, text, &budget.0).boxed_local();
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
                let (how, miss) = match failure {
                    CallFailure::Overloaded => (
                        "overloaded: not called again".to_owned(),
                        AllocatorMiss::Overloaded,
                    ),
                    CallFailure::Retryable => (
                        format!("retryable, called {attempts} times"),
                        AllocatorMiss::Failed,
                    ),
                    CallFailure::Other => ("not retryable".to_owned(), AllocatorMiss::Failed),
                };
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
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(JsValue::from_str(text)));
    let req = Request::new_with_init(&format!("https://{binding}.internal/"), &init)?;
    let mut res = stub.fetch_with_request(req).await?;
    if res.status_code() >= 400 {
        return Ok(Err(ApiError::from_response(res).await));
    }
    Ok(res
        .text()
        .await
        .map_err(|e| ApiError::store_error(format!("store answer: {e}"))))
}

/// An object's `fetch`: `broken` (tables that could not be made) answers
/// every call; otherwise the request enum is decoded and `handle` answers it.
pub async fn serve<R: DeserializeOwned>(
    broken: Option<&ApiError>,
    req: &Request,
    handle: impl AsyncFnOnce(R) -> ApiResult<Response>,
) -> worker::Result<Response> {
    if let Some(e) = broken {
        return Ok(e.response());
    }
    // TESTS ONLY: an object made slow on purpose (the header is only ever
    // set by `send`, under `Config::test_object_delay_ms`).
    if let Some(ms) = req
        .headers()
        .get(TEST_DELAY_HEADER)
        .ok()
        .flatten()
        .and_then(|v| v.parse::<u64>().ok())
    {
        sleep_ms(ms.min(60_000)).await;
    }
    let result = match body_within::<R>(req.inner(), req.headers(), MAX_STORE_BODY_BYTES).await {
        Ok(request) => handle(request).await,
        Err(e) => Err(e),
    };
    Ok(result.unwrap_or_else(|e| e.response()))
}

/// Runs a Durable Object's `CREATE TABLE`s; the first failure is kept by the
/// object and answered to every call (it must not run on a half-made schema).
pub fn create_tables(sql: &SqlStorage, ddl: &[&str]) -> ApiResult<()> {
    for statement in ddl {
        sql.exec(statement, None)
            .map_err(|e| ApiError::store_error(format!("store: creating tables: {e}")))?;
    }
    Ok(())
}

/// Appends a row to a bounded log table (`seq INTEGER PRIMARY KEY`, then
/// `columns`) and drops all but its last `keep` rows. `seq` counts every row
/// ever appended, so the newest row's `seq` is the log's total.
pub fn append_bounded(
    sql: &SqlStorage,
    table: &str,
    columns: &[&str],
    values: Vec<SqlStorageValue>,
    keep: u64,
) -> ApiResult<()> {
    let marks = vec!["?"; columns.len()].join(", ");
    sql.exec(
        &format!(
            "INSERT INTO {table}(seq, {}) VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM {table}), {marks})",
            columns.join(", ")
        ),
        values,
    )?;
    sql.exec(
        &format!("DELETE FROM {table} WHERE seq <= (SELECT MAX(seq) FROM {table}) - ?"),
        vec![i64::try_from(keep).unwrap_or(i64::MAX).into()],
    )?;
    Ok(())
}

/// An integer column read back from SQLite: negative is a broken row, never
/// read as 0.
pub fn stored_u64(what: &str, v: i64) -> ApiResult<u64> {
    u64::try_from(v)
        .map_err(|_| ApiError::store_error(format!("store: {what}: expected 0 or more, found {v}")))
}
