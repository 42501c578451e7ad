//! A tag's object (`TagStore`, one per `biz_tag`): its requests and
//! answers, and the bodies of the public tag and lease routes.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use edgeleaf::{
    code::ErrorCode, opaque::key_from_hex, opaque::OpaqueDomain, opaque::OpaqueIds,
    segment::Allocation, segment::MAX_STEP, tag::Asker, tag::TagExpected, tag::TagKind,
    tag::TagRecord,
};
use serde::{ser::Error as _, Deserialize, Serialize, Serializer};

use super::{decimal, WireError};
use crate::access::lease_asker;
use crate::history::{runway, AllocationEvent, Runway};

/// What a tag's object is asked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum TagRequest {
    /// Creates or updates the tag: answers its [`TagView`].
    Put(TagUpsert),
    /// The live tag: answers its [`TagView`].
    Get,
    /// Deletes the tag (its `max_id` is kept): answers its last [`TagView`].
    Delete,
    /// Its remembered allocations: answers [`TagHistory`].
    History,
    /// A segment: answers [`SegmentLease`].
    Allocate(AllocateRequest),
    /// An opaque ID's counter: answers [`Revealed`].
    Reveal {
        /// The ID as the client gave it.
        id: GivenId,
    },
    /// A monotonic tag's IDs, from the object itself: answers [`IdList`](super::api::IdList).
    Ids {
        /// How many.
        count: u64,
    },
    /// A leased range's unused tail, handed back by the asker that leased
    /// it (under the lease's request ID): answers [`TakenBack`].
    TakeBack(TakeBackRequest),
    /// Reports the tag's summary to the catalog now: answers
    /// [`Done`](super::catalog::Done). Sent by the tag's object to itself,
    /// from a timer a change starts, not from an alarm: an alarm stays in
    /// storage, and after a rollback it fires on the release before, whose
    /// `TagStore` has no alarm handler and panics (design.md, "Two releases
    /// at once"). New in 0.2; the release before refuses it.
    Report,
}

impl super::StoreRequest for TagRequest {
    fn repeatable(&self) -> bool {
        match self {
            // Reads; an allocation or monotonic IDs made again leave the
            // first answer's IDs unused (a gap, never an ID twice), and a
            // request ID's repeat answers the same range.
            TagRequest::Get
            | TagRequest::History
            | TagRequest::Reveal { .. }
            | TagRequest::Allocate(_)
            | TagRequest::Ids { .. }
            // A summary reported twice is kept once.
            | TagRequest::Report => true,
            // A conditional write run twice refuses itself; a delete run
            // twice answers not_found; a hand-back run twice finds its
            // range shortened already and takes nothing.
            TagRequest::Put(_) | TagRequest::Delete | TagRequest::TakeBack(_) => false,
        }
    }
}

/// A tag as the API shows it (IDs as decimal strings): `GET` and `PUT
/// /v1/tags/{tag}`, in this order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagView {
    /// The tag.
    pub biz_tag: String,
    /// The largest ID handed out in a segment, decimal.
    pub max_id: String,
    /// The configured step (the dynamic step's floor).
    pub step: u64,
    /// Free text.
    pub description: String,
    /// Last change, Unix ms.
    pub update_time: u64,
    /// IDs strictly increasing across every caller (served by the object).
    pub monotonic: bool,
    /// `{"bits": n}` or `{"digits": n}` for an opaque tag (its key never leaves the store).
    pub opaque: Option<OpaqueDomain>,
    /// The largest step granted (1,000,000 unless set).
    pub max_step: u64,
}

impl From<&TagRecord> for TagView {
    fn from(r: &TagRecord) -> Self {
        TagView {
            biz_tag: r.biz_tag.clone(),
            max_id: r.max_id.to_string(),
            step: r.step,
            description: r.description.clone(),
            update_time: r.update_time,
            monotonic: r.kind.is_monotonic(),
            opaque: r.kind.opaque(),
            max_step: r.max_step.unwrap_or(MAX_STEP),
        }
    }
}

/// Create, or update step/description (and raise max_id): the Worker's
/// [`TagPut`] with the tag's name and the service's default step.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TagUpsert {
    /// The tag (the route's `{tag}`).
    pub biz_tag: String,
    /// The configured step.
    pub step: Option<u64>,
    /// A decimal string: the max ID to raise to.
    pub max_id: Option<String>,
    /// Free text.
    pub description: Option<String>,
    /// At creation only.
    pub monotonic: Option<bool>,
    /// At creation only; checked by the core.
    pub opaque: Option<OpaqueDomain>,
    /// The largest step granted.
    pub max_step: Option<u64>,
    /// The step of a tag created without one (`DEFAULT_STEP`).
    pub default_step: u64,
    /// Conditional: what the writer read of the tag (`expectMaxId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
}

/// What a conditional `PUT` read of its tag (`expectMaxId`): the core's
/// [`TagExpected`], on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Expect {
    /// No live tag (`"expectMaxId": null`).
    Absent,
    /// A live tag at this `max_id` (`"expectMaxId": "<decimal>"`).
    MaxId(u64),
}

impl From<Expect> for TagExpected {
    fn from(e: Expect) -> Self {
        match e {
            Expect::Absent => TagExpected::Absent,
            Expect::MaxId(m) => TagExpected::MaxId(m),
        }
    }
}

/// `PUT /v1/tags/{tag}`'s body.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TagPut {
    /// The configured step.
    pub step: Option<u64>,
    /// A decimal string (or a whole number below 2^53).
    pub max_id: Option<serde_json::Value>,
    /// Free text.
    pub description: Option<String>,
    /// At creation.
    pub monotonic: Option<bool>,
    /// `{"bits": 32..=63}` or `{"digits": 6..=18}`, at creation.
    pub opaque: Option<OpaqueDomain>,
    /// The largest step granted: `step..=1,000,000`.
    pub max_step: Option<u64>,
    /// Only if the tag is as the writer read it: `null` (no live tag) or its
    /// `maxId`, a decimal string (or a whole number below 2^53); else 409
    /// `tag_changed`. Absent: unconditional.
    #[serde(default, deserialize_with = "present")]
    pub expect_max_id: Option<serde_json::Value>,
}

/// A field that may be `null`: present (even as `null`) is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

impl TagPut {
    /// The tag object's request for `biz_tag`: `maxId` as a decimal string
    /// (a whole number becomes one; anything else is `out_of_range`), and
    /// the opaque domain checked by the core.
    pub fn upsert(self, biz_tag: String, default_step: u64) -> Result<TagUpsert, WireError> {
        let max_id = match self.max_id {
            None => None,
            Some(serde_json::Value::String(s)) => Some(s),
            Some(serde_json::Value::Number(n)) if n.is_u64() => Some(n.to_string()),
            Some(other) => {
                return Err(WireError::Invalid(
                    ErrorCode::OutOfRange,
                    format!("maxId: expected a decimal string, found {other}"),
                ));
            }
        };
        let bad = |found: &dyn core::fmt::Display| {
            WireError::Invalid(
                ErrorCode::OutOfRange,
                format!("expectMaxId: expected null or a decimal string, found {found}"),
            )
        };
        let expect = match self.expect_max_id {
            None => None,
            Some(serde_json::Value::Null) => Some(Expect::Absent),
            Some(serde_json::Value::String(s)) => {
                let digits = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                match s.parse::<u64>() {
                    Ok(m) if digits => Some(Expect::MaxId(m)),
                    _ => return Err(bad(&format_args!("{s:?}"))),
                }
            }
            Some(serde_json::Value::Number(n)) if n.is_u64() => n.as_u64().map(Expect::MaxId),
            Some(other) => return Err(bad(&other)),
        };
        Ok(TagUpsert {
            biz_tag,
            step: self.step,
            max_id,
            description: self.description,
            monotonic: self.monotonic,
            opaque: self.opaque.map(OpaqueDomain::validate).transpose()?,
            max_step: self.max_step,
            default_step,
            expect,
        })
    }
}

/// `GET /v1/tags`: the tags the caller may see, each with its fields in
/// alphabetical order (as this answer has always given them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct TagViews {
    /// The tags, by name.
    #[serde(serialize_with = "alphabetical")]
    pub tags: Vec<TagView>,
    /// Tags of the catalog whose object did not answer within the request's
    /// budget: listed by name, so a partial answer says it is partial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
    /// The cursor of the next page (`?cursor=`), if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// How many tags every page together lists (the caller's, matching `q`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// `DELETE /v1/tags/{tag}`'s answer: the tag as it was, its fields in
/// alphabetical order (as this answer has always given them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Deleted {
    /// The deleted tag.
    #[serde(serialize_with = "alphabetical")]
    pub deleted: TagView,
}

/// Writes `value` with every object's fields in alphabetical order (through
/// a JSON map, which keeps its keys sorted).
fn alphabetical<T: Serialize, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(value)
        .map_err(S::Error::custom)?
        .serialize(s)
}

/// `POST /v1/segment/{tag}/lease`: what an outside client may ask.
#[derive(Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseBody {
    /// The step wanted (never below the tag's).
    pub step: Option<u64>,
    /// Asked again under the same ID, the same segment (only with a
    /// credential of the caller's own: an API key).
    pub request_id: Option<String>,
    /// The highest ID the client already holds, decimal: the key's credits
    /// at or below it are left for another of its clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// A segment, for a client's lease or one of the service's isolates.
#[derive(Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocateRequest {
    /// The step wanted.
    pub step: Option<u64>,
    /// A client's request ID.
    pub request_id: Option<String>,
    /// For one of the service's own isolates: an opaque tag's key comes
    /// with the segment. Never set from a client's body.
    #[serde(default)]
    pub for_isolate: bool,
    /// Who asked, for the history: `isolate:<id>` or `lease:<key or token>`.
    #[serde(default)]
    pub by: String,
    /// `by` is a credential of the caller's own (an API key), whose request
    /// IDs are its own ([`lease_asker`]); otherwise it may send none.
    #[serde(default, skip_serializing_if = "is_false")]
    pub own_credential: bool,
    /// A client's [`LeaseBody::after`], decimal (checked by the tag's store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_false(b: &bool) -> bool {
    !*b
}

impl AllocateRequest {
    /// A client's lease, by `owner` (the credential asking): never for an
    /// isolate.
    pub fn for_client(body: LeaseBody, owner: &str) -> Self {
        AllocateRequest {
            step: body.step,
            request_id: body.request_id,
            for_isolate: false,
            by: format!("lease:{owner}"),
            own_credential: matches!(lease_asker(owner), Asker::Own(_)),
            after: body.after,
        }
    }

    /// Who asks, as the core's rule of request IDs sees it.
    pub fn asker(&self) -> Asker<'_> {
        if self.own_credential {
            Asker::Own(&self.by)
        } else {
            Asker::Shared
        }
    }
}

/// A tail handed back to the root ([`TagRequest::TakeBack`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TakeBackRequest {
    /// The request ID the range was leased under.
    pub request_id: String,
    /// Who leased it (the lease's `by`: its own credential).
    pub by: String,
    /// First ID of the unused tail, decimal.
    pub start: String,
    /// Last ID of the tail (the leased range's end), decimal.
    pub end: String,
    /// Who leased it: one of the service's allocators (the default), or an
    /// outside client ([`TakeBackRequest::for_client`]).
    #[serde(default, skip_serializing_if = "Returner::is_allocator")]
    pub from: Returner,
}

/// Who hands a tail back ([`TakeBackRequest::from`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Returner {
    /// One of the service's regional allocators: its blocks were leased for
    /// an isolate, under its own name.
    #[default]
    Allocator,
    /// An outside client (`POST /v1/segment/{tag}/lease/return`): its range
    /// was leased by `lease:<owner>`, a credential of its own only with an
    /// API key (as [`AllocateRequest::own_credential`]).
    Client {
        /// `by` is a credential of the caller's own ([`lease_asker`]).
        own_credential: bool,
    },
}

impl Returner {
    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
    fn is_allocator(&self) -> bool {
        *self == Returner::Allocator
    }
}

impl TakeBackRequest {
    /// A client's tail, by `owner` (the credential asking), named as its
    /// lease was ([`AllocateRequest::for_client`]): only the same API key
    /// finds the range remembered under its request ID.
    pub fn for_client(body: ReturnBody, owner: &str) -> Self {
        TakeBackRequest {
            request_id: body.request_id,
            by: format!("lease:{owner}"),
            start: body.start,
            end: body.end,
            from: Returner::Client {
                own_credential: matches!(lease_asker(owner), Asker::Own(_)),
            },
        }
    }

    /// Who hands it back, as the core's rule of request IDs sees it.
    pub fn asker(&self) -> Asker<'_> {
        match self.from {
            Returner::Allocator
            | Returner::Client {
                own_credential: true,
            } => Asker::Own(&self.by),
            Returner::Client {
                own_credential: false,
            } => Asker::Shared,
        }
    }

    /// Whether the range was leased for one of the service's isolates (an
    /// allocator's block) rather than by an outside client.
    pub fn for_isolate(&self) -> bool {
        self.from == Returner::Allocator
    }
}

/// `POST /v1/segment/{tag}/lease/return`: the unused tail of a range the
/// caller leased under `requestId` (decimal bounds, as the lease answered).
#[derive(Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReturnBody {
    /// The request ID the range was leased under.
    pub request_id: String,
    /// The first unused ID, decimal.
    pub start: String,
    /// The leased range's last ID, decimal.
    pub end: String,
}

/// `POST /v1/segment/{tag}/lease/return`'s answer: whether the tail was
/// credited to the caller's key (its next lease answers those IDs first; no
/// other key ever gets them) or stays a gap. The tag's `max_id`
/// is not shown (a view of the tag needs the `monitor` scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TailReturned {
    /// Credited to the caller's own key.
    pub taken: bool,
}

impl From<TakenBack> for TailReturned {
    fn from(t: TakenBack) -> Self {
        TailReturned { taken: t.taken }
    }
}

/// What the root did with a tail handed back.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TakenBack {
    /// An allocator's tail: `max_id` moved back to `start - 1` (nothing was
    /// handed out after it). A client's: credited to its own key (`max_id`
    /// unchanged). `false`: the tail stays a gap.
    pub taken: bool,
    /// Not taken, and provably never taken (`TakeBack::proves_untaken`).
    /// Never for a client. Alone it is not enough to serve the tail again:
    /// the release 0.1.0's root says it without `closed`.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub untaken: bool,
    /// With `untaken`: the root also closed the tail (`TakeBack::Closed`:
    /// the range remembered under its request ID now ends before it, written
    /// with this answer), so no later copy of the hand-back can be taken.
    /// Only then may the allocator serve it again (`BlockAllocator::keep`);
    /// a root of 0.1.0 never sets it, and its refusals leave the tail a gap.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub closed: bool,
    /// The tag's `max_id` after it, decimal.
    pub max_id: String,
}

/// An opaque tag's permutation, for the service's own isolates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpaqueGrant {
    /// The IDs' domain.
    pub domain: OpaqueDomain,
    /// The key, hex.
    pub key: String,
}

impl OpaqueGrant {
    /// The core's permutation.
    pub fn ids(&self) -> Result<OpaqueIds, WireError> {
        let key = key_from_hex(&self.key).ok_or_else(|| {
            WireError::Unreadable("store: opaque key is not 32 hex digits".into())
        })?;
        OpaqueIds::new(self.domain, &key)
            .map_err(|e| WireError::Unreadable(format!("store: opaque key: {e}")))
    }
}

/// A segment as the tag's object answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentLease {
    /// First ID, decimal.
    pub start: String,
    /// Last ID (inclusive), decimal.
    pub end: String,
    /// The step granted.
    pub step: u64,
    /// The tag's configured step: the floor of the dynamic step.
    pub min_step: u64,
    /// Only to the service's own isolates, for opaque tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<OpaqueGrant>,
}

impl SegmentLease {
    /// The core's checked range.
    pub fn allocation(&self) -> Result<Allocation, WireError> {
        let start = decimal("store: segment bound", &self.start)?;
        let end = decimal("store: segment bound", &self.end)?;
        Ok(Allocation::new(start, end)?)
    }
}

/// `POST /v1/segment/{tag}/lease`'s answer (fields in alphabetical order):
/// a segment without anything meant for the service's isolates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeasedSegment {
    /// Last ID (inclusive), decimal.
    pub end: String,
    /// The tag's configured step.
    pub min_step: u64,
    /// First ID, decimal.
    pub start: String,
    /// The step granted.
    pub step: u64,
}

impl From<SegmentLease> for LeasedSegment {
    fn from(s: SegmentLease) -> Self {
        LeasedSegment {
            end: s.end,
            min_step: s.min_step,
            start: s.start,
            step: s.step,
        }
    }
}

/// One remembered allocation, as [`TagRequest::History`] answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEvent {
    /// When, Unix ms.
    pub at_ms: u64,
    /// First ID, decimal.
    pub start: String,
    /// Last ID, decimal.
    pub end: String,
    /// Who asked: `isolate:<id>`, `lease:<owner>` or `store`.
    pub by: String,
}

/// The tag, its allocations so far, and the remembered ones
/// (oldest first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagHistory {
    /// The tag.
    pub tag: TagView,
    /// Every allocation ever made.
    pub allocations: u64,
    /// The remembered ones, oldest first.
    pub events: Vec<HistoryEvent>,
}

impl TagHistory {
    /// The remembered allocations as the history rules read them.
    pub fn allocation_events(&self) -> Result<Vec<AllocationEvent>, WireError> {
        let bound = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| WireError::Unreadable(format!("history: bound {s:?}")))
        };
        self.events
            .iter()
            .map(|e| {
                Ok(AllocationEvent {
                    at_ms: e.at_ms,
                    start: bound(&e.start)?,
                    end: bound(&e.end)?,
                })
            })
            .collect()
    }

    /// The last ID the tag may reach: where allocation stops
    /// ([`TagKind::last_id`]), whatever the service's layout.
    pub fn domain_max(&self) -> u64 {
        // A view never names both kinds; monotonic ends where plain does.
        self.tag
            .opaque
            .map_or(TagKind::Plain, TagKind::Opaque)
            .last_id()
    }

    /// The tag's runway at `now_ms`: its remembered rate, and the IDs left
    /// from `max_id` to [`TagHistory::domain_max`].
    ///
    /// # Errors
    /// [`WireError::Unreadable`] for a `max_id` or bound that is not a number.
    pub fn runway(&self, now_ms: u64) -> Result<Runway, WireError> {
        let max_id =
            self.tag.max_id.parse().map_err(|_| {
                WireError::Unreadable(format!("history: max_id {:?}", self.tag.max_id))
            })?;
        Ok(runway(
            &self.allocation_events()?,
            max_id,
            self.domain_max(),
            now_ms,
        ))
    }
}

/// An ID to reveal as the client gave it: a decimal string or a whole
/// number, or else what it gave (as JSON, for the error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GivenId {
    /// An ID.
    Id(u64),
    /// Not one: the JSON the client gave.
    Not(String),
}

impl GivenId {
    /// A decimal string (or a number below 2^53) is an ID.
    pub fn from_json(id: &serde_json::Value) -> Self {
        let parsed = match id {
            serde_json::Value::String(s)
                if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) =>
            {
                s.parse::<u64>().ok()
            }
            serde_json::Value::Number(n) => n.as_u64(),
            _ => None,
        };
        parsed.map_or_else(|| GivenId::Not(id.to_string()), GivenId::Id)
    }
}

/// `POST /v1/tags/{tag}/reveal`'s body.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RevealBody {
    /// A decimal string (or a number below 2^53).
    pub id: serde_json::Value,
}

/// `POST /v1/tags/{tag}/reveal`'s answer. (Fields in alphabetical order: the
/// order the API has always answered them in.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revealed {
    /// The tag handed the ID out (its counter is at most the tag's `max_id`).
    pub belongs: bool,
    /// The ID's counter, decimal; `null` if the ID is outside the domain.
    pub counter: Option<String>,
    /// The ID, decimal.
    pub id: String,
}
