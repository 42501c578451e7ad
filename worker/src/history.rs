//! `GET /v1/tags/{tag}/history`: what the tag's store remembers of its
//! allocations — every isolate's and client's together — read by the core as
//! IDs per minute, the step over time and the runway.

use edgeleaf::code::ErrorCode;
use edgeleaf_rules::wire::catalog::{TagStats, TagSummary};
use edgeleaf_rules::wire::tag::TagHistory;
use edgeleaf_rules::{history::per_minute, history::Runway};
use serde_json::json;
use worker::Env;

use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::objects::tag_store::stubs as tag_store;

/// The most minutes one history answer covers (a day).
pub const MAX_MINUTES: u64 = 1440;

/// A tag's history from its store.
pub async fn load(env: &Env, tag: &str) -> ApiResult<TagHistory> {
    tag_store::history(env, tag).await
}

/// The runway of a tag from its history.
pub fn tag_runway(h: &TagHistory, now: u64) -> ApiResult<Runway> {
    Ok(h.runway(now)?)
}

/// The summary the catalog keeps of a tag, from its history and runway at
/// `now` (what its object reports, and what a listing reads when none was):
/// with the last hour's allocations a minute each, from which readers age
/// its rate (`TagStats::at`).
pub fn summary(h: &TagHistory, r: &Runway, now: u64) -> TagSummary {
    let minutes = h
        .allocation_events()
        .map(|e| edgeleaf_rules::history::recent_minutes(&e, now))
        .unwrap_or_default();
    TagSummary {
        tag: h.tag.clone(),
        stats: Some(TagStats {
            allocations: h.allocations,
            ids_per_hour: r.ids_per_hour,
            remaining: r.remaining.to_string(),
            exhausted_at_ms: r.exhausted_at_ms,
            at_ms: now,
            minutes,
        }),
    }
}

/// `?minutes=N`, 1..=1440 (default 60).
pub fn minutes(url: &worker::Url) -> ApiResult<u64> {
    minutes_or(url, 60)
}

/// `?minutes=N`, 1..=1440 (default `default`).
pub fn minutes_or(url: &worker::Url, default: u64) -> ApiResult<u64> {
    let Some((_, raw)) = url.query_pairs().find(|(k, _)| k == "minutes") else {
        return Ok(default);
    };
    raw.parse::<u64>()
        .ok()
        .filter(|m| (1..=MAX_MINUTES).contains(m))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::OutOfRange,
                format!("minutes: expected 1..={MAX_MINUTES}, found {raw:?}"),
            )
        })
}

/// The answer of `GET /v1/tags/{tag}/history`.
pub async fn answer(env: &Env, tag: &str, minutes: u64) -> ApiResult<serde_json::Value> {
    let h = load(env, tag).await?;
    let now = now_ms();
    let events = h.allocation_events()?;
    let r = tag_runway(&h, now)?;
    let recent: Vec<serde_json::Value> = h
        .events
        .iter()
        .rev()
        .take(100)
        .zip(events.iter().rev())
        .map(|(e, a)| json!({ "atMs": e.at_ms, "start": e.start, "end": e.end, "ids": a.ids(), "by": e.by }))
        .collect();
    Ok(json!({
        "bizTag": h.tag.biz_tag, "maxId": h.tag.max_id, "step": h.tag.step,
        "domainMax": h.domain_max().to_string(),
        "allocations": h.allocations, "remembered": h.events.len(), "nowMs": now,
        "minutes": per_minute(&events, now, minutes),
        "runway": {
            "idsPerHour": r.ids_per_hour, "remaining": r.remaining.to_string(),
            "exhaustedAtMs": r.exhausted_at_ms,
        },
        "recent": recent,
    }))
}
