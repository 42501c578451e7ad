//! A minter's answers: a batch minted (and a right to mint lent, when
//! asked: `rights.rs`), its state taken over from (or handed to) the minter
//! of before regions.

use edgeleaf::{
    code::ErrorCode, minted::batch_beside_right, minted::batch_ranges,
    minted::minter_lease_refused, minted::minter_step, minted::MinterStep, minted::MAX_MINT_BATCH,
    wait::RETRY_AFTER_MS,
};
use edgeleaf_rules::wire::{
    minter::Batch, minter::HandOverRequest, minter::HandedOver, minter::MintRequest,
    minter::MinterRequest, registry::MinterLeaseRequest, registry::Previous,
};

use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::config::Config;
use crate::objects::call::{call, Store};
use crate::objects::registry_store::stubs as registry_store;

use super::{own_clock, SnowflakeMinter};

impl SnowflakeMinter {
    /// A regional minter's first request: it takes its predecessor's state
    /// over (`minter-{index}`, of before regions), saved as its own before
    /// it is used. Done once; an object with a state of its own never asks.
    async fn take_over(&self, index: u32) -> ApiResult<()> {
        if self.settled.get() || self.holder.borrow().is_some() {
            return Ok(());
        }
        if self.stored("holder")?.is_some() || self.stored("took_over")?.is_some() {
            self.settled.set(true);
            return Ok(());
        }
        if self.taking_over.replace(true) {
            let e = format!(
                "minter {index}: taking over from minter-{index}, expected to be done shortly"
            );
            return Err(ApiError::unavailable(
                ErrorCode::StoreUnavailable,
                e,
                RETRY_AFTER_MS,
            ));
        }
        let request = MinterRequest::HandOver(HandOverRequest { index });
        let answer: ApiResult<HandedOver> =
            call(&self.env, Store::Minter(index, None), &request).await;
        self.taking_over.set(false);
        // A failure: asked again at the next request.
        let answer = answer?;
        if let Some(text) = answer.state {
            self.sql.exec(
                "INSERT OR REPLACE INTO state(k, v) VALUES ('holder', ?)",
                vec![text.into()],
            )?;
        }
        self.sql.exec(
            "INSERT OR REPLACE INTO state(k, v) VALUES ('took_over', '1')",
            None,
        )?;
        self.settled.set(true);
        Ok(())
    }

    /// A minter of before regions hands its saved state to its regional
    /// successor, once: it records that it did (durable before the answer
    /// leaves: the output gate), forgets its holder, and never mints again.
    pub(super) fn hand_over(&self) -> ApiResult<HandedOver> {
        if self.handed.get() || self.stored("handed")?.is_some() {
            self.handed.set(true);
            return Ok(HandedOver { state: None });
        }
        let state = self.stored("holder")?;
        self.sql.exec(
            "INSERT OR REPLACE INTO state(k, v) VALUES ('handed', '1')",
            None,
        )?;
        self.handed.set(true);
        *self.holder.borrow_mut() = None;
        Ok(HandedOver { state })
    }

    pub(super) async fn mint(&self, config: &Config, r: MintRequest) -> ApiResult<Batch> {
        if r.index >= config.minters {
            return Err(ApiError::new(
                ErrorCode::OutOfRange,
                format!("minter: expected 0..{}, found {}", config.minters, r.index),
            ));
        }
        if r.count == 0 {
            return Err(ApiError::new(
                ErrorCode::OutOfRange,
                format!("count: expected 1..={MAX_MINT_BATCH}, found 0"),
            ));
        }
        // More than it mints in one call: it answers what it can (an isolate
        // of a later release may ask more; the buffer takes fewer).
        let count = r.count.min(MAX_MINT_BATCH);
        if r.regional {
            self.take_over(r.index).await?;
        }
        let layout = config.layout;
        // Rights are lent by the regional minters alone (rights came after
        // regions: the object of before regions, handed over or not, never
        // holds a rights worker ID), to an isolate that asks for one; a
        // right that serves the ask alone is answered without a batch.
        let right = if r.right && r.regional && config.rights {
            self.lend(config, r.index).await
        } else {
            None
        };
        let count = batch_beside_right(&layout, count, right.as_ref());
        let batch = if count == 0 {
            Ok((self.batch_worker_id(), Vec::new()))
        } else {
            self.mint_batch(config, r.index, count).await
        };
        match batch {
            Ok((worker_id, ranges)) => Ok(Batch {
                worker_id,
                ranges,
                right,
            }),
            // A right lent is answered even when the batch beside it fails:
            // dropped, its slice would sit unused until its end.
            Err(_) if right.is_some() => Ok(Batch {
                worker_id: self.batch_worker_id(),
                ranges: Vec::new(),
                right,
            }),
            Err(e) => Err(e),
        }
    }

    /// The batch holder's worker ID, if it holds a lease now (0: none).
    fn batch_worker_id(&self) -> u32 {
        self.holder
            .borrow()
            .as_ref()
            .and_then(|h| h.lease().map(|g| g.worker_id))
            .unwrap_or(0)
    }

    /// `count` IDs minted by the batch holder of minter `index`, as ranges,
    /// and its worker ID.
    async fn mint_batch(
        &self,
        config: &Config,
        index: u32,
        count: u32,
    ) -> ApiResult<(u32, Vec<(String, String)>)> {
        let layout = config.layout;
        let mut out = vec![0u64; count as usize];
        let mut filled = 0;
        let mut leased = false;
        // No loop here waits: the core's `minter_step` answers at once, and
        // leases at most once (so this runs at most twice).
        loop {
            let now = now_ms();
            let (next, renew) = self.with_holder(config, |h| {
                self.save_if_due(h, now, false)?;
                let poll = h.poll(now, &mut out[filled..])?;
                filled += poll.filled;
                Ok((poll.next, poll.renew))
            })?;
            if let Some(renewal) = renew {
                let answer = registry_store::renew(&self.env, renewal.into()).await;
                self.with_holder(config, |h| {
                    registry_store::renewal_answered(h, renewal, answer, layout, now_ms());
                    Ok(())
                })?;
            }
            match minter_step(filled, next, leased) {
                MinterStep::Answer => break,
                MinterStep::Lease(ask) => {
                    leased = true;
                    let request = MinterLeaseRequest {
                        index,
                        node_time: ask.node_now_ms,
                        previous: ask.previous.map(Previous::from),
                    };
                    let answer = registry_store::lease_minter(&self.env, request).await;
                    self.with_holder(config, |h| {
                        registry_store::lease_answered(h, answer, layout, now_ms())
                            .map_err(|e| own_clock(minter_lease_refused(e.code), e))?;
                        // The grant is proof after a restart: save it now.
                        self.save_if_due(h, now_ms(), true)
                    })?;
                }
                MinterStep::Unavailable {
                    code,
                    retry_after_ms,
                } => {
                    return Err(ApiError::unavailable(
                        code,
                        format!(
                            "minter {index}: expected IDs to mint now, found none for {retry_after_ms} ms"
                        ),
                        retry_after_ms,
                    ));
                }
            }
        }
        out.truncate(filled);
        let ranges = batch_ranges(&layout, &out)
            .into_iter()
            .map(|(s, e)| (s.to_string(), e.to_string()))
            .collect();
        let worker_id = self.with_holder(config, |h| Ok(h.lease().map_or(0, |g| g.worker_id)))?;
        Ok((worker_id, ranges))
    }
}
