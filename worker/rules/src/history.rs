//! What the stores remember of their past, and what it says: a tag's bounded
//! allocation history read as IDs per minute, the step over time and the
//! runway (when `max_id` reaches the end of the tag's domain at the last
//! hour's rate). The registry's lease events come from the `Registry`
//! itself (`edgeleaf::registry::Registry::take_events`).

use alloc::vec::Vec;

/// How many allocations a tag remembers (the oldest go first).
pub const HISTORY_LEN: u64 = 1000;
/// How many lease events the registry's store remembers.
pub const LEASE_EVENTS_LEN: u64 = 1000;
/// The window of the runway's rate.
pub const RUNWAY_WINDOW_MS: u64 = 3_600_000;

const MINUTE_MS: u64 = 60_000;

/// One segment a tag's store handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocationEvent {
    /// When, Unix ms.
    pub at_ms: u64,
    /// Its first ID.
    pub start: u64,
    /// Its last ID.
    pub end: u64,
}

impl AllocationEvent {
    /// How many IDs it held.
    pub fn ids(&self) -> u64 {
        self.end.saturating_sub(self.start).saturating_add(1)
    }
}

/// One minute of a tag's allocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MinuteBucket {
    /// The minute's start, Unix ms.
    pub minute_ms: u64,
    /// IDs allocated in it, by every isolate and client together.
    pub ids: u64,
    /// Segments allocated in it.
    pub allocations: u64,
    /// The largest segment of the minute (0: none): the step over time.
    pub max_step: u64,
}

/// The last `minutes` whole minutes up to `now_ms` (the current one last),
/// every minute present, empty ones as zeros.
pub fn per_minute(events: &[AllocationEvent], now_ms: u64, minutes: u64) -> Vec<MinuteBucket> {
    let last = now_ms / MINUTE_MS * MINUTE_MS;
    let first = last.saturating_sub(minutes.saturating_sub(1) * MINUTE_MS);
    let mut buckets: Vec<MinuteBucket> = (0..)
        .map(|i| first + i * MINUTE_MS)
        .take_while(|m| *m <= last)
        .map(|minute_ms| MinuteBucket {
            minute_ms,
            ids: 0,
            allocations: 0,
            max_step: 0,
        })
        .collect();
    for e in events {
        if e.at_ms < first || e.at_ms >= last + MINUTE_MS {
            continue;
        }
        let i = usize::try_from((e.at_ms - first) / MINUTE_MS).unwrap_or(usize::MAX);
        if let Some(b) = buckets.get_mut(i) {
            b.ids = b.ids.saturating_add(e.ids());
            b.allocations += 1;
            b.max_step = b.max_step.max(e.ids());
        }
    }
    buckets
}

/// How long a tag's IDs last at its recent rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Runway {
    /// IDs per hour over the window (the last hour, or since the oldest
    /// allocation remembered if that is later).
    pub ids_per_hour: u64,
    /// IDs left: the domain's end minus `max_id`.
    pub remaining: u64,
    /// When `max_id` reaches the end at that rate, Unix ms (`None`: no
    /// allocation in the window; `u64::MAX`: further than that).
    pub exhausted_at_ms: Option<u64>,
}

/// The runway of a tag at `max_id` in a domain ending at `domain_max`.
pub fn runway(events: &[AllocationEvent], max_id: u64, domain_max: u64, now_ms: u64) -> Runway {
    runway_of(
        events.iter().map(|e| (e.at_ms, e.ids())),
        domain_max.saturating_sub(max_id),
        now_ms,
    )
}

/// The allocations of the last hour up to `now_ms` a minute each, what a
/// summary carries so that its reader ages the rate ([`runway_of`]): per
/// minute with an allocation, the time of its first and the IDs of all
/// (oldest first; at most 61 entries whatever the traffic).
pub fn recent_minutes(events: &[AllocationEvent], now_ms: u64) -> Vec<(u64, u64)> {
    let since = now_ms.saturating_sub(RUNWAY_WINDOW_MS);
    let mut recent: Vec<&AllocationEvent> = events
        .iter()
        .filter(|e| e.at_ms > since && e.at_ms <= now_ms)
        .collect();
    recent.sort_by_key(|e| e.at_ms);
    let mut minutes: Vec<(u64, u64)> = Vec::new();
    for e in recent {
        match minutes.last_mut() {
            Some((at, ids)) if *at / MINUTE_MS == e.at_ms / MINUTE_MS => {
                *ids = ids.saturating_add(e.ids());
            }
            _ => minutes.push((e.at_ms, e.ids())),
        }
    }
    minutes
}

/// The runway at `now_ms` of `remaining` IDs from allocations given as
/// `(at_ms, ids)`: [`runway`]'s rule, which a summary's reader applies to
/// its [`recent_minutes`] (each minute's IDs counted at its first
/// allocation, so to the minute at most of what the events say).
pub fn runway_of(
    allocations: impl Iterator<Item = (u64, u64)>,
    remaining: u64,
    now_ms: u64,
) -> Runway {
    let since = now_ms.saturating_sub(RUNWAY_WINDOW_MS);
    let (ids, oldest) = allocations
        .filter(|(at, _)| *at > since && *at <= now_ms)
        .fold((0u128, now_ms), |(n, oldest), (at, ids)| {
            (n + u128::from(ids), oldest.min(at))
        });
    // A history that begins inside the window (a new tag, or one whose
    // remembered allocations cover less than an hour) is a rate over its own
    // span, at least a minute so that one allocation is not an hour's worth.
    let span = u128::from(now_ms - oldest.max(since)).max(u128::from(MINUTE_MS));
    let per_hour = ids * u128::from(RUNWAY_WINDOW_MS) / span;
    let exhausted_at_ms = (ids > 0).then(|| {
        let ms = u128::from(remaining) * span / ids;
        u64::try_from(ms)
            .ok()
            .and_then(|ms| now_ms.checked_add(ms))
            .unwrap_or(u64::MAX)
    });
    Runway {
        ids_per_hour: u64::try_from(per_hour).unwrap_or(u64::MAX),
        remaining,
        exhausted_at_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_700_000_000_000 / MINUTE_MS * MINUTE_MS;

    fn ev(at_ms: u64, start: u64, end: u64) -> AllocationEvent {
        AllocationEvent { at_ms, start, end }
    }

    #[test]
    fn minutes_add_up_every_allocation_in_them() {
        let events = [
            ev(T - 1, 1, 10),
            ev(T, 11, 20),
            ev(T + 59_999, 21, 120),
            ev(T + 60_000, 121, 125),
        ];
        let b = per_minute(&events, T + 60_500, 3);
        assert_eq!(b.len(), 3);
        assert_eq!(b.iter().map(|m| m.ids).collect::<Vec<_>>(), [10, 110, 5]);
        assert_eq!(b[1].max_step, 100);
        assert_eq!(b[1].allocations, 2);
        assert_eq!(b[2].minute_ms, T + 60_000);
    }

    #[test]
    fn runway_at_the_last_hours_rate() {
        // 1,000 IDs a minute for an hour, 1,000,000 left: 1,000 minutes.
        let events: Vec<_> = (0..60)
            .map(|i| ev(T + i * MINUTE_MS, i * 1000 + 1, (i + 1) * 1000))
            .collect();
        let now = T + 60 * MINUTE_MS;
        let r = runway(&events, 60_000, 1_060_000, now);
        assert_eq!(r.ids_per_hour, 60_000);
        assert_eq!(r.remaining, 1_000_000);
        assert_eq!(r.exhausted_at_ms, Some(now + 1000 * MINUTE_MS));
        // Further than u64 reaches.
        let r = runway(&events, 60_000, u64::MAX, now);
        assert_eq!(r.exhausted_at_ms, Some(u64::MAX));
        // Nothing recent: no end in sight.
        assert_eq!(
            runway(&events, 60_000, 1_060_000, now + 2 * RUNWAY_WINDOW_MS).exhausted_at_ms,
            None
        );
        // A young history: its own span, at least a minute.
        let r = runway(&[ev(now - 1, 1, 100)], 100, 1100, now);
        assert_eq!(r.ids_per_hour, 6000);
        assert_eq!(r.exhausted_at_ms, Some(now + 10 * MINUTE_MS));
    }

    #[test]
    fn a_summarys_minutes_age_to_the_rate_the_events_give() {
        // Two allocations a minute for ten minutes, read at once and later.
        let events: Vec<_> = (0..20)
            .map(|i| ev(T + i * 30_000, i * 100 + 1, (i + 1) * 100))
            .collect();
        let minutes = recent_minutes(&events, T + 10 * MINUTE_MS);
        assert_eq!(minutes.len(), 10);
        assert_eq!(minutes[0], (T, 200));
        for later in [10, 30, 70, 200] {
            let now = T + later * MINUTE_MS;
            assert_eq!(
                runway_of(minutes.iter().copied(), 5000, now),
                runway(&events, 2000, 7000, now),
                "{later} minutes on"
            );
        }
        // A minute leaving the hour leaves whole (to the minute: at most
        // its IDs, 200, an hour apart).
        for later in [60, 65, 69] {
            let now = T + later * MINUTE_MS + 15_000;
            let (a, b) = (
                runway_of(minutes.iter().copied(), 5000, now),
                runway(&events, 2000, 7000, now),
            );
            assert!(
                a.ids_per_hour.abs_diff(b.ids_per_hour) <= 200,
                "{later}: {a:?} {b:?}"
            );
        }
        // An hour after the last: no rate, no end.
        let r = runway_of(minutes.iter().copied(), 5000, T + 70 * MINUTE_MS);
        assert_eq!((r.ids_per_hour, r.exhausted_at_ms), (0, None));
        // Bounded: a minute each, however many allocations.
        let busy: Vec<_> = (0..1000).map(|i| ev(T + i * 7_000, i + 1, i + 1)).collect();
        assert!(recent_minutes(&busy, T + 7_000_000).len() <= 61);
    }
}
