//! The registry's answers that are more than one call of the core's
//! `Registry`: a grant, the list of slots, the lease events.

use edgeleaf::{
    registry::Lease, registry::Registry, registry::SlotStatus, secret::LeaseSecret,
    secret::SecretHash, secret::LEASE_SECRET_BYTES,
};
use edgeleaf_rules::lease::secret_hash;
use edgeleaf_rules::wire::registry::{EventList, EventView, Granted, WorkerList, WorkerView};
use serde::Deserialize;
use worker::Response;

use crate::api::{json, ApiResult};
use crate::clock::random_bytes;

use super::WorkerRegistry;

impl WorkerRegistry {
    pub(super) fn events(&self) -> ApiResult<Response> {
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

    /// Grants a lease under a fresh secret from the platform's CSPRNG: the
    /// registry is given its hash, and the answer carries it once.
    pub(super) fn grant(
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

    pub(super) fn list(&self) -> ApiResult<Response> {
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
