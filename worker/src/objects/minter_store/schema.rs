//! A minter's storage: its saved state (the grant and the reservation),
//! key by key.

use edgeleaf::{holder::SnowflakeHolder, rand::SplitMix64};
use serde::Deserialize;

use crate::api::{ApiError, ApiResult};

use super::SnowflakeMinter;

/// The minter's one table (its state, key by key), made when it starts.
pub(super) const TABLES: &[&str] =
    &["CREATE TABLE IF NOT EXISTS state(k TEXT PRIMARY KEY, v TEXT NOT NULL)"];

#[derive(Deserialize)]
pub(super) struct Row {
    pub(super) v: String,
}

impl SnowflakeMinter {
    /// The stored value under `k`.
    pub(super) fn stored(&self, k: &str) -> ApiResult<Option<String>> {
        let rows: Vec<Row> = self
            .sql
            .exec("SELECT v FROM state WHERE k = ?", vec![k.into()])?
            .to_array()?;
        Ok(rows.into_iter().next().map(|r| r.v))
    }

    /// Saves the state the holder asks to save (a later reservation), if a
    /// save is due; synchronous, and durable before any answer leaves.
    pub(super) fn save_if_due(
        &self,
        holder: &mut SnowflakeHolder<SplitMix64>,
        now: u64,
        force: bool,
    ) -> ApiResult<()> {
        if !force && holder.save_due_in(now) != Some(0) {
            return Ok(());
        }
        let Some(state) = holder.save_request(now) else {
            return Ok(());
        };
        let text = serde_json::to_string(&state)
            .map_err(|e| ApiError::store_error(format!("minter: state: {e}")))?;
        match self.sql.exec(
            "INSERT OR REPLACE INTO state(k, v) VALUES ('holder', ?)",
            vec![text.into()],
        ) {
            Ok(_) => {
                holder.saved(&state);
                Ok(())
            }
            Err(e) => {
                holder.save_failed();
                Err(ApiError::store_error(format!("minter: saving state: {e}")))
            }
        }
    }
}
