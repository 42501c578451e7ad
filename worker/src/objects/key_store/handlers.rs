//! The index's answers: a key made, listed, revoked, adopted, used.

use edgeleaf::code::ErrorCode;
use edgeleaf_rules::access::MAX_KEYS;
use edgeleaf_rules::wire::catalog::Done;
use edgeleaf_rules::wire::keys::{
    Adopted, ApiKeyRequest, KeyList, Lookup, NewKey, Revoked, StoredKey,
};
use worker::Response;

use crate::api::{json, ApiError, ApiResult};
use crate::clock::now_ms;

use super::schema::{Count, Row};
use super::{KeyStore, ADOPT_BATCH};
use crate::objects::api_key::stubs::key_object;

impl KeyStore {
    pub(super) async fn create(&self, k: NewKey) -> ApiResult<Response> {
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

    pub(super) fn list(&self) -> ApiResult<Response> {
        let keys = self
            .rows(None)?
            .iter()
            .map(Row::view)
            .collect::<ApiResult<Vec<_>>>()?;
        json(200, &KeyList { keys })
    }

    pub(super) async fn revoke(&self, id: &str) -> ApiResult<Response> {
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

    pub(super) async fn adopt(&self, id: &str) -> ApiResult<Adopted> {
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

    pub(super) fn used(&self, id: &str, at_ms: u64) -> ApiResult<Response> {
        let at = i64::try_from(at_ms).unwrap_or(i64::MAX);
        self.sql.exec(
            "UPDATE keys SET last_used = max(COALESCE(last_used, 0), ?) WHERE id = ?",
            vec![at.into(), id.into()],
        )?;
        json(200, &Done {})
    }
}
