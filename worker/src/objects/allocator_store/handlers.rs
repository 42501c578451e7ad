//! A regional allocator's answers: a range served, a block leased from the
//! root, its view, its retirement.

use std::rc::Rc;

use edgeleaf::{
    block::BlockAsk, block::BlockLoad, block::HandBack, block::Serve, block::TailAnswer,
    code::ErrorCode, region::Region, wait::RETRY_AFTER_MS,
};
use edgeleaf_rules::wire::{
    allocator::AllocatorView, allocator::BlockView, tag::AllocateRequest, tag::SegmentLease,
    tag::TakeBackRequest,
};
use futures::channel::oneshot;
use futures::future::{self, Either, FutureExt};

use crate::api::{ApiError, ApiResult};
use crate::clock::{now_ms, sleep_ms};
use crate::objects::tag_store::stubs as tag_store;
use crate::scope;

use super::schema::Held;
use super::{Crypto, Inner, RETIRE_MIN_WAIT_MS};

impl Inner {
    /// Its view, without writing anything (an allocator never used stays
    /// empty).
    pub(super) fn peek(&self, tag: &str, region: Region) -> ApiResult<AllocatorView> {
        if let Some(h) = self.held.borrow().as_ref() {
            return Ok(Self::view_of(h));
        }
        Ok(Self::view_of(&self.read(tag, region)?))
    }

    /// A range for an isolate: the core's answer, written, then answered;
    /// a block ask it makes is sent in the background, and a serve without
    /// a range waits for the ask's answer within the caller's limit (woken
    /// by it, never polling), then answers a 503 `store_unavailable` itself
    /// (the root is what is late: the isolate does not ask it too).
    pub(super) async fn serve_range(
        self: &Rc<Self>,
        tag: &str,
        region: Region,
        step: u64,
    ) -> ApiResult<SegmentLease> {
        let budget = scope::budget();
        let late = || {
            ApiError::unavailable(
                ErrorCode::StoreUnavailable,
                format!("allocator {tag}@{region}: expected a block from the tag's root within the caller's limit, found none"),
                RETRY_AFTER_MS,
            )
        };
        loop {
            let (next, grant, tag_step) = self.update(tag, region, |h| {
                let next = h.allocator.serve(step, now_ms(), &mut Crypto);
                // Written when the core says: a range past the reservation
                // the stored state holds, or with an ask (an allocator's
                // first ask once the root said the tag is one:
                // `lease_block`); a range within it is answered from memory
                // (the output gate still holds it until the write that
                // reserved it is durable, if that one is in flight).
                let changed = h.allocator.persist_first(&next);
                if matches!(next, Serve::Range { .. }) {
                    h.served += 1;
                }
                Ok(((next, h.grant.clone(), h.allocator.tag_step()), changed))
            })?;
            let ask = match next {
                Serve::Range { range, ask, .. } => {
                    if let Some(ask) = ask {
                        // The next block, while this range is answered.
                        self.send_ask(ask);
                    }
                    return Ok(SegmentLease {
                        start: range.start.to_string(),
                        end: range.end.to_string(),
                        step: range.step,
                        min_step: tag_step.unwrap_or(1),
                        opaque: grant,
                    });
                }
                Serve::Load(ask) => Some(ask),
                Serve::Wait => None,
            };
            // In line before the ask is sent (it runs once this one awaits).
            let woken = self.waiter();
            if let Some(ask) = ask {
                self.send_ask(ask);
            }
            let left = budget.remaining_ms();
            if left == 0 {
                // No time to wait within the caller's limit (a range it
                // holds is answered whatever the limit, above).
                return Err(late());
            }
            match future::select(woken, sleep_ms(left).boxed_local()).await {
                // Answered (or its sender gone): serve again.
                Either::Left((Ok(None) | Err(_), _)) => {}
                Either::Left((Ok(Some(e)), _)) => return Err(e),
                Either::Right(_) => return Err(late()),
            }
        }
    }

    /// A serve's place in line for the answer of the ask in flight.
    fn waiter(&self) -> oneshot::Receiver<Option<ApiError>> {
        let (tx, rx) = oneshot::channel();
        let mut waiters = self.waiters.borrow_mut();
        // Those whose serve answered already (its caller's limit) leave.
        waiters.retain(|w| !w.is_canceled());
        waiters.push(tx);
        rx
    }

    /// Sends `ask` in the background (the object's own budget, whoever
    /// asked gives up sooner), then wakes the serves waiting for it.
    fn send_ask(self: &Rc<Self>, ask: BlockAsk) {
        let this = Rc::clone(self);
        let load = async move {
            let answer = this.lease_block(&ask).await;
            let waiting = std::mem::take(&mut *this.waiters.borrow_mut());
            for w in waiting {
                let _ = w.send(answer.as_ref().err().cloned());
            }
        };
        wasm_bindgen_futures::spawn_local(scope::background().run(load));
    }

    /// Sends the block ask to the root and reports its answer to the core
    /// (writing the state): the root's error is the answer.
    async fn lease_block(&self, ask: &BlockAsk) -> ApiResult<()> {
        let (tag, region) = {
            let cell = self.held.borrow();
            let held = cell
                .as_ref()
                .ok_or_else(|| ApiError::store_error("allocator: no state"))?;
            (held.tag.clone(), held.region)
        };
        // Its first block's ask is sent unwritten (one call to the root, not
        // two, so that a far region's first ID fits the caller's limit; and
        // a made-up name costs no write): nothing was handed on, so a
        // replacement that asks anew only leaves that block a gap.
        let request = AllocateRequest {
            step: ask.step,
            request_id: Some(ask.request_id.clone()),
            for_isolate: true,
            by: format!("allocator:{region}"),
            own_credential: true,
            after: None,
        };
        let answer = tag_store::allocate(&self.env, &tag, request).await;
        if let Err(e) = &answer {
            if self.forget_if_unused(e.code)? {
                // A name that is not a tag, or a monotonic tag (root-only):
                // nothing kept for it (made-up names cost no storage, here
                // as at the root).
                return Err(e.clone());
            }
        }
        self.with_held(&tag, region, |h| {
            let lease = match answer {
                Ok(lease) => lease,
                Err(e) => {
                    // The core decides whether the same ask may be answered
                    // later or must be given up (`request_id_reused`).
                    h.allocator.load_refused(&ask.request_id, e.code);
                    return Err(e);
                }
            };
            let block = match lease.allocation() {
                Ok(block) => block,
                Err(e) => {
                    h.allocator.load_failed(&ask.request_id);
                    return Err(e.into());
                }
            };
            if lease.opaque.is_some() {
                h.grant = lease.opaque.clone();
            }
            let loaded = h
                .allocator
                .loaded(&ask.request_id, block, lease.min_step, now_ms())?;
            if loaded == BlockLoad::Installed {
                h.blocks_leased += 1;
            }
            Ok(())
        })?;
        // An allocator holding blocks looks on a timer whether to retire
        // (the core's `retire_due`: before the root forgets its blocks).
        let next = self
            .held
            .borrow()
            .as_ref()
            .and_then(|h| h.allocator.next_check(now_ms()));
        self.arm(next).await
    }

    /// Sets the alarm `next` ms from now (the core's `next_check`), if none
    /// is set; none when the core says nothing can become due (no block, or
    /// only kept tails: before, such an allocator woke every 3 minutes for
    /// ever).
    pub(super) async fn arm(&self, next: Option<u64>) -> ApiResult<()> {
        let Some(ms) = next else {
            return Ok(());
        };
        let storage = self.state.storage();
        if storage.get_alarm().await?.is_none() {
            // At least a second: a due retirement that failed is not
            // retried in a tight loop (the platform retries a failed alarm).
            let ms = i64::try_from(ms)
                .unwrap_or(i64::MAX)
                .max(RETIRE_MIN_WAIT_MS);
            storage.set_alarm(ms).await?;
            // Billed as a row written.
            crate::scope::count_rows(0, 1);
        }
        Ok(())
    }

    /// The alarm: retires (handing the tails back) when the core says it is
    /// due; otherwise looks again when the core says.
    pub(super) async fn on_alarm(&self) -> ApiResult<()> {
        let held = self.held.borrow().clone();
        let Some(held) = held.map_or_else(|| self.stored(), |h| Ok(Some(h)))? else {
            return Ok(());
        };
        let now = now_ms();
        if held.allocator.retire_due(now) {
            self.retire(&held.tag, held.region, true).await?;
        } else {
            self.arm(held.allocator.next_check(now)).await?;
        }
        Ok(())
    }

    /// Retires every block: the state without them is written first, then
    /// each tail goes back to the root (last first); the tails the root
    /// refused are kept (the core's `keep`: served again, never due to
    /// retire again) and the state written again.
    pub(super) async fn retire(
        &self,
        tag: &str,
        region: Region,
        hand_back: bool,
    ) -> ApiResult<AllocatorView> {
        if self.held.borrow().is_none() && self.stored()?.is_none() {
            // Never used: nothing to retire, nothing written.
            return self.peek(tag, region);
        }
        let tails = self.with_held(tag, region, |h| Ok(h.allocator.retire()))?;
        if !hand_back {
            return self.peek(tag, region);
        }
        // The state without the tails is written: now they go back, as the
        // core's `HandBack` says, and those still this allocator's alone
        // are served again.
        let mut back = HandBack::new(tails);
        while let Some(tail) = back.to_send() {
            let request = TakeBackRequest {
                request_id: tail.request_id.clone(),
                by: format!("allocator:{region}"),
                start: tail.range.start.to_string(),
                end: tail.range.end.to_string(),
                from: Default::default(),
            };
            let answer = match tag_store::take_back(&self.env, tag, request).await {
                Ok(t) if t.taken => TailAnswer::Taken,
                // Proof that it never was taken and never can be: only
                // from a root that closed the tail (a root of 0.1.0 says
                // `untaken` without closing it: a later copy could still
                // be taken, so the tail stays a gap).
                Ok(t) => TailAnswer::Refused {
                    untaken: t.untaken && t.closed,
                },
                Err(_) => TailAnswer::Lost,
            };
            back.answered(tail, answer);
        }
        self.with_held(tag, region, |h| {
            let (taken, _) = back.finish(&mut h.allocator, now_ms());
            h.handed_back += taken;
            Ok(Self::view_of(h))
        })
    }

    fn view_of(h: &Held) -> AllocatorView {
        let blocks = h
            .allocator
            .snapshot()
            .segments
            .iter()
            .flatten()
            .filter(|s| s.value <= s.max)
            .map(|s| BlockView {
                start: (s.max + 1 - s.step).to_string(),
                end: s.max.to_string(),
                next: s.value.to_string(),
                left: s.max + 1 - s.value,
            })
            .collect();
        AllocatorView {
            tag: h.tag.clone(),
            region: h.region,
            blocks,
            runway: h.allocator.available(),
            served_high: h.allocator.served_high().to_string(),
            leasing: h.allocator.pending().is_some(),
            served: h.served,
            blocks_leased: h.blocks_leased,
            handed_back: h.handed_back,
            writes: h.writes,
        }
    }
}
