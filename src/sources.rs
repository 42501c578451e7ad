//! A client of one tag with two kinds of source, as a service's isolate
//! holds it: the tag's root (its store), and one regional allocator per
//! region its requests come through. Each source feeds its own
//! [`SegmentDriver`]: a driver's segments must rise, and a source's rise
//! only among its own. The isolate drives it (sends the loads it asks for,
//! reports their answers); this decides:
//!
//! - **the drain order**: a request of a region takes first what the root's
//!   driver holds (ranges brought by fallbacks to the root), never asking
//!   the root for more from there (its prefetch is cancelled), then its
//!   region's driver;
//! - **which driver a range goes to**: its source's. A range from the root
//!   answering a region's ask (the allocator missed) goes to the root's
//!   driver, and the region's load is over without a segment;
//! - **what a refusal says**: `monotonic_tag` marks the tag as one whose IDs
//!   come from its store alone (no driver is polled again), `not_found`
//!   says to drop the tag's state (made-up names cannot grow the isolate's
//!   memory).
//!
//! ```
//! use edgeleaf::driver::SegmentStep;
//! use edgeleaf::region::Region;
//! use edgeleaf::segment::Allocation;
//! use edgeleaf::sources::TagSources;
//!
//! let wnam: Region = "wnam".parse()?;
//! let mut t = TagSources::new();
//! let mut out = [0u64; 2];
//! let p = t.poll(Some(wnam), 0, &mut out).unwrap();
//! assert_eq!(p.next, SegmentStep::LoadNow { step: 1 });
//! // The allocator missed; the root answered: its range goes to the root's driver.
//! t.loaded(Some(wnam), None, Allocation::new(1, 10)?, 0)?;
//! let p = t.poll(Some(wnam), 0, &mut out).unwrap();
//! assert_eq!((p.filled, out), (2, [1, 2]));
//! # Ok::<(), edgeleaf::Error>(())
//! ```

use alloc::collections::BTreeMap;

use crate::code::ErrorCode;
use crate::driver::{SegmentDriver, SegmentPoll};
use crate::error::Error;
use crate::region::Region;
use crate::segment::{
    Allocation, SegmentSnapshot, StepPolicy, DEFAULT_SEGMENT_DURATION_MS, MAX_STEP,
};

/// One tag's drivers in an isolate: the root's and one per region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagSources {
    /// Segments from the tag's root: every segment of an isolate without
    /// regional allocators, else what fallbacks to the root brought.
    root: SegmentDriver,
    /// Segments from a region's allocator, one driver per region.
    regional: BTreeMap<Region, SegmentDriver>,
    monotonic: bool,
}

impl Default for TagSources {
    fn default() -> Self {
        Self::new()
    }
}

/// An isolate's driver of a tag's segments: the floor of the dynamic step
/// is the tag's own step, which the store applies to every request
/// ([`TagRecord::grant_step`](crate::tag::TagRecord::grant_step)).
fn new_driver() -> SegmentDriver {
    SegmentDriver::new(StepPolicy {
        min_step: 1,
        max_step: MAX_STEP,
        duration_ms: DEFAULT_SEGMENT_DURATION_MS,
    })
}

impl TagSources {
    /// A tag no segment was loaded for yet.
    pub fn new() -> Self {
        TagSources {
            root: new_driver(),
            regional: BTreeMap::new(),
            monotonic: false,
        }
    }

    /// Up to `out.len()` IDs for a request of `region` (`None`: no regional
    /// allocators, or an unknown colo: the root's driver alone), and what to
    /// do next, as [`SegmentDriver::poll`]: a load it asks for is one for
    /// `region`'s driver (or the root's, without a region). `None` for a
    /// monotonic tag: ask its store for the IDs.
    pub fn poll(
        &mut self,
        region: Option<Region>,
        now_ms: u64,
        out: &mut [u64],
    ) -> Option<SegmentPoll> {
        if self.monotonic {
            return None;
        }
        let Some(r) = region else {
            return Some(self.root.poll(now_ms, out));
        };
        // First what fallbacks to the root brought: only what it holds (it
        // is loaded by fallbacks alone, never from here).
        let spare = usize::try_from(self.root.available()).map_or(out.len(), |a| a.min(out.len()));
        let mut spare_filled = 0;
        if spare > 0 {
            let p = self.root.poll(now_ms, &mut out[..spare]);
            spare_filled = p.filled;
            if p.next.load().is_some() {
                // This poll marked a prefetch nobody sends.
                self.root.load_failed();
            }
        }
        let p = self.driver(Some(r)).poll(now_ms, &mut out[spare_filled..]);
        Some(SegmentPoll {
            filled: spare_filled + p.filled,
            next: p.next,
        })
    }

    /// The load a request of `region` asked for was answered `alloc` by
    /// `from` (`None`: the root — the only source without a region, or a
    /// fallback when the region's allocator missed).
    ///
    /// # Errors
    /// As [`SegmentDriver::loaded`]: a range at or below what its driver
    /// held is refused (report [`TagSources::load_failed`] then).
    pub fn loaded(
        &mut self,
        region: Option<Region>,
        from: Option<Region>,
        alloc: Allocation,
        now_ms: u64,
    ) -> Result<(), Error> {
        if from.is_none() {
            if let Some(r) = self.asked(region) {
                // A regional driver would refuse its allocator's lower
                // ranges after the root's: the region's load is over,
                // without a segment.
                self.driver(Some(r)).load_failed();
            }
        }
        self.driver(from).loaded(alloc, now_ms)
    }

    /// The load a request of `region` asked for failed with `code`. Returns
    /// whether to drop the tag's state (`not_found`: an unknown or deleted
    /// tag).
    #[must_use]
    pub fn load_failed(&mut self, region: Option<Region>, code: ErrorCode) -> bool {
        let asked = self.asked(region);
        self.driver(asked).load_failed();
        self.monotonic |= code == ErrorCode::MonotonicTag;
        code == ErrorCode::NotFound
    }

    /// Whether the tag is known to be monotonic (its IDs come from its
    /// store alone).
    pub fn is_monotonic(&self) -> bool {
        self.monotonic
    }

    /// The root's driver's state, for monitoring.
    pub fn root_snapshot(&self) -> SegmentSnapshot {
        self.root.snapshot()
    }

    /// Each region's driver's state, for monitoring.
    pub fn regional_snapshots(&self) -> impl Iterator<Item = (Region, SegmentSnapshot)> + '_ {
        self.regional.iter().map(|(r, d)| (*r, d.snapshot()))
    }

    /// The driver a request of `region` loads into.
    fn asked(&self, region: Option<Region>) -> Option<Region> {
        region.filter(|_| !self.monotonic)
    }

    fn driver(&mut self, region: Option<Region>) -> &mut SegmentDriver {
        match region {
            None => &mut self.root,
            Some(r) => self.regional.entry(r).or_insert_with(new_driver),
        }
    }
}
