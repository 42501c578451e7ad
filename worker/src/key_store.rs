//! `KeyStore`: the Durable Object that holds the service's API keys — each
//! key's name, scopes, tag limit and the SHA-256 hash of its token. The token
//! itself is made in the Worker, answered once to whoever created the key,
//! and never reaches storage.

use edgeleaf_rules::wire::keys::{
    KeyList, KeyRequest, KeyView, Lookup, NewKey, Revoked, StoredKey,
};
use serde::Deserialize;
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, SqlStorage, State,
};

use crate::api::{json, ApiError, ApiResult};
use crate::clock::now_ms;
use crate::stores::{call, create_tables, serve, stored_u64, Store};

/// The most keys the store holds.
pub const MAX_KEYS: u64 = 1000;

/// Stores a new key.
pub async fn create(env: &Env, key: NewKey) -> ApiResult<KeyView> {
    call(env, Store::Keys, &KeyRequest::Create(key)).await
}

/// The stored record of key `id`, if there is one.
pub async fn lookup(env: &Env, id: &str) -> ApiResult<Lookup> {
    let id = id.to_owned();
    call(env, Store::Keys, &KeyRequest::Lookup { id }).await
}

/// Every key, oldest first.
pub async fn list(env: &Env) -> ApiResult<KeyList> {
    call(env, Store::Keys, &KeyRequest::List).await
}

/// Deletes key `id` (404 if there is none).
pub async fn revoke(env: &Env, id: &str) -> ApiResult<Revoked> {
    let id = id.to_owned();
    call(env, Store::Keys, &KeyRequest::Revoke { id }).await
}

#[derive(Deserialize)]
struct Row {
    id: String,
    name: String,
    scopes: String,
    tags: String,
    hash: String,
    created: i64,
    last_used: Option<i64>,
}

#[derive(Deserialize)]
struct Count {
    n: i64,
}

fn scopes(raw: &str) -> Vec<String> {
    raw.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Row {
    fn view(&self) -> ApiResult<KeyView> {
        Ok(KeyView {
            id: self.id.clone(),
            name: self.name.clone(),
            scopes: scopes(&self.scopes),
            tags: self.tags.clone(),
            created_ms: stored_u64("created", self.created)?,
            last_used_ms: self
                .last_used
                .map(|v| stored_u64("last_used", v))
                .transpose()?,
        })
    }
}

#[durable_object]
pub struct KeyStore {
    sql: SqlStorage,
    /// Set when the table could not be created: every call answers it.
    broken: Option<ApiError>,
}

impl KeyStore {
    fn rows(&self, id: Option<&str>) -> ApiResult<Vec<Row>> {
        Ok(match id {
            Some(id) => self
                .sql
                .exec("SELECT * FROM keys WHERE id = ?", vec![id.into()])?,
            None => self
                .sql
                .exec("SELECT * FROM keys ORDER BY created, id", None)?,
        }
        .to_array()?)
    }

    fn create(&self, k: NewKey) -> ApiResult<Response> {
        let count: Vec<Count> = self
            .sql
            .exec("SELECT count(*) AS n FROM keys", None)?
            .to_array()?;
        if count.first().is_some_and(|c| c.n >= MAX_KEYS as i64) {
            return Err(ApiError::new(
                edgeleaf::code::ErrorCode::InvalidKeySpec,
                format!(
                    "keys: expected fewer than {MAX_KEYS} keys, found {MAX_KEYS} (revoke some)"
                ),
            ));
        }
        if !self.rows(Some(&k.id))?.is_empty() {
            // 48 random bits: a clash means the randomness is broken.
            return Err(ApiError::store_error("key store: key id already taken"));
        }
        #[allow(clippy::cast_possible_wrap)] // Unix ms
        self.sql.exec(
            "INSERT INTO keys(id, name, scopes, tags, hash, created, last_used) VALUES (?, ?, ?, ?, ?, ?, NULL)",
            vec![
                k.id.as_str().into(),
                k.name.as_str().into(),
                k.scopes.join(",").into(),
                k.tags.as_str().into(),
                k.hash.as_str().into(),
                (now_ms() as i64).into(),
            ],
        )?;
        let row = self
            .rows(Some(&k.id))?
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::store_error("key store: key not written"))?;
        json(201, &row.view()?)
    }

    fn lookup(&self, id: &str) -> ApiResult<Response> {
        let row = self.rows(Some(id))?.into_iter().next();
        if row.is_some() {
            #[allow(clippy::cast_possible_wrap)] // Unix ms
            self.sql.exec(
                "UPDATE keys SET last_used = ? WHERE id = ?",
                vec![(now_ms() as i64).into(), id.into()],
            )?;
        }
        json(
            200,
            &Lookup {
                key: row.map(|r| StoredKey {
                    hash: r.hash,
                    scopes: scopes(&r.scopes),
                    tags: r.tags,
                }),
            },
        )
    }

    fn list(&self) -> ApiResult<Response> {
        let keys = self
            .rows(None)?
            .iter()
            .map(Row::view)
            .collect::<ApiResult<Vec<_>>>()?;
        json(200, &KeyList { keys })
    }

    fn revoke(&self, id: &str) -> ApiResult<Response> {
        let row = self.rows(Some(id))?.into_iter().next().ok_or_else(|| {
            ApiError::not_found(format!(
                "key: expected a key listed by GET /v1/keys, found {id:?}"
            ))
        })?;
        self.sql
            .exec("DELETE FROM keys WHERE id = ?", vec![id.into()])?;
        json(
            200,
            &Revoked {
                revoked: row.view()?,
            },
        )
    }
}

impl DurableObject for KeyStore {
    fn new(state: State, _env: Env) -> Self {
        let sql = state.storage().sql();
        let broken = create_tables(&sql, &[
            "CREATE TABLE IF NOT EXISTS keys(id TEXT PRIMARY KEY, name TEXT NOT NULL, scopes TEXT NOT NULL,
               tags TEXT NOT NULL, hash TEXT NOT NULL, created INTEGER NOT NULL, last_used INTEGER)",
        ])
        .err();
        KeyStore { sql, broken }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        serve(self.broken.as_ref(), &mut req, async |r| match r {
            KeyRequest::List => self.list(),
            KeyRequest::Create(k) => self.create(k),
            KeyRequest::Lookup { id } => self.lookup(&id),
            KeyRequest::Revoke { id } => self.revoke(&id),
        })
        .await
    }
}
