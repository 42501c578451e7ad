//! `Catalog`: one Durable Object that lists every tag, for the admin API and
//! the dashboard. The tag objects stay the owners of `max_id`; the catalog
//! only knows which tags exist.

use serde::Deserialize;
use serde_json::json;
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Method, Request, Response, SqlStorage, State,
};

use crate::api::{body, json, ApiError, ApiResult};
use crate::stores::create_tables;

#[durable_object]
pub struct Catalog {
    sql: SqlStorage,
    /// Set when the table could not be created: every call answers it.
    broken: Option<ApiError>,
}

#[derive(Deserialize)]
struct Entry {
    biz_tag: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Change {
    biz_tag: String,
}

impl Catalog {
    fn list(&self) -> ApiResult<Response> {
        let rows: Vec<Entry> = self
            .sql
            .exec("SELECT biz_tag FROM tags ORDER BY biz_tag", None)?
            .to_array()?;
        let tags: Vec<String> = rows.into_iter().map(|r| r.biz_tag).collect();
        json(200, &json!({ "tags": tags }))
    }
}

impl DurableObject for Catalog {
    fn new(state: State, _env: Env) -> Self {
        let sql = state.storage().sql();
        let broken = create_tables(
            &sql,
            &["CREATE TABLE IF NOT EXISTS tags(biz_tag TEXT PRIMARY KEY)"],
        )
        .err();
        Catalog { sql, broken }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        if let Some(e) = &self.broken {
            return Ok(e.response());
        }
        let result = match req.method() {
            Method::Get => self.list(),
            Method::Put => match body::<Change>(&mut req).await {
                Ok(c) => self
                    .sql
                    .exec(
                        "INSERT OR IGNORE INTO tags(biz_tag) VALUES (?)",
                        vec![c.biz_tag.into()],
                    )
                    .map_err(ApiError::from)
                    .and_then(|_| json(200, &json!({}))),
                Err(e) => Err(e),
            },
            Method::Delete => match body::<Change>(&mut req).await {
                Ok(c) => self
                    .sql
                    .exec("DELETE FROM tags WHERE biz_tag = ?", vec![c.biz_tag.into()])
                    .map_err(ApiError::from)
                    .and_then(|_| json(200, &json!({}))),
                Err(e) => Err(e),
            },
            _ => Err(ApiError::not_found("catalog: no such route")),
        };
        Ok(result.unwrap_or_else(|e| e.response()))
    }
}
