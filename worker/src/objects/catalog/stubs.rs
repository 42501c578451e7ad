//! What callers use of the catalog: one function per `CatalogRequest`.

use edgeleaf_rules::wire::catalog::{CatalogRequest, Done, TagList};
use worker::Env;

use crate::api::ApiResult;
use crate::objects::call::{call, Store};

/// Every tag, sorted.
pub async fn list(env: &Env) -> ApiResult<Vec<String>> {
    let list: TagList = call(env, Store::Catalog, &CatalogRequest::List).await?;
    Ok(list.tags)
}

/// Adds `tag` to the catalog.
pub async fn add(env: &Env, tag: &str) -> ApiResult<()> {
    let biz_tag = tag.to_owned();
    let _: Done = call(env, Store::Catalog, &CatalogRequest::Add { biz_tag }).await?;
    Ok(())
}

/// Removes `tag` from the catalog.
pub async fn remove(env: &Env, tag: &str) -> ApiResult<()> {
    let biz_tag = tag.to_owned();
    let _: Done = call(env, Store::Catalog, &CatalogRequest::Remove { biz_tag }).await?;
    Ok(())
}
