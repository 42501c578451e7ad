//! The isolate's buffer settings and their defaults, and which minter it
//! asks.

use crate::error::{check_range, Error};
use crate::layout::Layout;
use crate::wait::DEFAULT_TAKE_OVER_MS;

/// Default bound between an ID's time unit and the moment it is served.
pub const DEFAULT_STALENESS_MS: u64 = 1_000;

/// The smallest batch asked for.
pub const MIN_MINT_BATCH: u32 = 1;

/// The first batch asked for.
pub const FIRST_MINT_BATCH: u32 = 16;

/// How far ahead of its clock a minter mints
/// ([`minter_holder_config`](super::minter_holder_config)):
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
/// than this from then on ([`MintedBuffer::fetch_refused`](super::MintedBuffer::fetch_refused)).
pub const MAX_MINT_BATCH_BEFORE_BORROW: u32 = 4_096;

/// A request that finds nothing to serve tries at most this many minters
/// (each failure is an answer, not a wait) before it gives up.
pub const MINTERS_PER_REQUEST: u32 = 3;

/// An isolate that failed over to another region's minters asks its own
/// region's again this long after it left them.
pub const RETURN_HOME_MS: u64 = 10_000;

/// How a [`MintedBuffer`](super::MintedBuffer) asks for and serves batches.
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
    /// ([`MinterPools::pool`](super::MinterPools::pool)), asked before the others. `pool_len` 0: no
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
    /// Ask the minters for rights to mint ([`MintRight`](super::MintRight))
    /// along with batches, and mint under them at this isolate's clock.
    /// `false` (absent): batches only.
    #[cfg_attr(feature = "serde", serde(default))]
    pub rights: bool,
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
            rights: false,
        }
    }

    /// `minters` minters, those of `pool` (the isolate's region's,
    /// [`MinterPools::pool`](super::MinterPools::pool)) asked first, from one chosen by `home`; an
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

    /// The settings of one of the service's isolates in `region` (`None`:
    /// unknown): `minters` split as the service places them
    /// ([`MinterPools::over_regions`](super::MinterPools::over_regions)),
    /// its region's pool asked first ([`MintConfig::in_pool`]), from one
    /// chosen by `home`. The Worker's isolates and the world simulation
    /// both take their settings from here.
    pub fn for_region(
        minters: u32,
        region: Option<crate::region::Region>,
        home: u64,
    ) -> MintConfig {
        let pools = super::MinterPools::over_regions(minters);
        let pool = region.map_or(minters..minters, |r| pools.region_pool(r));
        MintConfig::in_pool(minters, pool, home)
    }

    /// Whether minter `i` is of this isolate's region's pool (`false`
    /// without one).
    pub fn in_own_pool(&self, i: u32) -> bool {
        (self.pool_start..self.pool_start + self.pool_len).contains(&i)
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
