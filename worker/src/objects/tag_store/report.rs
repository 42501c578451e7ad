//! A tag's summary for the catalog: its view, allocations and runway, sent
//! from an alarm after a change — at most once a minute, never on the ID
//! path — and again each minute while the last hour's rate is not 0 (it
//! falls as allocations age out of the hour).

use edgeleaf_rules::wire::catalog::TagSummary;

use crate::api::ApiResult;
use crate::clock::now_ms;
use crate::history::{summary, tag_runway};
use crate::objects::catalog::stubs as catalog;

use super::TagStore;

/// The least time between two reports of one tag.
pub const REPORT_EVERY_MS: u64 = 60_000;

/// How long after a first change the report waits (the changes of a burst
/// reported once).
const FIRST_REPORT_AFTER_MS: u64 = 2_000;

impl TagStore {
    /// After a change: an alarm to report it, unless one is set — by this
    /// instance, or by one before it that the platform evicted: its alarm is
    /// kept, and setting a new one 2 s ahead would report (and pay an alarm,
    /// a call to the catalog and their rows) each time an idle gap evicted
    /// the object, not at most once a minute.
    pub(super) async fn arm_report(&self) {
        if self.report_armed.get() {
            return;
        }
        let now = now_ms();
        // One set further ahead than a report's wait is no report's, and one
        // due already may be the alarm running now (its report read the tag
        // before this change): set anew.
        let (now_i, soon) = (
            i64::try_from(now).unwrap_or(i64::MAX),
            i64::try_from(now + REPORT_EVERY_MS).unwrap_or(i64::MAX),
        );
        if let Ok(Some(at)) = self.storage.get_alarm().await {
            if now_i < at && at <= soon {
                self.report_armed.set(true);
                return;
            }
        }
        let at = (now + FIRST_REPORT_AFTER_MS).max(self.reported_ms.get() + REPORT_EVERY_MS);
        self.arm_at(at).await;
    }

    async fn arm_at(&self, at: u64) {
        // workers-rs reads an integer as an offset from now, not a time.
        #[allow(clippy::cast_possible_wrap)] // at most a minute
        let offset_ms = at.saturating_sub(now_ms()).max(1) as i64;
        match self.storage.set_alarm(offset_ms).await {
            Ok(()) => {
                self.report_armed.set(true);
                // Billed as a row written.
                crate::scope::count_rows(0, 1);
            }
            // The next change tries again.
            Err(e) => worker::console_warn!("tag: arming its report: {e}"),
        }
    }

    /// The alarm: reports the summary (none for a deleted tag); while the
    /// last hour's rate is not 0, once more a minute later.
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
        let busy = summary.stats.as_ref().is_some_and(|s| s.ids_per_hour > 0);
        self.reported_ms.set(now_ms());
        // A catalog of the release before keeps no summaries (`Ok` too).
        if let Err(e) = catalog::report(&self.env, vec![summary]).await {
            worker::console_warn!("tag: reporting its summary: {}", e.message);
        }
        if busy && !self.report_armed.get() {
            self.arm_at(now_ms() + REPORT_EVERY_MS).await;
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
