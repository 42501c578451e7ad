//! edgeleaf's service: Leaf's server rebuilt as a Cloudflare Worker. Isolates
//! serve IDs from memory (`isolate`); Durable Objects are the store
//! (`objects`, one folder each: its stubs, its schema, its handlers) — one
//! `TagStore` per `biz_tag`, a `Catalog` of tags, the `WorkerRegistry` of
//! snowflake worker IDs, the `SnowflakeMinter`s, the index of API keys
//! (`KeyStore`), one `ApiKey` per key, and a `RegionalAllocator` per tag
//! and region that serves its region's isolates from blocks of the tag's
//! object. Each request's handling runs in one `scope` (its budget, its
//! region). The HTTP API (`routes`) is documented in `worker/openapi.yaml`;
//! Workers of the same account call the ID operations over RPC through a
//! service binding (`binding`, entered by worker/entry.mjs).

mod api;
mod auth;
mod binding;
mod body;
mod clock;
mod config;
mod fleet;
mod history;
mod incoming;
mod isolate;
mod metrics;
mod monitor;
mod objects;
mod routes;
mod scope;

use worker::worker_sys::web_sys;
use worker::{event, Context, Env, Response};

use incoming::Incoming;

use config::Config;

pub use objects::{
    ApiKey, Catalog, KeyStore, RegionalAllocator, SnowflakeMinter, TagStore, WorkerRegistry,
};

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, ctx: Context) -> worker::Result<Response> {
    let origin = req.headers().get("Origin").ok().flatten();
    let handled = match Incoming::new(req) {
        Ok(req) => routes::handle(req, env.clone(), ctx).await,
        Err(e) => Err(e),
    };
    let mut res = match handled {
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
        if Config::cached(&env).is_ok_and(|c| c.cors_allows(&origin)) {
            let _ = headers.set("Access-Control-Allow-Origin", &origin);
            let _ = headers.set("Access-Control-Expose-Headers", "Retry-After");
        }
        let _ = headers.append("Vary", "Origin");
    }
    Ok(res)
}
