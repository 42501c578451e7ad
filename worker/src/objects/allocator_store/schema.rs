//! A regional allocator's storage: its one row (the state, as JSON), read
//! at first use and written before anything leaves.

use edgeleaf::{block::BlockAllocator, code::ErrorCode, region::Region};
use edgeleaf_rules::wire::tag::OpaqueGrant;
use serde::{Deserialize, Serialize};

use crate::api::{ApiError, ApiResult};
use crate::objects::sql::create_tables;

use super::Inner;

/// Everything the object keeps, as one row (JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Held {
    pub(super) tag: String,
    pub(super) region: Region,
    /// The core's state.
    pub(super) allocator: BlockAllocator,
    /// An opaque tag's key, as the root gave it with a block.
    #[serde(default)]
    pub(super) grant: Option<OpaqueGrant>,
    pub(super) served: u64,
    pub(super) blocks_leased: u64,
    pub(super) handed_back: u64,
    /// Writes of this state (counted in it).
    #[serde(default)]
    pub(super) writes: u64,
}

#[derive(Deserialize)]
struct Row {
    state: String,
}

#[derive(Deserialize)]
struct TableRow {
    #[allow(dead_code)] // only its presence is read
    name: String,
}

/// Its one table, made at its first write.
const TABLE: &str =
    "CREATE TABLE IF NOT EXISTS allocator(id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL)";

impl Inner {
    /// Whether its table exists (without making it).
    fn has_table(&self) -> ApiResult<bool> {
        if !self.table.get() {
            let found: Vec<TableRow> = self
                .sql
                .exec(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'allocator'",
                    None,
                )?
                .to_array()?;
            self.table.set(!found.is_empty());
        }
        Ok(self.table.get())
    }

    /// The stored state, if any.
    pub(super) fn stored(&self) -> ApiResult<Option<Held>> {
        if !self.has_table()? {
            return Ok(None);
        }
        let rows: Vec<Row> = self
            .sql
            .exec("SELECT state FROM allocator WHERE id = 1", None)?
            .to_array()?;
        rows.into_iter()
            .next()
            .map(|row| {
                serde_json::from_str(&row.state)
                    .map_err(|e| ApiError::store_error(format!("allocator: state: {e}")))
            })
            .transpose()
    }

    pub(super) fn read(&self, tag: &str, region: Region) -> ApiResult<Held> {
        match self.stored()? {
            Some(held) => Ok(held),
            None => Ok(Held {
                tag: tag.to_owned(),
                region,
                allocator: BlockAllocator::new(),
                grant: None,
                served: 0,
                blocks_leased: 0,
                handed_back: 0,
                writes: 0,
            }),
        }
    }

    pub(super) fn write(&self, held: &Held) -> ApiResult<()> {
        let state = serde_json::to_string(held)
            .map_err(|e| ApiError::store_error(format!("allocator: state: {e}")))?;
        if !self.table.get() {
            create_tables(&self.sql, &[TABLE])?;
            self.table.set(true);
        }
        self.sql.exec(
            "INSERT INTO allocator(id, state) VALUES (1, ?)
             ON CONFLICT(id) DO UPDATE SET state = excluded.state",
            vec![state.into()],
        )?;
        Ok(())
    }

    /// Deletes the state when the core says the root's refusal `code`
    /// leaves nothing to keep (`BlockAllocator::forgets_after`): `true` if
    /// it did.
    pub(super) fn forget_if_unused(&self, code: ErrorCode) -> ApiResult<bool> {
        let mut cell = self.held.borrow_mut();
        let forgets = match cell.as_ref() {
            Some(h) => h.allocator.forgets_after(code),
            // The memory copy dropped (a write failed): as stored, read only
            // for a code that may forget (what a new allocator forgets).
            None => {
                BlockAllocator::new().forgets_after(code)
                    && self
                        .stored()?
                        .is_none_or(|h| h.allocator.forgets_after(code))
            }
        };
        if !forgets {
            return Ok(false);
        }
        if self.has_table()? {
            self.sql.exec("DELETE FROM allocator", None)?;
        }
        *cell = None;
        Ok(true)
    }
}
