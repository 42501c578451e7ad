//! The API keys' Durable Objects. Each key has an object of its own
//! (`ApiKey`, named by the key's ID): its name, scopes, tag limit and the
//! SHA-256 hash of its token, the one record an isolate checks a token
//! against. The index of keys (`KeyStore`, one object) lists them, counts
//! them against `MAX_KEYS`, and makes and revokes them. A lookup reaches the
//! key's own object only, so a made-up key ID costs a call to an object of
//! its own, which holds nothing and writes nothing. The token itself is made
//! in the Worker, answered once to whoever created the key, and never
//! reaches storage.
//!
//! The order of the two writes, so that a crash between them never leaves a
//! revoked key usable: the key's own object is the truth for a token, the
//! index only lists. Creation writes the index's row, then the key's object
//! (a crash between: a listed key that opens nothing, whose token nobody was
//! given; revoking it removes the row). Revocation writes the key's object
//! (revoked for good: a later copy of it is refused), then removes the row
//! (a crash between: a listed key that opens nothing; revoking it again
//! finishes).
//!
//! Keys kept before each key had its own object are the index's rows with a
//! hash. While any remain, an isolate whose lookup finds nothing asks the
//! index (`Adopt`), which copies that key and up to `ADOPT_BATCH` others out
//! to their own objects, then drops their hash from its rows; once none
//! remain the isolate stops asking (one call per isolate in a store made
//! after the change).

mod handlers;
mod schema;
pub mod stubs;

use std::cell::RefCell;
use std::collections::BTreeSet;

use edgeleaf_rules::wire::keys::{KeyRequest, Lookup};
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use crate::api::{json, ApiError};
use crate::objects::serve::serve;
use crate::objects::sql::{create_tables, Sql};

/// Keys from before each key had its own object that one `Adopt` copies out
/// at most (each a call from the index: well within a request's subrequests).
const ADOPT_BATCH: usize = 20;

/// The index of keys: one row per key (no hash, except in the rows of keys
/// kept before each key had its own object, until they are copied out).
use schema::TABLES;

#[durable_object]
pub struct KeyStore {
    sql: Sql,
    env: Env,
    /// The IDs of the old keys being copied out now.
    copying: RefCell<BTreeSet<String>>,
    /// Set when the table could not be created: every call answers it.
    broken: Option<ApiError>,
}

impl DurableObject for KeyStore {
    fn new(state: State, env: Env) -> Self {
        let sql = Sql::new(&state);
        let broken = create_tables(&sql, TABLES).err();
        KeyStore {
            sql,
            env,
            copying: RefCell::default(),
            broken,
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(&self.env, self.broken.as_ref(), &req, async |r| match r {
            KeyRequest::List => self.list(),
            KeyRequest::Create(k) => self.create(k).await,
            KeyRequest::Lookup { id } => json(
                200,
                &Lookup {
                    key: self.adopt(&id).await?.key,
                },
            ),
            KeyRequest::Revoke { id } => self.revoke(&id).await,
            KeyRequest::Adopt { id } => json(200, &self.adopt(&id).await?),
            KeyRequest::Used { id, at_ms } => self.used(&id, at_ms),
        })
        .await
    }
}
