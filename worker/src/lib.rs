//! edgeleaf's service: Leaf's server rebuilt as a Cloudflare Worker. Isolates
//! serve IDs from memory; Durable Objects are the store — one `TagStore` per
//! `biz_tag`, a `Catalog` of tags, and the `WorkerRegistry` of snowflake
//! worker IDs. The HTTP API is documented in `worker/openapi.yaml`.

mod api;
mod auth;
mod catalog;
mod clock;
mod config;
mod history;
mod isolate;
mod key_store;
mod metrics;
mod minter_store;
mod monitor;
mod registry_store;
mod stores;
mod tag_store;

use std::cell::RefCell;

use edgeleaf::{code::ErrorCode, name::check_tag, registry::Lease};
use edgeleaf_rules::{access::Access, access::KeySpec, access::Scope};
use serde::Deserialize;
use serde_json::json;
use worker::{event, Context, Env, Method, Request, Response};

use api::{body, checked_count, json, ApiError, ApiResult, MAX_COUNT};
use auth::Caller;
use config::Config;
use registry_store::{
    ClaimBody, EvictRequest, Granted, LeaseRequest, RenewRequest, WorkerLeaseBody,
};
use stores::{call, Store};
use tag_store::{AllocateRequest, LeaseBody, SegmentLease, TagUpsert, TagView};

pub use catalog::Catalog;
pub use key_store::KeyStore;
pub use minter_store::SnowflakeMinter;
pub use registry_store::WorkerRegistry;
pub use tag_store::TagStore;

/// The dashboard page (`www/index.html`), served at `/`, and its chart
/// library (uPlot, from the npm packages `make test` / `make dev` install).
const DASHBOARD: &str = include_str!("../../www/index.html");
const UPLOT_JS: &str = include_str!("../../node_modules/uplot/dist/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../node_modules/uplot/dist/uPlot.min.css");

thread_local! {
    static CONFIG: RefCell<Option<Config>> = const { RefCell::new(None) };
}

/// The settings, read and checked once per isolate.
fn config(env: &Env) -> ApiResult<Config> {
    if let Some(c) = CONFIG.with(|c| c.borrow().clone()) {
        return Ok(c);
    }
    let c = Config::from_env(env)?;
    CONFIG.with(|cell| *cell.borrow_mut() = Some(c.clone()));
    Ok(c)
}

/// What a route needs of its caller.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    Open,
    Scope(Scope),
    /// The scope, for a view of what belongs to no tag (the worker-ID
    /// registry): every tenant's, so no key limited to some tags
    /// (`Access::sees_fleet`). Views that list tags filter them instead.
    Fleet(Scope),
}

const OPEN: Need = Need::Open;
const IDS: Need = Need::Scope(Scope::Ids);
const REGISTRY: Need = Need::Scope(Scope::Registry);
const MONITOR: Need = Need::Scope(Scope::Monitor);
const ADMIN: Need = Need::Scope(Scope::Admin);
const FLEET: Need = Need::Fleet(Scope::Monitor);

/// What a route does; `dispatch` runs it.
#[derive(Clone, Copy)]
enum Op {
    Dashboard,
    Asset(&'static str, &'static str),
    Ping,
    Health,
    SegmentText,
    SnowflakeText,
    SegmentIds,
    SegmentLease,
    SnowflakeIds,
    Decode,
    WorkerLease,
    WorkerRenew,
    WorkerRelease,
    WorkerEvict,
    Workers,
    Tags,
    TagGet,
    TagPut,
    TagDelete,
    TagReveal,
    Monitor,
    KeyCreate,
    KeyList,
    KeyRevoke,
    TagHistory,
    WorkerEvents,
    Metrics,
}

struct Route {
    method: Method,
    /// `/`-separated; `{name}` matches one non-empty segment. Where two
    /// patterns match a path, the earlier one wins.
    path: &'static str,
    /// The scope it needs; a key's tag limit applies to its `{tag}`, and to
    /// what a view shows (`Access::sees_tag`, `Access::sees_fleet`).
    need: Need,
    op: Op,
}

const fn route(method: Method, path: &'static str, need: Need, op: Op) -> Route {
    Route {
        method,
        path,
        need,
        op,
    }
}

/// Every route of the service, once. `worker/openapi.yaml` documents exactly
/// these (checked by tests/service/service.test.mjs through `/v1/health`).
#[rustfmt::skip]
const ROUTES: &[Route] = &[
    route(Method::Get,    "/",                          OPEN,     Op::Dashboard),
    route(Method::Get,    "/index.html",                OPEN,     Op::Dashboard),
    route(Method::Get,    "/assets/uplot.js",           OPEN,     Op::Asset(UPLOT_JS, "text/javascript; charset=utf-8")),
    route(Method::Get,    "/assets/uplot.css",          OPEN,     Op::Asset(UPLOT_CSS, "text/css; charset=utf-8")),
    route(Method::Get,    "/v1/ping",                   OPEN,     Op::Ping),
    route(Method::Get,    "/v1/health",                 OPEN,     Op::Health),
    route(Method::Get,    "/api/segment/get/{tag}",     IDS,      Op::SegmentText),
    route(Method::Get,    "/api/snowflake/get/{tag}",   IDS,      Op::SnowflakeText),
    route(Method::Get,    "/v1/segment/{tag}",          IDS,      Op::SegmentIds),
    route(Method::Post,   "/v1/segment/{tag}/lease",    IDS,      Op::SegmentLease),
    route(Method::Get,    "/v1/snowflake",              IDS,      Op::SnowflakeIds),
    route(Method::Get,    "/v1/snowflake/{id}",         IDS,      Op::Decode),
    route(Method::Get,    "/v1/workers/events",         FLEET,    Op::WorkerEvents),
    route(Method::Post,   "/v1/workers/lease",          REGISTRY, Op::WorkerLease),
    route(Method::Post,   "/v1/workers/{id}/renew",     REGISTRY, Op::WorkerRenew),
    route(Method::Delete, "/v1/workers/{id}",           REGISTRY, Op::WorkerRelease),
    route(Method::Post,   "/v1/workers/{id}/evict",     ADMIN,    Op::WorkerEvict),
    route(Method::Get,    "/v1/workers",                FLEET,    Op::Workers),
    route(Method::Get,    "/v1/tags",                   MONITOR,  Op::Tags),
    route(Method::Get,    "/v1/tags/{tag}",             MONITOR,  Op::TagGet),
    route(Method::Put,    "/v1/tags/{tag}",             ADMIN,    Op::TagPut),
    route(Method::Delete, "/v1/tags/{tag}",             ADMIN,    Op::TagDelete),
    route(Method::Post,   "/v1/tags/{tag}/reveal",      ADMIN,    Op::TagReveal),
    route(Method::Get,    "/v1/tags/{tag}/history",     MONITOR,  Op::TagHistory),
    route(Method::Get,    "/v1/monitor",                MONITOR,  Op::Monitor),
    route(Method::Get,    "/metrics",                   MONITOR,  Op::Metrics),
    route(Method::Post,   "/v1/keys",                   ADMIN,    Op::KeyCreate),
    route(Method::Get,    "/v1/keys",                   ADMIN,    Op::KeyList),
    route(Method::Delete, "/v1/keys/{id}",              ADMIN,    Op::KeyRevoke),
];

fn segments(path: &str) -> Vec<&str> {
    path.trim_matches('/').split('/').collect()
}

/// The path parameters if `pattern` matches `parts`.
fn captures<'a>(pattern: &str, parts: &[&'a str]) -> Option<Vec<&'a str>> {
    let pat = segments(pattern);
    if pat.len() != parts.len() {
        return None;
    }
    let mut args = Vec::new();
    for (p, part) in pat.iter().zip(parts) {
        if p.starts_with('{') {
            if part.is_empty() {
                return None;
            }
            args.push(*part);
        } else if p != part {
            return None;
        }
    }
    Some(args)
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> worker::Result<Response> {
    let origin = req.headers().get("Origin").ok().flatten();
    let mut res = match handle(req, &env, &ctx).await {
        Ok(res) => res,
        Err(e) => {
            isolate::count_error();
            e.response()
        }
    };
    let headers = res.headers_mut();
    // IDs, ranges and leases must never come from a cache: a kept answer
    // would hand the same ID out twice. Nothing else here is worth caching.
    let _ = headers.set("Cache-Control", "no-store");
    if let Some(origin) = origin {
        if config(&env).is_ok_and(|c| c.cors_allows(&origin)) {
            let _ = headers.set("Access-Control-Allow-Origin", &origin);
            let _ = headers.set("Access-Control-Expose-Headers", "Retry-After");
        }
        let _ = headers.append("Vary", "Origin");
    }
    Ok(res)
}

/// A CORS preflight: the route's methods, to an origin in `CORS_ORIGINS`.
fn preflight(req: &Request, env: &Env, pattern: &str) -> ApiResult<Response> {
    let origin = req
        .headers()
        .get("Origin")
        .ok()
        .flatten()
        .unwrap_or_default();
    if !config(env)?.cors_allows(&origin) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("cors: expected an Origin listed in CORS_ORIGINS, found {origin:?}"),
        ));
    }
    let methods: Vec<String> = ROUTES
        .iter()
        .filter(|r| r.path == pattern)
        .map(|r| r.method.to_string())
        .collect();
    let mut res = Response::empty()?.with_status(204);
    let headers = res.headers_mut();
    headers.set("Access-Control-Allow-Methods", &methods.join(", "))?;
    headers.set(
        "Access-Control-Allow-Headers",
        "Authorization, Content-Type",
    )?;
    headers.set("Access-Control-Max-Age", "600")?;
    Ok(res)
}

async fn handle(mut req: Request, env: &Env, ctx: &Context) -> ApiResult<Response> {
    let path = req.path();
    let parts = segments(&path);
    let Some((pattern, args)) = ROUTES
        .iter()
        .find_map(|r| captures(r.path, &parts).map(|args| (r.path, args)))
    else {
        return Err(ApiError::not_found(format!(
            "route: expected one of the documented paths (see /v1/health), found {path}"
        )));
    };
    let method = req.method();
    if method == Method::Options {
        return preflight(&req, env, pattern);
    }
    let Some(route) = ROUTES
        .iter()
        .find(|r| r.path == pattern && r.method == method)
    else {
        let allowed: Vec<String> = ROUTES
            .iter()
            .filter(|r| r.path == pattern)
            .map(|r| r.method.to_string())
            .collect();
        let e = ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{path}: expected {}, found {method}", allowed.join(" or ")),
        );
        let mut res = e.response();
        let _ = res.headers_mut().set("Allow", &allowed.join(", "));
        return Ok(res);
    };
    let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
    if matches!(route.op, Op::Ping | Op::Dashboard | Op::Asset(..)) {
        // Answered before the settings are read: they work even when a
        // setting is invalid.
        return dispatch(route.op, &args, &mut req, env, ctx, None, None).await;
    }
    let config = config(env)?;
    let caller = match route.need {
        Need::Open => None,
        Need::Scope(scope) => {
            let tag = route
                .path
                .contains("{tag}")
                .then(|| args.first().map(String::as_str))
                .flatten();
            Some(auth::authorize(env, &config, req.headers(), scope, tag).await?)
        }
        Need::Fleet(scope) => {
            let caller = auth::authorize(env, &config, req.headers(), scope, None).await?;
            caller.access.permits_fleet_view(scope)?;
            Some(caller)
        }
    };
    dispatch(
        route.op,
        &args,
        &mut req,
        env,
        ctx,
        Some(&config),
        caller.as_ref(),
    )
    .await
}

async fn dispatch(
    op: Op,
    args: &[String],
    req: &mut Request,
    env: &Env,
    ctx: &Context,
    config: Option<&Config>,
    caller: Option<&Caller>,
) -> ApiResult<Response> {
    let arg = || args.first().map_or("", String::as_str);
    let config =
        || config.ok_or_else(|| ApiError::new(ErrorCode::ConfigInvalid, "configuration: not read"));
    match op {
        Op::Ping => json(200, &json!({ "ok": true })),
        // The dashboard: a static page that talks to this API with the token
        // its user types in.
        Op::Dashboard => {
            let mut res = Response::ok(DASHBOARD)?;
            res.headers_mut()
                .set("Content-Type", "text/html; charset=utf-8")?;
            Ok(res)
        }
        Op::Asset(body, content_type) => {
            let mut res = Response::ok(body)?;
            res.headers_mut().set("Content-Type", content_type)?;
            Ok(res)
        }
        Op::Health => {
            let routes: Vec<String> = ROUTES
                .iter()
                .map(|r| format!("{} {}", r.method, r.path))
                .collect();
            json(
                200,
                &json!({ "ok": true, "layout": layout_json(config()?), "routes": routes }),
            )
        }
        Op::SegmentText => {
            let tag = tag_arg(arg())?;
            let id = isolate::segment_ids(env, ctx, &tag, 1).await?;
            text_id(id[0])
        }
        Op::SnowflakeText => {
            tag_arg(arg())?;
            let id = isolate::snowflake_ids(env, ctx, config()?, 1).await?;
            text_id(id[0])
        }
        Op::SegmentIds => {
            let tag = tag_arg(arg())?;
            let ids = isolate::segment_ids(env, ctx, &tag, count(&req.url()?)?).await?;
            ids_json(&ids)
        }
        Op::SegmentLease => {
            let tag = tag_arg(arg())?;
            let LeaseBody { step, request_id } = body(req).await?;
            let request = AllocateRequest {
                step,
                request_id,
                for_isolate: false,
                by: format!("lease:{}", caller.map_or("anonymous", |c| c.owner.as_str())),
            };
            let lease: SegmentLease = call(
                env,
                Store::Tag(&tag),
                Method::Post,
                "/allocate",
                Some(&request),
            )
            .await?;
            json(
                200,
                &json!({ "start": lease.start, "end": lease.end, "step": lease.step, "minStep": lease.min_step }),
            )
        }
        Op::SnowflakeIds => {
            let ids = isolate::snowflake_ids(env, ctx, config()?, count(&req.url()?)?).await?;
            ids_json(&ids)
        }
        Op::Decode => decode(config()?, arg()),
        Op::WorkerLease => {
            let WorkerLeaseBody {
                node_key,
                node_time,
                previous,
            } = body(req).await?;
            let request = LeaseRequest {
                node_key,
                node_time,
                previous,
                owner: owner(caller),
            };
            let granted: Granted =
                call(env, Store::Registry, Method::Post, "/lease", Some(&request)).await?;
            let mut answer = lease_json(config()?, &granted.lease);
            // Only the caller that leased ever sees the secret.
            answer["secret"] = json!(&*granted.secret.to_hex());
            json(200, &answer)
        }
        Op::WorkerRenew => {
            let claim: ClaimBody = body(req).await?;
            let request = RenewRequest::from_body(&owner(caller), worker_arg(arg())?, claim);
            let lease: Lease =
                call(env, Store::Registry, Method::Post, "/renew", Some(&request)).await?;
            json(200, &lease_json(config()?, &lease))
        }
        Op::WorkerRelease => {
            let claim: ClaimBody = body(req).await?;
            let request = RenewRequest::from_body(&owner(caller), worker_arg(arg())?, claim);
            let answer: serde_json::Value = call(
                env,
                Store::Registry,
                Method::Post,
                "/release",
                Some(&request),
            )
            .await?;
            json(200, &answer)
        }
        Op::WorkerEvict => {
            let request = EvictRequest {
                worker_id: worker_arg(arg())?,
            };
            let answer: serde_json::Value =
                call(env, Store::Registry, Method::Post, "/evict", Some(&request)).await?;
            json(200, &answer)
        }
        Op::Workers => {
            let answer: serde_json::Value =
                call(env, Store::Registry, Method::Get, "/list", None::<&()>).await?;
            json(200, &answer)
        }
        Op::Tags => list_tags(env, access(caller)?).await,
        Op::TagGet => {
            let tag = tag_arg(arg())?;
            let view: TagView =
                call(env, Store::Tag(&tag), Method::Get, "/tag", None::<&()>).await?;
            json(200, &view)
        }
        Op::TagPut => put_tag(env, config()?, &tag_arg(arg())?, req).await,
        Op::TagDelete => {
            let tag = tag_arg(arg())?;
            let view: TagView =
                call(env, Store::Tag(&tag), Method::Delete, "/tag", None::<&()>).await?;
            catalog(env, Method::Delete, &tag).await?;
            isolate::forget_tag(&tag);
            json(200, &json!({ "deleted": view }))
        }
        Op::TagReveal => {
            let tag = tag_arg(arg())?;
            let request: RevealBody = body(req).await?;
            let answer: serde_json::Value = call(
                env,
                Store::Tag(&tag),
                Method::Post,
                "/reveal",
                Some(&request),
            )
            .await?;
            json(200, &answer)
        }
        Op::Monitor => json(200, &monitor::monitor(access(caller)?)),
        Op::KeyCreate => create_key(env, req).await,
        Op::TagHistory => {
            let tag = tag_arg(arg())?;
            let minutes = history::minutes(&req.url()?)?;
            json(200, &history::answer(env, config()?, &tag, minutes).await?)
        }
        Op::WorkerEvents => {
            let answer: serde_json::Value =
                call(env, Store::Registry, Method::Get, "/events", None::<&()>).await?;
            json(200, &answer)
        }
        Op::Metrics => {
            let mut res = Response::ok(metrics::metrics(env, config()?, access(caller)?).await?)?;
            res.headers_mut()
                .set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")?;
            Ok(res)
        }
        Op::KeyList => {
            let answer: serde_json::Value =
                call(env, Store::Keys, Method::Get, "/list", None::<&()>).await?;
            json(200, &answer)
        }
        Op::KeyRevoke => {
            let answer: serde_json::Value = call(
                env,
                Store::Keys,
                Method::Post,
                "/revoke",
                Some(&json!({ "id": arg() })),
            )
            .await?;
            auth::forget_key(arg());
            json(200, &answer)
        }
    }
}

/// What the caller may see, for the handlers of routes that need a scope
/// (they always have a caller; without one, nothing is shown).
fn access(caller: Option<&Caller>) -> ApiResult<&Access> {
    caller.map(|c| &c.access).ok_or_else(|| {
        ApiError::new(
            ErrorCode::Unauthorized,
            "authorization: expected a checked credential, found none",
        )
    })
}

fn tag_arg(tag: &str) -> ApiResult<String> {
    // Tags only have URL-safe characters, so the path segment is the tag.
    check_tag(tag)?;
    Ok(tag.to_owned())
}

fn worker_arg(id: &str) -> ApiResult<u32> {
    id.parse().map_err(|_| {
        ApiError::new(
            ErrorCode::OutOfRange,
            format!("worker id: expected a whole number, found {id:?}"),
        )
    })
}

/// `?count=N`, 1..=1000 (default 1).
fn count(url: &worker::Url) -> ApiResult<usize> {
    let Some((_, raw)) = url.query_pairs().find(|(k, _)| k == "count") else {
        return Ok(1);
    };
    let n: u64 = raw.parse().map_err(|_| {
        ApiError::new(
            ErrorCode::OutOfRange,
            format!("count: expected 1..={MAX_COUNT}, found {raw:?}"),
        )
    })?;
    checked_count(n)
}

fn text_id(id: u64) -> ApiResult<Response> {
    let mut res = Response::ok(id.to_string())?;
    res.headers_mut()
        .set("Content-Type", "text/plain; charset=utf-8")?;
    Ok(res)
}

fn ids_json(ids: &[u64]) -> ApiResult<Response> {
    let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
    json(200, &json!({ "ids": ids }))
}

fn layout_json(config: &Config) -> serde_json::Value {
    let l = config.layout;
    json!({
        "timestampBits": l.timestamp_bits(), "workerBits": l.worker_bits(), "sequenceBits": l.sequence_bits(),
        "epoch": l.epoch_ms(), "unitMs": l.unit_ms(), "expiresAt": l.expires_at(),
    })
}

fn lease_json(config: &Config, lease: &Lease) -> serde_json::Value {
    json!({
        "workerId": lease.worker_id, "generation": lease.generation, "nodeKey": lease.node_key,
        "expiresAtMs": lease.expires_at_ms, "issueAfterMs": lease.issue_after_ms, "ttlMs": lease.ttl_ms,
        "layout": layout_json(config),
    })
}

/// Who leases, renews or releases: the authenticated caller's name (a
/// registry route always has one).
fn owner(caller: Option<&Caller>) -> String {
    caller.map_or_else(|| "anonymous".to_owned(), |c| c.owner.clone())
}

fn decode(config: &Config, raw: &str) -> ApiResult<Response> {
    let layout = config.layout;
    let id: u64 = raw
        .parse()
        .ok()
        .filter(|_| raw.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidId,
                format!(
                    "id: expected a decimal integer in 0..={}, found {raw:?}",
                    layout.max_id()
                ),
            )
        })?;
    let parts = layout.decompose(id)?;
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(parts.timestamp_ms as f64));
    json(
        200,
        &json!({
            "id": id.to_string(), "timestamp": parts.timestamp_ms,
            "date": String::from(date.to_iso_string()), "workerId": parts.worker_id, "sequence": parts.sequence,
        }),
    )
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TagPut {
    step: Option<u64>,
    max_id: Option<serde_json::Value>,
    description: Option<String>,
    monotonic: Option<bool>,
    /// `{"bits": 32..=63}` or `{"digits": 6..=18}`, at creation.
    opaque: Option<edgeleaf::opaque::OpaqueDomain>,
    /// The largest step granted: `step..=1,000,000`.
    max_step: Option<u64>,
}

/// `POST /v1/tags/{tag}/reveal`.
#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RevealBody {
    /// A decimal string (or a number below 2^53).
    id: serde_json::Value,
}

async fn put_tag(env: &Env, config: &Config, tag: &str, req: &mut Request) -> ApiResult<Response> {
    let put: TagPut = body(req).await?;
    let max_id = match put.max_id {
        None => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Number(n)) if n.is_u64() => Some(n.to_string()),
        Some(other) => {
            return Err(ApiError::new(
                ErrorCode::OutOfRange,
                format!("maxId: expected a decimal string, found {other}"),
            ));
        }
    };
    let upsert = TagUpsert {
        biz_tag: tag.to_owned(),
        step: put.step,
        max_id,
        description: put.description,
        monotonic: put.monotonic,
        opaque: put
            .opaque
            .map(edgeleaf::opaque::OpaqueDomain::validate)
            .transpose()?,
        max_step: put.max_step,
        default_step: config.default_step,
    };
    let view: TagView = call(env, Store::Tag(tag), Method::Put, "/tag", Some(&upsert)).await?;
    catalog(env, Method::Put, tag).await?;
    json(200, &view)
}

/// `POST /v1/keys` `{"name", "scopes", "tags"?}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyBody {
    name: String,
    scopes: Vec<String>,
    tags: Option<String>,
}

/// Makes a key: the core checks the request and makes the token from the
/// platform's CSPRNG; the store keeps its hash; the token is answered once.
async fn create_key(env: &Env, req: &mut Request) -> ApiResult<Response> {
    let b: KeyBody = body(req).await?;
    let spec = KeySpec::new(
        &b.name,
        b.scopes.iter().map(String::as_str),
        b.tags.as_deref(),
    )?;
    let (id, token) = edgeleaf_rules::access::new_key(&clock::random_bytes()?);
    let new = key_store::NewKey {
        id,
        name: spec.name,
        scopes: spec
            .access
            .scopes
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect(),
        tags: spec.access.tags.to_string(),
        hash: edgeleaf_rules::access::token_hash(&token),
    };
    let view: key_store::KeyView =
        call(env, Store::Keys, Method::Post, "/create", Some(&new)).await?;
    let mut answer =
        serde_json::to_value(&view).map_err(|e| ApiError::store_error(format!("key: {e}")))?;
    answer["token"] = json!(token);
    json(201, &answer)
}

/// Adds a tag to (PUT) or removes it from (DELETE) the catalog.
async fn catalog(env: &Env, method: Method, tag: &str) -> ApiResult<()> {
    let _: serde_json::Value = call(
        env,
        Store::Catalog,
        method,
        "/",
        Some(&json!({ "bizTag": tag })),
    )
    .await?;
    Ok(())
}

/// The tags `access` may see (a key limited to some tags sees only those).
async fn list_tags(env: &Env, access: &Access) -> ApiResult<Response> {
    #[derive(Deserialize)]
    struct Tags {
        tags: Vec<String>,
    }
    let list: Tags = call(env, Store::Catalog, Method::Get, "/", None::<&()>).await?;
    let views = futures::future::join_all(
        list.tags
            .iter()
            .filter(|t| access.sees_tag(t))
            .map(|t| call::<TagView>(env, Store::Tag(t), Method::Get, "/tag", None::<&()>)),
    )
    .await;
    let tags: Vec<TagView> = views.into_iter().filter_map(Result::ok).collect();
    json(200, &json!({ "tags": tags }))
}
