//! `Catalog`: one Durable Object that lists every tag, for the admin API and
//! the dashboard. The tag objects stay the owners of `max_id`; the catalog
//! only knows which tags exist.

pub mod stubs;

use edgeleaf_rules::wire::catalog::{CatalogRequest, Done, TagList};
use serde::Deserialize;
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, SqlStorage, State,
};

use crate::api::{json, ApiError, ApiResult};
use crate::objects::serve::serve;
use crate::objects::sql::create_tables;

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

impl Catalog {
    fn list(&self) -> ApiResult<Response> {
        let rows: Vec<Entry> = self
            .sql
            .exec("SELECT biz_tag FROM tags ORDER BY biz_tag", None)?
            .to_array()?;
        let tags: Vec<String> = rows.into_iter().map(|r| r.biz_tag).collect();
        json(200, &TagList { tags })
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

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(self.broken.as_ref(), &req, async |r| match r {
            CatalogRequest::List => self.list(),
            CatalogRequest::Add { biz_tag } => self
                .sql
                .exec(
                    "INSERT OR IGNORE INTO tags(biz_tag) VALUES (?)",
                    vec![biz_tag.into()],
                )
                .map_err(ApiError::from)
                .and_then(|_| json(200, &Done {})),
            CatalogRequest::Remove { biz_tag } => self
                .sql
                .exec("DELETE FROM tags WHERE biz_tag = ?", vec![biz_tag.into()])
                .map_err(ApiError::from)
                .and_then(|_| json(200, &Done {})),
        })
        .await
    }
}
