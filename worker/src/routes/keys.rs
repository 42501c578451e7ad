//! API keys: made here (the token from the platform's CSPRNG, answered
//! once), kept by the `KeyStore` as a hash.

use edgeleaf_rules::access::KeySpec;
use serde::Deserialize;
use serde_json::json;
use worker::Response;

use super::Cx;
use crate::api::{json, ApiError, ApiResult};
use crate::key_store::{self, NewKey};
use crate::{auth, clock};

/// `POST /v1/keys` `{"name", "scopes", "tags"?}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyBody {
    name: String,
    scopes: Vec<String>,
    tags: Option<String>,
}

/// `POST /v1/keys`: the core checks the request and makes the token; the
/// store keeps its hash; the token is answered once.
pub async fn create(mut cx: Cx) -> ApiResult<Response> {
    let b: KeyBody = cx.body().await?;
    let spec = KeySpec::new(
        &b.name,
        b.scopes.iter().map(String::as_str),
        b.tags.as_deref(),
    )?;
    let (id, token) = edgeleaf_rules::access::new_key(&clock::random_bytes()?);
    let new = NewKey {
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
    let view = key_store::create(&cx.env, new).await?;
    let mut answer =
        serde_json::to_value(&view).map_err(|e| ApiError::store_error(format!("key: {e}")))?;
    answer["token"] = json!(token);
    json(201, &answer)
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
