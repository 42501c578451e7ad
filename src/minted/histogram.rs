//! How stale the IDs served were: a histogram the isolate keeps and the
//! service reports.

use alloc::vec::Vec;

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
