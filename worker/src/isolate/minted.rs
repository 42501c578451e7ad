//! Snowflake IDs from the minters (`SNOWFLAKE_MINTERS` > 0): batches fetched
//! into this isolate's `MintedBuffer`, and the rights to mint they lend
//! along with them (`SNOWFLAKE_RIGHTS`), minted under at this isolate's
//! clock.

use std::cell::Cell;

use edgeleaf::{
    code::ErrorCode, minted::BatchAsk, minted::Fetched, minted::MintStep, minted::MintTries,
    minted::Refused, minted::Unanswered, wait::MAX_WAIT_MS, wait::RETRY_AFTER_MS,
};
use futures::future::{self, AbortHandle, Aborted, Either, FutureExt, RemoteHandle};
use worker::{Context, Env};

use super::{run, with, Isolate, Then, Turn, POLL_MS};
use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, sleep_ms};
use crate::config::Config;
use crate::objects::minter_store::stubs as minter_store;
use crate::scope;

/// `count` snowflake IDs from the minters' batches in this isolate's buffer,
/// within the request's budget: a minter that answers a batch already stale
/// (its clock lags this one's by more than the staleness bound) is passed
/// over, and a request that runs out answers 503 at once. A fetch that has
/// not answered when the request runs out goes on in the background as the
/// core says (`MintedBuffer::fetch_unanswered`; `send_fetch`).
pub(super) async fn ids(
    env: &Env,
    ctx: &Context,
    config: &Config,
    count: usize,
) -> ApiResult<Vec<u64>> {
    let poll = |i: &mut Isolate, now, out: &mut [u64]| {
        let buffer = i.minted(config)?;
        let poll = buffer.poll(now, out);
        let turn = match poll.next {
            MintStep::Done { prefetch } => {
                if let Some(ask) = prefetch {
                    // A prefetch is a fetch its request does not wait for
                    // (its bound is now): awaited in the background for as
                    // long as the core says, then dropped, as `send_fetch`'s.
                    let (answer, abort) = spawn_fetch(env, ctx, ask, 0);
                    let then = buffer.fetch_unanswered(ask.ticket, now);
                    await_unanswered(ctx, answer, abort, then);
                }
                Turn::Done
            }
            MintStep::FetchNow(ask) => Turn::Send(ask),
            MintStep::Wait => Turn::Wait(POLL_MS),
        };
        Ok((poll.filled, turn))
    };
    let last_error = Cell::new(None);
    let mut tries = MintTries::default();
    let send = async |ask: BatchAsk, left| {
        let Some(answer) = send_fetch(env, ctx, ask, left).await else {
            return Ok(Then::Late);
        };
        let (error, then) = match answer {
            Ok(()) => return Ok(Then::Poll),
            Err(failed) => failed,
        };
        let then = match then {
            Refused::Again => Then::Wait(POLL_MS),
            Refused::Next => {
                let next = with(|i| i.minted.as_ref().is_some_and(|b| tries.failed(b)));
                if next {
                    Then::Poll
                } else {
                    Then::Late
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
    // The minters' trouble is the service's, never the caller's: a minter's
    // 4xx (one of another release refusing the ask) answers 503 too.
    let late = |filled, _| match last_error.take() {
        Some(e) if e.status() == 503 => e,
        Some(e) => {
            let e = format!(
                "snowflake: expected minted IDs, found the minters refusing: {}",
                e.message
            );
            ApiError::unavailable(ErrorCode::StoreUnavailable, e, RETRY_AFTER_MS)
        }
        None => {
            let e = format!(
                "snowflake: expected {count} minted IDs within {MAX_WAIT_MS} ms, found {filled}"
            );
            ApiError::unavailable(ErrorCode::StoreUnavailable, e, RETRY_AFTER_MS)
        }
    };
    run(count, poll, send, late).await
}

/// Sends a batch fetch in this request's background (`waitUntil`, with the
/// background budget) and waits for it for what is left of the request
/// (`left_ms`): its answer, or `None` when the request ran out first. Then
/// the core says what becomes of the fetch (`MintedBuffer::fetch_unanswered`):
/// awaited on for a while more, its answer the buffer's for the requests
/// after this one (a minter further than a request's budget, as `BEY`'s
/// are, is otherwise passed over at every first call), or dropped.
async fn send_fetch(
    env: &Env,
    ctx: &Context,
    ask: BatchAsk,
    left_ms: u64,
) -> Option<Result<(), (ApiError, Refused)>> {
    let (answer, abort) = spawn_fetch(env, ctx, ask, left_ms);
    match future::select(answer, sleep_ms(left_ms).boxed_local()).await {
        Either::Left((Ok(answer), _)) => Some(answer),
        // Aborted: never, but by `await_unanswered`, after this request.
        Either::Left((Err(_), _)) => None,
        Either::Right(((), answer)) => {
            let then = with(|i| {
                i.minted
                    .as_mut()
                    .map(|b| b.fetch_unanswered(ask.ticket, now_ms()))
            });
            await_unanswered(ctx, answer, abort, then.unwrap_or(Unanswered::Failed));
            None
        }
    }
}

/// The answer of a batch fetch sent in this request's background
/// (`waitUntil`, with the background budget and the request's test
/// settings), and the handle that aborts it.
fn spawn_fetch(env: &Env, ctx: &Context, ask: BatchAsk, left_ms: u64) -> (Answer, AbortHandle) {
    let (fetch, abort) = future::abortable(fetch_batch(env.clone(), ask, left_ms));
    let (fetch, answer) = fetch.remote_handle();
    ctx.wait_until(scope::background().run(fetch));
    (answer, abort)
}

/// A fetch's answer not awaited by any request: awaited in the background
/// for `for_ms` more ([`Unanswered::Await`]; the wait ends with the answer
/// if that comes first), then the call is aborted; or dropped now.
fn await_unanswered(ctx: &Context, answer: Answer, abort: AbortHandle, then: Unanswered) {
    match then {
        Unanswered::Await { for_ms } => ctx.wait_until(async move {
            let timer = sleep_ms(for_ms).boxed_local();
            if let Either::Right(((), answer)) = future::select(answer, timer).await {
                abort.abort();
                drop(answer);
            }
        }),
        // Dropping the handle drops the call.
        Unanswered::Failed | Unanswered::Answered | Unanswered::TakenOver => abort.abort(),
    }
}

/// A batch fetch's outcome as `spawn_fetch` hands it over (`Err`: aborted).
type Answer = RemoteHandle<Result<Result<(), (ApiError, Refused)>, Aborted>>;

/// Fetches a batch (and the right to mint the ask asked for, if the minter
/// lends one) from a minter into this isolate's buffer; on failure, the
/// error and what the buffer says to do. Runs in the context of the request
/// the buffer asked (or in its `waitUntil`).
async fn fetch_batch(env: Env, ask: BatchAsk, left_ms: u64) -> Result<(), (ApiError, Refused)> {
    with(|i| i.counters.minter_calls += 1);
    let answer = minter_store::mint(&env, ask.minter, ask.count, ask.right).await;
    with(|i| {
        let Some(buf) = i.minted.as_mut() else {
            let error = ApiError::store_error("snowflake: minted buffer missing");
            return Err((error, Refused::Next));
        };
        let (ranges, right) = answer.map_err(|e| {
            let then = buf.fetch_refused(ask.ticket, e.code, now_ms(), left_ms);
            (e, then)
        })?;
        match buf.fetched_with_right(ask.ticket, &ranges, right, now_ms()) {
            Ok(Fetched::Kept) => Ok(()),
            // A later fetch took over from this one (it was presumed lost):
            // its answer is dropped, and nobody waits for it.
            Ok(Fetched::Late) => {
                let e = format!(
                    "minter {}: an answer after a later fetch took over, dropped",
                    ask.minter
                );
                let e = ApiError::unavailable(ErrorCode::StoreUnavailable, e, RETRY_AFTER_MS);
                Err((e, Refused::Again))
            }
            // Already counted as a failed fetch by the buffer.
            Ok(Fetched::Stale) => {
                let e = format!(
                    "minter {}: expected fresh IDs, found a batch stale on arrival \
                     (its clock lags this isolate's by more than SNOWFLAKE_STALENESS_MS)",
                    ask.minter
                );
                let e = ApiError::unavailable(ErrorCode::StoreUnavailable, e, RETRY_AFTER_MS);
                Err((e, Refused::Next))
            }
            Err(e) => {
                buf.fetch_failed();
                Err((e.into(), Refused::Next))
            }
        }
    })
}
