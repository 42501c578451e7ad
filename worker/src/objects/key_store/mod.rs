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

use std::cell::RefCell;
use std::collections::BTreeSet;

use edgeleaf::code::ErrorCode;
use edgeleaf_rules::access::{KEY_USE_REPORT_MS, MAX_KEYS};
use edgeleaf_rules::wire::catalog::Done;
use edgeleaf_rules::wire::keys::{
    Adopted, ApiKeyRequest, KeyEntry, KeyList, KeyRequest, KeyView, Lookup, NewKey, Revoked,
    StoredKey,
};
use serde::{Deserialize, Serialize};
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, SqlStorage, State,
};

use crate::api::{json, ApiError, ApiResult};
use crate::clock::now_ms;
use crate::stores::{call, create_tables, serve, stored_u64, Store};

/// Keys from before each key had its own object that one `Adopt` copies out
/// at most (each a call from the index: well within a request's subrequests).
const ADOPT_BATCH: usize = 20;

/// Makes a new key (the index's row, then the key's own object).
pub async fn create(env: &Env, key: NewKey) -> ApiResult<KeyView> {
    call(env, Store::Keys, &KeyRequest::Create(key)).await
}

/// The record of key `id`, from its own object, if it has one.
pub async fn lookup(env: &Env, id: &str) -> ApiResult<Lookup> {
    let id = id.to_owned();
    call(
        env,
        Store::Key(&id),
        &ApiKeyRequest::Lookup { id: id.clone() },
    )
    .await
}

/// Asks the index to copy key `id` out to its own object if it kept it
/// from before each key had one.
pub async fn adopt(env: &Env, id: &str) -> ApiResult<Adopted> {
    let id = id.to_owned();
    call(env, Store::Keys, &KeyRequest::Adopt { id }).await
}

/// Every key, oldest first.
pub async fn list(env: &Env) -> ApiResult<KeyList> {
    call(env, Store::Keys, &KeyRequest::List).await
}

/// Revokes key `id` (404 if the index lists none).
pub async fn revoke(env: &Env, id: &str) -> ApiResult<Revoked> {
    let id = id.to_owned();
    call(env, Store::Keys, &KeyRequest::Revoke { id }).await
}

async fn key_object(env: &Env, id: &str, request: ApiKeyRequest) -> ApiResult<Lookup> {
    call(env, Store::Key(id), &request).await
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

    /// The key as its own object keeps it (`hash`: the index's, if it
    /// still has one, else the new key's).
    fn entry(&self, hash: &str) -> ApiResult<KeyEntry> {
        let view = self.view()?;
        Ok(KeyEntry {
            id: view.id,
            name: view.name,
            scopes: view.scopes,
            tags: view.tags,
            hash: hash.to_owned(),
            created_ms: view.created_ms,
            last_used_ms: view.last_used_ms,
        })
    }
}

/// The index of keys: one row per key (no hash, except in the rows of keys
/// kept before each key had its own object, until they are copied out).
#[durable_object]
pub struct KeyStore {
    sql: SqlStorage,
    env: Env,
    /// The IDs of the old keys being copied out now.
    copying: RefCell<BTreeSet<String>>,
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

    fn row(&self, id: &str) -> ApiResult<Option<Row>> {
        Ok(self.rows(Some(id))?.into_iter().next())
    }

    async fn create(&self, k: NewKey) -> ApiResult<Response> {
        let count: Vec<Count> = self
            .sql
            .exec("SELECT count(*) AS n FROM keys", None)?
            .to_array()?;
        if count.first().is_some_and(|c| c.n >= MAX_KEYS as i64) {
            return Err(ApiError::new(
                ErrorCode::InvalidKeySpec,
                format!(
                    "keys: expected fewer than {MAX_KEYS} keys, found {MAX_KEYS} (revoke some)"
                ),
            ));
        }
        if self.row(&k.id)?.is_some() {
            // 48 random bits: a clash means the randomness is broken.
            return Err(ApiError::store_error("key store: key id already taken"));
        }
        // The row first (its key opens nothing yet), with no hash: the
        // key's own object keeps that.
        #[allow(clippy::cast_possible_wrap)] // Unix ms
        self.sql.exec(
            "INSERT INTO keys(id, name, scopes, tags, hash, created, last_used) VALUES (?, ?, ?, ?, '', ?, NULL)",
            vec![
                k.id.as_str().into(),
                k.name.as_str().into(),
                k.scopes.join(",").into(),
                k.tags.as_str().into(),
                (now_ms() as i64).into(),
            ],
        )?;
        let row = self
            .row(&k.id)?
            .ok_or_else(|| ApiError::store_error("key store: key not written"))?;
        let made = key_object(&self.env, &k.id, ApiKeyRequest::Create(row.entry(&k.hash)?)).await;
        if !matches!(made, Ok(Lookup { key: Some(_) })) {
            // Not made (or not known to be): revoked for good, then unlisted.
            let _ = key_object(&self.env, &k.id, ApiKeyRequest::Revoke { id: k.id.clone() }).await;
            self.sql
                .exec("DELETE FROM keys WHERE id = ?", vec![k.id.as_str().into()])?;
            made?;
            return Err(ApiError::store_error(
                "key store: the key's object refused it",
            ));
        }
        json(201, &row.view()?)
    }

    fn list(&self) -> ApiResult<Response> {
        let keys = self
            .rows(None)?
            .iter()
            .map(Row::view)
            .collect::<ApiResult<Vec<_>>>()?;
        json(200, &KeyList { keys })
    }

    async fn revoke(&self, id: &str) -> ApiResult<Response> {
        let row = self.row(id)?.ok_or_else(|| {
            ApiError::not_found(format!(
                "key: expected a key listed by GET /v1/keys, found {id:?}"
            ))
        })?;
        // The key's own object first: from its answer on, the key opens
        // nothing, whatever happens to the row.
        key_object(&self.env, id, ApiKeyRequest::Revoke { id: id.to_owned() }).await?;
        self.sql
            .exec("DELETE FROM keys WHERE id = ?", vec![id.into()])?;
        json(
            200,
            &Revoked {
                revoked: row.view()?,
            },
        )
    }

    fn pending(&self) -> ApiResult<bool> {
        let count: Vec<Count> = self
            .sql
            .exec("SELECT count(*) AS n FROM keys WHERE hash != ''", None)?
            .to_array()?;
        Ok(count.first().is_some_and(|c| c.n > 0))
    }

    /// Copies a key kept here with its hash out to its own object, then
    /// drops the hash (if the row still holds that one): what its object
    /// answered (`None`: it was revoked meanwhile).
    async fn copy_out(&self, row: &Row) -> ApiResult<Option<StoredKey>> {
        let entry = row.entry(&row.hash)?;
        let made = key_object(&self.env, &row.id, ApiKeyRequest::Create(entry)).await?;
        self.sql.exec(
            "UPDATE keys SET hash = '' WHERE id = ? AND hash = ?",
            vec![row.id.as_str().into(), row.hash.as_str().into()],
        )?;
        Ok(made.key)
    }

    async fn adopt(&self, id: &str) -> ApiResult<Adopted> {
        // Rows another `Adopt` is copying meanwhile are left to it (a flood
        // of lookups during the upgrade copies each key about once), but
        // the one asked for, whose answer this needs.
        let copying = self.copying.borrow().clone();
        let limit = ADOPT_BATCH + copying.len();
        let batch: Vec<Row> = self
            .sql
            .exec(
                "SELECT * FROM keys WHERE hash != '' ORDER BY id = ? DESC, created, id LIMIT ?",
                vec![id.into(), i64::try_from(limit).unwrap_or(i64::MAX).into()],
            )?
            .to_array::<Row>()?
            .into_iter()
            .filter(|row| row.id == id || !copying.contains(&row.id))
            .take(ADOPT_BATCH)
            .collect();
        self.copying
            .borrow_mut()
            .extend(batch.iter().map(|row| row.id.clone()));
        let copied = futures::future::join_all(batch.iter().map(|row| self.copy_out(row))).await;
        {
            let mut copying = self.copying.borrow_mut();
            for row in &batch {
                copying.remove(&row.id);
            }
        }
        let mut key = None;
        let mut found = false;
        for (row, copied) in batch.iter().zip(copied) {
            if row.id == id {
                key = copied?;
                found = true;
            }
            // Another key that failed to copy stays for the next time.
        }
        if !found && self.row(id)?.is_some() {
            // Listed, and copied out before: its object answers.
            key = key_object(&self.env, id, ApiKeyRequest::Lookup { id: id.to_owned() })
                .await?
                .key;
        }
        Ok(Adopted {
            key,
            pending: self.pending()?,
        })
    }

    fn used(&self, id: &str, at_ms: u64) -> ApiResult<Response> {
        let at = i64::try_from(at_ms).unwrap_or(i64::MAX);
        self.sql.exec(
            "UPDATE keys SET last_used = max(COALESCE(last_used, 0), ?) WHERE id = ?",
            vec![at.into(), id.into()],
        )?;
        json(200, &Done {})
    }
}

impl DurableObject for KeyStore {
    fn new(state: State, env: Env) -> Self {
        let sql = state.storage().sql();
        let broken = create_tables(&sql, &[
            "CREATE TABLE IF NOT EXISTS keys(id TEXT PRIMARY KEY, name TEXT NOT NULL, scopes TEXT NOT NULL,
               tags TEXT NOT NULL, hash TEXT NOT NULL, created INTEGER NOT NULL, last_used INTEGER)",
        ])
        .err();
        KeyStore {
            sql,
            env,
            copying: RefCell::default(),
            broken,
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(self.broken.as_ref(), &req, async |r| match r {
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

/// What a key's own object keeps, under [`HELD`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
enum Held {
    Live {
        entry: KeyEntry,
        /// The last use the index was told of (0: none).
        reported_ms: u64,
    },
    /// Revoked for good: a later copy of the key is refused.
    Revoked { id: String, at_ms: u64 },
}

const HELD: &str = "key";

/// A key's own object, named by the key's ID. An object no key was made
/// for answers "none" and writes nothing.
#[durable_object]
pub struct ApiKey {
    state: State,
    env: Env,
}

impl ApiKey {
    /// What the object keeps (under [`HELD`] in its key-value storage); an
    /// object that never kept anything has none, and reading writes none.
    async fn held(&self) -> ApiResult<Option<Held>> {
        let Some(text) = self.state.storage().get::<String>(HELD).await? else {
            return Ok(None);
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| ApiError::store_error(format!("key: stored record: {e}")))
    }

    async fn keep(&self, held: &Held) -> ApiResult<()> {
        let text = serde_json::to_string(held)
            .map_err(|e| ApiError::store_error(format!("key: record: {e}")))?;
        Ok(self.state.storage().put(HELD, text).await?)
    }

    async fn create(&self, entry: KeyEntry) -> ApiResult<Lookup> {
        let key = match self.held().await? {
            None => {
                let key = entry.stored();
                self.keep(&Held::Live {
                    entry,
                    reported_ms: 0,
                })
                .await?;
                Some(key)
            }
            // The same key again (a copy retried): no change.
            Some(Held::Live { entry: held, .. })
                if held.id == entry.id && held.hash == entry.hash =>
            {
                Some(held.stored())
            }
            Some(Held::Live { .. }) => {
                return Err(ApiError::store_error(format!(
                    "key {}: its object holds another key",
                    entry.id
                )));
            }
            Some(Held::Revoked { .. }) => None,
        };
        Ok(Lookup { key })
    }

    async fn lookup(&self, id: &str) -> ApiResult<Lookup> {
        let Some(Held::Live {
            mut entry,
            reported_ms,
        }) = self.held().await?
        else {
            return Ok(Lookup { key: None });
        };
        if entry.id != id {
            return Ok(Lookup { key: None });
        }
        let now = now_ms();
        entry.last_used_ms = Some(now);
        let key = entry.stored();
        self.keep(&Held::Live { entry, reported_ms }).await?;
        // The index hears of the use later (the alarm), at most every
        // KEY_USE_REPORT_MS.
        let storage = self.state.storage();
        if storage.get_alarm().await?.is_none() {
            let wait = (reported_ms + KEY_USE_REPORT_MS).saturating_sub(now);
            storage.set_alarm(i64::try_from(wait).unwrap_or(0)).await?;
        }
        Ok(Lookup { key: Some(key) })
    }

    async fn revoke(&self, id: &str) -> ApiResult<Lookup> {
        let before = match self.held().await? {
            Some(Held::Live { entry, .. }) if entry.id == id => Some(entry.stored()),
            _ => None,
        };
        self.keep(&Held::Revoked {
            id: id.to_owned(),
            at_ms: now_ms(),
        })
        .await?;
        Ok(Lookup { key: before })
    }

    /// Tells the index when the key was last used.
    async fn report_use(&self) -> ApiResult<()> {
        let Some(Held::Live { entry, reported_ms }) = self.held().await? else {
            return Ok(());
        };
        let Some(at_ms) = entry.last_used_ms.filter(|&at| at > reported_ms) else {
            return Ok(());
        };
        let request = KeyRequest::Used {
            id: entry.id.clone(),
            at_ms,
        };
        let _: Done = call(&self.env, Store::Keys, &request).await?;
        // Read again: a lookup may have run meanwhile.
        if let Some(Held::Live { entry, .. }) = self.held().await? {
            self.keep(&Held::Live {
                entry,
                reported_ms: at_ms,
            })
            .await?;
        }
        Ok(())
    }
}

impl DurableObject for ApiKey {
    fn new(state: State, env: Env) -> Self {
        ApiKey { state, env }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(None, &req, async |r| {
            let answer = match r {
                ApiKeyRequest::Create(entry) => self.create(entry).await?,
                ApiKeyRequest::Lookup { id } => self.lookup(&id).await?,
                ApiKeyRequest::Revoke { id } => self.revoke(&id).await?,
            };
            json(200, &answer)
        })
        .await
    }

    async fn alarm(&self) -> worker::Result<Response> {
        // An error is retried by the platform.
        self.report_use()
            .await
            .map_err(|e| worker::Error::RustError(e.message))?;
        Response::empty()
    }
}
