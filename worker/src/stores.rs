//! The Worker's side and the objects' side of every call to a Durable
//! Object: one typed request (each object's own enum, as JSON) to one path,
//! and a JSON answer; an error answer comes back as the same `ApiError` the
//! object made.

use serde::{de::DeserializeOwned, Serialize};
use wasm_bindgen::JsValue;
use worker::{Env, Headers, Method, Request, RequestInit, Response, SqlStorage, SqlStorageValue};

use crate::api::{body_within, ApiError, ApiResult, MAX_STORE_BODY_BYTES};

/// Which object to call.
#[derive(Clone, Copy)]
pub enum Store<'a> {
    /// The object that owns this tag.
    Tag(&'a str),
    /// The single catalog of tags.
    Catalog,
    /// The single worker-ID registry.
    Registry,
    /// Snowflake minter `i`.
    Minter(u32),
    /// The index of API keys.
    Keys,
    /// The own object of the API key with this ID.
    Key(&'a str),
}

/// Sends `request` (the object's request enum) to a Durable Object and
/// decodes its JSON answer. Only the object's own client functions call it.
pub async fn call<T: DeserializeOwned>(
    env: &Env,
    store: Store<'_>,
    request: &impl Serialize,
) -> ApiResult<T> {
    let text = serde_json::to_string(request)
        .map_err(|e| ApiError::store_error(format!("store request: {e}")))?;
    let answer = send(env, store, &text).await?;
    serde_json::from_str(&answer).map_err(|e| ApiError::store_error(format!("store answer: {e}")))
}

/// The part of `call` that is the same for every request (not generic, so
/// compiled once): `text` to the object, its answer's text back.
async fn send(env: &Env, store: Store<'_>, text: &str) -> ApiResult<String> {
    let minter;
    let (binding, name) = match store {
        Store::Tag(tag) => ("TAGS", tag),
        Store::Catalog => ("CATALOG", "catalog"),
        Store::Registry => ("REGISTRY", "registry"),
        Store::Keys => ("KEYS", "keys"),
        Store::Key(id) => ("API_KEYS", id),
        Store::Minter(i) => {
            minter = format!("minter-{i}");
            ("MINTERS", minter.as_str())
        }
    };
    let stub = env
        .durable_object(binding)?
        .id_from_name(name)?
        .get_stub()?;
    let headers = Headers::new();
    headers.set("Content-Type", "application/json")?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(JsValue::from_str(text)));
    let req = Request::new_with_init(&format!("https://{binding}.internal/"), &init)?;
    let mut res = stub.fetch_with_request(req).await?;
    if res.status_code() >= 400 {
        return Err(ApiError::from_response(res).await);
    }
    res.text()
        .await
        .map_err(|e| ApiError::store_error(format!("store answer: {e}")))
}

/// An object's `fetch`: `broken` (tables that could not be made) answers
/// every call; otherwise the request enum is decoded and `handle` answers it.
pub async fn serve<R: DeserializeOwned>(
    broken: Option<&ApiError>,
    req: &mut Request,
    handle: impl AsyncFnOnce(R) -> ApiResult<Response>,
) -> worker::Result<Response> {
    if let Some(e) = broken {
        return Ok(e.response());
    }
    let result = match body_within::<R>(req, MAX_STORE_BODY_BYTES).await {
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
