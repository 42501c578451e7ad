//! How one Worker isolate serves IDs from memory (what it keeps:
//! `isolate/state.rs`): a segment driver per tag, fed from the tag's Durable
//! Object (`isolate/segments.rs`), and snowflake IDs — a buffer of batches
//! from the minters when `SNOWFLAKE_MINTERS` > 0 (`isolate/minted.rs`), or
//! else a holder under a worker ID of its own (`isolate/leased.rs`). The
//! rules — when to load and with which step, when to fetch and which batches
//! are stale, when to lease, renew or stop minting, how long a request may
//! wait — are the core's (`SegmentDriver`, `MintedBuffer`, `SnowflakeHolder`,
//! `WaitBudget`); each kind's file carries their requests to the Durable
//! Objects and their answers back, and runs this file's one wait loop, `run`.
//!
//! A request may not await I/O that another request started (Workers refuse
//! it), so a load or lease is done by the request the core asked; the others
//! wait on short timers and poll again. Every wait, and every Durable Object
//! call (`objects::call`), draws on the request's one budget
//! (`scope::budget`, the core's `WaitBudget`).

mod leased;
mod minted;
mod segments;
mod state;

use edgeleaf::wait::POLL_MS;
use worker::{Context, Env};

use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, sleep_ms};
use crate::config::Config;
use crate::scope;

pub use segments::segment_ids;
pub(crate) use state::{count_error, forget_tag, isolate_id, with, Isolate};

/// What a buffer's poll asks of the request that polled it.
enum Turn<A> {
    /// Every ID is filled: answer.
    Done,
    /// Send this (a segment load, a batch fetch, a lease) now, from this request.
    Send(A),
    /// Poll again after this many ms.
    Wait(u64),
}

/// What follows a send: poll again now or after a wait, or answer `late`.
enum Then {
    Poll,
    Wait(u64),
    Late,
}

/// The one wait loop: `count` IDs from polls of this isolate's buffer
/// (`poll` fills what it can at `now` and says what next), sending what it
/// asks from this request (`send`, given the ms left) and waiting within the
/// request's budget; past it, `late(filled, wait)`.
async fn run<A>(
    count: usize,
    mut poll: impl FnMut(&mut Isolate, u64, &mut [u64]) -> ApiResult<(usize, Turn<A>)>,
    mut send: impl AsyncFnMut(A, u64) -> ApiResult<Then>,
    late: impl FnOnce(usize, u64) -> ApiError,
) -> ApiResult<Vec<u64>> {
    let mut out = vec![0u64; count];
    let mut filled = 0;
    let budget = scope::budget();
    loop {
        let now = now_ms();
        let (n, turn) = with(|i| poll(i, now, &mut out[filled..]))?;
        filled += n;
        let wait = match turn {
            Turn::Done => return Ok(out),
            // Sent even with nothing left: the buffer has marked it in
            // flight, and only its answer (here, at once, that the budget
            // ran out) frees it for the other requests.
            Turn::Send(ask) => match send(ask, budget.remaining_ms()).await? {
                Then::Poll => continue,
                Then::Wait(ms) => ms,
                Then::Late => return Err(late(filled, 0)),
            },
            Turn::Wait(ms) => ms,
        };
        if !budget.wait(wait) {
            return Err(late(filled, wait));
        }
        // Date.now() moves only across I/O and timers: await one.
        sleep_ms(wait).await;
    }
}

/// `count` snowflake IDs: from the minters' batches, or (without minters)
/// under this isolate's own leased worker ID.
pub async fn snowflake_ids(
    env: &Env,
    ctx: &Context,
    config: &Config,
    count: usize,
) -> ApiResult<Vec<u64>> {
    let out = if config.minters > 0 {
        minted::ids(env, ctx, config, count).await?
    } else {
        leased::ids(env, ctx, config, count).await?
    };
    with(|i| i.counters.snowflake_ids += out.len() as u64);
    Ok(out)
}
