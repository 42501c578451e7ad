//! The registry's storage: one row per worker ID, the generation counter
//! and the lease events, written through before any answer leaves.

use edgeleaf::{
    registry::LeaseEvent, registry::Registry, registry::WorkerSlot, secret::SecretHash,
};
use edgeleaf_rules::history::LEASE_EVENTS_LEN;
use serde::Deserialize;

use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::objects::sql::{append_bounded, stored_u64};

use super::WorkerRegistry;

/// The registry's tables, made when the object starts.
pub(super) const TABLES: &[&str] = &[
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
];

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
    /// Runs `op` on the registry (loaded on first use), then writes the slot
    /// it names, the generation counter and the lease events the registry
    /// emitted.
    pub(super) fn with_registry<T>(
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
}
