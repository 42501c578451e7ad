//! `WorkerRegistry`: the Durable Object that leases snowflake worker IDs (Leaf
//! used ZooKeeper), running the core's `Registry`. The registry lives in
//! memory while the object does and is written through, one row per worker
//! ID, before any answer leaves (the output gate): a restart reloads exactly
//! what was granted.

mod handlers;
mod schema;
pub mod stubs;

use std::cell::RefCell;

use edgeleaf::{registry::GrantRequest, registry::Registry, registry::RegistryConfig};
use edgeleaf_rules::wire::registry::{Evicted, Previous, RegistryRequest, Released};
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use crate::api::{json, ApiError, ApiResult};
use crate::config::Config;
use crate::objects::serve::serve;
use crate::objects::sql::{create_tables, Sql};

use schema::TABLES;

#[durable_object]
pub struct WorkerRegistry {
    sql: Sql,
    /// Set when the tables could not be created: every call answers it.
    broken: Option<ApiError>,
    env: Env,
    registry: RefCell<Option<Registry>>,
}

impl WorkerRegistry {
    fn config(&self) -> ApiResult<RegistryConfig> {
        Ok(Config::from_env(&self.env)?.registry)
    }
}

impl DurableObject for WorkerRegistry {
    fn new(state: State, env: Env) -> Self {
        let sql = Sql::new(&state);
        let broken = create_tables(&sql, TABLES).err();
        WorkerRegistry {
            sql,
            broken,
            env,
            registry: RefCell::new(None),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(&self.env, self.broken.as_ref(), &req, async |r| match r {
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
