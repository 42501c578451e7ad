//! `GET /v1/fleet`: the dashboard's charts, computed here rather than in the
//! browser over one request per tag. The busiest tags the credential sees
//! (`?top=K`, from the summaries in the catalog: one object call), each
//! read from its own history (exact: its IDs per minute, the step over time,
//! its runway) — at most `MAX_TOP` of them, so the route makes at most
//! 1 + `MAX_TOP` object calls whatever the number of tags.

use edgeleaf::code::ErrorCode;
use edgeleaf_rules::access::Access;
use edgeleaf_rules::history::per_minute;
use serde_json::{json, Value};
use worker::Env;

use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::history;
use crate::objects::catalog::stubs as catalog;
use crate::routes::{ListQuery, MAX_READ_PER_PAGE};

/// The tags charted by default (the dashboard's eight colours).
pub const DEFAULT_TOP: u32 = 8;
/// The most tags charted: each is one object call.
#[allow(clippy::cast_possible_truncation)] // 32
pub const MAX_TOP: u32 = MAX_READ_PER_PAGE as u32;
/// The minutes charted by default.
pub const DEFAULT_MINUTES: u64 = 30;

/// `?top=K` (1..=32, default 8).
pub fn top(url: &worker::Url) -> ApiResult<u32> {
    let Some((_, raw)) = url.query_pairs().find(|(k, _)| k == "top") else {
        return Ok(DEFAULT_TOP);
    };
    raw.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_TOP).contains(n))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::OutOfRange,
                format!("top: expected 1..={MAX_TOP}, found {raw:?}"),
            )
        })
}

/// The names of the `top` busiest tags `access` sees and how many it sees:
/// from the catalog's summaries, or (a catalog of the release before,
/// during a deploy, which keeps none) the first by name.
async fn busiest(env: &Env, access: &Access, top: u32) -> ApiResult<(Vec<String>, u64)> {
    let query = ListQuery {
        cursor: None,
        limit: top,
        contains: None,
    };
    if let Some(page) = catalog::page(env, query.page(access, true)).await? {
        let names = page.entries.into_iter().map(|e| e.biz_tag).collect();
        return Ok((names, page.total));
    }
    let seen: Vec<String> = catalog::list(env)
        .await?
        .into_iter()
        .filter(|t| access.sees_tag(t))
        .collect();
    let total = seen.len() as u64;
    Ok((seen.into_iter().take(top as usize).collect(), total))
}

/// The answer: the minutes charted, and for each of the busiest tags its
/// IDs and largest segment per minute and its runway; a tag whose object did
/// not answer within the request's budget is named in `unavailable`.
pub async fn answer(env: &Env, access: &Access, minutes: u64, top: u32) -> ApiResult<Value> {
    let (names, total) = busiest(env, access, top).await?;
    let read = futures::future::join_all(names.iter().map(|t| history::load(env, t))).await;
    let now = now_ms();
    let mut tags = Vec::new();
    let mut unavailable = Vec::new();
    let mut charted_minutes = Vec::new();
    for (name, h) in names.into_iter().zip(read) {
        let h = match h {
            Ok(h) => h,
            // Deleted since it was listed: not charted.
            Err(e) if e.code == ErrorCode::NotFound => continue,
            Err(_) => {
                unavailable.push(name);
                continue;
            }
        };
        let buckets = per_minute(&h.allocation_events()?, now, minutes);
        if charted_minutes.is_empty() {
            charted_minutes = buckets.iter().map(|b| b.minute_ms).collect();
        }
        let r = history::tag_runway(&h, now)?;
        tags.push(json!({
            "bizTag": h.tag.biz_tag, "maxId": h.tag.max_id, "step": h.tag.step,
            "ids": buckets.iter().map(|b| b.ids).collect::<Vec<_>>(),
            "maxStep": buckets.iter().map(|b| b.max_step).collect::<Vec<_>>(),
            "runway": {
                "idsPerHour": r.ids_per_hour, "remaining": r.remaining.to_string(),
                "exhaustedAtMs": r.exhausted_at_ms,
            },
        }));
    }
    if charted_minutes.is_empty() {
        charted_minutes = per_minute(&[], now, minutes)
            .iter()
            .map(|b| b.minute_ms)
            .collect();
    }
    Ok(json!({
        "nowMs": now, "total": total, "minutes": charted_minutes, "tags": tags,
        "unavailable": unavailable,
    }))
}
