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
//! asker (the core's `TagRecord::plan_tail` and `plan_lease`: the store
//! writes what they decide).
//!
//! It reports its summary (its view, allocations, runway and the last
//! hour's allocations a minute each, from which readers age the rate) to
//! the catalog at most once a minute and only after a change (`report`), so that
//! listings and scrapes never call every tag's object — from a timer in
//! memory, not an alarm, which the release before could not handle after a
//! rollback (`report.rs`).
//!
//! `max_id` is stored as TEXT: SQLite integers reach JS as numbers, exact only
//! below 2^53, and IDs go to 2^63 − 1.

mod handlers;
mod report;
mod schema;
pub mod stubs;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use edgeleaf::driver::MonotonicIssuer;
use edgeleaf_rules::wire::{catalog::Done, tag::TagRequest, tag::TagView};
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use crate::api::{json, ApiError, ApiResult};
use crate::objects::serve::serve;
use crate::objects::sql::Sql;

use schema::Stored;

#[durable_object]
pub struct TagStore {
    sql: Sql,
    env: Env,
    /// A timer to report the summary is pending (`report`: one at a time,
    /// at most a minute); shared with it, which clears it if its report
    /// could not be asked for.
    report_armed: Rc<Cell<bool>>,
    /// When this instance last reported its summary, Unix ms (0: never).
    reported_ms: Cell<u64>,
    /// The tables are known to exist (made by this instance, or found).
    tables: Cell<bool>,
    /// Monotonic tags only: the IDs this object serves itself.
    issuer: RefCell<Option<MonotonicIssuer>>,
    /// Per asker that sent request IDs since this instance started (by the
    /// start of its names' range): at least as many leases as it has
    /// remembered — counted when this instance first remembers one of its
    /// leases, one more each lease after, the core's `remembered_prune`
    /// applied — so that a keyed lease reads the asker's rows only to count
    /// them once or to prune (once in `REMEMBERED_PRUNE_MARGIN` leases), not
    /// at each, and writes no row more. Only this instance writes the table
    /// (an older one's writes fail), so the count never falls below the
    /// rows; rows forgotten otherwise (the hour, a tail handed back) leave
    /// it above them, which prunes early at worst. At most the core's
    /// `MAX_COUNTED_CALLERS` askers: past that, all are forgotten at once
    /// (`schema::keep_count`), each counted again at its next lease.
    remembered_counts: RefCell<HashMap<String, u64>>,
}

impl TagStore {
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
}

impl DurableObject for TagStore {
    fn new(state: State, env: Env) -> Self {
        TagStore {
            sql: Sql::new(&state),
            env,
            report_armed: Rc::new(Cell::new(false)),
            reported_ms: Cell::new(0),
            tables: Cell::new(false),
            issuer: RefCell::new(None),
            remembered_counts: RefCell::new(HashMap::new()),
        }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(&self.env, None, &req, async |r| {
            if matches!(r, TagRequest::Report) {
                self.report().await;
                return json(200, &Done {});
            }
            let changed = !matches!(
                r,
                TagRequest::Get | TagRequest::History | TagRequest::Reveal { .. }
            );
            let answer = self.answer(r);
            // A change that was made (a refused one, e.g. of a name never
            // created, writes nothing and arms no report).
            if changed && answer.as_ref().is_ok_and(|r| r.status_code() < 400) {
                self.arm_report().await;
            }
            answer
        })
        .await
    }

    // No release arms an alarm here yet: this handler is for the release
    // after, which may arm one once the release it rolls back to (this one)
    // handles it.
    async fn alarm(&self) -> worker::Result<Response> {
        crate::scope::for_alarm(&self.env).run(self.report()).await;
        Response::empty()
    }
}

impl TagStore {
    fn answer(&self, r: TagRequest) -> ApiResult<Response> {
        match r {
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
            // Answered in `fetch` (it awaits the catalog).
            TagRequest::Report => json(200, &Done {}),
        }
    }
}
