//! The store side of segment mode: one record per `biz_tag`, the allocation
//! that advances it, and the rules of its store: a tag's kind (plain,
//! monotonic or opaque), fixed when it is created, says who may take its
//! segments; a segment lease sent again under its request ID is answered the
//! same segment, and only a caller with a credential of its own may send one.
//! A Durable Object runs this over its storage; the record returned must be
//! durable before the allocation is handed out.

use alloc::string::String;

use crate::error::{check_range, Error};
use crate::name::check_tag;
use crate::opaque::OpaqueDomain;
use crate::segment::{Allocation, MAX_SEGMENT_ID, MAX_STEP};

/// The longest description kept with a tag, in bytes.
pub const MAX_DESCRIPTION_LEN: usize = 256;
/// The longest request ID of a segment lease, in bytes.
pub const MAX_REQUEST_ID_LEN: usize = 128;
/// How long a tag's store remembers a segment lease's request ID (a retry
/// within it is answered the same segment).
pub const REQUEST_ID_TTL_MS: u64 = 3_600_000;

/// The most credits ([`TagRecord::credit_back`]) one asker holds on a tag:
/// a tail handed back beyond them stays a gap.
pub const MAX_CREDITS: usize = 8;

/// What a tag is. Fixed when the tag is created: isolates hold its segments
/// (or its store its buffer) under the promise its kind makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub enum TagKind {
    /// IDs increase within each segment; its segments go to the service's
    /// isolates and to outside clients (segment leases).
    #[default]
    Plain,
    /// Its store serves every ID itself, each greater than every one before:
    /// its segments never leave it.
    Monotonic,
    /// Its IDs are a keyed permutation of its counters over the domain; its
    /// segments go only to the service's own isolates, with the key.
    Opaque(OpaqueDomain),
}

impl TagKind {
    /// The kind a new tag asks for.
    ///
    /// # Errors
    /// [`Error::OpaqueAndMonotonic`] for both.
    pub fn new(monotonic: bool, opaque: Option<OpaqueDomain>) -> Result<TagKind, Error> {
        match (monotonic, opaque) {
            (true, Some(_)) => Err(Error::OpaqueAndMonotonic),
            (true, None) => Ok(TagKind::Monotonic),
            (false, Some(d)) => Ok(TagKind::Opaque(d)),
            (false, None) => Ok(TagKind::Plain),
        }
    }

    /// Whether the tag is monotonic.
    pub fn is_monotonic(self) -> bool {
        self == TagKind::Monotonic
    }

    /// An opaque tag's domain.
    pub fn opaque(self) -> Option<OpaqueDomain> {
        match self {
            TagKind::Opaque(d) => Some(d),
            _ => None,
        }
    }

    /// Checks that the tag's store serves its IDs itself (`/ids`).
    ///
    /// # Errors
    /// [`Error::NotMonotonic`] for any other kind.
    pub fn check_monotonic(self) -> Result<(), Error> {
        if self.is_monotonic() {
            Ok(())
        } else {
            Err(Error::NotMonotonic)
        }
    }

    /// An opaque tag's domain, to read an ID's counter with its key.
    ///
    /// # Errors
    /// [`Error::NotOpaque`] for any other kind.
    pub fn check_opaque(self) -> Result<OpaqueDomain, Error> {
        self.opaque().ok_or(Error::NotOpaque)
    }

    /// Checks that a change naming `monotonic` and `opaque` (`None`: not
    /// named) keeps this kind.
    ///
    /// # Errors
    /// [`Error::MonotonicImmutable`], then [`Error::OpaqueImmutable`], for
    /// a change that names another.
    fn check_unchanged(
        self,
        monotonic: Option<bool>,
        opaque: Option<OpaqueDomain>,
    ) -> Result<(), Error> {
        let fixed = self.is_monotonic();
        if let Some(found) = monotonic.filter(|m| *m != fixed) {
            return Err(Error::MonotonicImmutable { fixed, found });
        }
        if let Some(found) = opaque.filter(|d| Some(*d) != self.opaque()) {
            return Err(Error::OpaqueImmutable {
                fixed: self.opaque(),
                found,
            });
        }
        Ok(())
    }

    /// Checks that a segment lease may take this tag's segments:
    /// `for_isolate` says it comes from one of the service's own isolates.
    ///
    /// # Errors
    /// [`Error::OpaqueTag`] for an opaque tag, unless for an isolate;
    /// [`Error::MonotonicTag`] for a monotonic tag.
    fn check_lease(self, for_isolate: bool) -> Result<(), Error> {
        match self {
            TagKind::Opaque(_) if !for_isolate => Err(Error::OpaqueTag),
            TagKind::Monotonic => Err(Error::MonotonicTag),
            _ => Ok(()),
        }
    }
}

/// A request to create a tag or change one: each `None` keeps what the tag
/// has (at creation: the default). The kind (`monotonic`, `opaque`) is set
/// at creation only; a change may name the kind the tag has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TagChange<'a> {
    /// The step.
    pub step: Option<u64>,
    /// A new `max_id`: never below the tag's (that would reissue IDs).
    pub max_id: Option<u64>,
    /// The largest step granted.
    pub max_step: Option<u64>,
    /// Free text.
    pub description: Option<&'a str>,
    /// Whether the tag is monotonic.
    pub monotonic: Option<bool>,
    /// An opaque tag's domain.
    pub opaque: Option<OpaqueDomain>,
    /// What the writer read of the tag (`None`: unconditional): the change
    /// goes through only if the tag is still so ([`TagChange::check_expected`]).
    pub expected: Option<TagExpected>,
}

/// What a conditional change read of its tag before it was sent (a plan made
/// from that reading, such as an import from Leaf): the change goes through
/// only if the tag is still so when it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagExpected {
    /// No live tag (none, or a deleted one).
    Absent,
    /// A live tag whose `max_id` is this.
    MaxId(u64),
}

impl TagChange<'_> {
    /// Checks the change's precondition against the tag as it is now
    /// (`live`: `None` for no tag or a deleted one).
    ///
    /// # Errors
    /// [`Error::TagChanged`] when the tag is not as the writer read it
    /// (created, deleted, or its `max_id` moved: IDs were drawn in between).
    pub fn check_expected(&self, live: Option<&TagRecord>) -> Result<(), Error> {
        let found = live.map(|r| r.max_id);
        let holds = match self.expected {
            None => true,
            Some(TagExpected::Absent) => found.is_none(),
            Some(TagExpected::MaxId(m)) => found == Some(m),
        };
        if holds {
            return Ok(());
        }
        Err(Error::TagChanged {
            expected: match self.expected {
                Some(TagExpected::MaxId(m)) => Some(m),
                _ => None,
            },
            found,
        })
    }
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
    /// The step asked for, granted as [`TagRecord::grant_step`] says.
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

impl SegmentAsk<'_> {
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

    /// Whose credits this ask may be answered from
    /// ([`TagRecord::lease_with_credits`]): an outside caller with a
    /// credential of its own, by its name; `None` for the service's own
    /// isolates and allocators and for callers without one.
    pub fn credit_owner(&self) -> Option<&str> {
        match self.caller {
            Asker::Own(owner) if !self.for_isolate => Some(owner),
            _ => None,
        }
    }
}

/// How a tag's store answers a segment lease ([`TagRecord::lease_segment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentAnswer {
    /// A retry: the segment first answered under its request ID, again —
    /// neither burnt nor handed out twice.
    Again(Allocation),
    /// A new segment of `step` IDs: allocate it ([`TagRecord::allocate`]),
    /// and remember it under the request ID if the lease has one (as a
    /// [`Remembered`] granted `step`).
    Allocate {
        /// The step granted.
        step: u64,
    },
}

/// The unused tail of a leased range, handed back to its tag's store by the
/// asker that leased it ([`TagRecord::take_back`]).
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

impl TailBack<'_> {
    /// What the store remembers the leased range under (as
    /// [`SegmentAsk::remembered_as`] for the lease): `None` for a caller
    /// without a credential of its own.
    pub fn remembered_as(&self) -> Option<String> {
        self.as_lease().remembered_as()
    }

    /// Whose credits the tail would join ([`TagRecord::credit_back`]): as
    /// [`SegmentAsk::credit_owner`] for the lease.
    pub fn credit_owner(&self) -> Option<&str> {
        match self.caller {
            Asker::Own(owner) if !self.for_isolate => Some(owner),
            _ => None,
        }
    }

    fn as_lease(&self) -> SegmentAsk<'_> {
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

/// Why a tail handed back stays skipped (its IDs are never handed out, as
/// when a holder is lost): nothing is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailSkipped {
    /// IDs were handed out after it (`max_id` is past its end), or the tag
    /// was moved: only the last range handed out can come back.
    Followed {
        /// The tag's `max_id` now.
        max_id: u64,
    },
    /// Nothing is remembered under the request ID for this caller (another
    /// caller's, forgotten after [`REQUEST_ID_TTL_MS`], or already handed
    /// back whole).
    NotRemembered,
    /// The tail is not the end of the range remembered under it (already
    /// handed back, or not this lease's IDs).
    NotItsTail {
        /// The range remembered under the request ID.
        remembered: Allocation,
    },
    /// An outside client's tail: it never moves `max_id` back (the root
    /// cannot know whether the client handed those IDs out); it may become
    /// a credit of its own asker instead ([`TagRecord::credit_back`]).
    FromClient,
    /// The asker already holds [`MAX_CREDITS`] credits on the tag.
    CreditsFull,
}

impl TailSkipped {
    /// Whether this refusal proves the tail was never taken back, so that
    /// its holder may serve it again ([`BlockAllocator::keep`](crate::block::BlockAllocator::keep)):
    /// only [`TailSkipped::Followed`], given after the tail was found to be
    /// the end of the range still remembered under its request ID — every
    /// take-back shortens or removes that entry in the same write, so it
    /// was never taken. The others may answer a second copy of a hand-back
    /// the root took (its entry gone or shortened): the tail stays skipped.
    pub fn proves_untaken(&self) -> bool {
        matches!(self, TailSkipped::Followed { .. })
    }
}

/// How a tag's store answers an outside client's tail handed back
/// ([`TagRecord::credit_back`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditBack {
    /// The tail becomes a credit of its asker (`max_id` unchanged: the IDs
    /// stay reserved, leased again only by the same asker): store `credit`
    /// among the asker's credits and apply `remembered`, in one write.
    Credited {
        /// The IDs credited.
        credit: Allocation,
        /// The change to the range remembered under the request ID.
        remembered: RememberedChange,
    },
    /// The IDs stay a gap; nothing is written.
    Skipped(TailSkipped),
}

/// How a tag's store answers a segment lease from a caller that may hold
/// credits ([`TagRecord::lease_with_credits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditedAnswer {
    /// As [`TagRecord::lease_segment`] answers (no credit used).
    Segment(SegmentAnswer),
    /// From the asker's lowest credit: answer `segment`, remember it under
    /// the request ID (if any) as a [`Remembered`] granted `granted`, and
    /// replace the credit `taken` by `rest` (`None`: remove it), in one
    /// write. `max_id` does not move.
    Credit {
        /// The IDs answered: the start of the credit, at most `granted`.
        segment: Allocation,
        /// The step the request was granted.
        granted: u64,
        /// The credit used.
        taken: Allocation,
        /// What is left of it.
        rest: Option<Allocation>,
    },
}

/// How a tag's store answers a tail handed back ([`TagRecord::take_back`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeBack {
    /// The IDs return: store `record` (its `max_id` moved back to
    /// `tail.start - 1`) and apply `remembered` in one write.
    Returned {
        /// The record to store.
        record: TagRecord,
        /// The change to the range remembered under the request ID.
        remembered: RememberedChange,
    },
    /// The IDs stay skipped; nothing is written.
    Skipped(TailSkipped),
}

/// Leaf's `leaf_alloc` row.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TagRecord {
    /// The business key.
    pub biz_tag: String,
    /// The highest ID handed out in a segment so far (0: none yet).
    pub max_id: u64,
    /// The configured step (segment length).
    pub step: u64,
    /// Free text.
    pub description: String,
    /// When the record last changed, Unix ms.
    pub update_time: u64,
    /// What the tag is, fixed when it is created. An opaque tag's counters
    /// (and so `max_id`) end at its domain's last ID.
    #[cfg_attr(feature = "serde", serde(default))]
    pub kind: TagKind,
    /// The largest step granted (`None`: Leaf's 1,000,000). A tag whose
    /// segments must stay short (fewer IDs skipped when an isolate is lost)
    /// pins its step with `max_step == step`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub max_step: Option<u64>,
}

impl TagRecord {
    /// A new tag whose first ID will be `max_id + 1`.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for a bad tag; [`Error::OutOfRange`] for a step
    /// outside 1..=1,000,000, a `max_id` above 2^63 − 1, or a description over
    /// 256 bytes.
    pub fn new(
        biz_tag: &str,
        step: u64,
        max_id: u64,
        description: &str,
        now_ms: u64,
    ) -> Result<Self, Error> {
        check_tag(biz_tag)?;
        let record = TagRecord {
            biz_tag: biz_tag.into(),
            max_id,
            step,
            description: description.into(),
            update_time: now_ms,
            kind: TagKind::Plain,
            max_step: None,
        };
        record.validate()?;
        Ok(record)
    }

    /// A new tag as `change` asks, with a step of `default_step` unless it
    /// names one.
    ///
    /// # Errors
    /// As [`TagRecord::new`] and [`TagRecord::with_max_step`];
    /// [`Error::OpaqueAndMonotonic`]; as [`TagRecord::with_kind`].
    pub fn create(
        biz_tag: &str,
        change: &TagChange<'_>,
        default_step: u64,
        now_ms: u64,
    ) -> Result<Self, Error> {
        let record = TagRecord::new(
            biz_tag,
            change.step.unwrap_or(default_step),
            change.max_id.unwrap_or(0),
            change.description.unwrap_or(""),
            now_ms,
        )?
        .with_max_step(change.max_step)?;
        let kind = TagKind::new(change.monotonic.unwrap_or(false), change.opaque)?;
        record.with_kind(kind)
    }

    /// The tag changed as `change` asks ([`TagRecord::update`]), its kind
    /// kept.
    ///
    /// # Errors
    /// As [`TagRecord::update`]; [`Error::MonotonicImmutable`] or
    /// [`Error::OpaqueImmutable`] for a change that names another kind.
    pub fn change(&self, change: &TagChange<'_>, now_ms: u64) -> Result<Self, Error> {
        let next = self.update(
            change.step.unwrap_or(self.step),
            change.max_id,
            change.max_step,
            change.description.unwrap_or(&self.description),
            now_ms,
        )?;
        self.kind.check_unchanged(change.monotonic, change.opaque)?;
        Ok(next)
    }

    /// Checks a record read back from storage or built by hand.
    ///
    /// # Errors
    /// As [`TagRecord::new`].
    pub fn validate(&self) -> Result<(), Error> {
        check_tag(&self.biz_tag)?;
        check_range("step", self.step, 1, MAX_STEP)?;
        if let Some(m) = self.max_step {
            check_range("max_step", m, self.step, MAX_STEP)?;
        }
        if let Some(d) = self.kind.opaque() {
            d.validate()?;
        }
        check_range("max_id", self.max_id, 0, self.last_id())?;
        check_range(
            "description length",
            self.description.len() as u64,
            0,
            MAX_DESCRIPTION_LEN as u64,
        )?;
        Ok(())
    }

    /// The same record of another kind (at creation, or read back from
    /// storage).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for an opaque domain outside the allowed widths
    /// or a `max_id` already past its end.
    pub fn with_kind(mut self, kind: TagKind) -> Result<Self, Error> {
        self.kind = kind;
        self.validate()?;
        Ok(self)
    }

    /// The last ID (for an opaque tag: counter) the tag may hand out:
    /// 2^63 − 1, or the end of its opaque domain.
    pub fn last_id(&self) -> u64 {
        self.kind
            .opaque()
            .map_or(MAX_SEGMENT_ID, OpaqueDomain::max_id)
    }

    /// How to answer a segment lease `ask`, given the segment its store
    /// remembers under [`SegmentAsk::remembered_as`] (`remembered`; ignored
    /// for an ask without a request ID).
    ///
    /// # Errors
    /// [`Error::OpaqueTag`] or [`Error::MonotonicTag`] for a tag whose
    /// segments may not go to the caller ([`TagKind`]);
    /// [`Error::RequestIdNeedsKey`] for a request ID from a caller without a
    /// credential of its own ([`Asker::Shared`]);
    /// [`Error::InvalidRequestId`] for a request ID outside
    /// 1..=[`MAX_REQUEST_ID_LEN`] bytes; [`Error::RequestIdReused`] when the
    /// request remembered under it was granted another step than this ask
    /// is (not a retry of the same request).
    pub fn lease_segment(
        &self,
        ask: &SegmentAsk<'_>,
        remembered: Option<&Remembered>,
    ) -> Result<SegmentAnswer, Error> {
        self.kind.check_lease(ask.for_isolate)?;
        let step = self.grant_step(ask.step);
        let Some(id) = ask.request_id else {
            return Ok(SegmentAnswer::Allocate { step });
        };
        if ask.caller == Asker::Shared {
            return Err(Error::RequestIdNeedsKey);
        }
        if id.is_empty() || id.len() > MAX_REQUEST_ID_LEN {
            return Err(Error::InvalidRequestId {
                len: id.len(),
                max: MAX_REQUEST_ID_LEN,
            });
        }
        match remembered {
            None => Ok(SegmentAnswer::Allocate { step }),
            Some(r) if r.granted == step => Ok(SegmentAnswer::Again(r.segment)),
            // Not a retry of the same request: say so, rather than hand
            // back a segment of another size.
            Some(r) => Err(Error::RequestIdReused {
                granted: r.granted,
                asked: step,
            }),
        }
    }

    /// How to answer a segment lease `ask` (as [`TagRecord::lease_segment`])
    /// from an asker holding `credits` on this tag (the credits stored for
    /// [`SegmentAsk::credit_owner`]; ignored without one): a new lease is
    /// answered from the lowest credit first, at most the granted step, the
    /// rest kept. A retry of a lease is answered as it was first. `above`:
    /// the highest ID the asking client already holds (0: none); credits
    /// starting at or below it are left for another client of the same
    /// asker (a client's buffer never loads below what it held).
    ///
    /// # Errors
    /// As [`TagRecord::lease_segment`].
    pub fn lease_with_credits(
        &self,
        ask: &SegmentAsk<'_>,
        remembered: Option<&Remembered>,
        credits: &[Allocation],
        above: u64,
    ) -> Result<CreditedAnswer, Error> {
        let answer = self.lease_segment(ask, remembered)?;
        let SegmentAnswer::Allocate { step } = answer else {
            return Ok(CreditedAnswer::Segment(answer));
        };
        let lowest = credits
            .iter()
            .filter(|c| c.start > above)
            .min_by_key(|c| c.start);
        let (Some(_), Some(&taken)) = (ask.credit_owner(), lowest) else {
            return Ok(CreditedAnswer::Segment(answer));
        };
        let last = taken.start.saturating_add(step - 1).min(taken.end);
        let segment = Allocation::new(taken.start, last)?;
        let rest = if last < taken.end {
            Some(Allocation::new(last + 1, taken.end)?)
        } else {
            None
        };
        Ok(CreditedAnswer::Credit {
            segment,
            granted: step,
            taken,
            rest,
        })
    }

    /// How to answer an outside client's tail handed back
    /// ([`TailBack::credit_owner`]), given the range its store remembers
    /// under [`TailBack::remembered_as`] and the credits the asker already
    /// holds on the tag. The root cannot know whether a client handed those
    /// IDs out (a bug, a crash mid-use, two copies of one process, a
    /// hostile key holder), so `max_id` never moves back for a client:
    /// the tail becomes a credit that only the same asker leases again
    /// ([`TagRecord::lease_with_credits`]), so a false return can repeat
    /// IDs only within the asker's own credential. Credited only when the
    /// tail is the end of the range remembered under the asker's own
    /// request ID (shortened or removed in the same write: a retry of the
    /// lease never answers the IDs credited) and the asker holds fewer than
    /// [`MAX_CREDITS`]; otherwise the tail stays a gap. Allocators use
    /// [`TagRecord::take_back`].
    ///
    /// # Errors
    /// As [`TagRecord::take_back`].
    pub fn credit_back(
        &self,
        back: &TailBack<'_>,
        remembered: Option<&Remembered>,
        credits: &[Allocation],
    ) -> Result<CreditBack, Error> {
        let (tail, leased) = match self.check_tail(back, remembered)? {
            Ok(found) => found,
            Err(skipped) => return Ok(CreditBack::Skipped(skipped)),
        };
        if back.credit_owner().is_none() {
            // An allocator's tail: `take_back`'s.
            return Ok(CreditBack::Skipped(TailSkipped::FromClient));
        }
        if credits
            .iter()
            .any(|c| c.start <= tail.end && tail.start <= c.end)
        {
            return Ok(CreditBack::Skipped(TailSkipped::NotItsTail {
                remembered: leased.segment,
            }));
        }
        if credits.len() >= MAX_CREDITS {
            return Ok(CreditBack::Skipped(TailSkipped::CreditsFull));
        }
        Ok(CreditBack::Credited {
            credit: tail,
            remembered: Self::kept(leased, tail)?,
        })
    }

    /// The checks of a tail handed back, shared by [`TagRecord::take_back`]
    /// and [`TagRecord::credit_back`]: the tail, and the range remembered
    /// under its request ID, or why it stays a gap.
    #[allow(clippy::type_complexity)]
    fn check_tail(
        &self,
        back: &TailBack<'_>,
        remembered: Option<&Remembered>,
    ) -> Result<Result<(Allocation, Remembered), TailSkipped>, Error> {
        self.kind.check_lease(back.for_isolate)?;
        let tail = Allocation::new(back.tail.start, back.tail.end)?;
        // The same checks as the lease's (the kind, done above, is ignored
        // there for a step of its own).
        self.lease_segment(&back.as_lease(), None)?;
        let Some(leased) = remembered else {
            return Ok(Err(TailSkipped::NotRemembered));
        };
        let seg = leased.segment;
        if tail.end != seg.end || tail.start < seg.start {
            return Ok(Err(TailSkipped::NotItsTail { remembered: seg }));
        }
        Ok(Ok((tail, *leased)))
    }

    /// The range remembered under a lease once `tail` left it.
    fn kept(leased: Remembered, tail: Allocation) -> Result<RememberedChange, Error> {
        Ok(if tail.start == leased.segment.start {
            RememberedChange::Remove
        } else {
            RememberedChange::Shorten(Remembered {
                segment: Allocation::new(leased.segment.start, tail.start - 1)?,
                granted: leased.granted,
            })
        })
    }

    /// How to answer a tail handed back by the asker that leased it, given
    /// the range its store remembers under [`TailBack::remembered_as`]
    /// (`remembered`). The IDs return (the next lease answers them) only
    /// when nothing was handed out after them (`max_id == tail.end`, a
    /// conditional write) and the tail is the end of the range its asker
    /// leased under its own request ID (a capability only its holder has:
    /// no one else can hand back another's IDs, nor the same IDs twice).
    /// Monotonic tags never take IDs back: their IDs must keep increasing.
    /// Only the service's own allocators' tails (`for_isolate`: they persist
    /// their state before serving, so they know a tail unused) move
    /// `max_id` back; an outside client's stays skipped here
    /// ([`TailSkipped::FromClient`]) and is credited instead
    /// ([`TagRecord::credit_back`]).
    ///
    /// # Errors
    /// [`Error::MonotonicTag`] or [`Error::OpaqueTag`] as for a lease
    /// ([`TagRecord::lease_segment`]); [`Error::RequestIdNeedsKey`] from a
    /// caller without a credential of its own; [`Error::InvalidRequestId`]
    /// for a request ID outside 1..=[`MAX_REQUEST_ID_LEN`] bytes;
    /// [`Error::InvalidSegment`] for a malformed tail.
    pub fn take_back(
        &self,
        back: &TailBack<'_>,
        remembered: Option<&Remembered>,
        now_ms: u64,
    ) -> Result<TakeBack, Error> {
        let checked = self.check_tail(back, remembered)?;
        if back.credit_owner().is_some() {
            // An outside client cannot prove the tail unused: see
            // `credit_back`.
            return Ok(TakeBack::Skipped(TailSkipped::FromClient));
        }
        let (tail, leased) = match checked {
            Ok(found) => found,
            Err(skipped) => return Ok(TakeBack::Skipped(skipped)),
        };
        if self.max_id != tail.end {
            return Ok(TakeBack::Skipped(TailSkipped::Followed {
                max_id: self.max_id,
            }));
        }
        let record = TagRecord {
            max_id: tail.start - 1,
            update_time: now_ms,
            ..self.clone()
        };
        Ok(TakeBack::Returned {
            record,
            remembered: Self::kept(leased, tail)?,
        })
    }

    /// The same record with its largest step set (`None`, or Leaf's cap of
    /// 1,000,000, which is the same: unset).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] unless `step <= max_step <= 1,000,000`.
    pub fn with_max_step(mut self, max_step: Option<u64>) -> Result<Self, Error> {
        self.max_step = max_step.filter(|m| *m != MAX_STEP);
        self.validate()?;
        Ok(self)
    }

    /// The step granted to a caller that asks for `requested` (its dynamic
    /// step): never below the tag's configured step, never above its
    /// `max_step` (Leaf's cap when unset).
    pub fn grant_step(&self, requested: Option<u64>) -> u64 {
        requested.map_or(self.step, |s| {
            s.clamp(self.step, self.max_step.unwrap_or(MAX_STEP))
        })
    }

    /// The next segment of `step` IDs (the record's own step when `None`),
    /// and the record as it must be stored before the segment is handed out.
    /// The tag's last segment is shorter: the IDs left up to
    /// [`TagRecord::last_id`].
    ///
    /// # Errors
    /// [`Error::OutOfRange`] for a step outside 1..=1,000,000;
    /// [`Error::TagExhausted`] when no ID is left (`max_id` is
    /// [`TagRecord::last_id`]).
    pub fn allocate(
        &self,
        step: Option<u64>,
        now_ms: u64,
    ) -> Result<(Allocation, TagRecord), Error> {
        let step = check_range("step", step.unwrap_or(self.step), 1, MAX_STEP)?;
        if self.max_id >= self.last_id() {
            return Err(Error::TagExhausted {
                max_id: self.max_id,
                step,
            });
        }
        let end = self.max_id.saturating_add(step).min(self.last_id());
        let alloc = Allocation::new(self.max_id + 1, end)?;
        let next = TagRecord {
            max_id: end,
            update_time: now_ms,
            ..self.clone()
        };
        Ok((alloc, next))
    }

    /// The record with a new step and description, keeping `max_id`: an
    /// update may never move `max_id` back (that would reissue IDs). A higher
    /// `max_id` is accepted (skipping IDs is safe). `max_step` is kept when
    /// `None`, else set as by [`TagRecord::with_max_step`], against the new step.
    ///
    /// # Errors
    /// As [`TagRecord::new`]; [`Error::OutOfRange`] when `max_id` would go
    /// back or `max_step` would be below the step.
    pub fn update(
        &self,
        step: u64,
        max_id: Option<u64>,
        max_step: Option<u64>,
        description: &str,
        now_ms: u64,
    ) -> Result<TagRecord, Error> {
        let max_id = match max_id {
            Some(m) => check_range("max_id", m, self.max_id, self.last_id())?,
            None => self.max_id,
        };
        let next = TagRecord {
            biz_tag: self.biz_tag.clone(),
            max_id,
            step,
            description: description.into(),
            update_time: now_ms,
            kind: self.kind,
            max_step: max_step.or(self.max_step).filter(|m| *m != MAX_STEP),
        };
        next.validate()?;
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_advances_max_id_like_leaf() {
        let r = TagRecord::new("order", 2000, 1, "orders", 5).unwrap();
        let (a, r2) = r.allocate(None, 10).unwrap();
        assert_eq!((a.start, a.end, a.step), (2, 2001, 2000));
        assert_eq!((r2.max_id, r2.update_time), (2001, 10));
        let (b, r3) = r2.allocate(Some(10), 11).unwrap();
        assert_eq!((b.start, b.end), (2002, 2011));
        assert_eq!(r3.max_id, 2011);
    }

    #[test]
    fn allocation_stops_at_i64_max_with_a_shorter_last_segment() {
        let r = TagRecord::new("t", 10, MAX_SEGMENT_ID - 10, "", 0).unwrap();
        let (a, r2) = r.allocate(None, 0).unwrap();
        assert_eq!(a.end, MAX_SEGMENT_ID);
        assert_eq!(
            r2.allocate(Some(1), 0),
            Err(Error::TagExhausted {
                max_id: MAX_SEGMENT_ID,
                step: 1
            })
        );
        // Fewer IDs left than the step: the last segment has them all.
        let r = TagRecord::new("t", 10, MAX_SEGMENT_ID - 5, "", 0).unwrap();
        let (a, r2) = r.allocate(Some(1_000), 0).unwrap();
        assert_eq!(
            (a.start, a.end, a.step),
            (MAX_SEGMENT_ID - 4, MAX_SEGMENT_ID, 5)
        );
        assert_eq!(r2.max_id, MAX_SEGMENT_ID);
        assert!(matches!(
            r2.allocate(None, 0),
            Err(Error::TagExhausted { .. })
        ));
    }

    #[test]
    fn an_opaque_tag_ends_at_its_domain() {
        let d = OpaqueDomain::Bits(32);
        let r = TagRecord::new("o", 10, d.max_id() - 10, "", 0)
            .unwrap()
            .with_kind(TagKind::Opaque(d))
            .unwrap();
        let (a, r2) = r.allocate(None, 0).unwrap();
        assert_eq!(a.end, d.max_id());
        assert!(matches!(
            r2.allocate(Some(1), 0),
            Err(Error::TagExhausted { .. })
        ));
        // A step grown past the IDs left: the last segment, short.
        let near = TagRecord::new("o", 10, d.max_id() - 7, "", 0)
            .unwrap()
            .with_kind(TagKind::Opaque(d))
            .unwrap();
        let (a, _) = near.allocate(Some(20), 0).unwrap();
        assert_eq!((a.start, a.end, a.step), (d.max_id() - 6, d.max_id(), 7));
        assert!(TagRecord::new("o", 10, d.max_id() + 1, "", 0)
            .unwrap()
            .with_kind(TagKind::Opaque(d))
            .is_err());
    }

    #[test]
    fn records_are_validated() {
        assert!(TagRecord::new("bad tag", 10, 0, "", 0).is_err());
        assert!(TagRecord::new("t", 0, 0, "", 0).is_err());
        assert!(TagRecord::new("t", 1_000_001, 0, "", 0).is_err());
        assert!(TagRecord::new("t", 1, MAX_SEGMENT_ID + 1, "", 0).is_err());
        assert!(TagRecord::new("t", 1, 0, &"x".repeat(257), 0).is_err());
        let r = TagRecord::new("t", 10, 100, "", 0).unwrap();
        assert!(r.allocate(Some(0), 0).is_err());
        assert_eq!(r.grant_step(Some(1)), 10, "never below the tag's step");
        assert_eq!(r.grant_step(Some(5_000_000)), MAX_STEP);
        assert_eq!(r.grant_step(None), 10);
        let pinned = r.clone().with_max_step(Some(10)).unwrap();
        assert_eq!(
            pinned.grant_step(Some(5_000)),
            10,
            "never above the tag's max_step"
        );
        assert!(
            r.clone().with_max_step(Some(9)).is_err(),
            "max_step below the step"
        );
        assert!(r.clone().with_max_step(Some(MAX_STEP + 1)).is_err());
        assert!(
            r.update(10, Some(99), None, "", 1).is_err(),
            "max_id never goes back"
        );
        assert_eq!(r.update(20, Some(500), None, "d", 1).unwrap().max_id, 500);
    }

    #[test]
    fn a_tags_kind_is_fixed_when_it_is_created() {
        let d = OpaqueDomain::Bits(40);
        let ask = |monotonic, opaque| TagChange {
            monotonic,
            opaque,
            ..TagChange::default()
        };
        let plain = TagRecord::create("p", &ask(None, None), 100, 0).unwrap();
        let mono = TagRecord::create("m", &ask(Some(true), None), 100, 0).unwrap();
        let opaque = TagRecord::create("o", &ask(Some(false), Some(d)), 100, 0).unwrap();
        assert_eq!(
            (plain.kind, mono.kind, opaque.kind, plain.step),
            (TagKind::Plain, TagKind::Monotonic, TagKind::Opaque(d), 100)
        );
        assert_eq!(
            TagRecord::create("b", &ask(Some(true), Some(d)), 100, 0),
            Err(Error::OpaqueAndMonotonic)
        );
        // Naming the kind it has (or none) changes the rest.
        let same = mono.change(&ask(Some(true), None), 1).unwrap();
        assert_eq!((same.kind, same.update_time), (TagKind::Monotonic, 1));
        assert_eq!(
            opaque.change(&ask(None, Some(d)), 1).unwrap().kind,
            opaque.kind
        );
        assert_eq!(
            plain.change(&ask(Some(true), None), 1),
            Err(Error::MonotonicImmutable {
                fixed: false,
                found: true
            })
        );
        assert_eq!(
            opaque.change(&ask(Some(true), None), 1),
            Err(Error::MonotonicImmutable {
                fixed: false,
                found: true
            })
        );
        assert_eq!(
            mono.change(&ask(None, Some(d)), 1),
            Err(Error::OpaqueImmutable {
                fixed: None,
                found: d
            })
        );
        assert_eq!(
            opaque.change(&ask(None, Some(OpaqueDomain::Digits(9))), 1),
            Err(Error::OpaqueImmutable {
                fixed: Some(d),
                found: OpaqueDomain::Digits(9)
            })
        );
        assert_eq!(mono.kind.check_monotonic(), Ok(()));
        assert_eq!(plain.kind.check_monotonic(), Err(Error::NotMonotonic));
        assert_eq!(opaque.kind.check_opaque(), Ok(d));
        assert_eq!(mono.kind.check_opaque(), Err(Error::NotOpaque));
    }

    #[test]
    fn a_request_id_is_remembered_within_its_callers_own_names() {
        let ask = |caller, request_id| SegmentAsk {
            step: None,
            request_id,
            caller,
            for_isolate: false,
        };
        let key = |c, r| ask(Asker::Own(c), Some(r)).remembered_as();
        assert_eq!(key("a", "1"), key("a", "1"));
        assert_ne!(key("a", "1"), key("b", "1"));
        // No caller and request ID may be cut another way into the same key.
        assert_ne!(key("a:1", "2"), key("a", "1:2"));
        assert_eq!(ask(Asker::Own("a"), None).remembered_as(), None);
        // A caller without a credential of its own has no names: nothing
        // is remembered for it, and its request IDs are refused.
        assert_eq!(ask(Asker::Shared, Some("1")).remembered_as(), None);
        let plain = TagRecord::new("p", 100, 0, "", 0).unwrap();
        assert_eq!(
            plain.lease_segment(&ask(Asker::Shared, Some("1")), None),
            Err(Error::RequestIdNeedsKey)
        );
        assert_eq!(
            plain.lease_segment(&ask(Asker::Shared, None), None),
            Ok(SegmentAnswer::Allocate { step: 100 })
        );
    }

    #[test]
    fn a_conditional_change_goes_through_only_on_the_tag_its_writer_read() {
        let r = TagRecord::new("t", 10, 500, "", 0).unwrap();
        let when = |expected| TagChange {
            expected,
            ..TagChange::default()
        };
        assert_eq!(when(None).check_expected(Some(&r)), Ok(()));
        assert_eq!(when(None).check_expected(None), Ok(()));
        let absent = when(Some(TagExpected::Absent));
        assert_eq!(absent.check_expected(None), Ok(()));
        assert_eq!(
            absent.check_expected(Some(&r)),
            Err(Error::TagChanged {
                expected: None,
                found: Some(500)
            })
        );
        let at = |m| when(Some(TagExpected::MaxId(m)));
        assert_eq!(at(500).check_expected(Some(&r)), Ok(()));
        assert_eq!(
            at(0).check_expected(Some(&r)),
            Err(Error::TagChanged {
                expected: Some(0),
                found: Some(500)
            })
        );
        assert_eq!(
            at(0).check_expected(None),
            Err(Error::TagChanged {
                expected: Some(0),
                found: None
            })
        );
    }

    #[test]
    fn segments_go_out_by_kind_and_a_request_id_is_answered_once() {
        let plain = TagRecord::new("p", 100, 0, "", 0).unwrap();
        let mono = plain.clone().with_kind(TagKind::Monotonic).unwrap();
        let opaque = plain
            .clone()
            .with_kind(TagKind::Opaque(OpaqueDomain::Bits(40)))
            .unwrap();
        let ask = |step, request_id, for_isolate| SegmentAsk {
            step,
            request_id,
            caller: Asker::Own("a"),
            for_isolate,
        };
        let new = |step| Ok(SegmentAnswer::Allocate { step });
        assert_eq!(plain.lease_segment(&ask(None, None, false), None), new(100));
        assert_eq!(opaque.lease_segment(&ask(None, None, true), None), new(100));
        assert_eq!(
            opaque.lease_segment(&ask(None, None, false), None),
            Err(Error::OpaqueTag)
        );
        assert_eq!(
            mono.lease_segment(&ask(None, None, true), None),
            Err(Error::MonotonicTag)
        );
        // A request ID: new, then a retry of the same request (the step as
        // granted: 50 is granted 100), then another request under it.
        let first = Remembered {
            segment: Allocation::new(1, 100).unwrap(),
            granted: 100,
        };
        let id = Some("r-1");
        assert_eq!(
            plain.lease_segment(&ask(Some(5), id, false), None),
            new(100)
        );
        assert_eq!(
            plain.lease_segment(&ask(Some(50), id, false), Some(&first)),
            Ok(SegmentAnswer::Again(first.segment))
        );
        // The tag's last segment, shorter than its step: a retry is still
        // the same request.
        let short = Remembered {
            segment: Allocation::new(1, 30).unwrap(),
            granted: 100,
        };
        assert_eq!(
            plain.lease_segment(&ask(Some(100), id, false), Some(&short)),
            Ok(SegmentAnswer::Again(short.segment))
        );
        assert_eq!(
            plain.lease_segment(&ask(Some(500), id, false), Some(&first)),
            Err(Error::RequestIdReused {
                granted: 100,
                asked: 500
            })
        );
        let long = "x".repeat(MAX_REQUEST_ID_LEN + 1);
        for bad in ["", long.as_str()] {
            assert_eq!(
                plain.lease_segment(&ask(None, Some(bad), false), None),
                Err(Error::InvalidRequestId {
                    len: bad.len(),
                    max: MAX_REQUEST_ID_LEN
                })
            );
        }
        let longest = &long[1..];
        assert_eq!(
            plain.lease_segment(&ask(None, Some(longest), false), None),
            new(100)
        );
        // The kind is checked first: a monotonic tag's store never answers
        // a segment, not even one it remembers.
        assert_eq!(
            mono.lease_segment(&ask(None, id, false), Some(&first)),
            Err(Error::MonotonicTag)
        );
    }

    #[test]
    fn a_tail_comes_back_only_last_and_only_from_its_asker() {
        let r = TagRecord::new("t", 10, 100, "", 0).unwrap();
        let leased = Remembered {
            segment: Allocation::new(101, 200).unwrap(),
            granted: 100,
        };
        let (_, r) = r.allocate(Some(100), 1).unwrap();
        let back = |start, caller| TailBack {
            tail: Allocation::new(start, 200).unwrap(),
            request_id: "b-1",
            caller,
            for_isolate: true,
        };
        let mine = back(151, Asker::Own("a@weur"));
        assert_eq!(
            r.take_back(&mine, Some(&leased), 2),
            Ok(TakeBack::Returned {
                record: TagRecord {
                    max_id: 150,
                    update_time: 2,
                    ..r.clone()
                },
                remembered: RememberedChange::Shorten(Remembered {
                    segment: Allocation::new(101, 150).unwrap(),
                    granted: 100,
                }),
            })
        );
        assert_eq!(
            r.take_back(&back(101, Asker::Own("a@weur")), Some(&leased), 2)
                .map(|t| matches!(
                    t,
                    TakeBack::Returned {
                        remembered: RememberedChange::Remove,
                        ..
                    }
                )),
            Ok(true)
        );
        // Something followed: skipped.
        let (_, later) = r.allocate(Some(10), 3).unwrap();
        assert_eq!(
            later.take_back(&mine, Some(&leased), 4),
            Ok(TakeBack::Skipped(TailSkipped::Followed { max_id: 210 }))
        );
        // Nothing remembered for this caller, or not the end of its range.
        assert_eq!(
            r.take_back(&mine, None, 4),
            Ok(TakeBack::Skipped(TailSkipped::NotRemembered))
        );
        let shorter = Remembered {
            segment: Allocation::new(101, 150).unwrap(),
            granted: 100,
        };
        assert_eq!(
            r.take_back(&mine, Some(&shorter), 4),
            Ok(TakeBack::Skipped(TailSkipped::NotItsTail {
                remembered: shorter.segment
            }))
        );
        // Refused: a shared credential, a monotonic tag, an outside
        // caller's opaque tail.
        assert_eq!(
            r.take_back(&back(151, Asker::Shared), Some(&leased), 4),
            Err(Error::RequestIdNeedsKey)
        );
        let mono = r.clone().with_kind(TagKind::Monotonic).unwrap();
        assert_eq!(
            mono.take_back(&mine, Some(&leased), 4),
            Err(Error::MonotonicTag)
        );
        let opaque = r
            .clone()
            .with_kind(TagKind::Opaque(OpaqueDomain::Bits(40)))
            .unwrap();
        let outside = TailBack {
            for_isolate: false,
            ..mine
        };
        assert_eq!(
            opaque.take_back(&outside, Some(&leased), 4),
            Err(Error::OpaqueTag)
        );
        assert!(matches!(
            opaque.take_back(&mine, Some(&leased), 4),
            Ok(TakeBack::Returned { .. })
        ));
    }

    #[test]
    fn a_clients_tail_is_a_credit_of_its_own_asker_never_max_id_moved_back() {
        let r = TagRecord::new("t", 10, 0, "", 0).unwrap();
        let (range, r) = r.allocate(Some(100), 1).unwrap();
        let leased = Remembered {
            segment: range,
            granted: 100,
        };
        let mine = TailBack {
            tail: Allocation::new(28, 100).unwrap(),
            request_id: "job-1",
            caller: Asker::Own("lease:k1"),
            for_isolate: false,
        };
        // Never max_id back for a client, even with nothing after its tail.
        assert_eq!(
            r.take_back(&mine, Some(&leased), 2),
            Ok(TakeBack::Skipped(TailSkipped::FromClient))
        );
        let credit = Allocation::new(28, 100).unwrap();
        assert_eq!(
            r.credit_back(&mine, Some(&leased), &[]),
            Ok(CreditBack::Credited {
                credit,
                remembered: RememberedChange::Shorten(Remembered {
                    segment: Allocation::new(1, 27).unwrap(),
                    granted: 100,
                }),
            })
        );
        // An allocator's tail is `take_back`'s; full credits, an overlap, a
        // shared caller: no credit.
        let allocator = TailBack {
            for_isolate: true,
            ..mine
        };
        assert_eq!(
            r.credit_back(&allocator, Some(&leased), &[]),
            Ok(CreditBack::Skipped(TailSkipped::FromClient))
        );
        let full = [Allocation::new(500, 500).unwrap(); MAX_CREDITS];
        assert_eq!(
            r.credit_back(&mine, Some(&leased), &full),
            Ok(CreditBack::Skipped(TailSkipped::CreditsFull))
        );
        assert!(matches!(
            r.credit_back(&mine, Some(&leased), &[Allocation::new(90, 95).unwrap()]),
            Ok(CreditBack::Skipped(TailSkipped::NotItsTail { .. }))
        ));
        assert_eq!(
            r.credit_back(
                &TailBack {
                    caller: Asker::Shared,
                    ..mine
                },
                Some(&leased),
                &[]
            ),
            Err(Error::RequestIdNeedsKey)
        );
        // The same asker's next lease is answered from its lowest credit, at
        // most its step; the rest is kept. Another asker's is a new segment.
        let ask = |caller, step| SegmentAsk {
            step: Some(step),
            request_id: Some("job-2"),
            caller,
            for_isolate: false,
        };
        let credits = [Allocation::new(300, 400).unwrap(), credit];
        assert_eq!(
            r.lease_with_credits(&ask(Asker::Own("lease:k1"), 50), None, &credits, 0),
            Ok(CreditedAnswer::Credit {
                segment: Allocation::new(28, 77).unwrap(),
                granted: 50,
                taken: credit,
                rest: Some(Allocation::new(78, 100).unwrap()),
            })
        );
        assert_eq!(
            r.lease_with_credits(&ask(Asker::Own("lease:k1"), 100), None, &[credit], 0),
            Ok(CreditedAnswer::Credit {
                segment: credit,
                granted: 100,
                taken: credit,
                rest: None,
            })
        );
        assert_eq!(
            ask(Asker::Own("lease:k2"), 50).credit_owner(),
            Some("lease:k2")
        );
        assert_eq!(
            r.lease_with_credits(&ask(Asker::Own("lease:k2"), 50), None, &[], 0),
            Ok(CreditedAnswer::Segment(SegmentAnswer::Allocate {
                step: 50
            }))
        );
        // A retry is answered as first; an isolate never from credits.
        let first = Remembered {
            segment: Allocation::new(28, 77).unwrap(),
            granted: 50,
        };
        assert_eq!(
            r.lease_with_credits(&ask(Asker::Own("lease:k1"), 50), Some(&first), &credits, 0),
            Ok(CreditedAnswer::Segment(SegmentAnswer::Again(first.segment)))
        );
        // A client already holding IDs above a credit: the next one above.
        assert_eq!(
            r.lease_with_credits(&ask(Asker::Own("lease:k1"), 50), None, &credits, 200),
            Ok(CreditedAnswer::Credit {
                segment: Allocation::new(300, 349).unwrap(),
                granted: 50,
                taken: credits[0],
                rest: Some(Allocation::new(350, 400).unwrap()),
            })
        );
        assert_eq!(
            r.lease_with_credits(&ask(Asker::Own("lease:k1"), 50), None, &credits, 300),
            Ok(CreditedAnswer::Segment(SegmentAnswer::Allocate {
                step: 50
            }))
        );
        let isolate = SegmentAsk {
            for_isolate: true,
            ..ask(Asker::Own("lease:k1"), 50)
        };
        assert_eq!(isolate.credit_owner(), None);
        assert_eq!(
            r.lease_with_credits(&isolate, None, &credits, 0),
            Ok(CreditedAnswer::Segment(SegmentAnswer::Allocate {
                step: 50
            }))
        );
    }
}
