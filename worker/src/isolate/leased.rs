//! Snowflake IDs without minters: this isolate's own `SnowflakeHolder`,
//! under a worker ID it leases from the registry.

use edgeleaf::{
    code::ErrorCode, holder::HolderNext, holder::LeaseAsk, holder::Renewal, wait::MAX_WAIT_MS,
    Layout,
};
use edgeleaf_rules::wire::registry::{LeaseRequest, Previous};
use worker::{Context, Env};

use super::{run, with, Isolate, Then, Turn, POLL_MS};
use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, random_u64};
use crate::config::Config;
use crate::objects::registry_store::stubs as registry_store;

/// `count` snowflake IDs under this isolate's leased worker ID.
pub(super) async fn ids(
    env: &Env,
    ctx: &Context,
    config: &Config,
    count: usize,
) -> ApiResult<Vec<u64>> {
    let poll = |i: &mut Isolate, now, out: &mut [u64]| {
        let poll = i.holder(config)?.poll(now, out)?;
        if let Some(r) = poll.renew {
            ctx.wait_until(renew(env.clone(), config.layout, r));
        }
        let turn = match poll.next {
            HolderNext::Done => Turn::Done,
            HolderNext::Lease(ask) => Turn::Send(ask),
            HolderNext::LeaseInFlight => Turn::Wait(POLL_MS),
            HolderNext::RetryAfter { ms, .. } => Turn::Wait(ms),
        };
        Ok((poll.filled, turn))
    };
    let send = async |ask, _| {
        lease_worker_id(env, config.layout, ask).await?;
        Ok(Then::Poll)
    };
    let late = |filled, wait| {
        let e = format!(
            "snowflake: expected to mint {count} IDs within {MAX_WAIT_MS} ms, found only {filled}"
        );
        ApiError::unavailable(ErrorCode::SequenceExhausted, e, wait)
    };
    run(count, poll, send, late).await
}

/// Leases a worker ID for this isolate. Runs in the context of the request
/// the holder asked.
async fn lease_worker_id(env: &Env, layout: Layout, ask: LeaseAsk) -> ApiResult<()> {
    let node_key = with(|i| {
        i.counters.store_calls += 1;
        i.node_key
            .get_or_insert_with(|| format!("isolate-{:016x}", random_u64()))
            .clone()
    });
    let request = LeaseRequest {
        node_key,
        node_time: ask.node_now_ms,
        previous: ask.previous.map(Previous::from),
        owner: String::new(),
    };
    let answer = registry_store::lease(env, request).await;
    with(|i| {
        let holder = i
            .snowflake
            .as_mut()
            .ok_or_else(|| ApiError::new(ErrorCode::StoreError, "snowflake: holder missing"))?;
        registry_store::lease_answered(holder, answer, layout, now_ms())
    })
}

/// Renews this isolate's lease, in the background of a request.
async fn renew(env: Env, layout: Layout, r: Renewal) {
    with(|i| i.counters.store_calls += 1);
    let answer = registry_store::renew(&env, r.into()).await;
    with(|i| {
        if let Some(holder) = i.snowflake.as_mut() {
            registry_store::renewal_answered(holder, r, answer, layout, now_ms());
        }
    });
}
