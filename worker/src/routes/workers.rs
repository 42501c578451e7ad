//! Snowflake worker IDs: leases for outside nodes, and the registry's views.

use edgeleaf_rules::wire::api::LayoutView;
use edgeleaf_rules::wire::registry::{ClaimBody, LeaseRequest, LeaseView, RenewRequest};
use worker::Response;

use super::Cx;
use crate::api::{json, ApiResult};
use crate::objects::registry_store::stubs as registry_store;

/// `POST /v1/workers/lease`: a worker ID and its secret.
pub async fn lease(cx: Cx) -> ApiResult<Response> {
    let body = cx.body().await?;
    let request = LeaseRequest::from_body(cx.owner(), body);
    let granted = registry_store::lease(&cx.env, request).await?;
    // Only the caller that leased ever sees the secret.
    let layout = LayoutView::from(&cx.config()?.layout);
    json(200, &LeaseView::granted(&granted, layout))
}

/// `POST /v1/workers/{id}/renew`.
pub async fn renew(cx: Cx) -> ApiResult<Response> {
    let claim: ClaimBody = cx.body().await?;
    let request = RenewRequest::from_body(cx.owner(), cx.worker_id()?, claim);
    let lease = registry_store::renew(&cx.env, request).await?;
    let layout = LayoutView::from(&cx.config()?.layout);
    json(200, &LeaseView::new(&lease, layout))
}

/// `DELETE /v1/workers/{id}`.
pub async fn release(cx: Cx) -> ApiResult<Response> {
    let claim: ClaimBody = cx.body().await?;
    let request = RenewRequest::from_body(cx.owner(), cx.worker_id()?, claim);
    json(200, &registry_store::release(&cx.env, request).await?)
}

/// `POST /v1/workers/{id}/evict`.
pub async fn evict(cx: Cx) -> ApiResult<Response> {
    json(200, &registry_store::evict(&cx.env, cx.worker_id()?).await?)
}

/// `GET /v1/workers`.
pub async fn list(cx: Cx) -> ApiResult<Response> {
    json(200, &registry_store::list(&cx.env).await?)
}

/// `GET /v1/workers/events`.
pub async fn events(cx: Cx) -> ApiResult<Response> {
    json(200, &registry_store::events(&cx.env).await?)
}
