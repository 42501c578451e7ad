//! Where minters are placed: the reserved worker IDs split into one pool per
//! region, so that two regions never share one.

use crate::error::{check_range, Error};
use crate::region::Region;

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
/// region's pool and ask every minter in turn ([`MintConfig::new`](super::MintConfig::new)).
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
    /// The service's split ([`MinterPools::over_regions`]): the regions'
    /// shares of the minters beyond one each; `None`: even.
    shares: Option<[u32; MINTER_REGION_COUNT as usize]>,
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
        Ok(MinterPools {
            minters,
            regions,
            shares: None,
        })
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
        let start = (0..k).map(|j| self.size(j)).sum::<u32>();
        start..start + self.size(k)
    }

    /// How many minters hosting region `k` (< [`hosting`](Self::hosting)) has.
    fn size(&self, k: u32) -> u32 {
        let h = self.hosting();
        let Some(shares) = self.shares.filter(|_| self.minters > h) else {
            let (base, extra) = (self.minters / h, self.minters % h);
            return base + u32::from(k < extra);
        };
        // One each, then each further minter to the region whose share per
        // minter beyond the first is the largest (Sainte-Laguë's divisors
        // 1, 3, 5, ...; the earlier region on a tie): one more minter never
        // takes one from a region.
        let mut extra = [0u64; MINTER_REGION_COUNT as usize];
        for _ in h..self.minters {
            let mut best = 0;
            for j in 1..extra.len() {
                let ahead = u64::from(shares[j]) * (2 * extra[best] + 1)
                    > u64::from(shares[best]) * (2 * extra[j] + 1);
                if ahead {
                    best = j;
                }
            }
            extra[best] += 1;
        }
        1 + u32::try_from(extra[k as usize]).unwrap_or(0)
    }

    /// The region hosting minter `i`; `None` beyond the minters.
    pub fn host(&self, i: u32) -> Option<u32> {
        (0..self.hosting()).find(|&k| self.pool(k).contains(&i))
    }

    /// The service's split: `minters` over [`MINTER_REGIONS`], in that
    /// order, by [`MINTER_SHARES`]: with 6 or more, one each and the rest
    /// by share (Sainte-Laguë, so that one minter more never takes one from
    /// a region); with fewer, one each to the first `minters` regions.
    ///
    /// ```
    /// use edgeleaf::minted::MinterPools;
    /// use edgeleaf::region::Region;
    /// let p = MinterPools::over_regions(32);
    /// // enam, weur, apac, wnam, eeur, oc
    /// assert_eq!(p.region_pool(Region::Apac), 10..25);
    /// assert_eq!(p.region_pool(Region::Oc), 31..32);
    /// assert_eq!(p.region_pool(Region::Afr), p.region_pool(Region::Weur));
    /// ```
    pub fn over_regions(minters: u32) -> MinterPools {
        MinterPools {
            minters: minters.min(1 << 16),
            regions: MINTER_REGION_COUNT,
            shares: Some(MINTER_SHARES),
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

/// Each region's share of the minters (of [`MINTER_REGIONS`], in that
/// order; percent): its share of the snowflake requests in the world
/// simulation (`tests/sim/world_sim.rs`: traffic in proportion to each
/// continent's Internet users, a colo's isolates asking the minters of its
/// nearest region's hosting region). `apac` carries half the world's
/// requests: split evenly, its minters were the first past their limit
/// (docs/benchmarks.md, "The world simulation").
pub const MINTER_SHARES: [u32; MINTER_REGION_COUNT as usize] = [13, 21, 53, 2, 10, 1];
