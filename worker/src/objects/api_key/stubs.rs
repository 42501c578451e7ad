//! What callers use of a key's own object.

use edgeleaf_rules::wire::keys::{ApiKeyRequest, Lookup};
use worker::Env;

use crate::api::ApiResult;
use crate::objects::call::{call, Store};

/// The record of key `id`, from its own object, if it has one.
pub async fn lookup(env: &Env, id: &str) -> ApiResult<Lookup> {
    let id = id.to_owned();
    call(
        env,
        Store::Key(&id),
        &ApiKeyRequest::Lookup { id: id.clone() },
    )
    .await
}

pub async fn key_object(env: &Env, id: &str, request: ApiKeyRequest) -> ApiResult<Lookup> {
    call(env, Store::Key(id), &request).await
}
