//! The ledger of ranges the segment tests keep (`block_props`,
//! `model_segment`): who was handed each range, by its start.

use std::collections::BTreeMap;

/// The range of `map` (start → (end, whose)) that `[start, end]` overlaps,
/// if any: ranges never overlap one another, so only the last one starting
/// at or before `end` can.
pub fn overlaps(
    map: &BTreeMap<u64, (u64, String)>,
    start: u64,
    end: u64,
) -> Option<(u64, u64, String)> {
    map.range(..=end)
        .next_back()
        .filter(|(_, (e, _))| *e >= start)
        .map(|(s, (e, who))| (*s, *e, who.clone()))
}
