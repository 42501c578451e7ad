//! The minter's policy: the holder it runs, what it does at each step, and
//! the ranges of a batch.

use crate::code::ErrorCode;
use crate::error::Error;
use crate::holder::{HolderConfig, HolderNext, LeaseAsk, DEFAULT_RESERVE_MS, RENEW_RETRY_MS};
use crate::layout::Layout;
use crate::snowflake::Wait;
use alloc::vec::Vec;

use super::MINTER_BORROW_MS;

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
/// call can answer [`MAX_MINT_BATCH`](super::MAX_MINT_BATCH). `max_backward_ms`: the service's.
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
