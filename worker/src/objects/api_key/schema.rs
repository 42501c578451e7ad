//! A key's own object's storage: one record, in its key-value storage.

use edgeleaf_rules::wire::keys::KeyEntry;
use serde::{Deserialize, Serialize};

use crate::api::{ApiError, ApiResult};

use super::ApiKey;

/// What a key's own object keeps, under [`HELD`].
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub(super) enum Held {
    Live {
        entry: KeyEntry,
        /// The last use the index was told of (0: none).
        reported_ms: u64,
    },
    /// Revoked for good: a later copy of the key is refused.
    Revoked { id: String, at_ms: u64 },
}

const HELD: &str = "key";

impl ApiKey {
    /// What the object keeps (under [`HELD`] in its key-value storage); an
    /// object that never kept anything has none, and reading writes none.
    pub(super) async fn held(&self) -> ApiResult<Option<Held>> {
        // A key-value read of a SQLite-backed object is billed as a row read.
        crate::scope::count_rows(1, 0);
        let Some(text) = self.state.storage().get::<String>(HELD).await? else {
            return Ok(None);
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| ApiError::store_error(format!("key: stored record: {e}")))
    }

    pub(super) async fn keep(&self, held: &Held) -> ApiResult<()> {
        let text = serde_json::to_string(held)
            .map_err(|e| ApiError::store_error(format!("key: record: {e}")))?;
        // A key-value write is billed as a row written.
        crate::scope::count_rows(0, 1);
        Ok(self.state.storage().put(HELD, text).await?)
    }
}
