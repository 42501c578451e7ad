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
//! It lends rights to mint too (`SNOWFLAKE_RIGHTS`; `rights.rs`): a second
//! holder, its rights holder, leases worker ID `rights_worker_index(N, i)`
//! (`N + i`, reserved by the registry when rights are on) by the same
//! minter lease, renews and saves (its own row, `'rights'`) as the batch
//! holder does, and never mints; the core's `RightLedger` lends isolates
//! slices of that worker ID's sequence for up to a minute, below the
//! reservation it saved. A minter of 0.1.0 taking this storage over (a
//! rollback) reads only the batch holder's row and never touches `N + i`.
//! The ledger is in memory: a restarted minter lends again only after its
//! saved reservation.
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

mod handlers;
mod rights;
mod schema;
pub mod stubs;

use std::cell::{Cell, RefCell};

use edgeleaf::{
    code::ErrorCode, holder::HolderConfig, holder::HolderState, holder::SnowflakeHolder,
    minted::minter_holder_config, minted::minter_restore_refused, minted::MinterStep,
    minted::RightLedger, rand::SplitMix64, wait::RETRY_AFTER_MS,
};
use edgeleaf_rules::wire::minter::MinterRequest;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use crate::api::{json, ApiError, ApiResult};
use crate::clock::{now_ms, random_u64};
use crate::config::Config;
use crate::objects::serve::serve;
use crate::objects::sql::{create_tables, Sql};

use schema::{StateRow, BATCHES, TABLES};

#[durable_object]
pub struct SnowflakeMinter {
    sql: Sql,
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
    /// Its rights holder (worker ID `rights_worker_index(minters, index)`,
    /// saved under its own row), restored on first use; what it lent, in
    /// memory (a restarted minter lends only after its saved reservation),
    /// with when its lease may be asked for again after a failure.
    rights: RefCell<Option<SnowflakeHolder<SplitMix64>>>,
    ledger: RefCell<Option<RightLedger>>,
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
            let config = minter_holder_config(config.max_backward_ms);
            *cell = Some(self.restored(&BATCHES, config)?);
        }
        let holder = cell
            .as_mut()
            .ok_or_else(|| ApiError::store_error("minter: holder missing"))?;
        f(holder)
    }

    /// The holder saved under `row`, restarted from its saved state (or new,
    /// without one).
    fn restored(
        &self,
        row: &StateRow,
        config: HolderConfig,
    ) -> ApiResult<SnowflakeHolder<SplitMix64>> {
        let saved = self.stored(row.key)?;
        let rand = SplitMix64::new(random_u64());
        match saved {
            Some(text) => {
                let state: HolderState = serde_json::from_str(&text).map_err(|e| {
                    ApiError::store_error(format!("minter: stored {}: {e}", row.what))
                })?;
                SnowflakeHolder::restore(config, rand, state, now_ms())
                    .map_err(|e| own_clock(minter_restore_refused(&e), e.into()))
            }
            None => Ok(SnowflakeHolder::with_rand(config, rand)?),
        }
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
        let sql = Sql::new(&state);
        let broken = create_tables(&sql, TABLES).err();
        SnowflakeMinter {
            sql,
            broken,
            env,
            holder: RefCell::new(None),
            handed: Cell::new(false),
            settled: Cell::new(false),
            taking_over: Cell::new(false),
            rights: RefCell::new(None),
            ledger: RefCell::new(None),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(&self.env, self.broken.as_ref(), &req, async |r| match r {
            MinterRequest::Mint(r) => {
                let config = Config::from_env(&self.env)?;
                self.mint(&config, r).await.and_then(|b| json(200, &b))
            }
            MinterRequest::HandOver(_) => self.hand_over().and_then(|h| json(200, &h)),
        })
        .await
    }
}
