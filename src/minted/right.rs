//! Rights to mint: a minter lends an isolate a slice of one worker ID's
//! sequence for a window of time, and the isolate mints inside it at its
//! own clock.
//!
//! A batch is a set of IDs already stamped with the minter's time, so it is
//! stale a second later: an isolate serving a request every few seconds
//! fetched a batch for nearly every ID (1.35 minter requests per ID in the
//! world simulation). A right is the space to mint in instead: worker ID
//! `w`, sequences `seq_start..seq_start + seq_len`, time units starting in
//! `from_ms..until_ms`. The isolate stamps each ID with its own clock (never
//! stale), and asks again once a window — minutes — not once a second.
//!
//! Why no ID repeats:
//! - a minter grants rights under a worker ID of its own, leased from the
//!   registry as its batches' is ([`rights_worker_index`]: the ID reserved
//!   for minter `minters + i`), and never mints batches under it; so a minter
//!   of an older release — one that takes this one's storage over after a
//!   rollback — never touches it;
//! - [`RightLedger`] never grants one (slice, time unit) twice: each slice
//!   is lent again only from where its last right ended;
//! - every right ends by the lease's expiry and by the reservation the
//!   minter's holder has saved ([`SnowflakeHolder::lendable`]); a minter
//!   restarted from its store lends only after that reservation;
//! - the registry records each expiry it answers a lender as the worker
//!   ID's floor ([`RegistryConfig::lenders`]), and never moves a minter's
//!   expiry back: whoever holds the ID next — the minter restarted, another
//!   minter after `SNOWFLAKE_MINTERS` changed, an outside node once the ID
//!   is no longer reserved — issues after every right lent, even under a
//!   registry of the release before (a 60 s TTL: its renewal moves the
//!   expiry back, but never the floor);
//! - the isolate mints each (unit, sequence) of a right at most once,
//!   units in increasing order, within its window
//!   ([`MintedBuffer`](super::MintedBuffer)'s cursor).
//!
//! [`SnowflakeHolder::lendable`]: crate::holder::SnowflakeHolder::lendable
//! [`RegistryConfig::lenders`]: crate::registry::RegistryConfig::lenders

use crate::error::Error;
use crate::holder::{
    HolderConfig, HolderNext, LeaseAsk, Lendable, SnowflakeHolder, MAX_RESERVE_MS,
};
use crate::layout::Layout;
use crate::rand::RandSource;
use alloc::vec;
use alloc::vec::Vec;

use super::{MintedBuffer, MINTER_BORROW_MS};

/// How many sequence values one right spans. LEAF: 4 of 4,096 per unit,
/// so 1,024 rights at once per worker ID (36,864 for 36 minters; with 16,
/// 9,216 were too few for the world simulation's isolates: 40% of asks
/// found every slice lent), and 4,000 IDs a second at the isolate's clock
/// (16 at once, borrowing [`MINTER_BORROW_MS`] ahead): a burst beyond that
/// is served from batches, as before rights. A layout with fewer sequences
/// per unit lends all of them in one right.
pub const RIGHT_SEQUENCES: u32 = 4;

/// The longest window of a right: five minutes, so that an isolate asks
/// its minter about once per window. Its lease
/// ([`RegistryConfig::lender_ttl_ms`], renewed at half) and the holder's
/// reservation ([`rights_holder_config`]) bound it too.
///
/// [`RegistryConfig::lender_ttl_ms`]: crate::registry::RegistryConfig::lender_ttl_ms
pub const MAX_RIGHT_MS: u64 = 300_000;

// A right ends by its holder's reservation, saved `MAX_RIGHT_MS` ahead: a
// holder reserves at most `MAX_RESERVE_MS` ahead. (What bounds a right for
// the ID's next holder is its lease's expiry, which the registry records as
// a lender's floor; its renewals report at most the clock + the tolerance.)
const _: () = assert!(MAX_RIGHT_MS <= MAX_RESERVE_MS);
/// A right shorter than this is not lent: the isolate would ask again at
/// once.
pub const MIN_RIGHT_MS: u64 = 5_000;

/// A right starting further than this after the unit after the minter's
/// clock's is not lent: its holder mints from the right's first unit at
/// once, so its IDs would be stamped that far ahead of every clock. A
/// holder's floor is that far ahead after a restart (it resumes after the
/// reservation it saved, up to [`MAX_RIGHT_MS`] ahead); it lends again once
/// the clock nears it.
const MAX_RIGHT_LEAD_MS: u64 = 1_000;

/// After a fetch that asked for a right and got none (a minter of a
/// release before rights, or one with none to lend now), the isolate asks
/// for none for this long: it fetches batches as before rights, and never
/// pays a request for a right it is not given.
pub const RIGHT_RETRY_MS: u64 = 30_000;

/// How a minter's rights holder runs: it leases again after a lapse, never
/// mints itself (it only lends), and lends only below a reservation saved
/// [`MAX_RIGHT_MS`] ahead (a restarted minter lends again only after it).
/// `max_backward_ms`: the service's.
pub fn rights_holder_config(max_backward_ms: u64) -> HolderConfig {
    HolderConfig {
        max_backward_ms,
        lease_again: true,
        reserve_ms: MAX_RIGHT_MS,
        lends_only: true,
        max_borrow_ms: 0,
        ..HolderConfig::default()
    }
}

/// Whether `minters` minters lend rights to mint under a registry of
/// `capacity` worker IDs: their rights holders' IDs must fit, the registry
/// then reserving `2 × minters` of them, at most half (as it allows for
/// minters). jsSafe's 128 hold 36 minters, not 72 IDs: no rights there.
pub const fn lends_rights(minters: u32, capacity: u32) -> bool {
    minters > 0 && minters.saturating_mul(2) <= capacity / 2
}

/// The worker ID of minter `index`'s rights holder, among `minters`: the
/// registry reserves `2 × minters` IDs when rights are lent, the first
/// `minters` for batches and the next for rights.
pub const fn rights_worker_index(minters: u32, index: u32) -> u32 {
    minters + index
}

/// A right to mint: IDs of worker `worker_id` whose sequence is in
/// `seq_start..seq_start + seq_len` and whose time unit starts in
/// `from_ms..until_ms`, each at most once, by its one holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct MintRight {
    /// The worker ID.
    pub worker_id: u32,
    /// The first sequence value.
    pub seq_start: u32,
    /// How many sequence values.
    pub seq_len: u32,
    /// The first unit's start, Unix ms.
    pub from_ms: u64,
    /// Units starting at or after this are not the right's, Unix ms.
    pub until_ms: u64,
}

impl MintRight {
    /// Checks the right fits `layout`: a worker ID and sequences within it,
    /// a window that is not empty.
    ///
    /// # Errors
    /// [`Error::InvalidRight`] otherwise.
    pub fn validate(&self, layout: &Layout) -> Result<(), Error> {
        let seq_end = u64::from(self.seq_start) + u64::from(self.seq_len);
        let ok = self.worker_id <= layout.max_worker_id()
            && self.seq_len > 0
            && seq_end <= u64::from(layout.max_sequence()) + 1
            && self.from_ms < self.until_ms
            && layout.tick(self.from_ms).is_ok()
            && layout.tick(self.until_ms - 1).is_ok()
            // Whole units, as a ledger lends them: the isolate mints each
            // unit that starts in the window whole.
            && (self.from_ms - layout.epoch_ms()) % layout.unit_ms() == 0
            && (self.until_ms - layout.epoch_ms()) % layout.unit_ms() == 0;
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidRight {
                worker_id: self.worker_id,
                seq_start: self.seq_start,
                seq_len: self.seq_len,
                from_ms: self.from_ms,
                until_ms: self.until_ms,
            })
        }
    }

    /// The IDs of time unit `tick`, sequences `seq_start + lo ..
    /// seq_start + hi`, as a range `[start, end)`.
    pub(crate) fn range(&self, layout: &Layout, tick: u64, lo: u32, hi: u32) -> (u64, u64) {
        let s = layout.pack(tick, self.worker_id, self.seq_start + lo);
        (s, s + u64::from(hi - lo))
    }
}

/// What a minter's rights holder lends, and to whom it already lent: the
/// slices of its worker ID's sequence and, for each, where the last right
/// lent of it ends. Pure: the minter's clock and its holder's
/// [`Lendable`] come in, a right goes out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RightLedger {
    layout: Layout,
    seq_len: u32,
    /// Per slice: no right lent of it reaches this instant (Unix ms).
    free_from: Vec<u64>,
    lent: u64,
    /// The rights holder's lease is not asked for before this (Unix ms).
    lease_not_before_ms: u64,
}

impl RightLedger {
    /// A ledger for `layout`, nothing lent.
    pub fn new(layout: Layout) -> RightLedger {
        let per_unit = layout.max_sequence() + 1;
        let seq_len = RIGHT_SEQUENCES.min(per_unit);
        RightLedger {
            layout,
            seq_len,
            free_from: vec![0; (per_unit / seq_len) as usize],
            lent: 0,
            lease_not_before_ms: 0,
        }
    }

    /// How many rights may be out at once.
    pub fn slices(&self) -> usize {
        self.free_from.len()
    }

    /// Rights lent so far.
    pub fn lent(&self) -> u64 {
        self.lent
    }

    /// Whether the rights holder may ask the registry for its lease at
    /// `now_ms` (its holder says it has none). Every isolate's ask for a
    /// right reaches the minter, and a minter restarted from its store is
    /// refused its worker ID until its clock passes the rights it lent
    /// before: without a pause, each of those asks would be a call to the
    /// one registry.
    pub fn may_lease(&self, now_ms: u64) -> bool {
        now_ms >= self.lease_not_before_ms
    }

    /// The lease to ask the registry for now, from what a rights holder's
    /// poll said (`next`): its ask, or `None` — nothing asked, or a pause
    /// after a failed lease ([`RightLedger::may_lease`]), in which case the
    /// holder is told the ask was not sent (so that it asks again at a
    /// later poll) and, holding no lease, lends nothing
    /// ([`RightLedger::lend_from`]). On a failure of the lease sent, call
    /// [`RightLedger::lease_failed`].
    pub fn lease_to_send<R: RandSource + Clone>(
        &self,
        next: HolderNext,
        holder: &mut SnowflakeHolder<R>,
        now_ms: u64,
    ) -> Option<LeaseAsk> {
        let HolderNext::Lease(ask) = next else {
            return None;
        };
        if self.may_lease(now_ms) {
            Some(ask)
        } else {
            holder.lease_failed(None, now_ms);
            None
        }
    }

    /// The rights holder's lease failed at `now_ms` (refused — a registry
    /// of a release before rights reserves no ID for it, or a restarted
    /// minter's clock is not yet past the rights it lent — or unanswered):
    /// it is not asked again for [`RIGHT_RETRY_MS`], the pause an isolate
    /// takes after an ask for a right that got none; meanwhile the minter
    /// answers batches alone.
    pub fn lease_failed(&mut self, now_ms: u64) {
        self.lease_not_before_ms = now_ms.saturating_add(RIGHT_RETRY_MS);
    }

    /// A right to lend at `now_ms` under `holder` (a minter's rights
    /// holder): [`RightLedger::lend`] within what it may lend
    /// ([`SnowflakeHolder::lendable`]), recorded as issued by it
    /// ([`SnowflakeHolder::lent_until`]) — the three always together, so
    /// that no edge lends a right its holder's renewals and saves do not
    /// cover.
    ///
    /// [`SnowflakeHolder::lendable`]: crate::holder::SnowflakeHolder::lendable
    /// [`SnowflakeHolder::lent_until`]: crate::holder::SnowflakeHolder::lent_until
    pub fn lend_from<R: RandSource + Clone>(
        &mut self,
        now_ms: u64,
        holder: &mut SnowflakeHolder<R>,
    ) -> Option<MintRight> {
        let right = self.lend(now_ms, holder.lendable(now_ms))?;
        holder.lent_until(right.until_ms);
        Some(right)
    }

    /// A right to lend at `now_ms` under `lendable` (the holder's lease and
    /// reservation), or `None`: no lease, less than [`MIN_RIGHT_MS`] of it
    /// left, its floor more than a second ahead of the clock (a restarted
    /// holder's), or every slice lent now. A slice is lent again only once its
    /// last right ended; the right starts at the unit after `now_ms`'s
    /// (never inside a unit the minter's clock is in: a step back of the
    /// clock would otherwise reach into one lent before), and after the
    /// holder's floor.
    pub fn lend(&mut self, now_ms: u64, lendable: Option<Lendable>) -> Option<MintRight> {
        let lendable = lendable?;
        let layout = self.layout;
        let unit = layout.unit_ms();
        let next_unit = |ms: u64| {
            layout
                .tick(ms)
                .ok()
                .map(|t| layout.tick_start_ms(t.saturating_add(1)))
        };
        let next = next_unit(now_ms)?;
        let start = next.max(lendable.from_ms);
        if start > next.saturating_add(MAX_RIGHT_LEAD_MS) {
            return None;
        }
        let (slice, &free_from) = self.free_from.iter().enumerate().min_by_key(|(_, f)| **f)?;
        // Only a slice free now: a right starting later would be of no use
        // to the isolate for a while.
        if free_from > start {
            return None;
        }
        // Whole units: the last one ends by `until`. An `until` before the
        // epoch (a holder that has saved no reservation yet lends up to 0)
        // stays below `start`, and nothing is lent.
        let end = lendable
            .until_ms
            .min(start.saturating_add(MAX_RIGHT_MS))
            .min(layout.expires_at());
        let end = end - end.saturating_sub(layout.epoch_ms()) % unit;
        if end < start.saturating_add(MIN_RIGHT_MS) {
            return None;
        }
        let seq_start = u32::try_from(slice).ok()? * self.seq_len;
        self.free_from[slice] = end;
        self.lent += 1;
        Some(MintRight {
            worker_id: lendable.worker_id,
            seq_start,
            seq_len: self.seq_len,
            from_ms: start,
            until_ms: end,
        })
    }
}

/// How many IDs a minter mints beside the right it lends (`lent`) for an
/// ask of `count`: none when the right alone serves the ask at once (its
/// sequences in the unit its holder is in and the [`MINTER_BORROW_MS`]
/// after), else `count`. A minter asked for a right by an isolate that has
/// none needs to mint nothing more, and one that mints nothing keeps no
/// batch reservation going (a row written a second per busy minter).
pub fn batch_beside_right(layout: &Layout, count: u32, lent: Option<&MintRight>) -> u32 {
    let units = 1 + MINTER_BORROW_MS / layout.unit_ms();
    match lent {
        Some(r) if u64::from(count) <= u64::from(r.seq_len) * units => 0,
        _ => count,
    }
}

impl MintedBuffer {
    /// Whether the next fetch asks for a right: rights are asked for
    /// (`MintConfig::rights`), the last ask was not answered without one
    /// lately ([`RIGHT_RETRY_MS`]), and the right held (if any) has less
    /// than a quarter of its window left — so a busy isolate has the next
    /// before this one ends, and an idle one asks only when it serves.
    pub(super) fn wants_right(&self, now_ms: u64) -> bool {
        if !self.config.rights || now_ms < self.rights_paused_until_ms {
            return false;
        }
        match self.right {
            None => true,
            Some(r) => {
                let left = r.until_ms.saturating_sub(now_ms.max(r.from_ms));
                left * 4 < r.until_ms - r.from_ms
            }
        }
    }

    /// Mints into `out` under the right held, at `now_ms`, and answers how
    /// many. Each (unit, sequence) of the right once, units in increasing
    /// order, at this clock's unit or the right's first (never before
    /// either), at most [`MINTER_BORROW_MS`] ahead of them, and only units
    /// starting before the right's end (then the right is dropped).
    pub(super) fn mint_under_right(&mut self, now_ms: u64, out: &mut [u64]) -> usize {
        let Some(r) = self.right else {
            return 0;
        };
        let layout = self.layout;
        let (Ok(now_tick), Ok(from_tick)) = (layout.tick(now_ms), layout.tick(r.from_ms)) else {
            return 0;
        };
        let limit_ms = now_ms.max(r.from_ms).saturating_add(MINTER_BORROW_MS);
        let mut filled = 0;
        while filled < out.len() {
            let tick = self.right_tick.max(now_tick).max(from_tick);
            if tick != self.right_tick {
                self.right_tick = tick;
                self.right_seq = 0;
            }
            let unit_ms = layout.tick_start_ms(tick);
            if unit_ms >= r.until_ms {
                self.right = None;
                break;
            }
            if unit_ms > limit_ms {
                break;
            }
            let want = u32::try_from(out.len() - filled).unwrap_or(u32::MAX);
            let n = (r.seq_len - self.right_seq).min(want);
            let (start, _) = r.range(&layout, tick, self.right_seq, self.right_seq + n);
            for (slot, id) in out[filled..filled + n as usize].iter_mut().zip(start..) {
                *slot = id;
            }
            filled += n as usize;
            self.right_seq += n;
            if self.right_seq == r.seq_len {
                self.right_tick = tick + 1;
                self.right_seq = 0;
            }
            self.staleness
                .record(now_ms.saturating_sub(unit_ms), u64::from(n));
        }
        self.window_served += filled as u64;
        self.right_minted += filled as u64;
        filled
    }

    /// Takes a right a minter lent with the latest fetch's answer (checked
    /// by the caller against the layout). One ending by `now_ms` is of no
    /// use; none at all to an ask for one pauses asking
    /// ([`RIGHT_RETRY_MS`]).
    pub(super) fn take_right(&mut self, right: Option<MintRight>, now_ms: u64) -> bool {
        match right {
            // The right held, answered again (a copied answer): where it
            // stands is kept, or its IDs would be minted twice.
            Some(r) if self.right == Some(r) => true,
            Some(r) if now_ms < r.until_ms => {
                self.right = Some(r);
                self.right_tick = 0;
                self.right_seq = 0;
                self.rights += 1;
                true
            }
            _ => {
                if self.asked_right {
                    self.rights_paused_until_ms = now_ms.saturating_add(RIGHT_RETRY_MS);
                }
                false
            }
        }
    }
}
