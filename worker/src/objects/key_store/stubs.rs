//! What callers use of the index of keys: one function per `KeyRequest`.

use edgeleaf_rules::wire::keys::{Adopted, KeyList, KeyRequest, KeyView, NewKey, Revoked};
use worker::Env;

use crate::api::ApiResult;
use crate::objects::call::{call, Store};

/// Makes a new key (the index's row, then the key's own object).
pub async fn create(env: &Env, key: NewKey) -> ApiResult<KeyView> {
    call(env, Store::Keys, &KeyRequest::Create(key)).await
}

/// Asks the index to copy key `id` out to its own object if it kept it
/// from before each key had one.
pub async fn adopt(env: &Env, id: &str) -> ApiResult<Adopted> {
    let id = id.to_owned();
    call(env, Store::Keys, &KeyRequest::Adopt { id }).await
}

/// Every key, oldest first.
pub async fn list(env: &Env) -> ApiResult<KeyList> {
    call(env, Store::Keys, &KeyRequest::List).await
}

/// Revokes key `id` (404 if the index lists none).
pub async fn revoke(env: &Env, id: &str) -> ApiResult<Revoked> {
    let id = id.to_owned();
    call(env, Store::Keys, &KeyRequest::Revoke { id }).await
}
