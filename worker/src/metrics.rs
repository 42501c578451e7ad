//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4).
//! The number of tags, and for the busiest (`?top=N`, 100 by default) and
//! those named (`?tag=a&tag=b`, at most `MAX_NAMED`), from
//! the summaries their objects report to the catalog (every isolate
//! together, at most a minute old while busy): `max_id`, step, allocations,
//! the recent rate and the runway (and `edgeleaf_tag_up`: 1 for a tag with
//! series — from a summary, that it was read, not that the object answered
//! now; 0 for a tag whose object was asked and did not answer, listed, not
//! left out); the registry's
//! worker IDs by status; and this isolate's counters, labelled with its ID
//! (each isolate answers for itself: a scrape sees whichever one answered).
//! A key limited to some tags gets the samples of those tags only, and no
//! registry or isolate families (every tenant's): `Access::sees_tag`,
//! `Access::sees_fleet`.

use std::fmt::Write;

use edgeleaf::code::ErrorCode;
use edgeleaf_rules::access::Access;
use edgeleaf_rules::history::Runway;
use edgeleaf_rules::wire::catalog::TagSummary;
use edgeleaf_rules::wire::tag::TagView;
use worker::Env;

use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::history;
use crate::isolate::{isolate_id, with};
use crate::objects::catalog::{stubs as catalog, MAX_PAGE};
use crate::objects::registry_store::stubs as registry_store;
use crate::routes::{ListQuery, MAX_READ_PER_PAGE};

#[derive(Default)]
struct Text(String);

impl Text {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| {
                    let v = v
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n");
                    format!("{k}=\"{v}\"")
                })
                .collect();
            let _ = write!(self.0, "{{{}}}", pairs.join(","));
        }
        let value = if value.is_infinite() {
            "+Inf".to_owned()
        } else {
            format!("{value}")
        };
        let _ = writeln!(self.0, " {value}");
    }
}

/// The per-tag series of a scrape by default: the busiest tags' (`?top=N`,
/// 0..=1000).
pub const DEFAULT_TOP: u32 = 100;

/// The most tags a scrape may name (`?tag=`): each is read from its own
/// object (exact), so a scrape stays within 50 object calls with the
/// busiest tags' (catalog, 32 tags, catalog, registry: 35).
pub const MAX_NAMED: usize = 10;

/// Which tags' series a scrape shows.
#[derive(Debug, PartialEq, Eq)]
pub struct Query {
    /// The busiest: `?top=N` (`DEFAULT_TOP` unless tags are named, then 0).
    pub top: u32,
    /// The named ones (`?tag=`, each once), besides the busiest.
    pub tags: Vec<String>,
}

/// `?top=N&tag=a&tag=b`.
pub fn query(url: &worker::Url) -> ApiResult<Query> {
    let named = url.query_pairs().filter(|(k, _)| k == "tag").count();
    if named > MAX_NAMED {
        return Err(ApiError::new(
            ErrorCode::OutOfRange,
            format!("tag: expected at most {MAX_NAMED} tags, found {named}"),
        ));
    }
    let mut tags: Vec<String> = Vec::new();
    for (k, v) in url.query_pairs() {
        if k == "tag" && !tags.iter().any(|t| *t == v) {
            tags.push(v.into_owned());
        }
    }
    let named_top = url.query_pairs().any(|(k, _)| k == "top");
    let top = match top(url)? {
        n if named_top || tags.is_empty() => n,
        _ => 0,
    };
    Ok(Query { top, tags })
}

/// One tag's series: its view, allocations and runway.
struct TagRow {
    tag: TagView,
    allocations: u64,
    runway: Runway,
}

/// `?top=N`.
fn top(url: &worker::Url) -> ApiResult<u32> {
    let Some((_, raw)) = url.query_pairs().find(|(k, _)| k == "top") else {
        return Ok(DEFAULT_TOP);
    };
    raw.parse::<u32>()
        .ok()
        .filter(|n| *n <= MAX_PAGE)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::OutOfRange,
                format!("top: expected 0..={MAX_PAGE}, found {raw:?}"),
            )
        })
}

/// The rows of the `top` busiest tags `access` sees, from the catalog's
/// summaries (a tag without stats yet read from its history, at most
/// `MAX_READ_PER_PAGE` a scrape; all of them if that many or fewer), the
/// names of those without stats whose object did not answer (listed as
/// down: as `rows_of`), and how many tags it sees in all; `None` from a
/// catalog of the release before.
async fn top_rows(
    env: &Env,
    access: &Access,
    top: u32,
) -> ApiResult<Option<(Vec<TagRow>, Vec<String>, u64)>> {
    if top == 0 {
        let query = ListQuery {
            cursor: None,
            limit: 1,
            contains: None,
        };
        return Ok(catalog::page(env, query.page(access, true))
            .await?
            .map(|p| (Vec::new(), Vec::new(), p.total)));
    }
    let query = ListQuery {
        cursor: None,
        limit: top,
        contains: None,
    };
    let Some(page) = catalog::page(env, query.page(access, true)).await? else {
        return Ok(None);
    };
    // As few tags as a page reads whole: each from its history (exact).
    let whole = page.entries.len() <= MAX_READ_PER_PAGE;
    let unread: Vec<String> = page
        .entries
        .iter()
        .filter(|e| whole || e.summary.as_ref().is_none_or(|s| s.stats.is_none()))
        .take(MAX_READ_PER_PAGE)
        .map(|e| e.biz_tag.clone())
        .collect();
    let read = futures::future::join_all(unread.iter().map(|t| history::load(env, t))).await;
    let now = now_ms();
    let (mut found, mut failed) = (std::collections::BTreeMap::new(), Vec::new());
    for (name, h) in unread.into_iter().zip(read) {
        match h {
            Ok(h) => {
                let runway = history::tag_runway(&h, now)?;
                found.insert(name, (h, runway));
            }
            // Deleted since it was listed: no longer a tag.
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(_) => failed.push(name),
        }
    }
    if !found.is_empty() {
        let summaries = found
            .values()
            .map(|(h, r)| history::summary(h, r, now))
            .collect();
        // Kept for the next scrape; one not kept is read again then.
        let _ = catalog::report(env, summaries).await;
    }
    let (mut rows, mut down) = (Vec::new(), Vec::new());
    for e in page.entries {
        if let Some((h, runway)) = found.remove(&e.biz_tag) {
            rows.push(TagRow {
                tag: h.tag,
                allocations: h.allocations,
                runway,
            });
            continue;
        }
        let Some(TagSummary {
            tag,
            stats: Some(st),
        }) = e.summary
        else {
            // No stats to show it by: down if its object did not answer.
            if failed.contains(&e.biz_tag) {
                down.push(e.biz_tag);
            }
            continue;
        };
        let remaining = st
            .remaining
            .parse()
            .map_err(|_| ApiError::store_error(format!("catalog: remaining {:?}", st.remaining)))?;
        rows.push(TagRow {
            tag,
            allocations: st.allocations,
            runway: Runway {
                ids_per_hour: st.ids_per_hour,
                remaining,
                exhausted_at_ms: st.exhausted_at_ms,
            },
        });
    }
    Ok(Some((rows, down, page.total)))
}

/// The rows of the first tags by name (at most `top` and
/// `MAX_READ_PER_PAGE`), each from its own history, those whose object did
/// not answer, and how many tags `access` sees: a catalog of the release
/// before (during a deploy) holds no summaries.
async fn first_rows(
    env: &Env,
    access: &Access,
    top: u32,
) -> ApiResult<(Vec<TagRow>, Vec<String>, u64)> {
    let now = now_ms();
    let tags = catalog::list(env).await?;
    let seen: Vec<&String> = tags.iter().filter(|t| access.sees_tag(t)).collect();
    let total = seen.len() as u64;
    let read: Vec<&String> = seen
        .into_iter()
        .take((top as usize).min(MAX_READ_PER_PAGE))
        .collect();
    let (rows, unavailable) = rows_of(env, &read, now).await?;
    Ok((rows, unavailable, total))
}

/// The rows of the tags `named` that `access` sees and neither `rows` nor
/// `down` lists, each from its history (exact), and those whose object did
/// not answer; a name that is no tag has none. (A tag already down is not
/// asked again: a second failure would list it twice, which the exposition
/// format does not allow.)
async fn named_rows(
    env: &Env,
    access: &Access,
    named: &[String],
    rows: &[TagRow],
    down: &[String],
) -> ApiResult<(Vec<TagRow>, Vec<String>)> {
    let wanted: Vec<&String> = named
        .iter()
        // A name no tag can have is not asked of any object.
        .filter(|t| edgeleaf::name::check_tag(t).is_ok())
        .filter(|t| {
            access.sees_tag(t) && !rows.iter().any(|r| r.tag.biz_tag == **t) && !down.contains(t)
        })
        .collect();
    rows_of(env, &wanted, now_ms()).await
}

/// The rows of `tags`, each from its history, and the names of those whose
/// object did not answer (within the request's budget, or with an error),
/// which a scrape shows as down, never leaves out; a tag that does not
/// exist (deleted since it was listed, or never made) has neither.
async fn rows_of(env: &Env, tags: &[&String], now: u64) -> ApiResult<(Vec<TagRow>, Vec<String>)> {
    let read = futures::future::join_all(tags.iter().map(|t| history::load(env, t))).await;
    let (mut found, mut unavailable) = (Vec::new(), Vec::new());
    for (name, h) in tags.iter().zip(read) {
        match h {
            Ok(h) => {
                let runway = history::tag_runway(&h, now)?;
                found.push(TagRow {
                    tag: h.tag,
                    allocations: h.allocations,
                    runway,
                });
            }
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(_) => unavailable.push((*name).clone()),
        }
    }
    Ok((found, unavailable))
}

/// The exposition text `access` may see, with the series of the
/// `query.top` busiest tags and of those it names.
#[allow(clippy::cast_precision_loss)] // Prometheus values are floats
pub async fn metrics(env: &Env, access: &Access, query: &Query) -> ApiResult<String> {
    let now = now_ms();
    let top = query.top;
    let (mut rows, mut down, total) = match top_rows(env, access, top).await? {
        Some(top) => top,
        None => first_rows(env, access, top).await?,
    };
    let (named, named_down) = named_rows(env, access, &query.tags, &rows, &down).await?;
    rows.extend(named);
    down.extend(named_down);
    let mut t = Text::default();
    t.family("edgeleaf_tags", "gauge", "Tags this credential sees (the per-tag series below are the busiest ?top=N, 100 by default, and those named by ?tag=).");
    t.sample("edgeleaf_tags", &[], total as f64);
    let per_tag: [(&str, &str, &str); 6] = [
        ("edgeleaf_tag_max_id", "gauge", "The tag's max_id: every ID up to it has been allocated (a float: exact below 2^53)."),
        ("edgeleaf_tag_step", "gauge", "The tag's configured step."),
        ("edgeleaf_tag_allocations_total", "counter", "Segments the tag's store allocated, for every isolate and client."),
        ("edgeleaf_tag_ids_per_hour", "gauge", "IDs allocated per hour over the last hour (or the history's span, if shorter)."),
        ("edgeleaf_tag_remaining_ids", "gauge", "IDs left before max_id reaches the end of the tag's domain."),
        ("edgeleaf_tag_runway_seconds", "gauge", "When max_id reaches the end of the domain at the last hour's rate, seconds from now (+Inf: no recent allocation)."),
    ];
    t.family("edgeleaf_tag_up", "gauge", "1: the tag's series below are in this scrape (read from its object, or from the summary it last reported to the catalog: then 1 says the summary was read, not that its object answered now); 0: its object did not answer it (a tag named by ?tag=, or one with no summary yet read from its history), so it has no other series.");
    for row in &rows {
        t.sample("edgeleaf_tag_up", &[("tag", &row.tag.biz_tag)], 1.0);
    }
    for name in &down {
        t.sample("edgeleaf_tag_up", &[("tag", name)], 0.0);
    }
    for (i, (name, kind, help)) in per_tag.iter().enumerate() {
        t.family(name, kind, help);
        for TagRow {
            tag,
            allocations,
            runway: r,
        } in &rows
        {
            let value = match i {
                0 => tag.max_id.parse::<f64>().unwrap_or(f64::NAN),
                1 => tag.step as f64,
                2 => *allocations as f64,
                3 => r.ids_per_hour as f64,
                4 => r.remaining as f64,
                _ => r
                    .exhausted_at_ms
                    .map_or(f64::INFINITY, |at| at.saturating_sub(now) as f64 / 1000.0),
            };
            t.sample(name, &[("tag", &tag.biz_tag)], value);
        }
    }
    if !access.sees_fleet() {
        return Ok(t.0);
    }
    let workers = registry_store::list(env).await?;
    let count = |s: &str| workers.workers.iter().filter(|w| w.status == s).count();
    let (live, lapsed) = (count("live"), count("lapsed"));
    let free = (workers.capacity as usize).saturating_sub(live + lapsed);
    t.family(
        "edgeleaf_workers",
        "gauge",
        "Snowflake worker IDs by status: live (leased), lapsed (expired, in grace), free.",
    );
    for (status, n) in [("live", live), ("lapsed", lapsed), ("free", free)] {
        t.sample("edgeleaf_workers", &[("status", status)], n as f64);
    }
    let id = isolate_id();
    let (c, since) = with(|i| {
        if i.started_ms == 0 {
            i.started_ms = now;
        }
        (i.counters, i.started_ms)
    });
    let counters: [(&str, &str, u64); 7] = [
        (
            "edgeleaf_isolate_segment_ids_total",
            "Segment IDs this isolate served.",
            c.segment_ids,
        ),
        (
            "edgeleaf_isolate_snowflake_ids_total",
            "Snowflake IDs this isolate served.",
            c.snowflake_ids,
        ),
        (
            "edgeleaf_isolate_refills_total",
            "Segments this isolate loaded.",
            c.refills,
        ),
        (
            "edgeleaf_isolate_refills_blocked_total",
            "Loads a request had to wait for (both buffers empty).",
            c.refills_that_blocked,
        ),
        (
            "edgeleaf_isolate_store_calls_total",
            "Calls to tag stores.",
            c.store_calls,
        ),
        (
            "edgeleaf_isolate_minter_calls_total",
            "Calls to snowflake minters.",
            c.minter_calls,
        ),
        ("edgeleaf_isolate_errors_total", "Error answers.", c.errors),
    ];
    for (name, help, value) in counters {
        t.family(name, "counter", help);
        t.sample(name, &[("isolate", &id)], value as f64);
    }
    let calls = crate::auth::key_calls();
    t.family(
        "edgeleaf_isolate_key_lookups_total",
        "counter",
        "Calls this isolate made to look up API keys its cache did not hold, by the object called: the index of keys or the key's own.",
    );
    for (object, n) in [("index", calls.index), ("key", calls.key)] {
        t.sample(
            "edgeleaf_isolate_key_lookups_total",
            &[("isolate", &id), ("object", object)],
            n as f64,
        );
    }
    t.family(
        "edgeleaf_isolate_start_time_seconds",
        "gauge",
        "When this isolate served its first request, Unix seconds.",
    );
    t.sample(
        "edgeleaf_isolate_start_time_seconds",
        &[("isolate", &id)],
        since as f64 / 1000.0,
    );
    Ok(t.0)
}
