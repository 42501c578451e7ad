//! What a tag's store is asked — a segment lease, a tail handed back — by
//! whom, and what it remembers under a lease's request ID.

use crate::segment::Allocation;
use alloc::string::String;

/// The longest request ID of a segment lease, in bytes.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// How long a tag's store remembers a segment lease's request ID (a retry
/// within it is answered the same segment).
pub const REQUEST_ID_TTL_MS: u64 = 3_600_000;

/// The request IDs a tag's store remembers for one caller, at least (its
/// newest, within [`REQUEST_ID_TTL_MS`]): when the caller's memory passes
/// it by [`REMEMBERED_PRUNE_MARGIN`], that caller's oldest beyond it are
/// forgotten, as after [`REQUEST_ID_TTL_MS`] ([`remembered_prune`]). So
/// one key sending new request IDs cannot grow the store without bound
/// (every lease of the tag would pay for it), the other callers' memory is
/// untouched, and no ID is ever answered twice: a forgotten request ID sent
/// again is a new ask, answered a new segment, and a tail handed back under
/// it stays a gap. Forgetting, not refusing: the caller keeps drawing IDs;
/// only retries older than its last `MAX_REMEMBERED_PER_CALLER` leases may
/// lose their answer.
pub const MAX_REMEMBERED_PER_CALLER: u64 = 1_000;

/// How far one caller's memory may grow past [`MAX_REMEMBERED_PER_CALLER`]
/// before its oldest are forgotten, back to that, all at once: forgetting
/// reads every lease the caller has remembered (to find its oldest), so it
/// is done once in this many of its leases, not at each (2,018 rows read a
/// lease at the cap before, as measured). A caller holds at most the sum
/// (1,100).
pub const REMEMBERED_PRUNE_MARGIN: u64 = 100;

/// The most callers a tag's store keeps a count of remembered leases for
/// (the count [`remembered_prune`] is given), in the memory of one instance
/// of it: past that, it forgets every count at once. A caller whose count
/// it does not hold has its leases counted again from the store, all its
/// rows (up to 1,100) read once — as at the first lease of each caller in
/// a new instance (after an eviction, a restart, a deploy). So the counts
/// never outgrow memory however many keys lease the tag, and forgetting
/// them costs those reads, never a count below the rows.
pub const MAX_COUNTED_CALLERS: usize = 10_000;

/// What a tag's store does with one caller's memory once it has remembered
/// one more of its leases, given `counted`: at least as many leases as the
/// caller now has remembered (an upper bound, which forgetting by
/// [`REQUEST_ID_TTL_MS`] or a tail handed back may leave above the truth).
/// `Some(keep)`: forget all but its newest `keep` leases, after which it
/// has at most `keep` (the count to go on from); `None`: keep them all, and
/// count on from `counted`.
pub fn remembered_prune(counted: u64) -> Option<u64> {
    (counted > MAX_REMEMBERED_PER_CALLER + REMEMBERED_PRUNE_MARGIN)
        .then_some(MAX_REMEMBERED_PER_CALLER)
}

/// Who asks for a segment lease, as its request IDs see it (by default:
/// [`Asker::Shared`], which may send none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Asker<'a> {
    /// A credential of the caller's own, by name (an API key's ID): the
    /// request IDs it sends are remembered within its own names.
    Own(&'a str),
    /// A credential others hold too, or none (no token, a token every
    /// client is given): another caller could send the same request ID and
    /// be answered this caller's segment, so it may not send one.
    #[default]
    Shared,
}

/// A segment remembered under a lease's request ID: the segment answered,
/// and the step its request was granted (the segment is shorter when it was
/// the tag's last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remembered {
    /// The segment first answered.
    pub segment: Allocation,
    /// The step the request was granted.
    pub granted: u64,
}

/// A segment lease, as a tag's store is asked for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentAsk<'a> {
    /// The step asked for, granted as [`TagRecord::grant_step`](super::TagRecord::grant_step) says.
    pub step: Option<u64>,
    /// The caller's name for the request: sent again (a retry) by the same
    /// caller, it is answered the same segment.
    pub request_id: Option<&'a str>,
    /// Who asks: request IDs are the caller's own, so another caller naming
    /// the same one gets a segment of its own; a caller without a credential
    /// of its own may send none.
    pub caller: Asker<'a>,
    /// From one of the service's own isolates: they alone take an opaque
    /// tag's segments (with its key).
    pub for_isolate: bool,
}

impl<'a> SegmentAsk<'a> {
    /// What the store remembers this ask's segment under: the request ID
    /// within its caller's own names (`None` without a request ID, or from
    /// a caller without a credential of its own). Two asks share it exactly
    /// when both their caller and their request ID are the same.
    pub fn remembered_as(&self) -> Option<String> {
        let Asker::Own(caller) = self.caller else {
            return None;
        };
        self.request_id
            .map(|id| alloc::format!("{}:{}:{}", caller.len(), caller, id))
    }

    /// The bounds `[from, to)` of every name [`SegmentAsk::remembered_as`]
    /// gives this ask's caller (`None` as there): the range of one caller's
    /// memory, and no other caller's name falls in it (the caller's name is
    /// prefixed by its length, and `;` follows `:`).
    pub fn remembered_range(&self) -> Option<(String, String)> {
        let Asker::Own(caller) = self.caller else {
            return None;
        };
        self.request_id?;
        Some((
            alloc::format!("{}:{}:", caller.len(), caller),
            alloc::format!("{}:{};", caller.len(), caller),
        ))
    }

    /// Whose credits this ask may be answered from
    /// ([`TagRecord::lease_with_credits`](super::TagRecord::lease_with_credits)): an outside caller
    /// with a
    /// credential of its own, by its name; `None` for the service's own
    /// isolates and allocators and for callers without one.
    pub fn credit_owner(&self) -> Option<&'a str> {
        match self.caller {
            Asker::Own(owner) if !self.for_isolate => Some(owner),
            _ => None,
        }
    }
}

/// The unused tail of a leased range, handed back to its tag's store by the
/// asker that leased it ([`TagRecord::take_back`](super::TagRecord::take_back)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailBack<'a> {
    /// The IDs handed back: the end of the range leased under `request_id`.
    pub tail: Allocation,
    /// The request ID the range was leased under.
    pub request_id: &'a str,
    /// Who hands it back: only the asker that leased it, by its own name.
    pub caller: Asker<'a>,
    /// From one of the service's own isolates or allocators (as the lease was).
    pub for_isolate: bool,
}

impl<'a> TailBack<'a> {
    /// What the store remembers the leased range under (as
    /// [`SegmentAsk::remembered_as`] for the lease): `None` for a caller
    /// without a credential of its own.
    pub fn remembered_as(&self) -> Option<String> {
        self.as_lease().remembered_as()
    }

    /// Whose credits the tail would join
    /// ([`TagRecord::credit_back`](super::TagRecord::credit_back)): as
    /// [`SegmentAsk::credit_owner`] for the lease.
    pub fn credit_owner(&self) -> Option<&'a str> {
        self.as_lease().credit_owner()
    }

    pub(super) fn as_lease(&self) -> SegmentAsk<'a> {
        SegmentAsk {
            step: None,
            request_id: Some(self.request_id),
            caller: self.caller,
            for_isolate: self.for_isolate,
        }
    }
}

/// What becomes of the range remembered under a lease's request ID when its
/// tail comes back: written with the record, in the same write, so that a
/// retry of the lease is never answered the IDs handed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RememberedChange {
    /// The range without its tail (the IDs the asker kept).
    Shorten(Remembered),
    /// The whole range came back: forget it (a retry of the lease is then a
    /// new lease, of new IDs).
    Remove,
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_prune_comes_past_the_margin_and_keeps_the_cap() {
        assert_eq!(remembered_prune(1), None);
        assert_eq!(remembered_prune(MAX_REMEMBERED_PER_CALLER + 1), None);
        assert_eq!(
            remembered_prune(MAX_REMEMBERED_PER_CALLER + REMEMBERED_PRUNE_MARGIN),
            None
        );
        assert_eq!(
            remembered_prune(MAX_REMEMBERED_PER_CALLER + REMEMBERED_PRUNE_MARGIN + 1),
            Some(MAX_REMEMBERED_PER_CALLER)
        );
    }
}
