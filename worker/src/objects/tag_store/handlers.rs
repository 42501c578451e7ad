//! A tag's object's answers, one per `TagRequest`: the core decides, the
//! handler reads and writes.

use edgeleaf::{
    code::ErrorCode, driver::FillError, driver::IssuedMark, driver::MonotonicIssuer,
    segment::Allocation, segment::StepPolicy, segment::MAX_SEGMENT_ID, tag::LeaseSource,
    tag::SegmentAsk, tag::TagChange, tag::TagRecord, tag::TailBack,
};
use edgeleaf_rules::wire::{
    api::IdList, tag::AllocateRequest, tag::GivenId, tag::HistoryEvent, tag::OpaqueGrant,
    tag::Revealed, tag::SegmentLease, tag::TagHistory, tag::TagUpsert, tag::TakeBackRequest,
    tag::TakenBack,
};
use worker::Response;

use crate::api::{checked_count, json, ApiError, ApiResult};
use crate::clock::now_ms;
use crate::objects::sql::stored_u64;

use super::schema::{HistoryRow, Stored};
use super::TagStore;

impl TagStore {
    pub(super) fn upsert(&self, req: TagUpsert) -> ApiResult<Response> {
        let now = now_ms();
        let max_id = req
            .max_id
            .as_deref()
            .map(|m| {
                m.parse::<u64>().map_err(|_| {
                    ApiError::new(
                        ErrorCode::OutOfRange,
                        format!(
                            "maxId: expected a decimal string in 0..={MAX_SEGMENT_ID}, found {m:?}"
                        ),
                    )
                })
            })
            .transpose()?;
        let change = TagChange {
            step: req.step,
            max_id,
            max_step: req.max_step,
            description: req.description.as_deref(),
            monotonic: req.monotonic,
            opaque: req.opaque,
            expected: req.expect.map(Into::into),
        };
        let existing = self.load()?;
        // A conditional change (an import's plan) goes through only on the
        // tag as its writer read it.
        change.check_expected(existing.as_ref().filter(|s| !s.deleted).map(|s| &s.record))?;
        let (record, created) = match &existing {
            // A deleted tag keeps its max_id (and its kind): re-creating it
            // continues after every ID it ever handed out.
            Some(s) => (s.record.change(&change, now)?, s.deleted),
            None => (
                TagRecord::create(&req.biz_tag, &change, req.default_step, now)?,
                true,
            ),
        };
        // The tables, once the change is known to be valid: a refused PUT
        // of a new name writes nothing either.
        self.tables(true)?;
        let mut opaque_key = existing.and_then(|s| s.opaque_key);
        if let (Some(d), None) = (record.kind.opaque(), &opaque_key) {
            opaque_key = Some(self.save_opaque(d)?);
        }
        self.save(&record, false)?;
        let stored = Stored {
            record,
            deleted: false,
            opaque_key,
        };
        json(if created { 201 } else { 200 }, &Self::view(&stored))
    }

    pub(super) fn allocate(
        &self,
        stored: &Stored,
        step: Option<u64>,
        by: &str,
    ) -> ApiResult<(Allocation, TagRecord)> {
        let step = stored.record.grant_step(step);
        let now = now_ms();
        let (alloc, next) = stored.record.allocate(Some(step), now)?;
        self.save(&next, false)?;
        self.remember(&alloc, now, by)?;
        Ok((alloc, next))
    }

    pub(super) fn history(&self) -> ApiResult<Response> {
        json(200, &self.read_history()?)
    }

    /// The live tag and its remembered allocations.
    pub(super) fn read_history(&self) -> ApiResult<TagHistory> {
        let stored = self.live()?;
        let rows: Vec<HistoryRow> = self
            .sql
            .exec(
                "SELECT seq, at, start, end, by FROM history ORDER BY seq",
                None,
            )?
            .to_array()?;
        let allocations = match rows.last() {
            Some(r) => stored_u64("history seq", r.seq)?,
            None => 0,
        };
        let events = rows
            .into_iter()
            .map(|r| {
                Ok(HistoryEvent {
                    at_ms: stored_u64("history at", r.at)?,
                    start: r.start,
                    end: r.end,
                    by: r.by,
                })
            })
            .collect::<ApiResult<Vec<_>>>()?;
        Ok(TagHistory {
            tag: Self::view(&stored),
            allocations,
            events,
        })
    }

    pub(super) fn lease(&self, req: AllocateRequest) -> ApiResult<Response> {
        let stored = self.live()?;
        let ask = SegmentAsk {
            step: req.step,
            request_id: req.request_id.as_deref(),
            caller: req.asker(),
            for_isolate: req.for_isolate,
        };
        let remembered = match ask.remembered_as() {
            Some(key) => self.remembered(&key)?,
            None => None,
        };
        let credits = match ask.credit_owner() {
            Some(owner) => self.credits(owner)?,
            None => Vec::new(),
        };
        let above = match req.after.as_deref() {
            None => 0,
            Some(a) => a.parse::<u64>().map_err(|_| {
                ApiError::new(
                    ErrorCode::OutOfRange,
                    format!(
                        "after: expected a decimal string in 0..=18446744073709551615, found {a:?}"
                    ),
                )
            })?,
        };
        // The core decides (the tag's kind, the request ID, the asker's
        // credits); this store writes its plan, in this one turn.
        let plan = stored
            .record
            .plan_lease(&ask, remembered.as_ref(), &credits, above)?;
        let alloc = match plan.source {
            LeaseSource::Again(alloc) => alloc,
            LeaseSource::Allocate { step } => self.allocate(&stored, Some(step), &req.by)?.0,
            LeaseSource::Credit {
                segment,
                taken,
                rest,
                ..
            } => {
                self.drop_credit(taken.owner, &taken.range)?;
                if let Some(rest) = rest {
                    self.add_credit(rest.owner, &rest.range)?;
                }
                self.remember(&segment, now_ms(), &req.by)?;
                segment
            }
        };
        if let Some((key, r)) = plan.remembered(alloc) {
            self.remember_lease(&ask, key, &r.segment, r.granted)?;
        }
        // Only an opaque tag's isolates get here with it: its key goes along.
        let opaque = match (&stored.opaque_key, stored.record.kind.opaque()) {
            (Some(key), Some(domain)) => Some(OpaqueGrant {
                domain,
                key: key.clone(),
            }),
            _ => None,
        };
        json(
            200,
            &SegmentLease {
                start: alloc.start.to_string(),
                end: alloc.end.to_string(),
                step: alloc.step,
                min_step: stored.record.step,
                opaque,
            },
        )
    }

    /// A leased range's unused tail, handed back by its asker: the core
    /// decides (`TagRecord::plan_tail`) — an allocator's returns, an
    /// outside client's becomes its own credit. The record, credits and
    /// remembered range change in one synchronous turn (one write).
    pub(super) fn take_back(&self, req: &TakeBackRequest) -> ApiResult<Response> {
        let stored = self.live()?;
        let bound = |s: &str| {
            s.parse::<u64>().map_err(|_| {
                ApiError::new(
                    ErrorCode::OutOfRange,
                    format!("take back: expected a decimal bound, found {s:?}"),
                )
            })
        };
        let tail = Allocation::new(bound(&req.start)?, bound(&req.end)?)?;
        let back = TailBack {
            tail,
            request_id: &req.request_id,
            caller: req.asker(),
            for_isolate: req.for_isolate(),
        };
        let remembered = match back.remembered_as() {
            Some(k) => self.remembered(&k)?,
            None => None,
        };
        let credits = match back.credit_owner() {
            Some(owner) => self.credits(owner)?,
            None => Vec::new(),
        };
        let plan = stored
            .record
            .plan_tail(&back, remembered.as_ref(), &credits, now_ms())?;
        if let Some(record) = &plan.record {
            self.save(record, false)?;
        }
        if let Some(credit) = &plan.credit {
            self.add_credit(credit.owner, &credit.range)?;
        }
        if let Some((k, change)) = &plan.remembered {
            self.change_remembered(k, *change)?;
        }
        // A refusal with proof closes the tail (written just above): the
        // proof only with that write.
        json(
            200,
            &TakenBack {
                taken: plan.taken,
                untaken: plan.closed,
                closed: plan.closed,
                max_id: plan.max_id.to_string(),
            },
        )
    }

    /// An opaque ID's counter, and whether the tag handed it out.
    pub(super) fn reveal(&self, id: &GivenId) -> ApiResult<Response> {
        let stored = self.live()?;
        let domain = stored.record.kind.check_opaque()?;
        let Some(key) = &stored.opaque_key else {
            return Err(ApiError::store_error(
                "store: an opaque tag without its key",
            ));
        };
        let id = match id {
            GivenId::Id(id) => *id,
            GivenId::Not(given) => {
                return Err(ApiError::new(
                    ErrorCode::InvalidId,
                    format!(
                        "id: expected a decimal string in 1..={}, found {given}",
                        domain.max_id()
                    ),
                ));
            }
        };
        let ids = OpaqueGrant {
            domain,
            key: key.clone(),
        }
        .ids()?;
        let counter = ids.decode(id).ok();
        let belongs = counter.is_some_and(|c| c <= stored.record.max_id);
        json(
            200,
            &Revealed {
                belongs,
                counter: counter.map(|c| c.to_string()),
                id: id.to_string(),
            },
        )
    }

    /// Monotonic tags: IDs from this object alone, so each is greater than
    /// every one issued before, whoever asked. Each answer writes its last
    /// ID before it leaves.
    pub(super) fn ids(&self, count: u64) -> ApiResult<Response> {
        let count = checked_count(count)?;
        let stored = self.live()?;
        stored.record.kind.check_monotonic()?;
        let read = IssuedMark {
            max_id: stored.record.max_id,
            issued: self.issued()?,
        };
        let mut cell = self.issuer.borrow_mut();
        let issuer = match cell.as_mut() {
            Some(i) => i,
            None => cell.insert(MonotonicIssuer::new(StepPolicy::new(stored.record.step)?)),
        };
        issuer.begin(read);
        let mut out = vec![0u64; count];
        let mut record = stored;
        let filled = issuer.fill(now_ms(), &mut out, |step| {
            let (alloc, next) = self.allocate(&record, Some(step), "store")?;
            record.record = next;
            Ok(alloc)
        });
        let mark = filled.map_err(|e| match e {
            FillError::Load(e) => e,
            FillError::InFlight => ApiError::new(
                ErrorCode::StoreError,
                "monotonic tag: a load marked in flight in a synchronous store",
            ),
        })?;
        if let Err(e) = self.write_issued(issuer.expected(), mark) {
            issuer.write_failed();
            return Err(e);
        }
        issuer.written(mark);
        json(200, &IdList::of(&out))
    }
}
