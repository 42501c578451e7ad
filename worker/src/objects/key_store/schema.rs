//! The index's storage: one row per key.

use edgeleaf_rules::wire::keys::{KeyEntry, KeyView};
use serde::Deserialize;

use crate::api::ApiResult;
use crate::objects::sql::stored_u64;

use super::KeyStore;

/// The index's one table, made when the object starts.
pub(super) const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS keys(id TEXT PRIMARY KEY, name TEXT NOT NULL, scopes TEXT NOT NULL,
               tags TEXT NOT NULL, hash TEXT NOT NULL, created INTEGER NOT NULL, last_used INTEGER)",
];

#[derive(Deserialize)]
pub(super) struct Row {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) scopes: String,
    pub(super) tags: String,
    pub(super) hash: String,
    pub(super) created: i64,
    pub(super) last_used: Option<i64>,
}

#[derive(Deserialize)]
pub(super) struct Count {
    pub(super) n: i64,
}

pub(super) fn scopes(raw: &str) -> Vec<String> {
    raw.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Row {
    pub(super) fn view(&self) -> ApiResult<KeyView> {
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
    pub(super) fn entry(&self, hash: &str) -> ApiResult<KeyEntry> {
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

impl KeyStore {
    pub(super) fn rows(&self, id: Option<&str>) -> ApiResult<Vec<Row>> {
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

    pub(super) fn row(&self, id: &str) -> ApiResult<Option<Row>> {
        Ok(self.rows(Some(id))?.into_iter().next())
    }

    pub(super) fn pending(&self) -> ApiResult<bool> {
        let count: Vec<Count> = self
            .sql
            .exec("SELECT count(*) AS n FROM keys WHERE hash != ''", None)?
            .to_array()?;
        Ok(count.first().is_some_and(|c| c.n > 0))
    }
}
