//! The HTTP API: one table of routes, each naming what it needs of its
//! caller and its handler; the handlers, by resource, in `routes/`. Each
//! handler takes one argument, [`Cx`]. Adding a route: a row here and its
//! handler (and its entry in `worker/openapi.yaml`).

mod floor;
pub(crate) mod ids;
mod keys;
pub(crate) mod tags;
pub(crate) mod views;
pub(crate) mod workers;

pub use tags::{ListQuery, MAX_READ_PER_PAGE};

use edgeleaf::{code::ErrorCode, name::check_tag};
use edgeleaf_rules::{access::Access, access::Scope, wire::api::percent_decoded};
use futures::future::{FutureExt, LocalBoxFuture};
use serde::de::DeserializeOwned;
use worker::{Context, Env, Method, Response};

use crate::api::{checked_count, ApiError, ApiResult, MAX_IDS_PER_REQUEST};
use crate::auth::{self, Caller};
use crate::config::Config;
use crate::incoming::Incoming;
use crate::scope;

/// What a route needs before its handler runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing, not even the settings: it answers even when a setting is
    /// invalid.
    Static,
    /// The settings, and no credential.
    Open,
    /// A credential with this scope; a key's tag limit applies to the
    /// route's `{tag}`, and to what a view shows (`Access::sees_tag`).
    Scope(Scope),
    /// The scope, for a view of what belongs to no tag (the worker-ID
    /// registry): every tenant's, so no key limited to some tags
    /// (`Access::sees_fleet`). Views that list tags filter them instead.
    Fleet(Scope),
}

const STATIC: Need = Need::Static;
const OPEN: Need = Need::Open;
const IDS: Need = Need::Scope(Scope::Ids);
const REGISTRY: Need = Need::Scope(Scope::Registry);
const MONITOR: Need = Need::Scope(Scope::Monitor);
const ADMIN: Need = Need::Scope(Scope::Admin);
const FLEET: Need = Need::Fleet(Scope::Monitor);

/// A handler: an `async fn(Cx) -> ApiResult<Response>`, boxed by `route!`.
pub type Handler = fn(Cx) -> LocalBoxFuture<'static, ApiResult<Response>>;

pub struct Route {
    pub method: Method,
    /// `/`-separated; `{name}` matches one non-empty segment. Where two
    /// patterns match a path, the earlier one wins.
    pub path: &'static str,
    pub need: Need,
    pub handler: Handler,
}

macro_rules! route {
    ($method:ident $path:literal, $need:expr, $handler:path) => {
        Route {
            method: Method::$method,
            path: $path,
            need: $need,
            handler: |cx| $handler(cx).boxed_local(),
        }
    };
}

/// Every route of the service, once. `worker/openapi.yaml` documents exactly
/// these (checked by tests/service/service.test.mjs through `/v1/health`).
#[rustfmt::skip]
pub const ROUTES: &[Route] = &[
    route!(Get    "/",                        STATIC,   views::dashboard),
    route!(Get    "/index.html",              STATIC,   views::dashboard),
    route!(Get    "/assets/uplot.js",         STATIC,   views::uplot_js),
    route!(Get    "/assets/uplot.css",        STATIC,   views::uplot_css),
    route!(Get    "/v1/ping",                 STATIC,   views::ping),
    route!(Get    "/v1/health",               OPEN,     views::health),
    route!(Get    "/api/segment/get/{tag}",   IDS,      ids::segment_text),
    route!(Get    "/api/snowflake/get/{tag}", IDS,      ids::snowflake_text),
    route!(Get    "/v1/segment/{tag}",        IDS,      ids::segment),
    route!(Post   "/v1/segment/{tag}/lease",  IDS,      ids::segment_lease),
    route!(Post   "/v1/segment/{tag}/lease/return", IDS, ids::segment_return),
    route!(Get    "/v1/snowflake",            IDS,      ids::snowflake),
    route!(Get    "/v1/snowflake/{id}",       IDS,      views::decode),
    route!(Get    "/v1/workers/events",       FLEET,    workers::events),
    route!(Post   "/v1/workers/lease",        REGISTRY, workers::lease),
    route!(Post   "/v1/workers/{id}/renew",   REGISTRY, workers::renew),
    route!(Delete "/v1/workers/{id}",         REGISTRY, workers::release),
    route!(Post   "/v1/workers/{id}/evict",   ADMIN,    workers::evict),
    route!(Get    "/v1/workers",              FLEET,    workers::list),
    route!(Get    "/v1/tags",                 MONITOR,  tags::list),
    route!(Get    "/v1/tags/{tag}",           MONITOR,  tags::get),
    route!(Put    "/v1/tags/{tag}",           ADMIN,    tags::put),
    route!(Delete "/v1/tags/{tag}",           ADMIN,    tags::delete),
    route!(Post   "/v1/tags/{tag}/reveal",    ADMIN,    tags::reveal),
    route!(Get    "/v1/tags/{tag}/history",   MONITOR,  views::history),
    route!(Get    "/v1/tags/{tag}/allocators", MONITOR, tags::allocators),
    route!(Post   "/v1/tags/{tag}/allocators/{region}/retire", ADMIN, tags::retire_allocator),
    route!(Get    "/v1/fleet",                MONITOR,  views::fleet),
    route!(Get    "/v1/monitor",              MONITOR,  views::monitor),
    route!(Get    "/metrics",                 MONITOR,  views::metrics),
    route!(Post   "/v1/keys",                 ADMIN,    keys::create),
    route!(Get    "/v1/keys",                 ADMIN,    keys::list),
    route!(Delete "/v1/keys/{id}",            ADMIN,    keys::revoke),
];

/// What a handler gets: the request and everything known of it.
pub struct Cx {
    pub env: Env,
    pub ctx: Context,
    pub req: Incoming,
    /// The path's `{…}` segments, percent-decoded, in order.
    pub args: Vec<String>,
    /// The settings (read for every route but the `Static` ones).
    config: Option<Config>,
    /// The authenticated caller (of every route that needs a scope).
    caller: Option<Caller>,
}

impl Cx {
    /// The path's first `{…}` segment.
    pub fn arg(&self) -> &str {
        self.args.first().map_or("", String::as_str)
    }

    /// The `{tag}`, checked (the path segment percent-decoded: `a%3Ab` is
    /// the tag `a:b`).
    pub fn tag(&self) -> ApiResult<String> {
        check_tag(self.arg())?;
        Ok(self.arg().to_owned())
    }

    /// The `{id}` of a worker ID.
    pub fn worker_id(&self) -> ApiResult<u32> {
        let id = self.arg();
        id.parse().map_err(|_| {
            ApiError::new(
                ErrorCode::OutOfRange,
                format!("worker id: expected a whole number, found {id:?}"),
            )
        })
    }

    /// `?count=N`, 1..=1000 (default 1).
    pub fn count(&self) -> ApiResult<usize> {
        let Some((_, raw)) = self.req.url().query_pairs().find(|(k, _)| k == "count") else {
            return Ok(1);
        };
        let n: u64 = raw.parse().map_err(|_| {
            ApiError::new(
                ErrorCode::OutOfRange,
                format!("count: expected 1..={MAX_IDS_PER_REQUEST}, found {raw:?}"),
            )
        })?;
        checked_count(n)
    }

    /// The JSON body (at most `MAX_BODY_BYTES`; empty reads as `{}`).
    pub async fn body<T: DeserializeOwned>(&self) -> ApiResult<T> {
        crate::body::body(&self.req).await
    }

    /// The settings.
    pub fn config(&self) -> ApiResult<&Config> {
        self.config
            .as_ref()
            .ok_or_else(|| ApiError::new(ErrorCode::ConfigInvalid, "configuration: not read"))
    }

    /// What the caller may see (routes that need a scope always have a
    /// caller; without one, nothing is shown).
    pub fn access(&self) -> ApiResult<&Access> {
        self.caller.as_ref().map(|c| &c.access).ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unauthorized,
                "authorization: expected a checked credential, found none",
            )
        })
    }

    /// Who asks: the authenticated caller's name (a key's ID, `root`,
    /// `client`, or `anonymous`).
    pub fn owner(&self) -> &str {
        self.caller
            .as_ref()
            .map_or("anonymous", |c| c.owner.as_str())
    }
}

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

/// The methods of the routes at `pattern`.
fn methods(pattern: &str) -> Vec<String> {
    ROUTES
        .iter()
        .filter(|r| r.path == pattern)
        .map(|r| r.method.to_string())
        .collect()
}

/// Finds the request's route, checks what it needs and runs its handler,
/// all within the request's one budget (`scope::RequestScope`).
pub async fn handle(req: Incoming, env: Env, ctx: Context) -> ApiResult<Response> {
    let scope = scope::RequestScope::for_request(&req, &env);
    let cost = scope.cost();
    let mut handled = scope.run(route(req, env, ctx)).await;
    if let (Some(cost), Ok(res)) = (cost, handled.as_mut()) {
        // TESTS ONLY (`Config::test_count_calls`, loopback hosts only).
        let headers = res.headers_mut();
        let _ = headers.set(scope::TEST_CALLS_HEADER, &cost.get().calls.to_string());
        let _ = headers.set(scope::TEST_COST_HEADER, &cost.get().header());
        let _ = headers.set(scope::TEST_COST_TOTAL_HEADER, &scope::total_cost().header());
    }
    handled
}

async fn route(req: Incoming, env: Env, ctx: Context) -> ApiResult<Response> {
    let path = req.path().to_owned();
    // TESTS ONLY: the bench's same-bytes floor (loopback and a test setting).
    if path == floor::PATH {
        if let Some(res) = floor::answer(&req, &env) {
            return res;
        }
    }
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
    if method == Some(Method::Options) {
        return preflight(&req, &env, pattern);
    }
    let Some(route) = ROUTES
        .iter()
        .find(|r| r.path == pattern && Some(&r.method) == method.as_ref())
    else {
        let allowed = methods(pattern);
        let e = ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!(
                "{path}: expected {}, found {}",
                allowed.join(" or "),
                req.inner().method()
            ),
        );
        let mut res = e.response();
        let _ = res.headers_mut().set("Allow", &allowed.join(", "));
        return Ok(res);
    };
    let args: Vec<String> = args.into_iter().map(percent_decoded).collect();
    let mut cx = Cx {
        env,
        ctx,
        req,
        args,
        config: None,
        caller: None,
    };
    if route.need != Need::Static {
        let config = Config::cached(&cx.env)?;
        cx.caller = match route.need {
            Need::Static | Need::Open => None,
            Need::Scope(scope) => {
                let tag = route.path.contains("{tag}").then(|| cx.arg());
                let headers = cx.req.headers();
                Some(auth::authorize(&cx.env, &config, headers, scope, tag).await?)
            }
            Need::Fleet(scope) => {
                let headers = cx.req.headers();
                let caller = auth::authorize(&cx.env, &config, headers, scope, None).await?;
                caller.access.permits_fleet_view(scope)?;
                Some(caller)
            }
        };
        cx.config = Some(config);
    }
    (route.handler)(cx).await
}

/// A CORS preflight: the route's methods, to an origin in `CORS_ORIGINS`.
fn preflight(req: &Incoming, env: &Env, pattern: &str) -> ApiResult<Response> {
    let origin = req
        .headers()
        .get("Origin")
        .ok()
        .flatten()
        .unwrap_or_default();
    if !Config::cached(env)?.cors_allows(&origin) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("cors: expected an Origin listed in CORS_ORIGINS, found {origin:?}"),
        ));
    }
    let mut res = Response::empty()?.with_status(204);
    let headers = res.headers_mut();
    headers.set("Access-Control-Allow-Methods", &methods(pattern).join(", "))?;
    headers.set(
        "Access-Control-Allow-Headers",
        "Authorization, Content-Type",
    )?;
    headers.set("Access-Control-Max-Age", "600")?;
    Ok(res)
}
