//! A tag's summary for the catalog: its view, allocations and runway, sent
//! after a change — at most once a minute, never on the ID path — and only
//! then: the summary carries the last hour's allocations a minute each, and
//! its readers age the rate from them (`TagStats::at`), so that nothing
//! re-reports a tag as its rate falls.
//!
//! The wake-up is a timer in this instance's memory that asks the object
//! itself (`TagRequest::Report`), not an alarm: an alarm is kept in storage,
//! and storage is read by the release before after a rollback (design.md,
//! "Two releases at once"), whose `TagStore` has no alarm handler — it
//! panics, and the runtime retries the alarm, each time failing every
//! request in flight in that isolate (tests/service/two-versions.test.mjs,
//! "rolling back"). A timer dies with its instance: an object evicted with a
//! report due keeps its last summary until its next change.
//!
//! A pending timer keeps the object in memory (it cannot hibernate, and the
//! platform bills its duration), so there is one at a time, of at most the
//! rest of the minute after a change (2 s after a first), never re-armed by
//! the report: an object lives at most about a minute past its last change
//! for its report (docs/service.md, "What it costs").

use edgeleaf_rules::wire::catalog::TagSummary;

use crate::api::ApiResult;
use crate::clock::{now_ms, sleep_ms};
use crate::history::{summary, tag_runway};
use crate::objects::catalog::stubs as catalog;

use super::stubs;

use super::TagStore;

/// The least time between two reports of one tag.
pub const REPORT_EVERY_MS: u64 = 60_000;

/// How long after a first change the report waits (the changes of a burst
/// reported once).
const FIRST_REPORT_AFTER_MS: u64 = 2_000;

impl TagStore {
    /// After a change: a timer to report it, unless one runs — 2 s on, or
    /// a minute after the last report if that is later. An instance the
    /// platform evicted lost its timer and when it last reported: its next
    /// change reports 2 s later (a report per eviction at most, not per
    /// change).
    pub(super) async fn arm_report(&self) {
        if self.report_armed.get() {
            return;
        }
        let at = (now_ms() + FIRST_REPORT_AFTER_MS).max(self.reported_ms.get() + REPORT_EVERY_MS);
        let tag = match self.load() {
            Ok(Some(s)) => s.record.biz_tag,
            // Nothing to report (no tag), or the next change tries again.
            _ => return,
        };
        let wait_ms = at.saturating_sub(now_ms()).max(1);
        let env = self.env.clone();
        let armed = self.report_armed.clone();
        armed.set(true);
        wasm_bindgen_futures::spawn_local(async move {
            sleep_ms(wait_ms).await;
            // Counted like a request (tests' `TEST_COUNT_CALLS`): its call
            // to the object, and what that one does; its budget from now.
            let asked = crate::scope::for_timer(&env)
                .run(stubs::report(&env, &tag))
                .await;
            if let Err(e) = asked {
                // Not asked (this instance replaced, or the object busy):
                // the next change arms again.
                armed.set(false);
                worker::console_warn!("tag: asking for its report: {}", e.message);
            }
        });
    }

    /// The timer's request (or an alarm): reports the summary (none for a
    /// deleted tag), once — a change after it arms the next.
    pub(super) async fn report(&self) {
        self.report_armed.set(false);
        let summary = match self.summary() {
            Ok(Some(s)) => s,
            Ok(None) => return,
            Err(e) => {
                worker::console_warn!("tag: its summary: {}", e.message);
                return;
            }
        };
        self.reported_ms.set(now_ms());
        // A catalog of the release before keeps no summaries (`Ok` too).
        if let Err(e) = catalog::report(&self.env, vec![summary]).await {
            worker::console_warn!("tag: reporting its summary: {}", e.message);
        }
    }

    fn summary(&self) -> ApiResult<Option<TagSummary>> {
        if !self.tables(false)? || self.load()?.is_none_or(|s| s.deleted) {
            return Ok(None);
        }
        let h = self.read_history()?;
        let now = now_ms();
        let r = tag_runway(&h, now)?;
        Ok(Some(summary(&h, &r, now)))
    }
}
