//! `SnowflakeMinter`: one of `SNOWFLAKE_MINTERS` Durable Objects, each minting
//! snowflake IDs under the one worker ID the registry reserves for it
//! (`Registry::lease_minter`). Isolates fetch batches from it
//! (`MintedBuffer`), so the worker IDs in use are bounded by the number of
//! minters, not of isolates.
//!
//! Its holder is the core's `SnowflakeHolder` with a store: before minting
//! past a reserved timestamp it writes its state (the grant and the
//! reservation) to its SQLite storage, and the output gate holds every answer
//! until that write is durable. A minter killed mid-batch restarts from that
//! state: it proves its grant to the registry, keeps its worker ID, and mints
//! only after the reservation — never an ID its previous incarnation may
//! have handed out.
//!
//! Renewals ride on mint requests (when the holder says one is due); an idle
//! minter's lease lapses, which costs nothing: its worker ID stays reserved
//! for it, and the next request leases again with proof.
//!
//! Minters live in regions: minter `i` is the object `minter-{region}-{i}`,
//! created with its region's location hint, the region that
//! `MinterPools::over_regions` gives it (the worker IDs split so that two
//! regions never share one). An upgrade from the minters of before regions
//! (`minter-{i}`, with saved reservations and live grants) takes each one's
//! place by a hand-over: the regional minter, at its first request, asks
//! `minter-{i}` for its saved state; the old object records that it handed
//! it over (durable before it answers), never mints again, and answers the
//! state once; the new one saves it as its own before it uses it, and then
//! restarts from it as a killed minter does (it proves the grant, mints
//! after the reservation). A hand-over whose answer is lost, or an old
//! object that never minted, leaves the new one without proof: it waits,
//! as the registry rules for a node without proof, until the old grant is
//! free (lapsed + grace), and mints after its end and after every
//! timestamp it reported.

use std::cell::{Cell, RefCell};

use edgeleaf::{
    code::ErrorCode, holder::HolderState, holder::SnowflakeHolder, minted::batch_ranges,
    minted::minter_holder_config, minted::minter_lease_refused, minted::minter_restore_refused,
    minted::minter_step, minted::MinterPools, minted::MinterStep, minted::MAX_MINT_BATCH,
    rand::SplitMix64, wait::RETRY_AFTER_MS,
};
use edgeleaf_rules::wire::{
    minter::Batch, minter::HandOverRequest, minter::HandedOver, minter::MintRequest,
    minter::MinterRequest, registry::MinterLeaseRequest, registry::Previous,
};
use serde::Deserialize;
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, SqlStorage, State,
};

use crate::api::{json, ApiError, ApiResult};
use crate::clock::{now_ms, random_u64};
use crate::config::Config;
use crate::objects::registry_store;
use crate::stores::{call, create_tables, serve, Store};

/// A batch of `count` IDs from minter `index` (in its region):
/// ranges `[start, end)`.
pub async fn mint(env: &Env, index: u32, count: u32) -> ApiResult<Vec<(u64, u64)>> {
    let config = Config::cached(env)?;
    let region = MinterPools::over_regions(config.minters).minter_region(index);
    let request = MinterRequest::Mint(MintRequest {
        index,
        count,
        regional: true,
    });
    let batch: Batch = call(env, Store::Minter(index, region), &request).await?;
    batch
        .numbers()
        .map_err(|e| ApiError::store_error(format!("minter {index}: {e}")))
}

#[derive(Deserialize)]
struct Row {
    v: String,
}

#[durable_object]
pub struct SnowflakeMinter {
    sql: SqlStorage,
    broken: Option<ApiError>,
    env: Env,
    holder: RefCell<Option<SnowflakeHolder<SplitMix64>>>,
    /// A minter of before regions that handed its state over to its
    /// regional successor: it never mints again.
    handed: Cell<bool>,
    /// A regional minter that has its state (its own, or its predecessor's
    /// taken over, or none to take).
    settled: Cell<bool>,
    /// A hand-over from its predecessor is in flight: other requests
    /// answer 503 meanwhile.
    taking_over: Cell<bool>,
}

impl SnowflakeMinter {
    /// Runs `f` on the holder, restored from storage on first use.
    fn with_holder<T>(
        &self,
        config: &Config,
        f: impl FnOnce(&mut SnowflakeHolder<SplitMix64>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        let handed = || {
            let e = "minter: handed over to its regional successor (minter-{region}-{index}); expected to be asked no more";
            ApiError::unavailable(ErrorCode::StoreUnavailable, e, RETRY_AFTER_MS)
        };
        if self.handed.get() {
            return Err(handed());
        }
        let mut cell = self.holder.borrow_mut();
        if cell.is_none() {
            if self.stored("handed")?.is_some() {
                self.handed.set(true);
                return Err(handed());
            }
            let rows: Vec<Row> = self
                .sql
                .exec("SELECT v FROM state WHERE k = 'holder'", None)?
                .to_array()?;
            let rand = SplitMix64::new(random_u64());
            let holder = match rows.first() {
                Some(row) => {
                    let state: HolderState = serde_json::from_str(&row.v)
                        .map_err(|e| ApiError::store_error(format!("minter: stored state: {e}")))?;
                    SnowflakeHolder::restore(
                        minter_holder_config(config.max_backward_ms),
                        rand,
                        state,
                        now_ms(),
                    )
                    .map_err(|e| own_clock(minter_restore_refused(&e), e.into()))?
                }
                None => {
                    SnowflakeHolder::with_rand(minter_holder_config(config.max_backward_ms), rand)?
                }
            };
            *cell = Some(holder);
        }
        let holder = cell
            .as_mut()
            .ok_or_else(|| ApiError::store_error("minter: holder missing"))?;
        f(holder)
    }

    /// The stored value under `k`.
    fn stored(&self, k: &str) -> ApiResult<Option<String>> {
        let rows: Vec<Row> = self
            .sql
            .exec("SELECT v FROM state WHERE k = ?", vec![k.into()])?
            .to_array()?;
        Ok(rows.into_iter().next().map(|r| r.v))
    }

    /// A regional minter's first request: it takes its predecessor's state
    /// over (`minter-{index}`, of before regions), saved as its own before
    /// it is used. Done once; an object with a state of its own never asks.
    async fn take_over(&self, index: u32) -> ApiResult<()> {
        if self.settled.get() || self.holder.borrow().is_some() {
            return Ok(());
        }
        if self.stored("holder")?.is_some() || self.stored("took_over")?.is_some() {
            self.settled.set(true);
            return Ok(());
        }
        if self.taking_over.replace(true) {
            let e = format!(
                "minter {index}: taking over from minter-{index}, expected to be done shortly"
            );
            return Err(ApiError::unavailable(
                ErrorCode::StoreUnavailable,
                e,
                RETRY_AFTER_MS,
            ));
        }
        let request = MinterRequest::HandOver(HandOverRequest { index });
        let answer: ApiResult<HandedOver> =
            call(&self.env, Store::Minter(index, None), &request).await;
        self.taking_over.set(false);
        // A failure: asked again at the next request.
        let answer = answer?;
        if let Some(text) = answer.state {
            self.sql.exec(
                "INSERT OR REPLACE INTO state(k, v) VALUES ('holder', ?)",
                vec![text.into()],
            )?;
        }
        self.sql.exec(
            "INSERT OR REPLACE INTO state(k, v) VALUES ('took_over', '1')",
            None,
        )?;
        self.settled.set(true);
        Ok(())
    }

    /// A minter of before regions hands its saved state to its regional
    /// successor, once: it records that it did (durable before the answer
    /// leaves: the output gate), forgets its holder, and never mints again.
    fn hand_over(&self) -> ApiResult<HandedOver> {
        if self.handed.get() || self.stored("handed")?.is_some() {
            self.handed.set(true);
            return Ok(HandedOver { state: None });
        }
        let state = self.stored("holder")?;
        self.sql.exec(
            "INSERT OR REPLACE INTO state(k, v) VALUES ('handed', '1')",
            None,
        )?;
        self.handed.set(true);
        *self.holder.borrow_mut() = None;
        Ok(HandedOver { state })
    }

    /// Saves the state the holder asks to save (a later reservation), if a
    /// save is due; synchronous, and durable before any answer leaves.
    fn save_if_due(
        &self,
        holder: &mut SnowflakeHolder<SplitMix64>,
        now: u64,
        force: bool,
    ) -> ApiResult<()> {
        if !force && holder.save_due_in(now) != Some(0) {
            return Ok(());
        }
        let Some(state) = holder.save_request(now) else {
            return Ok(());
        };
        let text = serde_json::to_string(&state)
            .map_err(|e| ApiError::store_error(format!("minter: state: {e}")))?;
        match self.sql.exec(
            "INSERT OR REPLACE INTO state(k, v) VALUES ('holder', ?)",
            vec![text.into()],
        ) {
            Ok(_) => {
                holder.saved(&state);
                Ok(())
            }
            Err(e) => {
                holder.save_failed();
                Err(ApiError::store_error(format!("minter: saving state: {e}")))
            }
        }
    }

    async fn mint(&self, config: &Config, r: MintRequest) -> ApiResult<Batch> {
        if r.index >= config.minters {
            return Err(ApiError::new(
                ErrorCode::OutOfRange,
                format!("minter: expected 0..{}, found {}", config.minters, r.index),
            ));
        }
        if r.count == 0 {
            return Err(ApiError::new(
                ErrorCode::OutOfRange,
                format!("count: expected 1..={MAX_MINT_BATCH}, found 0"),
            ));
        }
        // More than it mints in one call: it answers what it can (an isolate
        // of a later release may ask more; the buffer takes fewer).
        let count = r.count.min(MAX_MINT_BATCH);
        if r.regional {
            self.take_over(r.index).await?;
        }
        let layout = config.layout;
        let mut out = vec![0u64; count as usize];
        let mut filled = 0;
        let mut leased = false;
        // No loop here waits: the core's `minter_step` answers at once, and
        // leases at most once (so this runs at most twice).
        loop {
            let now = now_ms();
            let (next, renew) = self.with_holder(config, |h| {
                self.save_if_due(h, now, false)?;
                let poll = h.poll(now, &mut out[filled..])?;
                filled += poll.filled;
                Ok((poll.next, poll.renew))
            })?;
            if let Some(renewal) = renew {
                let answer = registry_store::renew(&self.env, renewal.into()).await;
                self.with_holder(config, |h| {
                    registry_store::renewal_answered(h, renewal, answer, layout, now_ms());
                    Ok(())
                })?;
            }
            match minter_step(filled, next, leased) {
                MinterStep::Answer => break,
                MinterStep::Lease(ask) => {
                    leased = true;
                    let request = MinterLeaseRequest {
                        index: r.index,
                        node_time: ask.node_now_ms,
                        previous: ask.previous.map(Previous::from),
                    };
                    let answer = registry_store::lease_minter(&self.env, request).await;
                    self.with_holder(config, |h| {
                        registry_store::lease_answered(h, answer, layout, now_ms())
                            .map_err(|e| own_clock(minter_lease_refused(e.code), e))?;
                        // The grant is proof after a restart: save it now.
                        self.save_if_due(h, now_ms(), true)
                    })?;
                }
                MinterStep::Unavailable {
                    code,
                    retry_after_ms,
                } => {
                    return Err(ApiError::unavailable(
                        code,
                        format!(
                            "minter {}: expected IDs to mint now, found none for {retry_after_ms} ms",
                            r.index
                        ),
                        retry_after_ms,
                    ));
                }
            }
        }
        out.truncate(filled);
        let ranges = batch_ranges(&layout, &out)
            .into_iter()
            .map(|(s, e)| (s.to_string(), e.to_string()))
            .collect();
        let worker_id = self.with_holder(config, |h| Ok(h.lease().map_or(0, |g| g.worker_id)))?;
        Ok(Batch { worker_id, ranges })
    }
}

/// Applies the core's verdict on a refusal of the service's own clock
/// (`minter_restore_refused`, `minter_lease_refused`): a 503 with
/// `Retry-After`, not the caller's error; `e` as it is otherwise.
fn own_clock(verdict: Option<MinterStep>, e: ApiError) -> ApiError {
    match verdict {
        Some(MinterStep::Unavailable {
            code,
            retry_after_ms,
        }) => ApiError::unavailable(
            code,
            format!("minter: this service's own clock: {}", e.message),
            retry_after_ms,
        ),
        _ => e,
    }
}

impl DurableObject for SnowflakeMinter {
    fn new(state: State, env: Env) -> Self {
        let sql = state.storage().sql();
        let broken = create_tables(
            &sql,
            &["CREATE TABLE IF NOT EXISTS state(k TEXT PRIMARY KEY, v TEXT NOT NULL)"],
        )
        .err();
        SnowflakeMinter {
            sql,
            broken,
            env,
            holder: RefCell::new(None),
            handed: Cell::new(false),
            settled: Cell::new(false),
            taking_over: Cell::new(false),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(self.broken.as_ref(), &req, async |r| match r {
            MinterRequest::Mint(r) => {
                let config = Config::from_env(&self.env)?;
                self.mint(&config, r).await.and_then(|b| json(200, &b))
            }
            MinterRequest::HandOver(_) => self.hand_over().and_then(|h| json(200, &h)),
        })
        .await
    }
}
