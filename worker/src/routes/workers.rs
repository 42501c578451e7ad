//! Snowflake worker IDs: leases for outside nodes, and the registry's views.

use edgeleaf::registry::Lease;
use serde_json::json;
use worker::Response;

use super::views::layout_json;
use super::Cx;
use crate::api::{json, ApiResult};
use crate::config::Config;
use crate::registry_store::{self, ClaimBody, LeaseRequest, RenewRequest, WorkerLeaseBody};

/// `POST /v1/workers/lease`: a worker ID and its secret.
pub async fn lease(mut cx: Cx) -> ApiResult<Response> {
    let WorkerLeaseBody {
        node_key,
        node_time,
        previous,
    } = cx.body().await?;
    let request = LeaseRequest {
        node_key,
        node_time,
        previous,
        owner: cx.owner().to_owned(),
    };
    let granted = registry_store::lease(&cx.env, request).await?;
    let mut answer = lease_json(cx.config()?, &granted.lease);
    // Only the caller that leased ever sees the secret.
    answer["secret"] = json!(&*granted.secret.to_hex());
    json(200, &answer)
}

/// `POST /v1/workers/{id}/renew`.
pub async fn renew(mut cx: Cx) -> ApiResult<Response> {
    let claim: ClaimBody = cx.body().await?;
    let request = RenewRequest::from_body(cx.owner(), cx.worker_id()?, claim);
    let lease = registry_store::renew(&cx.env, request).await?;
    json(200, &lease_json(cx.config()?, &lease))
}

/// `DELETE /v1/workers/{id}`.
pub async fn release(mut cx: Cx) -> ApiResult<Response> {
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

fn lease_json(config: &Config, lease: &Lease) -> serde_json::Value {
    json!({
        "workerId": lease.worker_id, "generation": lease.generation, "nodeKey": lease.node_key,
        "expiresAtMs": lease.expires_at_ms, "issueAfterMs": lease.issue_after_ms, "ttlMs": lease.ttl_ms,
        "layout": layout_json(config),
    })
}
