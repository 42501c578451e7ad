//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4).
//! Per tag from its store (every isolate together): `max_id`, step,
//! allocations, the recent rate and the runway; the registry's worker IDs by
//! status; and this isolate's counters, labelled with its ID (each isolate
//! answers for itself: a scrape sees whichever one answered). A key limited
//! to some tags gets the samples of those tags only, and no registry or
//! isolate families (every tenant's): `Access::sees_tag`, `Access::sees_fleet`.

use std::fmt::Write;

use edgeleaf_rules::access::Access;
use worker::Env;

use crate::api::ApiResult;
use crate::clock::now_ms;
use crate::history;
use crate::isolate::{isolate_id, with};
use crate::objects::catalog::stubs as catalog;
use crate::objects::registry_store::stubs as registry_store;

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

/// The exposition text `access` may see.
#[allow(clippy::cast_precision_loss)] // Prometheus values are floats
pub async fn metrics(env: &Env, access: &Access) -> ApiResult<String> {
    let now = now_ms();
    let tags = catalog::list(env).await?;
    let histories = futures::future::join_all(
        tags.iter()
            .filter(|t| access.sees_tag(t))
            .map(|t| history::load(env, t)),
    )
    .await;
    let mut t = Text::default();
    let mut rows = Vec::new();
    for h in histories.into_iter().flatten() {
        let runway = history::tag_runway(&h, now)?;
        rows.push((h, runway));
    }
    let per_tag: [(&str, &str, &str); 6] = [
        ("edgeleaf_tag_max_id", "gauge", "The tag's max_id: every ID up to it has been allocated (a float: exact below 2^53)."),
        ("edgeleaf_tag_step", "gauge", "The tag's configured step."),
        ("edgeleaf_tag_allocations_total", "counter", "Segments the tag's store allocated, for every isolate and client."),
        ("edgeleaf_tag_ids_per_hour", "gauge", "IDs allocated per hour over the last hour (or the history's span, if shorter)."),
        ("edgeleaf_tag_remaining_ids", "gauge", "IDs left before max_id reaches the end of the tag's domain."),
        ("edgeleaf_tag_runway_seconds", "gauge", "When max_id reaches the end of the domain at the last hour's rate, seconds from now (+Inf: no recent allocation)."),
    ];
    for (i, (name, kind, help)) in per_tag.iter().enumerate() {
        t.family(name, kind, help);
        for (h, r) in &rows {
            let value = match i {
                0 => h.tag.max_id.parse::<f64>().unwrap_or(f64::NAN),
                1 => h.tag.step as f64,
                2 => h.allocations as f64,
                3 => r.ids_per_hour as f64,
                4 => r.remaining as f64,
                _ => r
                    .exhausted_at_ms
                    .map_or(f64::INFINITY, |at| at.saturating_sub(now) as f64 / 1000.0),
            };
            t.sample(name, &[("tag", &h.tag.biz_tag)], value);
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
