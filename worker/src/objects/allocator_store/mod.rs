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
//!   asks the core, **writes the state the core returns**, and only then
//!   answers a range or sends a block ask (the output gate holds the answer
//!   until the write is durable; a write that fails answers nothing and
//!   drops the memory copy). A replacement restored from storage never
//!   serves a range twice (`served_high`), and sends the pending block ask
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

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use edgeleaf::{
    block::BlockAllocator, block::BlockAsk, block::BlockLoad, block::HandBack, block::Serve,
    block::TailAnswer, block::RETIRE_AFTER_MS, code::ErrorCode, rand::RandSource, region::Region,
    wait::MAX_WAIT_MS, wait::RETRY_AFTER_MS,
};
use edgeleaf_rules::wire::allocator::allocator_serve_ms;
use edgeleaf_rules::wire::{
    allocator::AllocatorRequest, allocator::AllocatorView, allocator::BlockView,
    tag::AllocateRequest, tag::OpaqueGrant, tag::SegmentLease, tag::TakeBackRequest,
};
use futures::channel::oneshot;
use futures::future::{self, Either, FutureExt};
use serde::{Deserialize, Serialize};
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, SqlStorage, State,
};

use crate::api::{json, ApiError, ApiResult};
use crate::clock::{now_ms, sleep_ms};
use crate::objects::tag_store;
use crate::stores::{self, call, call_within, create_tables, serve, Missed, RequestScope, Store};

/// A range of `tag` for an isolate of `region` (asked of the allocator of
/// its hosting region), within `limit_ms` of the request's budget.
pub async fn serve_range(
    env: &Env,
    tag: &str,
    region: Region,
    step: u64,
    by: &str,
    limit_ms: u64,
) -> Result<SegmentLease, Missed> {
    let region = region.hosting();
    let request = AllocatorRequest::Serve {
        tag: tag.to_owned(),
        region,
        step,
        by: by.to_owned(),
        limit_ms: Some(limit_ms),
    };
    call_within(env, Store::Allocator(tag, region), &request, Some(limit_ms)).await
}

/// What the allocator of `tag` in `region` holds.
pub async fn view(env: &Env, tag: &str, region: Region) -> ApiResult<AllocatorView> {
    let request = AllocatorRequest::View {
        tag: tag.to_owned(),
        region,
    };
    call(env, Store::Allocator(tag, region), &request).await
}

/// Retires the blocks of the allocator of `tag` in `region`: with
/// `hand_back`, their unused tails go back to the root when nothing
/// followed them.
pub async fn retire(
    env: &Env,
    tag: &str,
    region: Region,
    hand_back: bool,
) -> ApiResult<AllocatorView> {
    let request = AllocatorRequest::Retire {
        tag: tag.to_owned(),
        region,
        hand_back,
    };
    call(env, Store::Allocator(tag, region), &request).await
}

/// How often an allocator holding blocks asks the core whether to retire
/// (a tenth of `RETIRE_AFTER_MS`: three minutes).
const RETIRE_CHECK_MS: i64 = (RETIRE_AFTER_MS / 10) as i64;

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

/// Everything the object keeps, as one row (JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Held {
    tag: String,
    region: Region,
    /// The core's state.
    allocator: BlockAllocator,
    /// An opaque tag's key, as the root gave it with a block.
    #[serde(default)]
    grant: Option<OpaqueGrant>,
    served: u64,
    blocks_leased: u64,
    handed_back: u64,
    /// Writes of this state (counted in it).
    #[serde(default)]
    writes: u64,
}

#[derive(Deserialize)]
struct Row {
    state: String,
}

#[derive(Deserialize)]
struct TableRow {
    #[allow(dead_code)] // only its presence is read
    name: String,
}

/// Its one table, made at its first write.
const TABLE: &str =
    "CREATE TABLE IF NOT EXISTS allocator(id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL)";

#[durable_object]
pub struct RegionalAllocator {
    /// Shared with the block asks it sends in the background.
    inner: Rc<Inner>,
}

struct Inner {
    /// For its alarm (`retire_due`).
    state: State,
    sql: SqlStorage,
    env: Env,
    /// Its table is known to exist (made by this instance, or found).
    table: Cell<bool>,
    /// The state, read at first use; `None` again after a write failed.
    held: RefCell<Option<Held>>,
    /// The serves waiting for the block ask in flight: each is woken when
    /// an ask's answer is in (with the root's error, if it failed).
    waiters: RefCell<Vec<oneshot::Sender<Option<ApiError>>>>,
}

/// Whether an allocator never held a block (nothing handed on, nothing to
/// fence): its first ask waits for the root to say the tag is one.
fn never_held(h: &Held) -> bool {
    h.blocks_leased == 0 && h.allocator.served_high() == 0
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

    /// Its view, without writing anything (an allocator never used stays
    /// empty).
    fn peek(&self, tag: &str, region: Region) -> ApiResult<AllocatorView> {
        if let Some(h) = self.held.borrow().as_ref() {
            return Ok(Self::view_of(h));
        }
        Ok(Self::view_of(&self.read(tag, region)?))
    }

    /// Deletes the state of an allocator that never held a block (nothing
    /// handed on, nothing to fence): `true` if it did.
    fn forget_if_unused(&self) -> ApiResult<bool> {
        let mut cell = self.held.borrow_mut();
        let used = match cell.as_ref() {
            Some(h) => !never_held(h),
            // The memory copy dropped (a write failed): as stored.
            None => self.stored()?.is_some_and(|h| !never_held(&h)),
        };
        if used {
            return Ok(false);
        }
        if self.has_table()? {
            self.sql.exec("DELETE FROM allocator", None)?;
        }
        *cell = None;
        Ok(true)
    }

    /// Whether its table exists (without making it).
    fn has_table(&self) -> ApiResult<bool> {
        if !self.table.get() {
            let found: Vec<TableRow> = self
                .sql
                .exec(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'allocator'",
                    None,
                )?
                .to_array()?;
            self.table.set(!found.is_empty());
        }
        Ok(self.table.get())
    }

    /// The stored state, if any.
    fn stored(&self) -> ApiResult<Option<Held>> {
        if !self.has_table()? {
            return Ok(None);
        }
        let rows: Vec<Row> = self
            .sql
            .exec("SELECT state FROM allocator WHERE id = 1", None)?
            .to_array()?;
        rows.into_iter()
            .next()
            .map(|row| {
                serde_json::from_str(&row.state)
                    .map_err(|e| ApiError::store_error(format!("allocator: state: {e}")))
            })
            .transpose()
    }

    fn read(&self, tag: &str, region: Region) -> ApiResult<Held> {
        match self.stored()? {
            Some(held) => Ok(held),
            None => Ok(Held {
                tag: tag.to_owned(),
                region,
                allocator: BlockAllocator::new(),
                grant: None,
                served: 0,
                blocks_leased: 0,
                handed_back: 0,
                writes: 0,
            }),
        }
    }

    fn write(&self, held: &Held) -> ApiResult<()> {
        let state = serde_json::to_string(held)
            .map_err(|e| ApiError::store_error(format!("allocator: state: {e}")))?;
        if !self.table.get() {
            create_tables(&self.sql, &[TABLE])?;
            self.table.set(true);
        }
        self.sql.exec(
            "INSERT INTO allocator(id, state) VALUES (1, ?)
             ON CONFLICT(id) DO UPDATE SET state = excluded.state",
            vec![state.into()],
        )?;
        Ok(())
    }

    /// A range for an isolate: the core's answer, written, then answered;
    /// a block ask it makes is sent in the background, and a serve without
    /// a range waits for the ask's answer within the caller's limit (woken
    /// by it, never polling), then answers a 503 `store_unavailable` itself
    /// (the root is what is late: the isolate does not ask it too).
    async fn serve_range(
        self: &Rc<Self>,
        tag: &str,
        region: Region,
        step: u64,
    ) -> ApiResult<SegmentLease> {
        let budget = stores::budget();
        let late = || {
            ApiError::unavailable(
                ErrorCode::StoreUnavailable,
                format!("allocator {tag}@{region}: expected a block from the tag's root within the caller's limit, found none"),
                RETRY_AFTER_MS,
            )
        };
        loop {
            let (next, grant, tag_step) = self.update(tag, region, |h| {
                let next = h.allocator.serve(step, now_ms(), &mut Crypto);
                // Written: a range handed on; an ask before it is sent (an
                // allocator's first, once the root said the tag is one:
                // `lease_block`). A wait changes nothing kept (the ask in
                // flight is not).
                let changed = match &next {
                    Serve::Range { .. } => {
                        h.served += 1;
                        true
                    }
                    Serve::Load(_) => !never_held(h),
                    Serve::Wait => false,
                };
                Ok(((next, h.grant.clone(), h.allocator.tag_step()), changed))
            })?;
            let ask = match next {
                Serve::Range { range, ask } => {
                    if let Some(ask) = ask {
                        // The next block, while this range is answered.
                        self.send_ask(ask);
                    }
                    return Ok(SegmentLease {
                        start: range.start.to_string(),
                        end: range.end.to_string(),
                        step: range.step,
                        min_step: tag_step.unwrap_or(1),
                        opaque: grant,
                    });
                }
                Serve::Load(ask) => Some(ask),
                Serve::Wait => None,
            };
            // In line before the ask is sent (it runs once this one awaits).
            let woken = self.waiter();
            if let Some(ask) = ask {
                self.send_ask(ask);
            }
            let left = budget.remaining_ms();
            if left == 0 {
                // No time to wait within the caller's limit (a range it
                // holds is answered whatever the limit, above).
                return Err(late());
            }
            match future::select(woken, sleep_ms(left).boxed_local()).await {
                // Answered (or its sender gone): serve again.
                Either::Left((Ok(None) | Err(_), _)) => {}
                Either::Left((Ok(Some(e)), _)) => return Err(e),
                Either::Right(_) => return Err(late()),
            }
        }
    }

    /// A serve's place in line for the answer of the ask in flight.
    fn waiter(&self) -> oneshot::Receiver<Option<ApiError>> {
        let (tx, rx) = oneshot::channel();
        let mut waiters = self.waiters.borrow_mut();
        // Those whose serve answered already (its caller's limit) leave.
        waiters.retain(|w| !w.is_canceled());
        waiters.push(tx);
        rx
    }

    /// Sends `ask` in the background (the object's own budget, whoever
    /// asked gives up sooner), then wakes the serves waiting for it.
    fn send_ask(self: &Rc<Self>, ask: BlockAsk) {
        let this = Rc::clone(self);
        let load = async move {
            let answer = this.lease_block(&ask).await;
            let waiting = std::mem::take(&mut *this.waiters.borrow_mut());
            for w in waiting {
                let _ = w.send(answer.as_ref().err().cloned());
            }
        };
        wasm_bindgen_futures::spawn_local(stores::background().run(load));
    }

    /// Sends the block ask to the root and reports its answer to the core
    /// (writing the state): the root's error is the answer.
    async fn lease_block(&self, ask: &BlockAsk) -> ApiResult<()> {
        let (tag, region) = {
            let cell = self.held.borrow();
            let held = cell
                .as_ref()
                .ok_or_else(|| ApiError::store_error("allocator: no state"))?;
            (held.tag.clone(), held.region)
        };
        // Its first block's ask is sent unwritten (one call to the root, not
        // two, so that a far region's first ID fits the caller's limit; and
        // a made-up name costs no write): nothing was handed on, so a
        // replacement that asks anew only leaves that block a gap.
        let request = AllocateRequest {
            step: ask.step,
            request_id: Some(ask.request_id.clone()),
            for_isolate: true,
            by: format!("allocator:{region}"),
            own_credential: true,
            after: None,
        };
        let answer = tag_store::allocate(&self.env, &tag, request).await;
        if let Err(e) = &answer {
            let not_ours = matches!(e.code, ErrorCode::NotFound | ErrorCode::MonotonicTag);
            if not_ours && self.forget_if_unused()? {
                // A name that is not a tag, or a monotonic tag (root-only):
                // nothing kept for it (made-up names cost no storage, here
                // as at the root).
                return Err(e.clone());
            }
        }
        self.with_held(&tag, region, |h| {
            let lease = match answer {
                Ok(lease) => lease,
                Err(e) => {
                    h.allocator.load_failed(&ask.request_id);
                    return Err(e);
                }
            };
            let block = match lease.allocation() {
                Ok(block) => block,
                Err(e) => {
                    h.allocator.load_failed(&ask.request_id);
                    return Err(e.into());
                }
            };
            if lease.opaque.is_some() {
                h.grant = lease.opaque.clone();
            }
            let loaded = h
                .allocator
                .loaded(&ask.request_id, block, lease.min_step, now_ms())?;
            if loaded == BlockLoad::Installed {
                h.blocks_leased += 1;
            }
            Ok(())
        })?;
        // An allocator holding blocks looks on a timer whether to retire
        // (the core's `retire_due`: before the root forgets its blocks).
        self.arm().await
    }

    /// Sets the alarm that asks `retire_due`, if none is set.
    async fn arm(&self) -> ApiResult<()> {
        let storage = self.state.storage();
        if storage.get_alarm().await?.is_none() {
            storage.set_alarm(RETIRE_CHECK_MS).await?;
        }
        Ok(())
    }

    /// The alarm: retires (handing the tails back) when the core says it is
    /// due; while it holds blocks, looks again later.
    async fn on_alarm(&self) -> ApiResult<()> {
        let held = self.held.borrow().clone();
        let Some(held) = held.map_or_else(|| self.stored(), |h| Ok(Some(h)))? else {
            return Ok(());
        };
        if held.allocator.retire_due(now_ms()) {
            self.retire(&held.tag, held.region, true).await?;
        } else if held.allocator.available() > 0 || held.allocator.pending().is_some() {
            self.arm().await?;
        }
        Ok(())
    }

    /// Retires every block: the state without them is written first, then
    /// each tail goes back to the root (last first); the tails the root
    /// refused are kept (the core's `keep`: served again, never due to
    /// retire again) and the state written again.
    async fn retire(&self, tag: &str, region: Region, hand_back: bool) -> ApiResult<AllocatorView> {
        if self.held.borrow().is_none() && self.stored()?.is_none() {
            // Never used: nothing to retire, nothing written.
            return self.peek(tag, region);
        }
        let tails = self.with_held(tag, region, |h| Ok(h.allocator.retire()))?;
        if !hand_back {
            return self.peek(tag, region);
        }
        // The state without the tails is written: now they go back, as the
        // core's `HandBack` says, and those still this allocator's alone
        // are served again.
        let mut back = HandBack::new(tails);
        while let Some(tail) = back.to_send() {
            let request = TakeBackRequest {
                request_id: tail.request_id.clone(),
                by: format!("allocator:{region}"),
                start: tail.range.start.to_string(),
                end: tail.range.end.to_string(),
                from: Default::default(),
            };
            let answer = match tag_store::take_back(&self.env, tag, request).await {
                Ok(t) if t.taken => TailAnswer::Taken,
                Ok(t) => TailAnswer::Refused { untaken: t.untaken },
                Err(_) => TailAnswer::Lost,
            };
            back.answered(tail, answer);
        }
        self.with_held(tag, region, |h| {
            let (taken, _) = back.finish(&mut h.allocator, now_ms());
            h.handed_back += taken;
            Ok(Self::view_of(h))
        })
    }

    fn view_of(h: &Held) -> AllocatorView {
        let blocks = h
            .allocator
            .snapshot()
            .segments
            .iter()
            .flatten()
            .filter(|s| s.value <= s.max)
            .map(|s| BlockView {
                start: (s.max + 1 - s.step).to_string(),
                end: s.max.to_string(),
                next: s.value.to_string(),
                left: s.max + 1 - s.value,
            })
            .collect();
        AllocatorView {
            tag: h.tag.clone(),
            region: h.region,
            blocks,
            runway: h.allocator.available(),
            served_high: h.allocator.served_high().to_string(),
            leasing: h.allocator.pending().is_some(),
            served: h.served,
            blocks_leased: h.blocks_leased,
            handed_back: h.handed_back,
            writes: h.writes,
        }
    }
}

impl DurableObject for RegionalAllocator {
    fn new(state: State, env: Env) -> Self {
        // Its table is made at its first write, never before: an object
        // for a name that is not a tag stays empty.
        let sql = state.storage().sql();
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
        // Its calls to the root run in a scope of their own: the background
        // budget (the isolate bounds its own wait) and the caller's test
        // fault.
        let received_ms = now_ms();
        let scope = RequestScope::for_object(&req, &self.inner.env);
        let inner = &self.inner;
        scope
            .run(serve(None, &req, async |r| match r {
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
                    stores::limit_budget(allocator_serve_ms(limit, elapsed));
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
            }))
            .await
    }

    async fn alarm(&self) -> worker::Result<Response> {
        // Its calls to the root: the background budget, no test fault.
        let inner = &self.inner;
        let done = stores::background().run(inner.on_alarm()).await;
        if let Err(e) = done {
            // Looked at again on the next alarm (the platform retries a
            // failed alarm; this one answers normally and re-arms).
            worker::console_warn!("allocator alarm: {}", e.message);
            let _ = inner.arm().await;
        }
        Response::empty()
    }
}
