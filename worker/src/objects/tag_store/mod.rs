//! `TagStore`: the Durable Object that owns one `biz_tag` — Leaf's
//! `leaf_alloc` row — and runs the core's allocator over its SQLite storage.
//!
//! Each allocation reads the row, advances `max_id` and writes it back with no
//! await in between (a Durable Object runs one event at a time), and the
//! platform's output gate holds the reply until that write is durable: a
//! segment a restart could hand out again is never handed out.
//!
//! Every answer that hands out IDs writes to storage in its own request, so
//! an old instance of this object still running beside its replacement (the
//! platform fails its storage operations once another exists) cannot answer
//! from memory: a segment writes `max_id`; a monotonic tag's IDs, served
//! from this object's memory, write the last ID answered (`issued`) before
//! they leave (the core's `MonotonicIssuer`; docs/design.md, "Segment IDs").
//!
//! Its tables are made when the tag is first created (`PUT`), never before:
//! a request naming a tag that does not exist is answered `not_found`
//! without writing anything, so random names cost no storage.
//!
//! A client's tail handed back never moves `max_id` back: it is a credit of
//! the asker (`credit`, one row per range), leased again only by the same
//! asker (the core's `TagRecord::credit_back` and `lease_with_credits`).
//!
//! `max_id` is stored as TEXT: SQLite integers reach JS as numbers, exact only
//! below 2^53, and IDs go to 2^63 − 1.

use std::cell::{Cell, RefCell};

use edgeleaf::{
    code::ErrorCode, driver::IssuedMark, driver::MonotonicIssuer, driver::SegmentStep,
    opaque::OpaqueDomain, opaque::OPAQUE_KEY_BYTES, segment::Allocation, segment::StepPolicy,
    tag::CreditBack, tag::CreditedAnswer, tag::Remembered, tag::RememberedChange,
    tag::SegmentAnswer, tag::SegmentAsk, tag::TagChange, tag::TagKind, tag::TagRecord,
    tag::TailBack, tag::TakeBack, tag::REQUEST_ID_TTL_MS,
};
use edgeleaf_rules::history::HISTORY_LEN;
use edgeleaf_rules::wire::{
    api::IdList, tag::AllocateRequest, tag::GivenId, tag::HistoryEvent, tag::OpaqueGrant,
    tag::Revealed, tag::SegmentLease, tag::TagHistory, tag::TagRequest, tag::TagUpsert,
    tag::TagView, tag::TakeBackRequest, tag::TakenBack,
};
use serde::Deserialize;
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, SqlStorage, State,
};

use crate::api::{checked_count, json, ApiError, ApiResult};
use crate::clock::{now_ms, random_bytes};
use crate::stores::{append_bounded, call, create_tables, serve, stored_u64, Store};

/// Creates or updates `tag` as `upsert` says.
pub async fn put(env: &Env, tag: &str, upsert: TagUpsert) -> ApiResult<TagView> {
    call(env, Store::Tag(tag), &TagRequest::Put(upsert)).await
}

/// The live tag `tag` (404 if none).
pub async fn get(env: &Env, tag: &str) -> ApiResult<TagView> {
    call(env, Store::Tag(tag), &TagRequest::Get).await
}

/// Deletes `tag`: its last view.
pub async fn delete(env: &Env, tag: &str) -> ApiResult<TagView> {
    call(env, Store::Tag(tag), &TagRequest::Delete).await
}

/// `tag` and its remembered allocations.
pub async fn history(env: &Env, tag: &str) -> ApiResult<TagHistory> {
    call(env, Store::Tag(tag), &TagRequest::History).await
}

/// A segment of `tag`.
pub async fn allocate(env: &Env, tag: &str, request: AllocateRequest) -> ApiResult<SegmentLease> {
    call(env, Store::Tag(tag), &TagRequest::Allocate(request)).await
}

/// Hands a leased range's unused tail back to `tag`'s root: a regional
/// allocator's retired block is taken only if nothing followed it; a
/// client's tail becomes a credit of its own key.
pub async fn take_back(env: &Env, tag: &str, request: TakeBackRequest) -> ApiResult<TakenBack> {
    call(env, Store::Tag(tag), &TagRequest::TakeBack(request)).await
}

/// What the opaque tag `tag` says of an ID.
pub async fn reveal(env: &Env, tag: &str, id: GivenId) -> ApiResult<Revealed> {
    call(env, Store::Tag(tag), &TagRequest::Reveal { id }).await
}

/// `count` IDs of the monotonic tag `tag`, from its object.
pub async fn ids(env: &Env, tag: &str, count: usize) -> ApiResult<Vec<u64>> {
    let count = count as u64;
    let list: IdList = call(env, Store::Tag(tag), &TagRequest::Ids { count }).await?;
    Ok(list.numbers()?)
}

#[derive(Deserialize)]
struct HistoryRow {
    seq: i64,
    at: i64,
    start: String,
    end: String,
    by: String,
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

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
struct LeaseRow {
    start: String,
    end: String,
    step: i64,
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
struct TableRow {
    #[allow(dead_code)] // only its presence is read
    name: String,
}

/// The tables of a tag's object, made when the tag is first created.
const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS tag(id INTEGER PRIMARY KEY CHECK (id = 1), biz_tag TEXT NOT NULL,
       max_id TEXT NOT NULL, step INTEGER NOT NULL, description TEXT NOT NULL,
       update_time INTEGER NOT NULL, monotonic INTEGER NOT NULL, deleted INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lease(request_id TEXT PRIMARY KEY, start TEXT NOT NULL,
       end TEXT NOT NULL, step INTEGER NOT NULL, created INTEGER NOT NULL)",
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
struct OpaqueRow {
    radix: i64,
    numerals: i64,
    key: String,
}

struct Stored {
    /// The row, with the tag's kind.
    record: TagRecord,
    deleted: bool,
    /// An opaque tag's key (hex).
    opaque_key: Option<String>,
}

#[durable_object]
pub struct TagStore {
    sql: SqlStorage,
    /// The tables are known to exist (made by this instance, or found).
    tables: Cell<bool>,
    /// Monotonic tags only: the IDs this object serves itself.
    issuer: RefCell<Option<MonotonicIssuer>>,
}

impl TagStore {
    /// Whether the tag's tables exist; with `create`, made if not. Without,
    /// nothing is written: an object for a name never created stays empty.
    fn tables(&self, create: bool) -> ApiResult<bool> {
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

    fn load(&self) -> ApiResult<Option<Stored>> {
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

    fn save(&self, record: &TagRecord, deleted: bool) -> ApiResult<()> {
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

    fn live(&self) -> ApiResult<Stored> {
        match self.load()? {
            Some(s) if !s.deleted => Ok(s),
            _ => Err(ApiError::not_found(
                "biz_tag: expected a tag created with PUT /v1/tags/{tag}, found none",
            )),
        }
    }

    fn view(s: &Stored) -> TagView {
        TagView::from(&s.record)
    }

    /// Makes the tag opaque over `domain` with a key from the platform's
    /// CSPRNG (at creation only).
    fn save_opaque(&self, domain: OpaqueDomain) -> ApiResult<String> {
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

    fn upsert(&self, req: TagUpsert) -> ApiResult<Response> {
        let now = now_ms();
        let max_id = req
            .max_id
            .as_deref()
            .map(|m| m.parse::<u64>().map_err(|_| ApiError::new(ErrorCode::OutOfRange, format!("maxId: expected a decimal string in 0..=9223372036854775807, found {m:?}"))))
            .transpose()?;
        let change = TagChange {
            step: req.step,
            max_id,
            max_step: req.max_step,
            description: req.description.as_deref(),
            monotonic: req.monotonic,
            opaque: req.opaque,
            expected: req.expect.map(Into::into),
        };
        let existing = self.load()?;
        // A conditional change (an import's plan) goes through only on the
        // tag as its writer read it.
        change.check_expected(existing.as_ref().filter(|s| !s.deleted).map(|s| &s.record))?;
        let (record, created) = match &existing {
            // A deleted tag keeps its max_id (and its kind): re-creating it
            // continues after every ID it ever handed out.
            Some(s) => (s.record.change(&change, now)?, s.deleted),
            None => (
                TagRecord::create(&req.biz_tag, &change, req.default_step, now)?,
                true,
            ),
        };
        // The tables, once the change is known to be valid: a refused PUT
        // of a new name writes nothing either.
        self.tables(true)?;
        let mut opaque_key = existing.and_then(|s| s.opaque_key);
        if let (Some(d), None) = (record.kind.opaque(), &opaque_key) {
            opaque_key = Some(self.save_opaque(d)?);
        }
        self.save(&record, false)?;
        let stored = Stored {
            record,
            deleted: false,
            opaque_key,
        };
        json(if created { 201 } else { 200 }, &Self::view(&stored))
    }

    fn allocate(
        &self,
        stored: &Stored,
        step: Option<u64>,
        by: &str,
    ) -> ApiResult<(Allocation, TagRecord)> {
        let step = stored.record.grant_step(step);
        let now = now_ms();
        let (alloc, next) = stored.record.allocate(Some(step), now)?;
        self.save(&next, false)?;
        self.remember(&alloc, now, by)?;
        Ok((alloc, next))
    }

    /// Adds an allocation to the history, keeping the last `HISTORY_LEN`.
    fn remember(&self, alloc: &Allocation, now: u64, by: &str) -> ApiResult<()> {
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

    fn history(&self) -> ApiResult<Response> {
        let stored = self.live()?;
        let rows: Vec<HistoryRow> = self
            .sql
            .exec(
                "SELECT seq, at, start, end, by FROM history ORDER BY seq",
                None,
            )?
            .to_array()?;
        let allocations = match rows.last() {
            Some(r) => stored_u64("history seq", r.seq)?,
            None => 0,
        };
        let events = rows
            .into_iter()
            .map(|r| {
                Ok(HistoryEvent {
                    at_ms: stored_u64("history at", r.at)?,
                    start: r.start,
                    end: r.end,
                    by: r.by,
                })
            })
            .collect::<ApiResult<Vec<_>>>()?;
        json(
            200,
            &TagHistory {
                tag: Self::view(&stored),
                allocations,
                events,
            },
        )
    }

    /// The segment remembered under a lease's request ID (as its caller's:
    /// `SegmentAsk::remembered_as`), with the step its request was granted.
    fn remembered(&self, request_id: &str) -> ApiResult<Option<Remembered>> {
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

    fn lease(&self, req: AllocateRequest) -> ApiResult<Response> {
        let stored = self.live()?;
        let ask = SegmentAsk {
            step: req.step,
            request_id: req.request_id.as_deref(),
            caller: req.asker(),
            for_isolate: req.for_isolate,
        };
        let remembered_as = ask.remembered_as();
        let remembered = match &remembered_as {
            Some(key) => self.remembered(key)?,
            None => None,
        };
        let credits = match ask.credit_owner() {
            Some(owner) => self.credits(owner)?,
            None => Vec::new(),
        };
        let above = match req.after.as_deref() {
            None => 0,
            Some(a) => a.parse::<u64>().map_err(|_| {
                ApiError::new(
                    ErrorCode::OutOfRange,
                    format!(
                        "after: expected a decimal string in 0..=18446744073709551615, found {a:?}"
                    ),
                )
            })?,
        };
        // The core decides (the tag's kind, the request ID, the asker's
        // credits); this store allocates and remembers, in this one turn.
        let alloc =
            match stored
                .record
                .lease_with_credits(&ask, remembered.as_ref(), &credits, above)?
            {
                CreditedAnswer::Segment(SegmentAnswer::Again(alloc)) => alloc,
                CreditedAnswer::Segment(SegmentAnswer::Allocate { step }) => {
                    let (alloc, _) = self.allocate(&stored, Some(step), &req.by)?;
                    if let Some(key) = &remembered_as {
                        self.remember_lease(key, &alloc, step)?;
                    }
                    alloc
                }
                CreditedAnswer::Credit {
                    segment,
                    granted,
                    taken,
                    rest,
                } => {
                    let owner = ask.credit_owner().unwrap_or_default();
                    self.drop_credit(owner, &taken)?;
                    if let Some(rest) = rest {
                        self.add_credit(owner, &rest)?;
                    }
                    self.remember(&segment, now_ms(), &req.by)?;
                    if let Some(key) = &remembered_as {
                        self.remember_lease(key, &segment, granted)?;
                    }
                    segment
                }
            };
        // Only an opaque tag's isolates get here with it: its key goes along.
        let opaque = match (&stored.opaque_key, stored.record.kind.opaque()) {
            (Some(key), Some(domain)) => Some(OpaqueGrant {
                domain,
                key: key.clone(),
            }),
            _ => None,
        };
        json(
            200,
            &SegmentLease {
                start: alloc.start.to_string(),
                end: alloc.end.to_string(),
                step: alloc.step,
                min_step: stored.record.step,
                opaque,
            },
        )
    }

    /// Remembers a lease's segment under its request ID, with the step its
    /// request was `granted` (the segment is shorter when it was the tag's
    /// last), forgetting those older than `REQUEST_ID_TTL_MS`.
    fn remember_lease(&self, request_id: &str, alloc: &Allocation, granted: u64) -> ApiResult<()> {
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
        Ok(())
    }

    /// The credits `owner` holds on this tag.
    fn credits(&self, owner: &str) -> ApiResult<Vec<Allocation>> {
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

    fn add_credit(&self, owner: &str, credit: &Allocation) -> ApiResult<()> {
        self.credit_row(
            "INSERT INTO credit(owner, start, end) VALUES (?, ?, ?)",
            owner,
            credit,
        )
    }

    fn drop_credit(&self, owner: &str, credit: &Allocation) -> ApiResult<()> {
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
    fn change_remembered(&self, key: &str, change: RememberedChange) -> ApiResult<()> {
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

    /// A leased range's unused tail, handed back by its asker: the core
    /// decides — an allocator's returns (`TagRecord::take_back`: nothing
    /// handed out after it, the end of the range remembered under the
    /// asker's own request ID); an outside client's becomes its own credit
    /// (`TagRecord::credit_back`), `max_id` unchanged. The record, credits
    /// and remembered range change in one synchronous turn (one write).
    fn take_back(&self, req: &TakeBackRequest) -> ApiResult<Response> {
        let stored = self.live()?;
        let bound = |s: &str| {
            s.parse::<u64>().map_err(|_| {
                ApiError::new(
                    ErrorCode::OutOfRange,
                    format!("take back: expected a decimal bound, found {s:?}"),
                )
            })
        };
        let tail = Allocation::new(bound(&req.start)?, bound(&req.end)?)?;
        let back = TailBack {
            tail,
            request_id: &req.request_id,
            caller: req.asker(),
            for_isolate: req.for_isolate(),
        };
        let key = back.remembered_as();
        let remembered = match &key {
            Some(k) => self.remembered(k)?,
            None => None,
        };
        // An outside client's tail: a credit of its own asker, never
        // `max_id` moved back (the core's `credit_back`).
        if let Some(owner) = back.credit_owner() {
            let credits = self.credits(owner)?;
            let taken = match stored
                .record
                .credit_back(&back, remembered.as_ref(), &credits)?
            {
                CreditBack::Credited { credit, remembered } => {
                    self.add_credit(owner, &credit)?;
                    if let Some(k) = &key {
                        self.change_remembered(k, remembered)?;
                    }
                    true
                }
                CreditBack::Skipped(_) => false,
            };
            return json(
                200,
                &TakenBack {
                    taken,
                    untaken: false,
                    max_id: stored.record.max_id.to_string(),
                },
            );
        }
        let (taken, untaken) =
            match stored
                .record
                .take_back(&back, remembered.as_ref(), now_ms())?
            {
                TakeBack::Returned { record, remembered } => {
                    self.save(&record, false)?;
                    if let Some(k) = &key {
                        self.change_remembered(k, remembered)?;
                    }
                    (Some(record.max_id), false)
                }
                TakeBack::Skipped(skipped) => (None, skipped.proves_untaken()),
            };
        json(
            200,
            &TakenBack {
                taken: taken.is_some(),
                untaken,
                max_id: taken.unwrap_or(stored.record.max_id).to_string(),
            },
        )
    }

    /// An opaque ID's counter, and whether the tag handed it out.
    fn reveal(&self, id: &GivenId) -> ApiResult<Response> {
        let stored = self.live()?;
        let domain = stored.record.kind.check_opaque()?;
        let Some(key) = &stored.opaque_key else {
            return Err(ApiError::store_error(
                "store: an opaque tag without its key",
            ));
        };
        let id = match id {
            GivenId::Id(id) => *id,
            GivenId::Not(given) => {
                return Err(ApiError::new(
                    ErrorCode::InvalidId,
                    format!(
                        "id: expected a decimal string in 1..={}, found {given}",
                        domain.max_id()
                    ),
                ));
            }
        };
        let ids = OpaqueGrant {
            domain,
            key: key.clone(),
        }
        .ids()?;
        let counter = ids.decode(id).ok();
        let belongs = counter.is_some_and(|c| c <= stored.record.max_id);
        json(
            200,
            &Revealed {
                belongs,
                counter: counter.map(|c| c.to_string()),
                id: id.to_string(),
            },
        )
    }

    /// A monotonic tag's last ID answered, as stored (0: none yet).
    fn issued(&self) -> ApiResult<u64> {
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
    fn write_issued(&self, expected: Option<IssuedMark>, mark: IssuedMark) -> ApiResult<()> {
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

    /// Monotonic tags: IDs from this object alone, so each is greater than
    /// every one issued before, whoever asked. Each answer writes its last
    /// ID before it leaves.
    fn ids(&self, count: u64) -> ApiResult<Response> {
        let count = checked_count(count)?;
        let stored = self.live()?;
        stored.record.kind.check_monotonic()?;
        let read = IssuedMark {
            max_id: stored.record.max_id,
            issued: self.issued()?,
        };
        let mut cell = self.issuer.borrow_mut();
        let issuer = match cell.as_mut() {
            Some(i) => i,
            None => cell.insert(MonotonicIssuer::new(StepPolicy::new(stored.record.step)?)),
        };
        issuer.begin(read);
        let mut out = vec![0u64; count];
        let mut filled = 0;
        let mut record = stored;
        loop {
            let poll = issuer.poll(now_ms(), &mut out[filled..]);
            filled += poll.filled;
            // The store is this object's own storage: loads are
            // synchronous, so a prefetch is done at once too.
            let (step, needed) = match poll.next {
                SegmentStep::Done { prefetch: None } => break,
                SegmentStep::Done {
                    prefetch: Some(step),
                } => (step, false),
                SegmentStep::LoadNow { step } => (step, true),
                SegmentStep::Wait => {
                    return Err(ApiError::new(
                        ErrorCode::StoreError,
                        "monotonic tag: a load marked in flight in a synchronous store",
                    ))
                }
            };
            match self.allocate(&record, Some(step), "store") {
                Ok((alloc, next)) => {
                    record.record = next;
                    issuer.loaded(alloc, now_ms())?;
                }
                Err(e) => {
                    issuer.load_failed();
                    // A prefetch that failed (the tag's last IDs are in
                    // memory) does not fail the answer it follows.
                    if needed {
                        return Err(e);
                    }
                    break;
                }
            }
        }
        let mark = issuer.answer(out[count - 1]);
        if let Err(e) = self.write_issued(issuer.expected(), mark) {
            issuer.write_failed();
            return Err(e);
        }
        issuer.written(mark);
        json(200, &IdList::of(&out))
    }
}

impl DurableObject for TagStore {
    fn new(state: State, _env: Env) -> Self {
        TagStore {
            sql: state.storage().sql(),
            tables: Cell::new(false),
            issuer: RefCell::new(None),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(None, &req, async |r| match r {
            TagRequest::Put(b) => self.upsert(b),
            TagRequest::Get => self.live().and_then(|s| json(200, &Self::view(&s))),
            TagRequest::History => self.history(),
            TagRequest::Delete => self.live().and_then(|s| {
                *self.issuer.borrow_mut() = None;
                self.save(&s.record, true)?;
                json(200, &Self::view(&s))
            }),
            TagRequest::Allocate(b) => self.lease(b),
            TagRequest::Reveal { id } => self.reveal(&id),
            TagRequest::Ids { count } => self.ids(count),
            TagRequest::TakeBack(b) => self.take_back(&b),
        })
        .await
    }
}
