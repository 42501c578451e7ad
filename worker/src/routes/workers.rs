//! Snowflake worker IDs: leases for outside nodes, and the registry's views.

use edgeleaf_rules::wire::api::LayoutView;
use edgeleaf_rules::wire::registry::{
    ClaimBody, LeaseRequest, LeaseView, Released, RenewRequest, WorkerLeaseBody,
};
use worker::{Env, Response};

use super::Cx;
use crate::api::{json, ApiResult};
use crate::config::Config;
use crate::objects::registry_store::stubs as registry_store;

/// `POST /v1/workers/lease`: a worker ID and its secret.
pub async fn lease(cx: Cx) -> ApiResult<Response> {
    let body = cx.body().await?;
    json(
        200,
        &lease_for(&cx.env, cx.config()?, cx.owner(), body).await?,
    )
}

/// A worker ID leased by `owner` (the credential asking), with its secret:
/// the lease route's and the service binding's.
pub async fn lease_for(
    env: &Env,
    config: &Config,
    owner: &str,
    body: WorkerLeaseBody,
) -> ApiResult<LeaseView> {
    let granted = registry_store::lease(env, LeaseRequest::from_body(owner, body)).await?;
    // Only the caller that leased ever sees the secret.
    let layout = LayoutView::from(&config.layout);
    Ok(LeaseView::granted(&granted, layout))
}

/// `POST /v1/workers/{id}/renew`.
pub async fn renew(cx: Cx) -> ApiResult<Response> {
    let claim: ClaimBody = cx.body().await?;
    let view = renew_for(&cx.env, cx.config()?, cx.owner(), cx.worker_id()?, claim).await?;
    json(200, &view)
}

/// Renews `owner`'s lease of `worker_id`: the renew route's and the
/// service binding's.
pub async fn renew_for(
    env: &Env,
    config: &Config,
    owner: &str,
    worker_id: u32,
    claim: ClaimBody,
) -> ApiResult<LeaseView> {
    let request = RenewRequest::from_body(owner, worker_id, claim);
    let lease = registry_store::renew(env, request).await?;
    Ok(LeaseView::new(&lease, LayoutView::from(&config.layout)))
}

/// `DELETE /v1/workers/{id}`.
pub async fn release(cx: Cx) -> ApiResult<Response> {
    let claim: ClaimBody = cx.body().await?;
    json(
        200,
        &release_for(&cx.env, cx.owner(), cx.worker_id()?, claim).await?,
    )
}

/// Releases `owner`'s lease of `worker_id`: the release route's and the
/// service binding's.
pub async fn release_for(
    env: &Env,
    owner: &str,
    worker_id: u32,
    claim: ClaimBody,
) -> ApiResult<Released> {
    let request = RenewRequest::from_body(owner, worker_id, claim);
    registry_store::release(env, request).await
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
