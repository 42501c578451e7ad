//! The IDs: Leaf's text routes, batches from this isolate's buffers, and
//! segment leases for outside clients.

use edgeleaf_rules::wire::{
    api::IdList, tag::AllocateRequest, tag::LeaseBody, tag::LeasedSegment, tag::ReturnBody,
    tag::TailReturned, tag::TakeBackRequest,
};
use worker::{Env, Response, ResponseBuilder};

use super::Cx;
use crate::api::{json, ApiResult};
use crate::isolate;
use crate::objects::tag_store::stubs as tag_store;

/// `GET /api/segment/get/{tag}`: one ID as text, as Leaf answers.
pub async fn segment_text(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    let id = isolate::segment_ids(&cx.env, &cx.ctx, &tag, 1).await?;
    text_id(id[0])
}

/// `GET /api/snowflake/get/{tag}`: one ID as text (the tag is Leaf's, unused).
pub async fn snowflake_text(cx: Cx) -> ApiResult<Response> {
    cx.tag()?;
    let id = isolate::snowflake_ids(&cx.env, &cx.ctx, cx.config()?, 1).await?;
    text_id(id[0])
}

/// `GET /v1/segment/{tag}?count=N`.
pub async fn segment(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    let ids = isolate::segment_ids(&cx.env, &cx.ctx, &tag, cx.count()?).await?;
    ids_json(&ids)
}

/// `POST /v1/segment/{tag}/lease`: a whole segment, for a client to serve.
pub async fn segment_lease(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    json(
        200,
        &lease(&cx.env, &tag, cx.body().await?, cx.owner()).await?,
    )
}

/// A segment of `tag` leased by `owner` (the credential asking): the lease
/// route's and the service binding's.
pub async fn lease(env: &Env, tag: &str, body: LeaseBody, owner: &str) -> ApiResult<LeasedSegment> {
    let request = AllocateRequest::for_client(body, owner);
    Ok(LeasedSegment::from(
        tag_store::allocate(env, tag, request).await?,
    ))
}

/// `POST /v1/segment/{tag}/lease/return`: the unused tail of a range the
/// caller leased under a request ID, handed back (a client closing). Who
/// asks is named exactly as for the lease, so only the API key that leased
/// the range finds it; the tag's store and the core decide the rest
/// (`TagRecord::credit_back`: never `max_id` moved back; the tail becomes a
/// credit that only the same key leases again, so a false return can repeat
/// IDs only within that key).
pub async fn segment_return(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    json(
        200,
        &take_back(&cx.env, &tag, cx.body().await?, cx.owner()).await?,
    )
}

/// A tail of `tag` handed back by `owner`: the return route's and the
/// service binding's.
pub async fn take_back(
    env: &Env,
    tag: &str,
    body: ReturnBody,
    owner: &str,
) -> ApiResult<TailReturned> {
    let request = TakeBackRequest::for_client(body, owner);
    Ok(TailReturned::from(
        tag_store::take_back(env, tag, request).await?,
    ))
}

/// `GET /v1/snowflake?count=N`.
pub async fn snowflake(cx: Cx) -> ApiResult<Response> {
    let ids = isolate::snowflake_ids(&cx.env, &cx.ctx, cx.config()?, cx.count()?).await?;
    ids_json(&ids)
}

/// What `Response::ok` answers (it sets this Content-Type), the header set
/// once: each set is a call into JS (it was set twice, ~2% of the request).
fn text_id(id: u64) -> ApiResult<Response> {
    Ok(ResponseBuilder::new()
        .with_header("Content-Type", "text/plain; charset=utf-8")?
        .fixed(id.to_string().into_bytes()))
}

/// `{"ids":["…"]}`, as `api::json` of `IdList::of(ids)` answers it (the
/// same bytes and headers), written in one buffer (`IdList::json_of`): the
/// per-ID `String`s and serde took ~40% of a `count=1000` request's CPU
/// (docs/benchmarks.md).
fn ids_json(ids: &[u64]) -> ApiResult<Response> {
    Ok(ResponseBuilder::new()
        .with_header("Content-Type", "application/json")?
        .fixed(IdList::json_of(ids)))
}
