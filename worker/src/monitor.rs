//! `/v1/monitor`: Leaf's cache view of this isolate's buffers, its snowflake
//! lease or buffer of minted batches, and its counters. A key limited to some
//! tags sees the buffers of those tags only, and nothing of the isolate's own
//! state (its counters sum every tag's traffic; its lease is the fleet's):
//! `Access::sees_tag`, `Access::sees_fleet`.

use std::collections::BTreeMap;

use edgeleaf::segment::SegmentSnapshot;
use edgeleaf_rules::access::Access;
use serde_json::json;

use crate::clock::now_ms;
use crate::isolate::with;

/// What `/v1/monitor` shows `access`: Leaf's cache view of every buffer it
/// may see and, without a tag limit, the snowflake lease and the counters.
pub fn monitor(access: &Access) -> serde_json::Value {
    with(|i| {
        if i.started_ms == 0 {
            i.started_ms = now_ms();
        }
        let buffers: BTreeMap<&String, serde_json::Value> = i
            .tags
            .iter()
            .filter(|(tag, _)| access.sees_tag(tag))
            .map(|(tag, t)| {
                let view = |s: SegmentSnapshot| {
                    s.initialized.then(|| {
                        json!({
                            "initialized": s.initialized, "currentPos": s.current_pos, "nextReady": s.next_ready,
                            "loading": s.loading, "step": s.step,
                            "segments": s.segments.iter().map(|seg| seg.map(|v| json!({
                                "value": v.value.to_string(), "max": v.max.to_string(), "step": v.step,
                            }))).collect::<Vec<_>>(),
                        })
                    })
                };
                // The buffer of segments from the root; with regional
                // allocators, each region's too (`buffer` is then the first
                // region's when the root's is empty).
                let regions: BTreeMap<&str, serde_json::Value> = t
                    .sources
                    .regional_snapshots()
                    .filter_map(|(r, s)| Some((r.as_str(), view(s)?)))
                    .collect();
                let buffer = view(t.sources.root_snapshot()).or_else(|| {
                    t.sources
                        .regional_snapshots()
                        .find_map(|(_, s)| view(s))
                });
                let mut entry = json!({ "monotonic": t.sources.is_monotonic(), "buffer": buffer });
                if !regions.is_empty() {
                    entry["regions"] = json!(regions);
                }
                (tag, entry)
            })
            .collect();
        let lease = i.snowflake.as_ref().and_then(|h| {
            h.lease().map(|g| {
                json!({
                    "workerId": g.worker_id, "generation": g.generation, "nodeKey": i.node_key,
                    "expiresAtMs": g.expires_at_ms, "renewAtMs": g.renew_at_ms(),
                    "lastIssuedMs": h.last_timestamp_ms(),
                })
            })
        });
        let minted = i.minted.as_ref().map(|b| {
            let s = b.staleness();
            json!({
                "minter": b.minter(), "batch": b.batch(), "available": b.available(),
                "fetches": b.fetches(), "dropped": b.dropped(), "served": s.total(),
                "stalenessMs": { "p50": s.percentile(50), "p99": s.percentile(99), "max": s.max() },
                "rights": b.rights(), "rightMinted": b.right_minted(),
                "right": b.right().map(|r| json!({
                    "workerId": r.worker_id, "seqStart": r.seq_start, "seqLen": r.seq_len,
                    "fromMs": r.from_ms, "untilMs": r.until_ms,
                })),
            })
        });
        if !access.sees_fleet() {
            return json!({ "buffers": buffers });
        }
        json!({ "buffers": buffers, "snowflake": lease, "minted": minted, "counters": i.counters, "isolateSinceMs": i.started_ms })
    })
}
