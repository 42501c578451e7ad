//! The catalog of tags (`Catalog`): its requests and its answer.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use super::tag::TagView;

/// What the catalog is asked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum CatalogRequest {
    /// Every tag, by name: answers [`TagList`].
    List,
    /// Adds a tag (if new): answers `{}`.
    Add {
        /// The tag.
        biz_tag: String,
    },
    /// Removes a tag: answers `{}`.
    Remove {
        /// The tag.
        biz_tag: String,
    },
    /// Tags' summaries, each kept by a tag still listed (a removed tag's
    /// report is dropped): answers `{}`. New in 0.2: the release before
    /// refuses it (`400 invalid_json`), and its sender then goes without.
    Report {
        /// The summaries.
        summaries: Vec<TagSummary>,
    },
    /// One page of tags with their summaries: answers [`TagPage`]. New in
    /// 0.2 (refused by the release before: its caller lists as before).
    Page(PageQuery),
}

impl super::StoreRequest for CatalogRequest {
    fn repeatable(&self) -> bool {
        // A set: adding or removing a name twice is once; a summary kept
        // twice is kept; a page is a read.
        true
    }
}

/// What a tag's object last reported of itself (at most once a minute,
/// never on the ID path), or what a listing read of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagSummary {
    /// The tag as `GET /v1/tags/{tag}` shows it.
    pub tag: TagView,
    /// Its allocations and runway (`None`: only its view is known, from a
    /// change or a listing; the catalog keeps the last stats reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<TagStats>,
}

/// A tag's allocations and runway, as its object read them at `at_ms`.
///
/// A summary is sent after a change only (at most once a minute), not as
/// its rate falls: it carries the last hour's allocations a minute each
/// (`minutes`), from which its reader computes the rate at read time
/// ([`TagStats::at`]) — so that no tag's object is kept awake to re-report
/// (docs/service.md, "The catalog").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagStats {
    /// Every allocation ever made.
    pub allocations: u64,
    /// IDs per hour over the last hour, at `at_ms` (a reader's: [`TagStats::at`]).
    pub ids_per_hour: u64,
    /// IDs left before the end of the tag's domain, decimal.
    pub remaining: String,
    /// When `max_id` reaches that end at that rate, Unix ms.
    pub exhausted_at_ms: Option<u64>,
    /// When read, Unix ms.
    pub at_ms: u64,
    /// The hour before `at_ms`, per minute with an allocation: `[the time
    /// of its first, Unix ms, the IDs of all]`, oldest first, at most 61
    /// (`history::recent_minutes`).
    #[serde(default)]
    pub minutes: Vec<(u64, u64)>,
}

impl TagStats {
    /// These stats as of `now_ms`: the rate and the end recomputed from
    /// `minutes` (IDs age out of the hour; `remaining` changes only with an
    /// allocation, which sends a new summary). Not before `at_ms`.
    #[must_use]
    pub fn at(&self, now_ms: u64) -> TagStats {
        if now_ms <= self.at_ms {
            return self.clone();
        }
        let Ok(remaining) = self.remaining.parse::<u64>() else {
            return self.clone();
        };
        let r = crate::history::runway_of(self.minutes.iter().copied(), remaining, now_ms);
        TagStats {
            ids_per_hour: r.ids_per_hour,
            exhausted_at_ms: r.exhausted_at_ms,
            at_ms: now_ms,
            ..self.clone()
        }
    }

    /// When its rate is 0 (its last minute out of the hour), Unix ms.
    pub fn quiet_at_ms(&self) -> u64 {
        self.minutes.last().map_or(0, |(at, _)| {
            at.saturating_add(crate::history::RUNWAY_WINDOW_MS)
        })
    }
}

/// Which tags a page holds: names after `after` (the cursor), at most
/// `limit`, those a key's limit allows (`exact`, `prefix`) and containing
/// `contains`; by name, or (`by_rate`) the busiest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageQuery {
    /// The cursor: the last name of the page before.
    #[serde(default)]
    pub after: Option<String>,
    /// The most entries.
    pub limit: u32,
    /// Only this tag.
    #[serde(default)]
    pub exact: Option<String>,
    /// Only tags starting with this.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Only tags whose name contains this.
    #[serde(default)]
    pub contains: Option<String>,
    /// Busiest first (`ids_per_hour`, then by name); `after` is ignored.
    #[serde(default)]
    pub by_rate: bool,
}

/// A page of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagPage {
    /// The tags, with what the catalog holds of each.
    pub entries: Vec<TagEntry>,
    /// How many tags the query's filters match, in every page.
    pub total: u64,
    /// The cursor of the next page, if there is one.
    #[serde(default)]
    pub next: Option<String>,
}

/// A tag of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagEntry {
    /// Its name.
    pub biz_tag: String,
    /// Its last summary (`None`: never reported, e.g. a tag made by the
    /// release before, not read since).
    #[serde(default)]
    pub summary: Option<TagSummary>,
}

/// The catalog's tags, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagList {
    /// The tags' names.
    pub tags: Vec<String>,
}

/// The catalog's answer to a change: `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {}
