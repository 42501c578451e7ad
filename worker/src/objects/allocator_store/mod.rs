//! `RegionalAllocator`: a tag's allocator in one region, the Durable Object
//! named `"{tag}@{region}"` and created there (`locationHint`: the region's
//! hosting region, `Region::hosting`). It is a segment client of the tag's
//! root object (`TagStore`, which owns `max_id`) and a segment server to the
//! isolates of its region: it leases *blocks* from the root and hands them
//! on in contiguous ranges, so that a cold isolate's first segment comes
//! from its own region, and the root sees one block lease per region where
//! it saw one segment lease per isolate.
//!
//! The rule is the core's (`edgeleaf::block::BlockAllocator`: which range,
//! when a block is due and of what size, its request ID, what a retirement
//! hands back); this object only does its I/O:
//!
//! - it reads its state (kept in memory, read from SQLite at first use),
//!   asks the core, **writes the state when the core says**
//!   (`persist_first`: a range past the reservation the stored state holds,
//!   a block ask; always after a block's answer and a retirement), and only
//!   then answers a range or sends a block ask (the output gate holds the
//!   answer until the write is durable; a write that fails answers nothing
//!   and drops the memory copy). The state is saved with a reservation
//!   (`served_high` up to `RESERVE_RANGES` ranges ahead), so most ranges
//!   are answered from memory without a write. A replacement restored from
//!   storage never serves a range twice (it starts after the reservation:
//!   the IDs between are a gap), and sends the pending block ask
//!   again under the same request ID, which the root answers with the same
//!   block (its lease rule under the allocator's own name, `Asker::Own`);
//! - a block ask is made through the root's one lease path
//!   (`TagRequest::Allocate`), `for_isolate` (an opaque tag's key comes with
//!   it, kept here with the state and passed on to the region's isolates);
//! - a retirement (`AllocatorRequest::Retire`) writes the state without its
//!   blocks, then hands each unserved tail back to the root
//!   (`TagRequest::TakeBack`), which takes it only if nothing followed it;
//!   the tails it refused (and those never sent) are served again
//!   (`BlockAllocator::keep`), written before any range from them; a tail
//!   whose hand-back got no answer stays a gap.
//!
//! Monotonic tags never reach it with success: the root refuses their
//! leases (`monotonic_tag`), which this object relays.

mod handlers;
mod schema;
pub mod stubs;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use edgeleaf::{block::RETIRE_AFTER_MS, rand::RandSource, region::Region, wait::MAX_WAIT_MS};
use edgeleaf_rules::wire::allocator::{allocator_serve_ms, AllocatorRequest};
use futures::channel::oneshot;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use crate::api::{json, ApiError, ApiResult};
use crate::clock::now_ms;
use crate::objects::serve::serve;
use crate::objects::sql::Sql;
use crate::scope;

use schema::Held;

/// When an alarm failed, how long until it looks again (a tenth of
/// `RETIRE_AFTER_MS`: three minutes).
const RETIRE_CHECK_MS: u64 = RETIRE_AFTER_MS / 10;

/// The shortest wait an alarm is set for.
const RETIRE_MIN_WAIT_MS: i64 = 1_000;

/// Randomness for block request IDs: the platform's CSPRNG.
struct Crypto;

impl RandSource for Crypto {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0u8; 4];
        // A failure leaves zeros: the ID is then less random, and the root
        // refuses a reused one of another step (never answers it twice).
        let _ = getrandom::fill(&mut b);
        u32::from_le_bytes(b)
    }
}

#[durable_object]
pub struct RegionalAllocator {
    /// Shared with the block asks it sends in the background.
    inner: Rc<Inner>,
}

struct Inner {
    /// For its alarm (`retire_due`).
    state: State,
    sql: Sql,
    env: Env,
    /// Its table is known to exist (made by this instance, or found).
    table: Cell<bool>,
    /// The state, read at first use; `None` again after a write failed.
    held: RefCell<Option<Held>>,
    /// The serves waiting for the block ask in flight: each is woken when
    /// an ask's answer is in (with the root's error, if it failed).
    waiters: RefCell<Vec<oneshot::Sender<Option<ApiError>>>>,
}

impl Inner {
    /// Runs `f` on the state (read from storage, or new, at first use),
    /// then writes the state back before anything else happens. A failed
    /// write drops the memory copy (the next request reads storage again)
    /// and is the answer.
    fn with_held<T>(
        &self,
        tag: &str,
        region: Region,
        f: impl FnOnce(&mut Held) -> ApiResult<T>,
    ) -> ApiResult<T> {
        self.update(tag, region, |h| f(h).map(|t| (t, true)))
    }

    /// `with_held`, writing the state back only when `f` says it changed
    /// something kept (with its answer) or failed.
    fn update<T>(
        &self,
        tag: &str,
        region: Region,
        f: impl FnOnce(&mut Held) -> ApiResult<(T, bool)>,
    ) -> ApiResult<T> {
        let mut cell = self.held.borrow_mut();
        if cell.is_none() {
            *cell = Some(self.read(tag, region)?);
        }
        let held = cell
            .as_mut()
            .ok_or_else(|| ApiError::store_error("allocator: no state"))?;
        if held.tag != tag || held.region != region {
            return Err(ApiError::store_error(format!(
                "allocator: expected requests for {}@{}, found one for {tag}@{region}",
                held.tag, held.region
            )));
        }
        let result = f(held);
        let changed = result.as_ref().map_or(true, |(_, changed)| *changed);
        if changed {
            held.writes += 1;
            if let Err(e) = self.write(held) {
                *cell = None;
                return Err(e);
            }
        }
        result.map(|(t, _)| t)
    }
}

impl DurableObject for RegionalAllocator {
    fn new(state: State, env: Env) -> Self {
        // Its table is made at its first write, never before: an object
        // for a name that is not a tag stays empty.
        let sql = Sql::new(&state);
        RegionalAllocator {
            inner: Rc::new(Inner {
                state,
                sql,
                env,
                table: Cell::new(false),
                held: RefCell::new(None),
                waiters: RefCell::new(Vec::new()),
            }),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        // Its calls to the root run in the call's scope (`serve`): the
        // background budget (the isolate bounds its own wait) and the
        // caller's test fault.
        let received_ms = now_ms();
        let inner = &self.inner;
        serve(&self.inner.env, None, &req, async |r| match r {
            AllocatorRequest::Serve {
                tag,
                region,
                step,
                limit_ms,
                ..
            } => {
                // The caller's limit, from when it came in.
                let limit = limit_ms.unwrap_or(MAX_WAIT_MS).min(MAX_WAIT_MS);
                let elapsed = now_ms().saturating_sub(received_ms);
                scope::limit_budget(allocator_serve_ms(limit, elapsed));
                inner
                    .serve_range(&tag, region, step)
                    .await
                    .and_then(|l| json(200, &l))
            }
            AllocatorRequest::View { tag, region } => {
                inner.peek(&tag, region).and_then(|v| json(200, &v))
            }
            AllocatorRequest::Retire {
                tag,
                region,
                hand_back,
            } => inner
                .retire(&tag, region, hand_back)
                .await
                .and_then(|v| json(200, &v)),
        })
        .await
    }

    async fn alarm(&self) -> worker::Result<Response> {
        // Its calls to the root: the background budget, no test fault.
        let inner = &self.inner;
        let done = scope::for_alarm(&inner.env).run(inner.on_alarm()).await;
        if let Err(e) = done {
            // Looked at again on the next alarm (the platform retries a
            // failed alarm; this one answers normally and re-arms).
            worker::console_warn!("allocator alarm: {}", e.message);
            let _ = inner.arm(Some(RETIRE_CHECK_MS)).await;
        }
        Response::empty()
    }
}
