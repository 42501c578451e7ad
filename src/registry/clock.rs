//! Leaf's clock checks: a node's clock against the registry's and against
//! the average of its owner's live nodes.

use crate::error::{ClockReference, Error};

use super::{Registry, SlotStatus};

impl Registry {
    pub(super) fn check_skew(
        &self,
        reference: ClockReference,
        node_now_ms: u64,
        reference_ms: u64,
    ) -> Result<(), Error> {
        if node_now_ms.abs_diff(reference_ms) > self.config.max_skew_ms {
            return Err(Error::ClockSkew {
                reference,
                node_now_ms,
                reference_ms,
                max_skew_ms: self.config.max_skew_ms,
            });
        }
        Ok(())
    }

    /// The clocks of `owner`'s live nodes now, averaged: each last report
    /// moved forward by the registry time since. `None` when it has none.
    /// One vote per owner's fleet, never across owners: every report is
    /// within the skew bound, so one credential's many leases could
    /// otherwise walk the reference another credential's nodes are
    /// checked against. (The service's own — minters and isolates — are
    /// owner `""`.)
    pub fn live_clock_average(&self, owner: &str, registry_now_ms: u64) -> Option<u64> {
        let (sum, n) = self
            .slots()
            .filter(|s| s.owner == owner && self.status(s, registry_now_ms) == SlotStatus::Live)
            .map(|s| i128::from(s.reported_clock_ms) - i128::from(s.reported_at_ms))
            .fold((0i128, 0i128), |(sum, n), offset| (sum + offset, n + 1));
        if n == 0 {
            return None;
        }
        let avg = i128::from(registry_now_ms) + sum / n;
        Some(u64::try_from(avg.max(0)).unwrap_or(u64::MAX))
    }
}
