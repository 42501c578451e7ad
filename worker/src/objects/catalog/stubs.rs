//! What callers use of the catalog: one function per `CatalogRequest`.

use edgeleaf_rules::wire::catalog::{
    CatalogRequest, Done, PageQuery, TagList, TagPage, TagSummary,
};
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

/// One page of tags with their summaries; `None` from a catalog of the
/// release before, which does not know pages (its caller lists as before).
pub async fn page(env: &Env, query: PageQuery) -> ApiResult<Option<TagPage>> {
    not_understood(call(env, Store::Catalog, &CatalogRequest::Page(query)).await)
}

/// Hands tags' summaries to the catalog (nothing done by a catalog of the
/// release before, which does not keep them).
pub async fn report(env: &Env, summaries: Vec<TagSummary>) -> ApiResult<()> {
    let sent: ApiResult<Done> =
        call(env, Store::Catalog, &CatalogRequest::Report { summaries }).await;
    not_understood(sent).map(|_| ())
}

/// An answer, or `None` for a request the catalog refused as one it does
/// not know (the release before, during a deploy: `call::not_understood`).
fn not_understood<T>(answer: ApiResult<T>) -> ApiResult<Option<T>> {
    match answer {
        Ok(t) => Ok(Some(t)),
        Err(e) if crate::objects::call::not_understood(&e) => Ok(None),
        Err(e) => Err(e),
    }
}
