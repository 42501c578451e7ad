//! What every Durable Object does the same with its SQLite storage: its
//! statements run and counted, its tables made, a bounded log appended to,
//! an integer column read back.

use serde::de::DeserializeOwned;
use worker::{SqlCursor, SqlStorage, SqlStorageValue, State};

use crate::api::{ApiError, ApiResult};
use crate::scope;

/// An object's SQLite storage, through which every statement runs so that
/// the rows it reads and writes can be counted (Cloudflare bills them:
/// `scope::Cost`), when the request being handled counts them.
pub struct Sql(SqlStorage);

impl Sql {
    pub fn new(state: &State) -> Sql {
        Sql(state.storage().sql())
    }

    /// Runs `query` (`SqlStorage::exec`); its rows are counted when the
    /// cursor is dropped, read by then.
    pub fn exec(
        &self,
        query: &str,
        bindings: impl Into<Option<Vec<SqlStorageValue>>>,
    ) -> worker::Result<Counted> {
        self.0.exec(query, bindings).map(Counted)
    }
}

/// A cursor whose rows read and written are counted when it is dropped
/// (`rowsRead` grows as its rows are read; a write has run by the time
/// `exec` returns).
pub struct Counted(SqlCursor);

impl Counted {
    /// Every row of the result (`SqlCursor::to_array`).
    pub fn to_array<T: DeserializeOwned>(&self) -> worker::Result<Vec<T>> {
        self.0.to_array()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        // Asked of the cursor only when counting: tests, never a deployment.
        if scope::counting() {
            let (read, written) = (self.0.rows_read(), self.0.rows_written());
            scope::count_rows(read as u64, written as u64);
        }
    }
}

/// Runs a Durable Object's `CREATE TABLE`s; the first failure is kept by the
/// object and answered to every call (it must not run on a half-made schema).
pub fn create_tables(sql: &Sql, ddl: &[&str]) -> ApiResult<()> {
    for statement in ddl {
        sql.exec(statement, None)
            .map_err(|e| ApiError::store_error(format!("store: creating tables: {e}")))?;
    }
    Ok(())
}

/// Appends a row to a bounded log table (`seq INTEGER PRIMARY KEY`, then
/// `columns`) and drops all but its last `keep` rows. `seq` counts every row
/// ever appended, so the newest row's `seq` is the log's total.
pub fn append_bounded(
    sql: &Sql,
    table: &str,
    columns: &[&str],
    values: Vec<SqlStorageValue>,
    keep: u64,
) -> ApiResult<()> {
    let marks = vec!["?"; columns.len()].join(", ");
    sql.exec(
        &format!(
            "INSERT INTO {table}(seq, {}) VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM {table}), {marks})",
            columns.join(", ")
        ),
        values,
    )?;
    sql.exec(
        &format!("DELETE FROM {table} WHERE seq <= (SELECT MAX(seq) FROM {table}) - ?"),
        vec![i64::try_from(keep).unwrap_or(i64::MAX).into()],
    )?;
    Ok(())
}

/// An integer column read back from SQLite: negative is a broken row, never
/// read as 0.
pub fn stored_u64(what: &str, v: i64) -> ApiResult<u64> {
    u64::try_from(v)
        .map_err(|_| ApiError::store_error(format!("store: {what}: expected 0 or more, found {v}")))
}
