//! What every Durable Object does the same with its SQLite storage: its
//! tables made, a bounded log appended to, an integer column read back.

use worker::{SqlStorage, SqlStorageValue};

use crate::api::{ApiError, ApiResult};

/// Runs a Durable Object's `CREATE TABLE`s; the first failure is kept by the
/// object and answered to every call (it must not run on a half-made schema).
pub fn create_tables(sql: &SqlStorage, ddl: &[&str]) -> ApiResult<()> {
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
    sql: &SqlStorage,
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
