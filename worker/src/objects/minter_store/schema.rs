//! A minter's storage: its saved states (the grant and the reservation of
//! its batch holder, and of its rights holder), key by key.

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

/// Where a holder's state is saved: its key in `state`, and what errors
/// call it.
pub(super) struct StateRow {
    pub(super) key: &'static str,
    pub(super) what: &'static str,
}

/// The batch holder's state (the only one a minter of 0.1.0 reads).
pub(super) const BATCHES: StateRow = StateRow {
    key: "holder",
    what: "state",
};

/// The rights holder's state: a row of its own, which a minter of a
/// release before rights never reads (after a rollback it mints under its
/// batch worker ID alone, and never touches the rights holder's).
pub(super) const RIGHTS: StateRow = StateRow {
    key: "rights",
    what: "rights state",
};

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
        self.save_row_if_due(&BATCHES, holder, now, force)
    }

    /// As `save_if_due`, for the holder saved under `row`.
    pub(super) fn save_row_if_due(
        &self,
        row: &StateRow,
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
            .map_err(|e| ApiError::store_error(format!("minter: {}: {e}", row.what)))?;
        match self.sql.exec(
            "INSERT OR REPLACE INTO state(k, v) VALUES (?, ?)",
            vec![row.key.into(), text.into()],
        ) {
            Ok(_) => {
                holder.saved(&state);
                Ok(())
            }
            Err(e) => {
                holder.save_failed();
                Err(ApiError::store_error(format!(
                    "minter: saving {}: {e}",
                    row.what
                )))
            }
        }
    }
}
