//! Snowflake IDs at edge scale, the serving side. A bounded set of minters —
//! each a [`SnowflakeHolder`](crate::holder::SnowflakeHolder) under one worker ID
//! reserved for it ([`Registry::lease_minter`](crate::registry::Registry::lease_minter))
//! — mint batches; any number of isolates serve them from memory. The worker
//! IDs in use are bounded by the number of minters, not of isolates.
//!
//! A batch is a list of ranges `[start, end)`: IDs of one time unit and one
//! worker ID are consecutive integers, so a batch of thousands of IDs is a few
//! ranges. The buffer here is the segment double buffer's idea applied to
//! them:
//! - serve from the ranges held, oldest first; each ID at most once;
//! - never serve an ID whose time unit started more than `staleness_ms`
//!   before the serving clock: such IDs are dropped, so a snowflake ID still
//!   says "about when" it was handed out;
//! - fetch the next batch in the background once fewer than 90% of a batch
//!   remain (one fetch in flight at a time; one presumed lost after
//!   `take_over_ms` is sent again);
//! - size batches to the rate served: a batch should last a quarter of the
//!   staleness bound at the rate measured over the last window (at least an
//!   eighth of the bound), shrinking at most by half per window; halve it
//!   when IDs went stale;
//! - a failed fetch moves to the next minter; a request tries at most
//!   [`MINTERS_PER_REQUEST`] of them (more when the isolate's region hosts
//!   more: [`MintConfig::tries_per_request`]);
//! - minters are placed per region ([`MinterPools`]: the reserved worker IDs
//!   split so that two regions never share one); an isolate asks its own
//!   region's pool first and the others on failure, and comes back to its
//!   own after [`RETURN_HOME_MS`]. A batch whose IDs are all stale on
//!   arrival is a failed fetch ([`Fetched::Stale`]): its minter's clock lags
//!   this one by more than the bound, and asking it again would starve the
//!   isolate.
//!
//! Like the rest of the core it reads no clock and does no I/O.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::code::ErrorCode;
use crate::error::{check_range, Error};
use crate::holder::{HolderConfig, HolderNext, LeaseAsk, DEFAULT_RESERVE_MS, RENEW_RETRY_MS};
use crate::layout::Layout;
use crate::region::Region;
use crate::snowflake::Wait;
use crate::wait::{InFlight, DEFAULT_TAKE_OVER_MS};

/// Default bound between an ID's time unit and the moment it is served.
pub const DEFAULT_STALENESS_MS: u64 = 1_000;
/// The smallest batch asked for.
pub const MIN_MINT_BATCH: u32 = 1;
/// The first batch asked for.
pub const FIRST_MINT_BATCH: u32 = 16;
/// How far ahead of its clock a minter mints ([`minter_holder_config`]):
/// a batch may run into the next time units (LEAF: 4 units of 1 ms, 16,384
/// IDs) instead of stopping at the end of the current one. Without it a
/// batch was one unit's sequence (4,096 IDs) however fast IDs were served,
/// and a busy isolate ran its buffer dry before the next batch came back
/// (docs/benchmarks.md, "HTTP at the floor").
pub const MINTER_BORROW_MS: u64 = 3;
/// The largest batch asked for (and minted in one call): what a LEAF-layout
/// minter mints at one clock reading, its unit and [`MINTER_BORROW_MS`]
/// ahead. A layout with fewer IDs per unit mints fewer, and answers those.
pub const MAX_MINT_BATCH: u32 = 16_384;
/// The largest batch a minter of the releases before [`MINTER_BORROW_MS`]
/// takes: it refuses more with `out_of_range`. Durable Objects may run the
/// release before for a while after a deploy (a gradual deployment keeps
/// each object on its version), so an isolate that meets one asks no more
/// than this from then on ([`MintedBuffer::fetch_refused`]).
pub const MAX_MINT_BATCH_BEFORE_BORROW: u32 = 4_096;
/// A request that finds nothing to serve tries at most this many minters
/// (each failure is an answer, not a wait) before it gives up.
pub const MINTERS_PER_REQUEST: u32 = 3;
/// An isolate that failed over to another region's minters asks its own
/// region's again this long after it left them.
pub const RETURN_HOME_MS: u64 = 10_000;

/// How a [`MintedBuffer`] asks for and serves batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct MintConfig {
    /// How many minters there are (1..=65,536).
    pub minters: u32,
    /// The minter tried first (from the isolate's randomness), so that
    /// isolates spread over the minters; within the pool when there is one.
    pub home: u32,
    /// The isolate's region's minters, `pool_start..pool_start + pool_len`
    /// ([`MinterPools::pool`]), asked before the others. `pool_len` 0: no
    /// region's pool (every minter alike, in turn from `home`).
    #[cfg_attr(feature = "serde", serde(default))]
    pub pool_start: u32,
    /// How many minters the isolate's region hosts (0: none, or unknown).
    #[cfg_attr(feature = "serde", serde(default))]
    pub pool_len: u32,
    /// Drop IDs whose time unit started longer ago than this (10..=60,000).
    pub staleness_ms: u64,
    /// A fetch in flight longer than this is presumed lost.
    pub take_over_ms: u64,
}

impl MintConfig {
    /// Checks the settings under `layout`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for 0 minters, a `home` outside them, a
    /// `staleness_ms` outside 10..=60,000 or shorter than two time units of
    /// the layout, or a `take_over_ms` outside 1..=60,000; a pool beyond the
    /// minters, or a `home` outside a pool there is.
    pub fn validate(&self, layout: &Layout) -> Result<(), Error> {
        check_range("minters", self.minters.into(), 1, 1 << 16)?;
        check_range("home", self.home.into(), 0, u64::from(self.minters) - 1)?;
        check_range(
            "pool_len",
            self.pool_len.into(),
            0,
            u64::from(self.minters.saturating_sub(self.pool_start)),
        )?;
        if self.pool_len > 0 {
            let start = u64::from(self.pool_start);
            check_range(
                "home",
                self.home.into(),
                start,
                start + u64::from(self.pool_len) - 1,
            )?;
        }
        let shortest = (2 * layout.unit_ms()).max(10);
        check_range("staleness_ms", self.staleness_ms, shortest, 60_000)?;
        check_range("take_over_ms", self.take_over_ms, 1, 60_000)?;
        Ok(())
    }

    /// How many minters a request tries before it gives up: at most
    /// [`MINTERS_PER_REQUEST`], or the whole of its region's pool and one
    /// other region's minter when the pool is larger (so that a request
    /// whose region's minters are all down still reaches another region's),
    /// never more than [`MINTERS_PER_REQUEST`] + 1: each minter a request
    /// wakes may lease from the one registry, so a large pool must not
    /// fan one request out (the next request goes on from where this one
    /// stopped).
    pub fn tries_per_request(&self) -> u32 {
        self.minters.min(
            MINTERS_PER_REQUEST
                .max(self.pool_len.saturating_add(1))
                .min(MINTERS_PER_REQUEST + 1),
        )
    }

    /// `minters` minters, the first tried chosen by `home`, default bounds.
    pub fn new(minters: u32, home: u64) -> MintConfig {
        MintConfig {
            minters,
            home: u32::try_from(home % u64::from(minters.max(1))).unwrap_or(0),
            pool_start: 0,
            pool_len: 0,
            staleness_ms: DEFAULT_STALENESS_MS,
            take_over_ms: DEFAULT_TAKE_OVER_MS,
        }
    }

    /// `minters` minters, those of `pool` (the isolate's region's,
    /// [`MinterPools::pool`]) asked first, from one chosen by `home`; an
    /// empty pool (a region hosting none): as [`MintConfig::new`]. A pool
    /// beyond the minters is refused by [`MintConfig::validate`].
    pub fn in_pool(minters: u32, pool: core::ops::Range<u32>, home: u64) -> MintConfig {
        let len = pool.end.saturating_sub(pool.start);
        if len == 0 {
            return MintConfig::new(minters, home);
        }
        let home = pool.start + u32::try_from(home % u64::from(len)).unwrap_or(0);
        MintConfig {
            home,
            pool_start: pool.start,
            pool_len: len,
            ..MintConfig::new(minters, 0)
        }
    }

    /// The minter asked at position `pos` of this isolate's order (taken
    /// modulo the minters): up to [`MINTERS_PER_REQUEST`] of its region's
    /// pool from `home` on, then one other region's minter (so that one
    /// request whose pool is down reaches another region's within
    /// [`tries_per_request`](MintConfig::tries_per_request)), the rest of the
    /// pool, then every other minter in turn from one chosen by `home` (so
    /// that isolates failing over spread over the other regions'), then the
    /// pool again. Without a pool: `home`, `home + 1`, … modulo the minters.
    pub fn minter_at(&self, pos: u32) -> u32 {
        let n = self.minters.max(1);
        let pos = pos % n;
        let len = self.pool_len.min(n);
        let others = n - len;
        let first = len.min(MINTERS_PER_REQUEST);
        // Positions past `first` shift by one when an other region's minter
        // is asked early.
        let early = u32::from(first < len && others > 0);
        let pool = |k: u32| self.pool_start + (self.home.saturating_sub(self.pool_start) + k) % len;
        let other = |j: u32| (self.pool_start + len + (self.home + j) % others) % n;
        if pos < first {
            pool(pos)
        } else if early == 1 && pos == first {
            other(0)
        } else if pos < len + early {
            pool(pos - early)
        } else {
            other(pos - len)
        }
    }
}

/// The most regions the reserved minter worker IDs are split among.
pub const MAX_MINTER_REGIONS: u32 = 64;

/// The split of the minters' reserved worker IDs `0..minters` among the
/// regions that host minters, so that two regions never share a worker ID:
/// minter `i` mints under worker ID `i`
/// ([`Registry::lease_minter`](crate::registry::Registry::lease_minter))
/// and lives in one region only.
///
/// The regions are numbered `0..regions` in the host's order of preference.
/// Region `k` hosts a contiguous range of minters: with `h = min(minters,
/// regions)` hosting regions, each gets `minters / h`, and the first
/// `minters % h` one more (16 minters over 9 regions: the first 7 host 2,
/// the last 2 host 1). With fewer minters than regions, the first `minters`
/// regions host one each and the others none: their isolates have no
/// region's pool and ask every minter in turn ([`MintConfig::new`]).
///
/// ```
/// use edgeleaf::minted::MinterPools;
/// let pools = MinterPools::new(16, 9)?;
/// assert_eq!((pools.pool(0), pools.pool(6), pools.pool(7), pools.pool(8)), (0..2, 12..14, 14..15, 15..16));
/// assert_eq!(pools.host(13), Some(6));
/// let few = MinterPools::new(4, 9)?;
/// assert_eq!((few.pool(3), few.pool(4)), (3..4, 4..4));
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinterPools {
    minters: u32,
    regions: u32,
}

impl MinterPools {
    /// `minters` minters split among `regions` regions.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for more than 65,536 minters, or regions
    /// outside 1..=[`MAX_MINTER_REGIONS`].
    pub fn new(minters: u32, regions: u32) -> Result<MinterPools, Error> {
        check_range("minters", minters.into(), 0, 1 << 16)?;
        check_range("regions", regions.into(), 1, MAX_MINTER_REGIONS.into())?;
        Ok(MinterPools { minters, regions })
    }

    /// How many regions host minters: `min(minters, regions)`.
    pub fn hosting(&self) -> u32 {
        self.minters.min(self.regions)
    }

    /// The minters (and so the worker IDs) of region `k`: empty for a
    /// region that hosts none (or `k` beyond the regions).
    pub fn pool(&self, k: u32) -> core::ops::Range<u32> {
        let h = self.hosting();
        if k >= h {
            return self.minters..self.minters;
        }
        let (base, extra) = (self.minters / h, self.minters % h);
        let start = k * base + k.min(extra);
        start..start + base + u32::from(k < extra)
    }

    /// The region hosting minter `i`; `None` beyond the minters.
    pub fn host(&self, i: u32) -> Option<u32> {
        (0..self.hosting()).find(|&k| self.pool(k).contains(&i))
    }

    /// The service's split: `minters` over [`MINTER_REGIONS`], in that
    /// order.
    pub fn over_regions(minters: u32) -> MinterPools {
        MinterPools {
            minters: minters.min(1 << 16),
            regions: MINTER_REGION_COUNT,
        }
    }

    /// The minters of the isolates of `region`: those of the region its
    /// objects land in ([`Region::hosting`]: `sam` → `enam`, `afr` →
    /// `weur`, `me` → `eeur`). Empty when it hosts none.
    pub fn region_pool(&self, region: Region) -> core::ops::Range<u32> {
        let host = region.hosting();
        match (0u32..).zip(MINTER_REGIONS).find(|(_, r)| *r == host) {
            Some((k, _)) => self.pool(k),
            None => self.minters..self.minters,
        }
    }

    /// The region whose `locationHint` minter `i` is created with (its
    /// object's name carries it); `None` beyond the minters.
    pub fn minter_region(&self, i: u32) -> Option<Region> {
        self.host(i).map(|k| MINTER_REGIONS[k as usize])
    }
}

/// How many regions host minters.
pub const MINTER_REGION_COUNT: u32 = 6;

/// The regions that host minters, in the order they get them: one per
/// continent first (eastern North America, western Europe, Asia-Pacific),
/// then the second of North America and of Europe, then Oceania. These are
/// the regions where objects really live ([`Region::HOSTING`]); a region
/// that hosts no objects (`sam`, `afr`, `me`) is served by the minters of
/// the region its objects land in.
pub const MINTER_REGIONS: [Region; MINTER_REGION_COUNT as usize] = [
    Region::Enam,
    Region::Weur,
    Region::Apac,
    Region::Wnam,
    Region::Eeur,
    Region::Oc,
];

/// Ask minter `minter` for a batch of `count` IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchAsk {
    /// Which minter.
    pub minter: u32,
    /// How many IDs (1..=[`MAX_MINT_BATCH`]).
    pub count: u32,
}

/// What the caller does after a [`MintedBuffer::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum MintStep {
    /// The buffer is full. With `Some(ask)`: fetch it now, in the background.
    Done {
        /// The background fetch to start, if one is due.
        prefetch: Option<BatchAsk>,
    },
    /// Nothing left to serve: fetch this now, report it with
    /// [`MintedBuffer::fetched`] or [`MintedBuffer::fetch_failed`], and poll
    /// again.
    FetchNow(BatchAsk),
    /// Nothing left and a fetch is in flight: wait for it, poll again.
    Wait,
}

/// The answer of [`MintedBuffer::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct MintPoll {
    /// IDs written to the front of the buffer.
    pub filled: usize,
    /// What to do next.
    pub next: MintStep,
}

/// Counts of served IDs by staleness (ms between an ID's time unit and the
/// moment it was served), for percentiles.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StalenessHistogram {
    /// `counts[ms]`: IDs served `ms` after their time unit started (IDs from
    /// a clock ahead of the server's count as 0).
    counts: Vec<u64>,
    total: u64,
}

impl StalenessHistogram {
    /// Records `n` IDs served `ms` after their time unit.
    pub fn record(&mut self, ms: u64, n: u64) {
        let i = usize::try_from(ms).unwrap_or(usize::MAX).min(60_000);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
        self.total += n;
    }

    /// IDs recorded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The smallest staleness (ms) at or below which `percent` of the IDs
    /// were served (0 when none were).
    pub fn percentile(&self, percent: u64) -> u64 {
        let want = (u128::from(self.total) * u128::from(percent.min(100))).div_ceil(100);
        let mut seen = 0u128;
        for (ms, n) in self.counts.iter().enumerate() {
            seen += u128::from(*n);
            if seen >= want.max(1) {
                return ms as u64;
            }
        }
        0
    }

    /// The largest staleness recorded.
    pub fn max(&self) -> u64 {
        self.counts.iter().rposition(|n| *n > 0).unwrap_or(0) as u64
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &StalenessHistogram) {
        for (ms, n) in other.counts.iter().enumerate() {
            if *n > 0 {
                self.record(ms as u64, *n);
            }
        }
    }
}

/// A minted range as held: `[start, end)`, and its time unit's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    start: u64,
    end: u64,
    unit_ms: u64,
}

/// An isolate's buffer of minted IDs.
///
/// ```
/// use edgeleaf::layout::Parts;
/// use edgeleaf::minted::{MintConfig, MintStep, MintedBuffer};
/// use edgeleaf::Layout;
///
/// let now = 1_700_000_000_000;
/// let mut buf = MintedBuffer::new(Layout::LEAF, MintConfig::new(16, 7))?;
/// let mut out = [0u64; 2];
/// let MintStep::FetchNow(ask) = buf.poll(now, &mut out).next else { unreachable!() };
/// assert_eq!(ask.minter, 7);
/// // ... minter 7 mints `ask.count` IDs and answers ranges:
/// let first = Layout::LEAF.compose(Parts { timestamp_ms: now, worker_id: 7, sequence: 0 })?.get();
/// buf.fetched(&[(first, first + 100)], now)?;
/// assert_eq!(buf.poll(now, &mut out).filled, 2);
/// assert_eq!(out, [first, first + 1]);
/// # Ok::<(), edgeleaf::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MintedBuffer {
    layout: Layout,
    config: MintConfig,
    held: VecDeque<Held>,
    available: u64,
    batch: u32,
    /// The largest batch it asks for: [`MAX_MINT_BATCH`], or
    /// [`MAX_MINT_BATCH_BEFORE_BORROW`] once a minter refused more.
    max_batch: u32,
    /// The position of the minter asked next in the isolate's order
    /// ([`MintConfig::minter_at`]).
    pos: u32,
    /// Since when it asks other regions' minters (it failed over), if so.
    away_since_ms: Option<u64>,
    fetching: InFlight,
    /// The start of the latest time unit of any batch fetched (Unix ms): the
    /// minters' clocks had reached it, less [`MINTER_BORROW_MS`].
    minted_up_to_ms: u64,
    /// The rate window: since when, and IDs served in it.
    window_start_ms: Option<u64>,
    window_served: u64,
    dropped_since_fetch: bool,
    dropped: u64,
    fetches: u64,
    staleness: StalenessHistogram,
}

impl MintedBuffer {
    /// An empty buffer.
    ///
    /// # Errors
    /// As [`MintConfig::validate`].
    pub fn new(layout: Layout, config: MintConfig) -> Result<MintedBuffer, Error> {
        config.validate(&layout)?;
        Ok(MintedBuffer {
            layout,
            config,
            held: VecDeque::new(),
            available: 0,
            batch: FIRST_MINT_BATCH,
            max_batch: MAX_MINT_BATCH,
            pos: 0,
            away_since_ms: None,
            fetching: InFlight::default(),
            minted_up_to_ms: 0,
            window_start_ms: None,
            window_served: 0,
            dropped_since_fetch: false,
            dropped: 0,
            fetches: 0,
            staleness: StalenessHistogram::default(),
        })
    }

    /// Up to `out.len()` IDs at clock reading `now_ms`, and what to do next.
    pub fn poll(&mut self, now_ms: u64, out: &mut [u64]) -> MintPoll {
        self.drop_stale(now_ms);
        let mut filled = 0;
        while filled < out.len() {
            let Some(h) = self.held.front_mut() else {
                break;
            };
            let left = usize::try_from(h.end - h.start).unwrap_or(usize::MAX);
            let n = left.min(out.len() - filled);
            for (slot, id) in out[filled..filled + n].iter_mut().zip(h.start..) {
                *slot = id;
            }
            filled += n;
            let n = n as u64;
            self.window_served += n;
            self.staleness.record(now_ms.saturating_sub(h.unit_ms), n);
            h.start += n;
            self.available -= n;
            if h.start == h.end {
                self.held.pop_front();
            }
        }
        let next = if filled == out.len() {
            let low = self.available * 10 < u64::from(self.batch) * 9;
            let prefetch = (low && self.claim(now_ms)).then(|| self.ask(0));
            MintStep::Done { prefetch }
        } else if self.claim(now_ms) {
            MintStep::FetchNow(self.ask(out.len() - filled))
        } else {
            MintStep::Wait
        };
        MintPoll { filled, next }
    }

    fn drop_stale(&mut self, now_ms: u64) {
        let bound = self.config.staleness_ms;
        let before = self.available;
        self.held
            .retain(|h| now_ms.saturating_sub(h.unit_ms) <= bound);
        self.available = self.held.iter().map(|h| h.end - h.start).sum();
        if self.available < before {
            self.dropped += before - self.available;
            self.dropped_since_fetch = true;
        }
    }

    fn claim(&mut self, now_ms: u64) -> bool {
        let lost = self.fetching.is_busy();
        let claimed = self.fetching.claim(now_ms, self.config.take_over_ms);
        if claimed && lost {
            // The fetch in flight is presumed lost: its minter may be stuck,
            // so the next one goes elsewhere.
            self.pos = (self.pos + 1) % self.config.minters;
        }
        if claimed {
            // Away from its region's pool: back to it after a while (its
            // minters may be back), never stuck on another region's.
            if self.pos < self.config.pool_len || self.config.pool_len == 0 {
                self.away_since_ms = None;
            } else {
                let since = *self.away_since_ms.get_or_insert(now_ms);
                if now_ms.saturating_sub(since) >= RETURN_HOME_MS {
                    self.pos = 0;
                    self.away_since_ms = None;
                }
            }
        }
        claimed
    }

    fn ask(&self, need: usize) -> BatchAsk {
        let need = u32::try_from(need).unwrap_or(MAX_MINT_BATCH);
        BatchAsk {
            minter: self.config.minter_at(self.pos),
            count: self.batch.max(need).min(self.max_batch),
        }
    }

    /// A minter answered `ranges` (`[start, end)` each) at `now_ms`: kept,
    /// or, when every ID of a batch is already older than the staleness
    /// bound, dropped and counted as a failed fetch ([`Fetched::Stale`]: the
    /// next fetch goes to the next minter).
    ///
    /// # Errors
    /// [`Error::InvalidBatch`] for a range that is empty, beyond the layout,
    /// spans two time units or worker IDs, or overlaps IDs held; nothing of
    /// the batch is kept then.
    pub fn fetched(&mut self, ranges: &[(u64, u64)], now_ms: u64) -> Result<Fetched, Error> {
        self.fetching.done();
        let mut add = Vec::with_capacity(ranges.len());
        for &(start, end) in ranges {
            let bad = Error::InvalidBatch { start, end };
            if start >= end {
                return Err(bad);
            }
            let first = self.layout.decompose(start).map_err(|_| bad.clone())?;
            let last = self.layout.decompose(end - 1).map_err(|_| bad.clone())?;
            let overlaps = |h: &Held| start < h.end && h.start < end;
            if (first.timestamp_ms, first.worker_id) != (last.timestamp_ms, last.worker_id)
                || self.held.iter().chain(&add).any(overlaps)
            {
                return Err(bad);
            }
            add.push(Held {
                start,
                end,
                unit_ms: first.timestamp_ms,
            });
        }
        let bound = self.config.staleness_ms;
        if !add.is_empty() && add.iter().all(|h| now_ms.saturating_sub(h.unit_ms) > bound) {
            // Its minter's clock lags this one's by more than the bound:
            // whatever it mints next is as stale, so asking it again would
            // starve this buffer. Its rate tells nothing of ours.
            self.dropped += add.iter().map(|h| h.end - h.start).sum::<u64>();
            self.fetch_failed();
            return Ok(Fetched::Stale);
        }
        self.fetches += 1;
        let start = *self.window_start_ms.get_or_insert(now_ms);
        let window = now_ms.saturating_sub(start);
        if self.dropped_since_fetch {
            self.batch = (self.batch / 2).max(MIN_MINT_BATCH);
        } else if window >= bound / 8 {
            // IDs per quarter bound at the rate served in the window.
            let target = self.window_served.saturating_mul(bound / 4) / window.max(1);
            let target = u32::try_from(target).unwrap_or(u32::MAX);
            self.batch = target
                .max(self.batch / 2)
                .clamp(MIN_MINT_BATCH, self.max_batch);
        }
        if self.dropped_since_fetch || window >= bound / 8 {
            self.window_start_ms = Some(now_ms);
            self.window_served = 0;
        }
        self.dropped_since_fetch = false;
        self.minted_up_to_ms = add
            .iter()
            .map(|h| h.unit_ms)
            .fold(self.minted_up_to_ms, u64::max);
        self.available += add.iter().map(|h| h.end - h.start).sum::<u64>();
        self.held.extend(add);
        Ok(Fetched::Kept)
    }

    /// The minter answered at `now_ms` that it has nothing for now, with
    /// `code`; the request may still wait `remaining_ms`. A minter whose time
    /// unit is used up (`sequence_exhausted`) is asked again after a short
    /// wait ([`Refused::Again`]), unless this clock is behind IDs already
    /// minted by more than the request can wait: then the minters' clocks
    /// are ahead of it (it stepped back), the next time unit comes only when
    /// it catches up, and the request answers at once ([`Refused::GiveUp`],
    /// with how long that is). A minter that refuses the count
    /// (`out_of_range`: one of the release before, see
    /// [`MAX_MINT_BATCH_BEFORE_BORROW`]) is asked again, once, for no more
    /// than it takes. Anything else moves to the next minter
    /// ([`Refused::Next`], as [`MintedBuffer::fetch_failed`]).
    pub fn fetch_refused(&mut self, code: ErrorCode, now_ms: u64, remaining_ms: u64) -> Refused {
        if code == ErrorCode::OutOfRange && self.max_batch > MAX_MINT_BATCH_BEFORE_BORROW {
            // A minter of the release before refused the count: ask again,
            // for no more than it takes.
            self.fetching.done();
            self.max_batch = MAX_MINT_BATCH_BEFORE_BORROW;
            self.batch = self.batch.min(self.max_batch);
            return Refused::Again;
        }
        if code != ErrorCode::SequenceExhausted {
            self.fetch_failed();
            return Refused::Next;
        }
        self.fetching.done();
        // A minter mints up to MINTER_BORROW_MS ahead of its own clock.
        let behind = self
            .minted_up_to_ms
            .saturating_sub(MINTER_BORROW_MS)
            .saturating_sub(now_ms);
        if behind > remaining_ms {
            Refused::GiveUp {
                code: ErrorCode::ClockMovedBackwards,
                retry_after_ms: behind,
            }
        } else {
            Refused::Again
        }
    }

    /// The fetch failed (no answer, or the minter refused): the next one
    /// goes to the next minter.
    pub fn fetch_failed(&mut self) {
        self.fetching.done();
        self.pos = (self.pos + 1) % self.config.minters;
    }

    /// IDs held and still fresh as of the last poll.
    pub fn available(&self) -> u64 {
        self.available
    }

    /// The batch size asked for next.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// Its settings.
    pub fn config(&self) -> &MintConfig {
        &self.config
    }

    /// The minter asked next.
    pub fn minter(&self) -> u32 {
        self.config.minter_at(self.pos)
    }

    /// IDs dropped unserved because they went stale.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Batches received.
    pub fn fetches(&self) -> u64 {
        self.fetches
    }

    /// The staleness of every ID served.
    pub fn staleness(&self) -> &StalenessHistogram {
        &self.staleness
    }
}

/// What [`MintedBuffer::fetched`] made of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    /// Its IDs are held, to be served.
    Kept,
    /// Every ID was older than the staleness bound on arrival: dropped, and
    /// counted as a failed fetch (the next goes to the next minter).
    Stale,
}

/// What a request does after a minter answered that it has nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Refused {
    /// Wait a little and ask the same minter again.
    Again,
    /// Ask the next minter (this one failed).
    Next,
    /// Answer now: waiting cannot help within the request's budget.
    GiveUp {
        /// Why.
        code: ErrorCode,
        /// When asking again may help, ms.
        retry_after_ms: u64,
    },
}

/// What a minter does next within one request, after its holder's poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum MinterStep {
    /// Answer the IDs minted so far.
    Answer,
    /// Lease (at most once per request), then poll again.
    Lease(LeaseAsk),
    /// Nothing minted, and minting would need a wait: answer at once that
    /// there is nothing, with the code and how long until asking helps.
    Unavailable {
        /// Why: `sequence_exhausted` (this time unit is used up),
        /// `clock_moved_backwards` (the clock is behind IDs minted or
        /// reserved), `store_unavailable` (a lease or save pending).
        code: ErrorCode,
        /// When to ask again, ms.
        retry_after_ms: u64,
    },
}

/// How a minter's holder mints: it leases again after a lapse, mints only
/// below a saved reservation ([`DEFAULT_RESERVE_MS`] ahead, as its state is
/// stored), and borrows [`MINTER_BORROW_MS`] ahead of its clock so that one
/// call can answer [`MAX_MINT_BATCH`]. `max_backward_ms`: the service's.
pub fn minter_holder_config(max_backward_ms: u64) -> HolderConfig {
    HolderConfig {
        max_backward_ms,
        lease_again: true,
        reserve_ms: DEFAULT_RESERVE_MS,
        max_borrow_ms: MINTER_BORROW_MS,
        ..HolderConfig::default()
    }
}

/// A minter never waits inside a request. A Durable Object's timers do not
/// fire while its clock stands behind the highest time it has shown (after
/// the clock steps back, for as long as the step), so one wait could hold a
/// request for minutes; and a batch is worth answering as soon as it has
/// IDs. It answers what it minted, or at once that it has none and for how
/// long; the isolate, whose timers work, waits within its own budget
/// ([`WaitBudget`](crate::wait::WaitBudget)) or asks the next minter. It leases
/// at most once per request (`leased`: it already did).
pub fn minter_step(filled: usize, next: HolderNext, leased: bool) -> MinterStep {
    let unavailable = |code, retry_after_ms: u64| MinterStep::Unavailable {
        code,
        retry_after_ms: retry_after_ms.max(1),
    };
    match next {
        HolderNext::Done => MinterStep::Answer,
        _ if filled > 0 => MinterStep::Answer,
        HolderNext::Lease(ask) if !leased => MinterStep::Lease(ask),
        HolderNext::Lease(_) | HolderNext::LeaseInFlight => {
            unavailable(ErrorCode::StoreUnavailable, RENEW_RETRY_MS)
        }
        HolderNext::RetryAfter { ms, reason } => unavailable(
            match reason {
                Wait::SequenceExhausted => ErrorCode::SequenceExhausted,
                Wait::ClockBehind => ErrorCode::ClockMovedBackwards,
                Wait::Saving => ErrorCode::StoreUnavailable,
            },
            ms,
        ),
    }
}

/// A minter's holder refused to restore: its clock is behind the
/// reservation it saved ([`Error::ClockBehindLastReport`] from
/// [`SnowflakeHolder::restore`](crate::holder::SnowflakeHolder::restore),
/// after the clock stepped back across a restart). The clock is the
/// service's, not the caller's: [`MinterStep::Unavailable`] with
/// `clock_moved_backwards` (a 503) for as long as it is behind. `None`:
/// another error, answered as it is.
pub fn minter_restore_refused(e: &Error) -> Option<MinterStep> {
    match *e {
        Error::ClockBehindLastReport {
            last_timestamp_ms,
            node_now_ms,
            ..
        } => Some(MinterStep::Unavailable {
            code: ErrorCode::ClockMovedBackwards,
            retry_after_ms: last_timestamp_ms.saturating_sub(node_now_ms).max(1),
        }),
        _ => None,
    }
}

/// The registry refused a minter's lease with `code`. A refusal of its
/// clock (`clock_skew`, `clock_behind_last_report`: a step between the
/// minter's reading and the registry's) is the service's own clock trouble,
/// not the caller's: [`MinterStep::Unavailable`] with `store_unavailable`,
/// asked again after [`RENEW_RETRY_MS`] — a 503, not the 409 an outside node
/// gets for its clock. `None`: any other answer, answered as it is.
pub fn minter_lease_refused(code: ErrorCode) -> Option<MinterStep> {
    matches!(
        code,
        ErrorCode::ClockSkew | ErrorCode::ClockBehindLastReport
    )
    .then_some(MinterStep::Unavailable {
        code: ErrorCode::StoreUnavailable,
        retry_after_ms: RENEW_RETRY_MS,
    })
}

/// The IDs a minter minted, as the ranges of a batch: runs of consecutive
/// integers within one time unit and worker ID.
pub fn batch_ranges(layout: &Layout, ids: &[u64]) -> Vec<(u64, u64)> {
    let unit = |id: u64| {
        layout
            .decompose(id)
            .map(|p| (p.timestamp_ms, p.worker_id))
            .ok()
    };
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &id in ids {
        match ranges.last_mut() {
            Some((start, end)) if *end == id && unit(*start) == unit(id) => *end += 1,
            _ => ranges.push((id, id + 1)),
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Parts;
    use alloc::vec;

    const T: u64 = 1_700_000_000_000;

    fn id(ms: u64, worker: u32, seq: u32) -> u64 {
        let parts = Parts {
            timestamp_ms: ms,
            worker_id: worker,
            sequence: seq,
        };
        Layout::LEAF.compose(parts).unwrap().get()
    }

    fn buf() -> MintedBuffer {
        MintedBuffer::new(Layout::LEAF, MintConfig::new(4, 1)).unwrap()
    }

    #[test]
    fn a_refusal_of_the_minters_own_clock_is_a_503_with_how_long() {
        let behind = Error::ClockBehindLastReport {
            worker_id: Some(0),
            last_timestamp_ms: T + 2_500,
            node_now_ms: T,
        };
        assert_eq!(
            minter_restore_refused(&behind),
            Some(MinterStep::Unavailable {
                code: ErrorCode::ClockMovedBackwards,
                retry_after_ms: 2_500
            })
        );
        assert_eq!(minter_restore_refused(&Error::SegmentBufferFull), None);
        for code in [ErrorCode::ClockSkew, ErrorCode::ClockBehindLastReport] {
            assert_eq!(
                minter_lease_refused(code),
                Some(MinterStep::Unavailable {
                    code: ErrorCode::StoreUnavailable,
                    retry_after_ms: RENEW_RETRY_MS
                })
            );
        }
        assert_eq!(minter_lease_refused(ErrorCode::NoFreeWorkerId), None);
    }

    #[test]
    fn serves_in_order_and_prefetches_below_ninety_percent() {
        let mut b = buf();
        let mut out = [0u64; 4];
        let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
            panic!("expected a fetch")
        };
        assert_eq!(
            ask,
            BatchAsk {
                minter: 1,
                count: FIRST_MINT_BATCH
            }
        );
        // A second caller while the fetch is in flight waits.
        assert_eq!(b.poll(T, &mut out).next, MintStep::Wait);
        b.fetched(&[(id(T, 1, 0), id(T, 1, 16))], T).unwrap();
        let p = b.poll(T, &mut out);
        assert_eq!(out, [id(T, 1, 0), id(T, 1, 1), id(T, 1, 2), id(T, 1, 3)]);
        // 12 of 16 left: below 90%, fetch in the background.
        assert!(matches!(p.next, MintStep::Done { prefetch: Some(_) }));
        let p = b.poll(T, &mut out);
        assert_eq!(p.next, MintStep::Done { prefetch: None });
    }

    #[test]
    fn stale_ids_are_dropped_never_served() {
        let mut b = buf();
        let mut out = [0u64; 1];
        let _ = b.poll(T, &mut out);
        b.fetched(&[(id(T, 1, 0), id(T, 1, 10))], T).unwrap();
        assert_eq!(b.poll(T + 1_000, &mut out).filled, 1);
        let p = b.poll(T + 1_001, &mut out);
        assert_eq!(p.filled, 0);
        // The prefetch asked for at T + 1000 is still in flight.
        assert_eq!(p.next, MintStep::Wait);
        assert_eq!(b.dropped(), 9);
        assert_eq!(b.staleness().max(), 1_000);
    }

    #[test]
    fn a_minter_answers_the_largest_batch_at_one_clock_reading() {
        use crate::holder::{Grant, SnowflakeHolder};
        let mut h = SnowflakeHolder::new(minter_holder_config(5)).unwrap();
        assert!(matches!(
            h.poll(T, &mut []).unwrap().next,
            HolderNext::Lease(_)
        ));
        let grant = Grant {
            worker_id: 1,
            generation: 1,
            expires_at_ms: T + 60_000,
            issue_after_ms: 0,
            ttl_ms: 60_000,
            layout: Layout::LEAF,
            secret: Some(crate::secret::LeaseSecret::from_random([9; 16])),
        };
        h.granted(grant, T).unwrap();
        let state = h.save_request(T).unwrap();
        h.saved(&state);
        let mut out = vec![0u64; MAX_MINT_BATCH as usize];
        assert_eq!(h.poll(T, &mut out).unwrap().filled, out.len());
        // A range per unit, none past the borrow, and a buffer takes them all.
        let ranges = batch_ranges(&Layout::LEAF, &out);
        assert_eq!(ranges.len(), 4);
        let last = Layout::LEAF.decompose(out[out.len() - 1]).unwrap();
        assert_eq!(last.timestamp_ms, T + MINTER_BORROW_MS);
        let mut b = buf();
        assert_eq!(b.fetched(&ranges, T), Ok(Fetched::Kept));
        assert_eq!(b.available(), u64::from(MAX_MINT_BATCH));
    }

    #[test]
    fn batches_grow_with_the_rate_and_shrink_when_ids_go_stale() {
        // Serve 1,000 IDs every 10 ms; answer each fetch at once.
        let mut b = buf();
        let mut out = vec![0u64; 1_000];
        let mut now = T;
        for _ in 0..60 {
            let mut filled = 0;
            while filled < out.len() {
                let p = b.poll(now, &mut out[filled..]);
                filled += p.filled;
                let ask = match p.next {
                    MintStep::Done { prefetch } => prefetch,
                    MintStep::FetchNow(ask) => Some(ask),
                    MintStep::Wait => panic!("nothing in flight"),
                };
                if let Some(ask) = ask {
                    // As a minter borrowing ahead answers: a range per unit.
                    let ranges: Vec<_> = (0..u64::from(ask.count))
                        .step_by(4_096)
                        .map(|k| {
                            let start = id(now + k / 4_096, 1, 0);
                            (start, start + (u64::from(ask.count) - k).min(4_096))
                        })
                        .collect();
                    b.fetched(&ranges, now).unwrap();
                }
            }
            now += 10;
        }
        // 100 IDs/ms for a quarter of the bound is more than the largest batch.
        assert_eq!(b.batch(), MAX_MINT_BATCH);
        // Everything goes stale: the next fetch halves the batch.
        let _ = b.poll(now + 5_000, &mut out);
        b.fetched(
            &[(id(now + 5_000, 1, 0), id(now + 5_000, 1, 1))],
            now + 5_000,
        )
        .unwrap();
        assert_eq!(b.batch(), MAX_MINT_BATCH / 2);
        assert!(b.dropped() > 0);
    }

    #[test]
    fn bad_batches_are_refused_whole() {
        let mut b = buf();
        for ranges in [
            vec![(5, 5)],
            vec![(id(T, 1, 4095), id(T + 1, 1, 1))],
            vec![(id(T, 1, 0), id(T, 1, 4)), (id(T, 1, 2), id(T, 1, 6))],
            vec![(u64::MAX - 1, u64::MAX)],
        ] {
            assert!(matches!(
                b.fetched(&ranges, T),
                Err(Error::InvalidBatch { .. })
            ));
            assert_eq!(b.available(), 0);
        }
        b.fetched(&[(id(T, 1, 0), id(T, 1, 4))], T).unwrap();
        assert!(b.fetched(&[(id(T, 1, 3), id(T, 1, 5))], T).is_err());
    }

    #[test]
    fn a_failed_fetch_moves_to_the_next_minter() {
        let mut b = buf();
        let mut out = [0u64; 1];
        let _ = b.poll(T, &mut out);
        b.fetch_failed();
        let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
            panic!()
        };
        assert_eq!(ask.minter, 2);
        b.fetch_failed();
        b.fetch_failed();
        assert_eq!(b.minter(), 0);
    }

    #[test]
    fn an_isolate_fails_over_to_other_regions_and_comes_back_home() {
        // 6 minters, this region's pool 2..4, first asked: 3.
        let config = MintConfig::in_pool(6, 2..4, 1);
        assert_eq!((config.home, config.tries_per_request()), (3, 3));
        let mut b = MintedBuffer::new(Layout::LEAF, config).unwrap();
        let mut out = [0u64; 1];
        let mut asked = vec![];
        for _ in 0..4 {
            let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
                panic!("expected a fetch")
            };
            asked.push(ask.minter);
            b.fetch_failed();
        }
        // Its pool from home, then the others from one chosen by home.
        assert_eq!(asked, [3, 2, 1, 4]);
        // Away (since its first fetch outside its pool, at T), it is served by
        // another region's minter, and stays there...
        let MintStep::FetchNow(ask) = b.poll(T + 1, &mut out).next else {
            panic!("expected a fetch")
        };
        assert_eq!(ask.minter, 5);
        let late = T + RETURN_HOME_MS - 1;
        b.fetched(&[(id(late, 5, 0), id(late, 5, 1))], late)
            .unwrap();
        let p = b.poll(late, &mut out);
        assert_eq!(p.filled, 1);
        let MintStep::Done {
            prefetch: Some(ask),
        } = p.next
        else {
            panic!("expected a prefetch")
        };
        assert_eq!(ask.minter, 5);
        b.fetch_failed();
        assert_eq!(b.minter(), 0, "the next other region's");
        // ... until RETURN_HOME_MS after it left: then its region's again.
        let MintStep::FetchNow(ask) = b.poll(T + RETURN_HOME_MS, &mut out).next else {
            panic!("expected a fetch")
        };
        assert_eq!(ask.minter, 3);
    }

    #[test]
    fn a_batch_stale_on_arrival_is_a_failed_fetch() {
        let mut b = buf();
        let mut out = [0u64; 1];
        let _ = b.poll(T, &mut out);
        // Minter 1's clock lags by more than the bound (1 s): every ID of
        // its batch is stale at once.
        let stale = [(id(T - 1_001, 1, 0), id(T - 1_001, 1, 10))];
        assert_eq!(b.fetched(&stale, T), Ok(Fetched::Stale));
        assert_eq!((b.available(), b.dropped(), b.fetches()), (0, 10, 0));
        let MintStep::FetchNow(ask) = b.poll(T, &mut out).next else {
            panic!("expected a fetch")
        };
        assert_eq!(ask.minter, 2, "the next fetch goes to the next minter");
        // A batch with some fresh IDs is kept; its stale ones are dropped.
        let mixed = [
            (id(T - 1_001, 2, 0), id(T - 1_001, 2, 5)),
            (id(T - 1_000, 2, 0), id(T - 1_000, 2, 5)),
        ];
        assert_eq!(b.fetched(&mixed, T), Ok(Fetched::Kept));
        assert_eq!(b.poll(T, &mut out).filled, 1);
        assert_eq!(out[0], id(T - 1_000, 2, 0));
        assert_eq!(b.minter(), 2);
    }

    #[test]
    fn a_refusal_is_waited_on_only_while_the_clock_can_catch_up_in_time() {
        let layout = Layout::LEAF;
        let mut b = MintedBuffer::new(layout, MintConfig::new(4, 0)).unwrap();
        let parts = crate::layout::Parts {
            timestamp_ms: T,
            worker_id: 0,
            sequence: 0,
        };
        let id = layout.compose(parts).unwrap().get();
        b.fetched(&[(id, id + 1)], T).unwrap();
        // Used up in this unit: ask the same minter again.
        assert_eq!(
            b.fetch_refused(ErrorCode::SequenceExhausted, T, 1_000),
            Refused::Again
        );
        assert_eq!(
            b.fetch_refused(ErrorCode::SequenceExhausted, T - 900, 1_000),
            Refused::Again
        );
        // This clock stepped back past what the request can wait: answer now.
        assert_eq!(
            b.fetch_refused(ErrorCode::SequenceExhausted, T - 60_000, 1_000),
            Refused::GiveUp {
                code: ErrorCode::ClockMovedBackwards,
                retry_after_ms: 60_000 - MINTER_BORROW_MS
            }
        );
        assert_eq!(b.minter(), 0);
        // Anything else: the next minter.
        assert_eq!(
            b.fetch_refused(ErrorCode::StoreUnavailable, T, 1_000),
            Refused::Next
        );
        assert_eq!(b.minter(), 1);
    }

    #[test]
    fn a_minter_never_waits_and_leases_at_most_once() {
        let wait = |ms, reason| HolderNext::RetryAfter { ms, reason };
        let ask = LeaseAsk {
            node_now_ms: T,
            previous: None,
        };
        // A partial batch is answered, whatever the holder would wait for.
        for next in [
            wait(1, Wait::SequenceExhausted),
            wait(60_000, Wait::ClockBehind),
            HolderNext::LeaseInFlight,
        ] {
            assert_eq!(minter_step(1, next, false), MinterStep::Answer);
        }
        // Nothing: answered at once, with the code and the wait.
        assert_eq!(
            minter_step(0, wait(60_000, Wait::ClockBehind), false),
            MinterStep::Unavailable {
                code: ErrorCode::ClockMovedBackwards,
                retry_after_ms: 60_000
            }
        );
        assert_eq!(
            minter_step(0, wait(0, Wait::SequenceExhausted), false),
            MinterStep::Unavailable {
                code: ErrorCode::SequenceExhausted,
                retry_after_ms: 1
            }
        );
        assert_eq!(
            minter_step(0, HolderNext::Lease(ask), false),
            MinterStep::Lease(ask)
        );
        assert!(matches!(
            minter_step(0, HolderNext::Lease(ask), true),
            MinterStep::Unavailable {
                code: ErrorCode::StoreUnavailable,
                ..
            }
        ));
        assert_eq!(
            MintConfig::new(16, 3).tries_per_request(),
            MINTERS_PER_REQUEST
        );
        assert_eq!(MintConfig::new(2, 3).tries_per_request(), 2);
        // A pool of three: all of it and one other region's minter.
        assert_eq!(MintConfig::in_pool(16, 0..3, 0).tries_per_request(), 4);
        // A large pool: no fan-out of one request.
        assert_eq!(
            MintConfig::in_pool(1024, 0..171, 0).tries_per_request(),
            MINTERS_PER_REQUEST + 1
        );
    }

    #[test]
    fn ranges_split_at_units_and_gaps() {
        let ids = [
            id(T, 2, 7),
            id(T, 2, 8),
            id(T, 2, 9),
            id(T + 1, 2, 0),
            id(T + 1, 2, 2),
        ];
        assert_eq!(
            batch_ranges(&Layout::LEAF, &ids),
            vec![
                (id(T, 2, 7), id(T, 2, 10)),
                (id(T + 1, 2, 0), id(T + 1, 2, 1)),
                (id(T + 1, 2, 2), id(T + 1, 2, 3)),
            ]
        );
    }
}
