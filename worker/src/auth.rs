//! Who is calling: the bearer token checked against the root tokens
//! (`ADMIN_TOKEN`: every scope; `CLIENT_TOKEN`: `ids`) and the API keys,
//! each looked up in its own Durable Object (`ApiKey`) through this
//! isolate's cache (the core's `KeyCache`: a revocation bites everywhere
//! within `KEY_CACHE_MS`; an unknown key ID never pushes a known key out).
//! A token that is not of a key's exact shape is never looked up. What a
//! credential may do is the core's rule (`Access::permits`).

use std::cell::{Cell, RefCell};

use edgeleaf::{code::ErrorCode, secret::constant_time_eq};
use edgeleaf_rules::{
    access::check_token, access::token_key_id, access::Access, access::KeyCache, access::KeyLookup,
    access::KeyRecord, access::Scope,
};
use worker::{Env, Headers};

use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::config::Config;
use crate::objects::api_key::stubs as api_key;
use crate::objects::key_store::stubs as key_store;

thread_local! {
    static KEYS: RefCell<KeyCache> = RefCell::new(KeyCache::default());
    static CALLS: Cell<KeyCalls> = const { Cell::new(KeyCalls { index: 0, key: 0 }) };
    /// Keys this isolate revoked: a lookup sent before one is not cached.
    static REVOCATIONS: Cell<u64> = const { Cell::new(0) };
    /// Whether the index may still hold keys from before each key had its
    /// own object (until it answers that it holds none).
    static LEGACY: Cell<bool> = const { Cell::new(true) };
}

/// The calls this isolate made to look keys up, by the object called: the
/// index of keys (`KeyStore`) or a key's own object. `/metrics` shows them.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyCalls {
    pub index: u64,
    pub key: u64,
}

/// This isolate's key lookups so far.
pub fn key_calls() -> KeyCalls {
    CALLS.with(Cell::get)
}

fn count_call(f: impl FnOnce(&mut KeyCalls)) {
    CALLS.with(|c| {
        let mut calls = c.get();
        f(&mut calls);
        c.set(calls);
    });
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    pub access: Access,
    /// Who holds worker IDs leased by this caller: a key's ID, `root`,
    /// `client`, or `anonymous`.
    pub owner: String,
}

fn bearer(headers: &Headers) -> ApiResult<Option<String>> {
    let Some(given) = headers.get("Authorization").ok().flatten() else {
        return Ok(None);
    };
    match given.strip_prefix("Bearer ") {
        Some(token) if !token.is_empty() => Ok(Some(token.to_owned())),
        _ => Err(ApiError::new(
            ErrorCode::Forbidden,
            "authorization: expected \"Bearer <token>\", found another scheme",
        )),
    }
}

/// The caller of a route that needs `need` (naming `tag` if it names one),
/// refused with 401 (no token where one is needed) or 403.
pub async fn authorize(
    env: &Env,
    config: &Config,
    headers: &Headers,
    need: Scope,
    tag: Option<&str>,
) -> ApiResult<Caller> {
    let caller = identify(env, config, bearer(headers)?, need).await?;
    caller.access.permits(need, tag)?;
    Ok(caller)
}

async fn identify(
    env: &Env,
    config: &Config,
    token: Option<String>,
    need: Scope,
) -> ApiResult<Caller> {
    let root = |t: &str, expected: &Option<String>| {
        expected
            .as_deref()
            .is_some_and(|e| constant_time_eq(t.as_bytes(), e.as_bytes()))
    };
    let Some(token) = token else {
        // The ID routes are open while no CLIENT_TOKEN is set (as before
        // keys existed); every other route needs a credential.
        if need == Scope::Ids && config.client_token.is_none() {
            return Ok(Caller {
                access: Access::only(Scope::Ids),
                owner: "anonymous".into(),
            });
        }
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            format!("authorization: expected a Bearer token with the \"{need}\" scope, found none"),
        ));
    };
    if root(&token, &config.admin_token) {
        return Ok(Caller {
            access: Access::root(),
            owner: "root".into(),
        });
    }
    if root(&token, &config.client_token) {
        return Ok(Caller {
            access: Access::only(Scope::Ids),
            owner: "client".into(),
        });
    }
    let Some(id) = token_key_id(&token) else {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "authorization: expected ADMIN_TOKEN, CLIENT_TOKEN or an API key (elk_…), found another token",
        ));
    };
    let record = key_record(env, id).await?;
    let access = check_token(record.as_ref(), &token).inspect_err(|_| {
        // An audit line for `wrangler tail` (and the tests' captured output):
        // the key's ID, which is public (listed, in URLs), never the token.
        let why = if record.is_some() {
            "a wrong secret"
        } else {
            "an unknown or revoked key"
        };
        worker::console_warn!("auth: refused API key {id}: {why}");
    })?;
    Ok(Caller {
        access,
        owner: id.to_owned(),
    })
}

/// The record of key `id`: cached, or from its own object (and while keys
/// from before each key had one may remain, the index). Requests do not
/// share a lookup under way: workerd refuses I/O on behalf of another
/// request.
async fn key_record(env: &Env, id: &str) -> ApiResult<Option<KeyRecord>> {
    let now = now_ms();
    let cached = KEYS.with(|k| match k.borrow().get(id, now) {
        KeyLookup::Cached(record) => Some(record.cloned()),
        KeyLookup::Fetch => None,
    });
    if let Some(record) = cached {
        return Ok(record);
    }
    let revocations = REVOCATIONS.with(Cell::get);
    count_call(|c| c.key += 1);
    let mut key = api_key::lookup(env, id).await?.key;
    if key.is_none() && LEGACY.with(Cell::get) {
        count_call(|c| c.index += 1);
        let adopted = key_store::adopt(env, id).await?;
        if !adopted.pending {
            LEGACY.with(|l| l.set(false));
        }
        key = adopted.key;
    }
    let record = key.map(|k| k.record()).transpose()?;
    // Not kept if this isolate revoked a key meanwhile: the answer may be
    // from before the revocation.
    if REVOCATIONS.with(Cell::get) == revocations {
        KEYS.with(|k| k.borrow_mut().put(id, record.clone(), now));
    }
    Ok(record)
}

/// Drops this isolate's cached lookup of a key it just revoked (the others'
/// expire within `KEY_CACHE_MS`); a lookup under way is not kept.
pub fn forget_key(id: &str) {
    KEYS.with(|k| k.borrow_mut().forget(id));
    REVOCATIONS.with(|r| r.set(r.get() + 1));
}
