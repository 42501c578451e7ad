//! Snowflake IDs from the minters (`SNOWFLAKE_MINTERS` > 0): batches fetched
//! into this isolate's `MintedBuffer`.

use std::cell::Cell;

use edgeleaf::{
    code::ErrorCode, minted::BatchAsk, minted::MintStep, minted::MintedBuffer, minted::Refused,
    wait::MAX_WAIT_MS,
};
use futures::future::{self, Either, FutureExt};
use worker::{Context, Env};

use super::state::mint_config;
use super::{run, with, Isolate, Then, Turn, POLL_MS};
use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, sleep_ms};
use crate::config::Config;
use crate::minter_store;

/// `count` snowflake IDs from the minters' batches in this isolate's buffer,
/// within the core's wait budget: a minter that does not answer in what is
/// left of it is passed over (its Durable Object may be stuck on a clock
/// that stepped back), and a request that runs out answers 503 at once.
pub(super) async fn ids(
    env: &Env,
    ctx: &Context,
    config: &Config,
    count: usize,
) -> ApiResult<Vec<u64>> {
    let poll = |i: &mut Isolate, now, out: &mut [u64]| {
        let poll = i.minted(config)?.poll(now, out);
        let turn = match poll.next {
            MintStep::Done { prefetch } => {
                if let Some(ask) = prefetch {
                    ctx.wait_until(fetch_batch(env.clone(), ask, 0).map(|_| ()));
                }
                Turn::Done
            }
            MintStep::FetchNow(ask) => Turn::Send(ask),
            MintStep::Wait => Turn::Wait(POLL_MS),
        };
        Ok((poll.filled, turn))
    };
    let last_error = Cell::new(None);
    let mut failures = 0;
    let send = async |ask: BatchAsk, left| {
        let fetch = fetch_batch(env.clone(), ask, left).boxed_local();
        let (error, then) = match future::select(fetch, sleep_ms(left).boxed_local()).await {
            Either::Left((Ok(()), _)) => return Ok(Then::Poll),
            Either::Left((Err(failed), _)) => failed,
            Either::Right(((), _)) => {
                with(|i| i.minted.as_mut().map(MintedBuffer::fetch_failed));
                let e = format!(
                    "minter {}: expected an answer within {left} ms, found none",
                    ask.minter
                );
                let e = ApiError::unavailable(ErrorCode::StoreUnavailable, e, MAX_WAIT_MS);
                (e, Refused::Next)
            }
        };
        let then = match then {
            Refused::Again => Then::Wait(POLL_MS),
            Refused::Next => {
                failures += 1;
                if failures >= mint_config(config).tries_per_request() {
                    Then::Late
                } else {
                    Then::Poll
                }
            }
            Refused::GiveUp {
                code,
                retry_after_ms,
            } => {
                let e = format!("snowflake: this clock is {retry_after_ms} ms behind IDs the minters already minted: {}", error.message);
                return Err(ApiError::unavailable(code, e, retry_after_ms));
            }
        };
        last_error.set(Some(error));
        Ok(then)
    };
    let late = |filled, _| {
        last_error.take().unwrap_or_else(|| {
            let e = format!(
                "snowflake: expected {count} minted IDs within {MAX_WAIT_MS} ms, found {filled}"
            );
            ApiError::unavailable(ErrorCode::StoreUnavailable, e, MAX_WAIT_MS)
        })
    };
    run(count, MAX_WAIT_MS, poll, send, late).await
}

/// Fetches a batch from a minter into this isolate's buffer; on failure, the
/// error and what the buffer says to do. Runs in the context of the request
/// the buffer asked (or in its `waitUntil`).
async fn fetch_batch(env: Env, ask: BatchAsk, left_ms: u64) -> Result<(), (ApiError, Refused)> {
    with(|i| i.counters.minter_calls += 1);
    let answer = minter_store::mint(&env, ask.minter, ask.count).await;
    with(|i| {
        let Some(buf) = i.minted.as_mut() else {
            let error = ApiError::store_error("snowflake: minted buffer missing");
            return Err((error, Refused::Next));
        };
        let ranges = answer.map_err(|e| {
            let then = buf.fetch_refused(e.code, now_ms(), left_ms);
            (e, then)
        })?;
        buf.fetched(&ranges, now_ms()).map_err(|e| {
            buf.fetch_failed();
            (e.into(), Refused::Next)
        })
    })
}
