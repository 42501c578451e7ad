//! `WorkerRegistry`: the Durable Object that leases snowflake worker IDs (Leaf
//! used ZooKeeper), running the core's `Registry`. The registry lives in
//! memory while the object does and is written through, one row per worker
//! ID, before any answer leaves (the output gate): a restart reloads exactly
//! what was granted.

use std::cell::RefCell;

use edgeleaf::{
    code::ErrorCode, holder::Grant, holder::Renewal, holder::SnowflakeHolder, rand::RandSource,
    registry::GrantRequest, registry::Lease, registry::LeaseEvent, registry::Registry,
    registry::RegistryConfig, registry::SlotStatus, registry::WorkerSlot, secret::LeaseSecret,
    secret::SecretHash, secret::LEASE_SECRET_BYTES, Layout,
};
use edgeleaf_rules::history::LEASE_EVENTS_LEN;
use edgeleaf_rules::lease::secret_hash;
use edgeleaf_rules::wire::registry::{
    EventList, EventView, Evicted, Granted, LeaseRequest, MinterLeaseRequest, Previous,
    RegistryRequest, Released, RenewRequest, WorkerList, WorkerView,
};
use serde::Deserialize;
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, SqlStorage, State,
};

use crate::api::{json, ApiError, ApiResult};
use crate::clock::{now_ms, random_bytes};
use crate::config::Config;
use crate::stores::{append_bounded, call, create_tables, serve, stored_u64, Store};

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

#[durable_object]
pub struct WorkerRegistry {
    sql: SqlStorage,
    /// Set when the tables could not be created: every call answers it.
    broken: Option<ApiError>,
    env: Env,
    registry: RefCell<Option<Registry>>,
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

#[derive(Deserialize)]
struct SlotRow {
    worker_id: i64,
    node_key: String,
    generation: i64,
    expires_at: i64,
    released: i64,
    last_timestamp: i64,
    reported_clock: i64,
    reported_at: i64,
    owner: String,
    secret_hash: Option<String>,
    evicted: i64,
}

#[derive(Deserialize)]
struct Meta {
    v: i64,
}

impl WorkerRegistry {
    fn config(&self) -> ApiResult<RegistryConfig> {
        Ok(Config::from_env(&self.env)?.registry)
    }

    /// Runs `op` on the registry (loaded on first use), then writes the slot
    /// it names, the generation counter and the lease events the registry
    /// emitted.
    fn with_registry<T>(
        &self,
        op: impl FnOnce(&mut Registry, u64) -> ApiResult<(T, Option<u32>)>,
    ) -> ApiResult<T> {
        let mut cell = self.registry.borrow_mut();
        if cell.is_none() {
            let rows: Vec<SlotRow> = self
                .sql
                .exec(
                    "SELECT s.*, COALESCE(o.owner, '') AS owner, g.secret_hash, COALESCE(g.evicted, 0) AS evicted
                       FROM slots s LEFT JOIN owners o USING (worker_id) LEFT JOIN grants g USING (worker_id)",
                    None,
                )?
                .to_array()?;
            let meta: Vec<Meta> = self
                .sql
                .exec("SELECT v FROM meta WHERE k = 'next_generation'", None)?
                .to_array()?;
            let slots = rows
                .into_iter()
                .map(|r| {
                    Ok(WorkerSlot {
                        worker_id: u32::try_from(r.worker_id).map_err(|_| {
                            ApiError::store_error(format!(
                                "registry: worker_id {} out of range",
                                r.worker_id
                            ))
                        })?,
                        node_key: r.node_key,
                        generation: stored_u64("generation", r.generation)?,
                        expires_at_ms: stored_u64("expires_at", r.expires_at)?,
                        released: r.released != 0,
                        last_timestamp_ms: stored_u64("last_timestamp", r.last_timestamp)?,
                        reported_clock_ms: stored_u64("reported_clock", r.reported_clock)?,
                        reported_at_ms: stored_u64("reported_at", r.reported_at)?,
                        owner: r.owner,
                        secret: r
                            .secret_hash
                            .map(|h| {
                                SecretHash::from_hex(&h).ok_or_else(|| {
                                    ApiError::store_error(
                                        "registry: a stored secret hash is not 64 hex digits",
                                    )
                                })
                            })
                            .transpose()?,
                        evicted: r.evicted != 0,
                    })
                })
                .collect::<ApiResult<Vec<WorkerSlot>>>()?;
            let next = match meta.first() {
                Some(m) => stored_u64("next_generation", m.v)?,
                None => 1,
            };
            // The core checks every slot (worker ID in range, generation
            // below the counter, node key); a row that fails is an error.
            let registry = Registry::from_parts(self.config()?, next, slots)
                .map_err(|e| ApiError::store_error(format!("registry: stored rows: {e}")))?;
            *cell = Some(registry);
        }
        let registry = cell
            .as_mut()
            .ok_or_else(|| ApiError::store_error("registry: not loaded"))?;
        let now = now_ms();
        let result = op(registry, now);
        let events = registry.take_events();
        let (value, changed) = result?;
        let written = match changed.and_then(|id| registry.slot(id)) {
            Some(slot) => self.persist(slot, registry.next_generation()),
            None => Ok(()),
        }
        .and_then(|()| self.record(&events));
        if let Err(e) = written {
            // Memory must never run ahead of storage: reload next time.
            *cell = None;
            return Err(e);
        }
        Ok(value)
    }

    /// Appends lease events, keeping the last `LEASE_EVENTS_LEN`.
    fn record(&self, events: &[LeaseEvent]) -> ApiResult<()> {
        for e in events {
            // Unix ms and generations stay far below 2^63.
            #[allow(clippy::cast_possible_wrap)]
            let row = vec![
                (e.at_ms as i64).into(),
                e.kind.as_str().into(),
                i64::from(e.worker_id).into(),
                e.node_key.as_str().into(),
                (e.generation as i64).into(),
                e.owner.as_str().into(),
            ];
            append_bounded(
                &self.sql,
                "events",
                &["at", "kind", "worker_id", "node_key", "generation", "owner"],
                row,
                LEASE_EVENTS_LEN,
            )?;
        }
        Ok(())
    }

    fn events(&self) -> ApiResult<Response> {
        #[derive(Deserialize)]
        struct Raw {
            seq: i64,
            at: i64,
            kind: String,
            worker_id: i64,
            node_key: String,
            generation: i64,
            owner: String,
        }
        let rows: Vec<Raw> = self
            .sql
            .exec("SELECT * FROM events ORDER BY seq DESC", None)?
            .to_array()?;
        let events: Vec<EventView> = rows
            .into_iter()
            .map(|r| EventView {
                seq: r.seq,
                at_ms: r.at,
                kind: r.kind,
                worker_id: r.worker_id,
                node_key: r.node_key,
                generation: r.generation,
                owner: r.owner,
            })
            .collect();
        json(200, &EventList { events })
    }

    fn persist(&self, slot: &WorkerSlot, next_generation: u64) -> ApiResult<()> {
        // Unix ms, generations and worker IDs stay far below 2^53.
        #[allow(clippy::cast_possible_wrap)]
        let row: Vec<worker::SqlStorageValue> = vec![
            i64::from(slot.worker_id).into(),
            slot.node_key.as_str().into(),
            (slot.generation as i64).into(),
            (slot.expires_at_ms as i64).into(),
            i64::from(slot.released).into(),
            (slot.last_timestamp_ms as i64).into(),
            (slot.reported_clock_ms as i64).into(),
            (slot.reported_at_ms as i64).into(),
        ];
        self.sql.exec(
            "INSERT OR REPLACE INTO slots(worker_id, node_key, generation, expires_at, released,
               last_timestamp, reported_clock, reported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )?;
        self.sql.exec(
            "INSERT OR REPLACE INTO owners(worker_id, owner) VALUES (?, ?)",
            vec![i64::from(slot.worker_id).into(), slot.owner.as_str().into()],
        )?;
        let hash: worker::SqlStorageValue = match slot.secret {
            Some(h) => h.to_hex().into(),
            None => worker::SqlStorageValue::Null,
        };
        self.sql.exec(
            "INSERT OR REPLACE INTO grants(worker_id, secret_hash, evicted) VALUES (?, ?, ?)",
            vec![
                i64::from(slot.worker_id).into(),
                hash,
                i64::from(slot.evicted).into(),
            ],
        )?;
        #[allow(clippy::cast_possible_wrap)]
        self.sql.exec(
            "INSERT OR REPLACE INTO meta(k, v) VALUES ('next_generation', ?)",
            vec![(next_generation as i64).into()],
        )?;
        Ok(())
    }

    /// Grants a lease under a fresh secret from the platform's CSPRNG: the
    /// registry is given its hash, and the answer carries it once.
    fn grant(
        &self,
        op: impl FnOnce(&mut Registry, SecretHash, u64) -> Result<Lease, edgeleaf::Error>,
    ) -> ApiResult<Response> {
        let secret = LeaseSecret::from_random(random_bytes::<LEASE_SECRET_BYTES>()?);
        let lease = self.with_registry(|reg, now| {
            let lease = op(reg, secret_hash(&secret), now)?;
            let id = lease.worker_id;
            Ok((lease, Some(id)))
        })?;
        json(200, &Granted { lease, secret })
    }

    fn list(&self) -> ApiResult<Response> {
        self.with_registry(|reg, now| {
            let workers: Vec<_> = reg
                .slots()
                .map(|s| {
                    let status = match reg.status(s, now) {
                        SlotStatus::Live => "live",
                        SlotStatus::Lapsed => "lapsed",
                        SlotStatus::Free => "free",
                    };
                    WorkerView {
                        worker_id: s.worker_id,
                        node_key: s.node_key.clone(),
                        generation: s.generation,
                        status: status.to_owned(),
                        expires_at_ms: s.expires_at_ms,
                        last_timestamp_ms: s.last_timestamp_ms,
                        released: s.released,
                        evicted: s.evicted,
                        owner: s.owner.clone(),
                    }
                })
                .collect();
            let live = workers.iter().filter(|w| w.status == "live").count();
            Ok((
                WorkerList {
                    capacity: reg.config().capacity,
                    live,
                    workers,
                },
                None,
            ))
        })
        .and_then(|v| json(200, &v))
    }
}

impl DurableObject for WorkerRegistry {
    fn new(state: State, env: Env) -> Self {
        let sql = state.storage().sql();
        let broken = create_tables(&sql, &[
            "CREATE TABLE IF NOT EXISTS slots(worker_id INTEGER PRIMARY KEY, node_key TEXT NOT NULL,
               generation INTEGER NOT NULL, expires_at INTEGER NOT NULL, released INTEGER NOT NULL,
               last_timestamp INTEGER NOT NULL, reported_clock INTEGER NOT NULL, reported_at INTEGER NOT NULL)",
            "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL)",
            // Added after `slots`: a table of its own, so that stores made
            // before it need no migration (no row: no owner).
            "CREATE TABLE IF NOT EXISTS owners(worker_id INTEGER PRIMARY KEY, owner TEXT NOT NULL)",
            "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL,
               worker_id INTEGER NOT NULL, node_key TEXT NOT NULL, generation INTEGER NOT NULL, owner TEXT NOT NULL)",
            // Added with lease secrets, again a table of its own: a slot
            // without a row is a grant from before secrets (nobody can
            // prove to hold it; it is fenced at its expiry + max skew).
            "CREATE TABLE IF NOT EXISTS grants(worker_id INTEGER PRIMARY KEY, secret_hash TEXT, evicted INTEGER NOT NULL)",
        ])
        .err();
        WorkerRegistry {
            sql,
            broken,
            env,
            registry: RefCell::new(None),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(self.broken.as_ref(), &req, async |r| match r {
            RegistryRequest::List => self.list(),
            RegistryRequest::Events => self.events(),
            RegistryRequest::Lease(r) => self.grant(|reg, hash, now| {
                let ask = GrantRequest {
                    owner: &r.owner,
                    node_key: &r.node_key,
                    node_now_ms: r.node_time,
                    previous: r.previous.map(Previous::proof),
                    secret_hash: hash,
                };
                reg.lease(ask, now)
            }),
            RegistryRequest::LeaseMinter(r) => self.grant(|reg, hash, now| {
                let previous = r.previous.map(Previous::proof);
                reg.lease_minter(r.index, r.node_time, previous, hash, now)
            }),
            RegistryRequest::Renew(r) => self
                .with_registry(|reg, now| {
                    let lease = reg.renew(&r.owner, &r.renewal(), now)?;
                    Ok((lease, Some(r.claim.worker_id)))
                })
                .and_then(|l| json(200, &l)),
            RegistryRequest::Release(r) => self
                .with_registry(|reg, now| {
                    reg.release(&r.owner, &r.renewal(), now)?;
                    Ok(((), Some(r.claim.worker_id)))
                })
                .and_then(|()| json(200, &Released { released: true })),
            RegistryRequest::Evict { worker_id } => self
                .with_registry(|reg, now| {
                    let end = reg.evict(worker_id, now)?;
                    Ok((end, Some(worker_id)))
                })
                .and_then(|end| {
                    json(
                        200,
                        &Evicted {
                            evicted: true,
                            issue_after_ms: end,
                            worker_id,
                        },
                    )
                }),
        })
        .await
    }
}
