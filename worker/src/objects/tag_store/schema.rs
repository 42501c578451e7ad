//! A tag's object's storage: its tables (made when the tag is first
//! created), its rows, and their reads and writes.

use edgeleaf::{
    code::ErrorCode, driver::IssuedMark, opaque::OpaqueDomain, opaque::OPAQUE_KEY_BYTES,
    segment::Allocation, tag::remembered_prune, tag::Remembered, tag::RememberedChange,
    tag::SegmentAsk, tag::TagKind, tag::TagRecord, tag::MAX_COUNTED_CALLERS,
    tag::REQUEST_ID_TTL_MS,
};
use std::collections::HashMap;

use edgeleaf_rules::history::HISTORY_LEN;
use serde::Deserialize;

use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, random_bytes};
use crate::objects::sql::{append_bounded, create_tables, stored_u64};

use super::TagStore;

/// The tables of a tag's object, made when the tag is first created.
const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS tag(id INTEGER PRIMARY KEY CHECK (id = 1), biz_tag TEXT NOT NULL,
       max_id TEXT NOT NULL, step INTEGER NOT NULL, description TEXT NOT NULL,
       update_time INTEGER NOT NULL, monotonic INTEGER NOT NULL, deleted INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lease(request_id TEXT PRIMARY KEY, start TEXT NOT NULL,
       end TEXT NOT NULL, step INTEGER NOT NULL, created INTEGER NOT NULL)",
    // Each remembered lease prunes those past REQUEST_ID_TTL_MS: by this
    // index, only the rows it deletes are read (without it, every row, so a
    // caller sending new request IDs slowed the tag for everyone: 1M rows,
    // 174 ms a lease). Added in a release after 0.1.0: made on the first
    // request an older tag's object serves (IF NOT EXISTS, below).
    "CREATE INDEX IF NOT EXISTS lease_created ON lease(created)",
    "CREATE TABLE IF NOT EXISTS max_step(id INTEGER PRIMARY KEY CHECK (id = 1), max_step INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS opaque(id INTEGER PRIMARY KEY CHECK (id = 1),
       radix INTEGER NOT NULL, numerals INTEGER NOT NULL, key TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS history(seq INTEGER PRIMARY KEY, at INTEGER NOT NULL,
       start TEXT NOT NULL, end TEXT NOT NULL, by TEXT NOT NULL)",
    // A monotonic tag's last ID answered (decimal): written before each answer.
    "CREATE TABLE IF NOT EXISTS issued(id INTEGER PRIMARY KEY CHECK (id = 1), last TEXT NOT NULL)",
    // A client's tails handed back, leased again only by the same asker
    // (`lease:<key>`): IDs never handed out to anyone else (decimal bounds).
    "CREATE TABLE IF NOT EXISTS credit(owner TEXT NOT NULL, start TEXT NOT NULL, end TEXT NOT NULL)",
    // Each key's lease looks up its own credits alone.
    "CREATE INDEX IF NOT EXISTS credit_owner ON credit(owner)",
];

#[derive(Deserialize)]
struct Row {
    biz_tag: String,
    max_id: String,
    step: i64,
    description: String,
    update_time: i64,
    monotonic: i64,
    deleted: i64,
}

#[derive(Deserialize)]
struct MaxStepRow {
    max_step: i64,
}

#[derive(Deserialize)]
struct OpaqueRow {
    radix: i64,
    numerals: i64,
    key: String,
}

#[derive(Deserialize)]
struct LeaseRow {
    start: String,
    end: String,
    step: i64,
}

#[derive(Deserialize)]
struct CountRow {
    n: i64,
}

#[derive(Deserialize)]
struct CreditRow {
    start: String,
    end: String,
}

#[derive(Deserialize)]
struct IssuedRow {
    last: String,
}

#[derive(Deserialize)]
pub(super) struct HistoryRow {
    pub(super) seq: i64,
    pub(super) at: i64,
    pub(super) start: String,
    pub(super) end: String,
    pub(super) by: String,
}

#[derive(Deserialize)]
struct TableRow {
    #[allow(dead_code)] // only its presence is read
    name: String,
}

pub(super) struct Stored {
    /// The row, with the tag's kind.
    pub(super) record: TagRecord,
    pub(super) deleted: bool,
    /// An opaque tag's key (hex).
    pub(super) opaque_key: Option<String>,
}

fn to_hex(bytes: &[u8]) -> String {
    edgeleaf::secret::to_hex(bytes)
}

impl TagStore {
    /// Whether the tag's tables exist; with `create`, made if not. Without,
    /// nothing is written: an object for a name never created stays empty.
    pub(super) fn tables(&self, create: bool) -> ApiResult<bool> {
        if self.tables.get() {
            return Ok(true);
        }
        let found: Vec<TableRow> = self
            .sql
            .exec(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'tag'",
                None,
            )?
            .to_array()?;
        if found.is_empty() && !create {
            return Ok(false);
        }
        // Also for a tag made before a table was added (IF NOT EXISTS).
        create_tables(&self.sql, TABLES)?;
        self.tables.set(true);
        Ok(true)
    }

    pub(super) fn load(&self) -> ApiResult<Option<Stored>> {
        if !self.tables(false)? {
            return Ok(None);
        }
        let rows: Vec<Row> = self
            .sql
            .exec("SELECT * FROM tag WHERE id = 1", None)?
            .to_array()?;
        let Some(row) = rows.into_iter().next() else {
            return Ok(None);
        };
        let max_id = row.max_id.parse().map_err(|_| {
            ApiError::store_error(format!("store: max_id {:?} is not a number", row.max_id))
        })?;
        let record = TagRecord {
            biz_tag: row.biz_tag,
            max_id,
            step: stored_u64("step", row.step)?,
            description: row.description,
            update_time: stored_u64("update_time", row.update_time)?,
            kind: TagKind::Plain,
            max_step: None,
        };
        let caps: Vec<MaxStepRow> = self
            .sql
            .exec("SELECT max_step FROM max_step WHERE id = 1", None)?
            .to_array()?;
        let record = match caps.into_iter().next() {
            None => record,
            Some(c) => TagRecord {
                max_step: Some(stored_u64("max_step", c.max_step)?),
                ..record
            },
        };
        let opaque: Vec<OpaqueRow> = self
            .sql
            .exec("SELECT radix, numerals, key FROM opaque WHERE id = 1", None)?
            .to_array()?;
        let (domain, opaque_key) = match opaque.into_iter().next() {
            None => (None, None),
            Some(o) => {
                let n = u8::try_from(o.numerals).unwrap_or(0);
                let domain = match o.radix {
                    2 => OpaqueDomain::Bits(n),
                    _ => OpaqueDomain::Digits(n),
                };
                (Some(domain), Some(o.key))
            }
        };
        // A row that breaks the core's rules is an error, never used.
        let record = TagKind::new(row.monotonic != 0, domain)
            .and_then(|kind| record.with_kind(kind))
            .map_err(|e| ApiError::store_error(format!("store: tag row: {e}")))?;
        Ok(Some(Stored {
            record,
            deleted: row.deleted != 0,
            opaque_key,
        }))
    }

    pub(super) fn save(&self, record: &TagRecord, deleted: bool) -> ApiResult<()> {
        // Steps (≤ 1,000,000) and Unix ms are far below 2^53.
        #[allow(clippy::cast_possible_wrap)]
        self.sql.exec(
            "INSERT INTO tag(id, biz_tag, max_id, step, description, update_time, monotonic, deleted)
             VALUES (1, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT(id) DO UPDATE SET biz_tag = excluded.biz_tag, max_id = excluded.max_id,
               step = excluded.step, description = excluded.description,
               update_time = excluded.update_time, monotonic = excluded.monotonic, deleted = excluded.deleted",
            vec![
                record.biz_tag.as_str().into(),
                record.max_id.to_string().into(),
                (record.step as i64).into(),
                record.description.as_str().into(),
                (record.update_time as i64).into(),
                i64::from(record.kind.is_monotonic()).into(),
                i64::from(deleted).into(),
            ],
        )?;
        match record.max_step {
            #[allow(clippy::cast_possible_wrap)] // at most 1,000,000
            Some(m) => self.sql.exec(
                "INSERT INTO max_step(id, max_step) VALUES (1, ?)
                 ON CONFLICT(id) DO UPDATE SET max_step = excluded.max_step",
                vec![(m as i64).into()],
            )?,
            None => self.sql.exec("DELETE FROM max_step WHERE id = 1", None)?,
        };
        Ok(())
    }

    /// Makes the tag opaque over `domain` with a key from the platform's
    /// CSPRNG (at creation only).
    pub(super) fn save_opaque(&self, domain: OpaqueDomain) -> ApiResult<String> {
        let key = to_hex(&random_bytes::<OPAQUE_KEY_BYTES>()?);
        let (radix, numerals) = match domain {
            OpaqueDomain::Bits(b) => (2, b),
            OpaqueDomain::Digits(d) => (10, d),
        };
        self.sql.exec(
            "INSERT INTO opaque(id, radix, numerals, key) VALUES (1, ?, ?, ?)",
            vec![
                i64::from(radix).into(),
                i64::from(numerals).into(),
                key.as_str().into(),
            ],
        )?;
        Ok(key)
    }

    /// Adds an allocation to the history, keeping the last `HISTORY_LEN`.
    pub(super) fn remember(&self, alloc: &Allocation, now: u64, by: &str) -> ApiResult<()> {
        // Unix ms stay far below 2^63.
        #[allow(clippy::cast_possible_wrap)]
        let row = vec![
            (now as i64).into(),
            alloc.start.to_string().into(),
            alloc.end.to_string().into(),
            by.into(),
        ];
        append_bounded(
            &self.sql,
            "history",
            &["at", "start", "end", "by"],
            row,
            HISTORY_LEN,
        )
    }

    /// The segment remembered under a lease's request ID (as its caller's:
    /// `SegmentAsk::remembered_as`), with the step its request was granted.
    pub(super) fn remembered(&self, request_id: &str) -> ApiResult<Option<Remembered>> {
        let rows: Vec<LeaseRow> = self
            .sql
            .exec(
                "SELECT start, end, step FROM lease WHERE request_id = ?",
                vec![request_id.into()],
            )?
            .to_array()?;
        let bound = |s: &str| {
            s.parse::<u64>().map_err(|_| {
                ApiError::store_error(format!("store: lease bound {s:?} is not a number"))
            })
        };
        rows.into_iter()
            .next()
            .map(|row| {
                let segment = Allocation::new(bound(&row.start)?, bound(&row.end)?)
                    .map_err(|e| ApiError::store_error(format!("store: lease row: {e}")))?;
                let granted = stored_u64("lease step", row.step)?;
                Ok(Remembered { segment, granted })
            })
            .transpose()
    }

    /// Remembers a lease's segment under its request ID, with the step its
    /// request was `granted` (the segment is shorter when it was the tag's
    /// last), forgetting those older than `REQUEST_ID_TTL_MS` and, when the
    /// core's `remembered_prune` says so, the asker's oldest beyond what it
    /// keeps.
    pub(super) fn remember_lease(
        &self,
        ask: &SegmentAsk<'_>,
        request_id: &str,
        alloc: &Allocation,
        granted: u64,
    ) -> ApiResult<()> {
        let now = now_ms();
        #[allow(clippy::cast_possible_wrap)] // Unix ms and steps are far below 2^63
        {
            self.sql.exec(
                "DELETE FROM lease WHERE created < ?",
                vec![(now.saturating_sub(REQUEST_ID_TTL_MS) as i64).into()],
            )?;
            self.sql.exec(
                "INSERT INTO lease(request_id, start, end, step, created) VALUES (?, ?, ?, ?, ?)",
                vec![
                    request_id.into(),
                    alloc.start.to_string().into(),
                    alloc.end.to_string().into(),
                    (granted as i64).into(),
                    (now as i64).into(),
                ],
            )?;
        }
        let Some((from, to)) = ask.remembered_range() else {
            return Ok(());
        };
        // Taken out while the statements run: one that fails leaves no
        // count, so the next lease counts the rows again (never fewer than
        // there are).
        let known = self.remembered_counts.borrow_mut().remove(&from);
        let counted = match known {
            Some(n) => n + 1,
            None => self.count_remembered(&from, &to)?,
        };
        let counted = match remembered_prune(counted) {
            Some(keep) => {
                // This asker's names only (by the primary key): the rows it
                // reads are its own, at most the cap and the margin, and one.
                self.sql.exec(
                    "DELETE FROM lease WHERE request_id IN (SELECT request_id FROM lease
                       WHERE request_id >= ? AND request_id < ?
                       ORDER BY created DESC, rowid DESC LIMIT -1 OFFSET ?)",
                    vec![
                        from.as_str().into(),
                        to.into(),
                        i64::try_from(keep).unwrap_or(i64::MAX).into(),
                    ],
                )?;
                keep
            }
            None => counted,
        };
        keep_count(&mut self.remembered_counts.borrow_mut(), from, counted);
        Ok(())
    }

    /// How many leases the asker whose names are `[from, to)` has
    /// remembered (read once per asker by an instance of the object).
    fn count_remembered(&self, from: &str, to: &str) -> ApiResult<u64> {
        let rows: Vec<CountRow> = self
            .sql
            .exec(
                "SELECT COUNT(*) AS n FROM lease WHERE request_id >= ? AND request_id < ?",
                vec![from.into(), to.into()],
            )?
            .to_array()?;
        rows.first()
            .map_or(Ok(0), |r| stored_u64("remembered leases", r.n))
    }

    /// The credits `owner` holds on this tag.
    pub(super) fn credits(&self, owner: &str) -> ApiResult<Vec<Allocation>> {
        let rows: Vec<CreditRow> = self
            .sql
            .exec(
                "SELECT start, end FROM credit WHERE owner = ?",
                vec![owner.into()],
            )?
            .to_array()?;
        rows.into_iter()
            .map(|row| {
                let bound = |s: &str| {
                    s.parse::<u64>().map_err(|_| {
                        ApiError::store_error(format!("store: credit bound {s:?} is not a number"))
                    })
                };
                Allocation::new(bound(&row.start)?, bound(&row.end)?)
                    .map_err(|e| ApiError::store_error(format!("store: credit row: {e}")))
            })
            .collect()
    }

    pub(super) fn add_credit(&self, owner: &str, credit: &Allocation) -> ApiResult<()> {
        self.credit_row(
            "INSERT INTO credit(owner, start, end) VALUES (?, ?, ?)",
            owner,
            credit,
        )
    }

    pub(super) fn drop_credit(&self, owner: &str, credit: &Allocation) -> ApiResult<()> {
        self.credit_row(
            "DELETE FROM credit WHERE owner = ? AND start = ? AND end = ?",
            owner,
            credit,
        )
    }

    /// Runs `statement` on one credit row (its bounds as TEXT, like max_id).
    fn credit_row(&self, statement: &str, owner: &str, credit: &Allocation) -> ApiResult<()> {
        self.sql.exec(
            statement,
            vec![
                owner.into(),
                credit.start.to_string().into(),
                credit.end.to_string().into(),
            ],
        )?;
        Ok(())
    }

    /// Applies the change to the range remembered under `key` when its tail
    /// left it.
    pub(super) fn change_remembered(&self, key: &str, change: RememberedChange) -> ApiResult<()> {
        match change {
            RememberedChange::Shorten(r) => self.sql.exec(
                "UPDATE lease SET end = ? WHERE request_id = ?",
                vec![r.segment.end.to_string().into(), key.into()],
            )?,
            RememberedChange::Remove => self
                .sql
                .exec("DELETE FROM lease WHERE request_id = ?", vec![key.into()])?,
        };
        Ok(())
    }

    /// A monotonic tag's last ID answered, as stored (0: none yet).
    pub(super) fn issued(&self) -> ApiResult<u64> {
        let rows: Vec<IssuedRow> = self
            .sql
            .exec("SELECT last FROM issued WHERE id = 1", None)?
            .to_array()?;
        rows.first().map_or(Ok(0), |r| {
            r.last.parse().map_err(|_| {
                ApiError::store_error(format!("store: issued {:?} is not a number", r.last))
            })
        })
    }

    /// Writes `mark.issued` if the stored one is still `expected`'s (the
    /// core's compare-and-set; within one instance the read and this write
    /// are one synchronous turn, across two the platform fails the old
    /// instance's write).
    pub(super) fn write_issued(
        &self,
        expected: Option<IssuedMark>,
        mark: IssuedMark,
    ) -> ApiResult<()> {
        let expected = expected.map_or(0, |e| e.issued).to_string();
        let rows: Vec<IssuedRow> = self
            .sql
            .exec(
                "INSERT INTO issued(id, last) VALUES (1, ?) ON CONFLICT(id)
                 DO UPDATE SET last = excluded.last WHERE issued.last = ? RETURNING last",
                vec![mark.issued.to_string().into(), expected.into()],
            )?
            .to_array()?;
        if rows.is_empty() {
            return Err(ApiError::unavailable(
                ErrorCode::StoreUnavailable,
                "monotonic tag: expected the last ID answered as this object read it, found another (another instance of the object answered in between): nothing was answered",
                100,
            ));
        }
        Ok(())
    }
}

/// Keeps `counted` as the count of the asker whose names start at `from`,
/// having forgotten every other count first if `MAX_COUNTED_CALLERS` are
/// held (the core's: a count forgotten is read again from the table).
fn keep_count(counts: &mut HashMap<String, u64>, from: String, counted: u64) {
    if counts.len() >= MAX_COUNTED_CALLERS && !counts.contains_key(&from) {
        counts.clear();
    }
    counts.insert(from, counted);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_are_forgotten_all_at_once_past_their_bound() {
        let mut counts = HashMap::new();
        for i in 0..MAX_COUNTED_CALLERS {
            keep_count(&mut counts, format!("{i}:"), 1);
        }
        assert_eq!(counts.len(), MAX_COUNTED_CALLERS);
        // An asker already counted: its count moves on, none is forgotten.
        keep_count(&mut counts, "0:".to_owned(), 2);
        assert_eq!(counts.len(), MAX_COUNTED_CALLERS);
        assert_eq!(counts["0:"], 2);
        // One more: the others are forgotten (counted again when they lease).
        keep_count(&mut counts, "new:".to_owned(), 5);
        assert_eq!(counts.len(), 1);
        assert_eq!(counts["new:"], 5);
    }
}
