//! API keys: made here (the token from the platform's CSPRNG, answered
//! once), kept by the `KeyStore` as a hash.

use edgeleaf_rules::access::KeySpec;
use edgeleaf_rules::wire::keys::{CreatedKey, KeyBody, NewKey};
use worker::Response;

use super::Cx;
use crate::api::{json, ApiResult};
use crate::auth;
use crate::clock;
use crate::objects::key_store::stubs as key_store;

/// `POST /v1/keys`: the core checks the request and makes the token; the
/// store keeps its hash; the token is answered once.
pub async fn create(cx: Cx) -> ApiResult<Response> {
    let b: KeyBody = cx.body().await?;
    let spec = KeySpec::new(
        &b.name,
        b.scopes.iter().map(String::as_str),
        b.tags.as_deref(),
    )?;
    let (id, token) = edgeleaf_rules::access::new_key(&clock::random_bytes()?);
    let hash = edgeleaf_rules::access::token_hash(&token);
    let key = key_store::create(&cx.env, NewKey::new(id, spec, hash)).await?;
    json(201, &CreatedKey { key, token })
}

/// `GET /v1/keys`.
pub async fn list(cx: Cx) -> ApiResult<Response> {
    json(200, &key_store::list(&cx.env).await?)
}

/// `DELETE /v1/keys/{id}`: revoked here at once, elsewhere within
/// `KEY_CACHE_MS`.
pub async fn revoke(cx: Cx) -> ApiResult<Response> {
    let id = cx.arg();
    let answer = key_store::revoke(&cx.env, id).await?;
    auth::forget_key(id);
    json(200, &answer)
}
