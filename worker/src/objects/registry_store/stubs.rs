//! What callers use of the registry: one function per `RegistryRequest`,
//! and the holder's side (its answers reported to the core's
//! `SnowflakeHolder`), for every holder in the Worker.

use edgeleaf::{
    code::ErrorCode, holder::Grant, holder::Renewal, holder::SnowflakeHolder, rand::RandSource,
    registry::Lease, Layout,
};
use edgeleaf_rules::wire::registry::{
    EventList, Evicted, Granted, LeaseRequest, MinterLeaseRequest, RegistryRequest, Released,
    RenewRequest, WorkerList,
};
use worker::Env;

use crate::api::{ApiError, ApiResult};
use crate::objects::call::{call, Store};

/// A worker ID for a node (`owner` the credential asking, empty for the
/// service's own isolates).
pub async fn lease(env: &Env, request: LeaseRequest) -> ApiResult<Granted> {
    call(env, Store::Registry, &RegistryRequest::Lease(request)).await
}

/// A minter's reserved worker ID.
pub async fn lease_minter(env: &Env, request: MinterLeaseRequest) -> ApiResult<Granted> {
    call(env, Store::Registry, &RegistryRequest::LeaseMinter(request)).await
}

/// Renews a lease (one of the service's own holders' renewals converts
/// with `.into()`).
pub async fn renew(env: &Env, request: RenewRequest) -> ApiResult<Lease> {
    call(env, Store::Registry, &RegistryRequest::Renew(request)).await
}

/// Releases a lease.
pub async fn release(env: &Env, request: RenewRequest) -> ApiResult<Released> {
    call(env, Store::Registry, &RegistryRequest::Release(request)).await
}

/// Evicts whatever lease holds `worker_id`.
pub async fn evict(env: &Env, worker_id: u32) -> ApiResult<Evicted> {
    call(env, Store::Registry, &RegistryRequest::Evict { worker_id }).await
}

/// Every slot, with its status now.
pub async fn list(env: &Env) -> ApiResult<WorkerList> {
    call(env, Store::Registry, &RegistryRequest::List).await
}

/// The latest lease events, newest first.
pub async fn events(env: &Env) -> ApiResult<EventList> {
    call(env, Store::Registry, &RegistryRequest::Events).await
}

// ---- the holder's side of the registry, for every holder in the Worker
// (isolates without minters, and the minters): the calls, and their answers
// reported to the core's `SnowflakeHolder`.

/// No answer is not a refusal: the holder treats `None` as "retry".
fn refusal(e: &ApiError) -> Option<ErrorCode> {
    (e.code != ErrorCode::StoreUnavailable).then_some(e.code)
}

/// Reports a renewal's answer to the holder that asked.
pub fn renewal_answered<R: RandSource + Clone>(
    holder: &mut SnowflakeHolder<R>,
    r: Renewal,
    answer: ApiResult<Lease>,
    layout: Layout,
    now: u64,
) {
    match answer {
        Ok(lease) => holder.renewed(Grant::from_lease(&lease, None, layout), now),
        Err(e) => holder.renewal_failed(r.claim.generation, refusal(&e), now),
    }
}

/// Reports a lease request's answer to the holder that asked; a failure is
/// also the request's error.
pub fn lease_answered<R: RandSource + Clone>(
    holder: &mut SnowflakeHolder<R>,
    answer: ApiResult<Granted>,
    layout: Layout,
    now: u64,
) -> ApiResult<()> {
    match answer {
        Ok(g) => Ok(holder.granted(Grant::from_lease(&g.lease, Some(g.secret), layout), now)?),
        Err(e) => {
            holder.lease_failed(refusal(&e), now);
            Err(e)
        }
    }
}
