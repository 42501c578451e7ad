//! A minter's rights to mint: its rights holder leases, renews and saves as
//! its batch holder does, never mints, and the ledger lends isolates
//! slices of its worker ID's sequence (`edgeleaf::minted::RightLedger`).

use edgeleaf::{
    holder::SnowflakeHolder, minted::rights_holder_config, minted::rights_worker_index,
    minted::MintRight, minted::RightLedger, rand::SplitMix64, Layout,
};
use edgeleaf_rules::wire::registry::{MinterLeaseRequest, Previous};

use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::config::Config;
use crate::objects::registry_store::stubs as registry_store;

use super::schema::RIGHTS;
use super::SnowflakeMinter;

impl SnowflakeMinter {
    /// A right to mint for the isolate that asked minter `index` for one,
    /// or `None`: the rights holder still leasing (at most one lease per
    /// request), its lease refused (a registry of before rights reserves
    /// no ID for it), every slice lent, or any failure. Never an error:
    /// the batch is answered either way.
    pub(super) async fn lend(&self, config: &Config, index: u32) -> Option<MintRight> {
        // Handed over to its regional successor: it lends nothing either.
        if self.handed.get() {
            return None;
        }
        self.try_lend(config, index).await.ok().flatten()
    }

    async fn try_lend(&self, config: &Config, index: u32) -> ApiResult<Option<MintRight>> {
        let layout = config.layout;
        let now = now_ms();
        // An empty poll: it only leases, renews and saves.
        let (next, renew) = self.with_rights(config, |h| {
            self.save_row_if_due(&RIGHTS, h, now, false)?;
            let poll = h.poll(now, &mut [])?;
            Ok((poll.next, poll.renew))
        })?;
        if let Some(renewal) = renew {
            let answer = registry_store::renew(&self.env, renewal.into()).await;
            self.with_rights(config, |h| {
                registry_store::renewal_answered(h, renewal, answer, layout, now_ms());
                Ok(())
            })?;
        }
        let ask = self.with_rights(config, |h| {
            Ok(self.with_ledger(layout, |l| l.lease_to_send(next, h, now)))
        })?;
        if let Some(ask) = ask {
            let request = MinterLeaseRequest {
                index: rights_worker_index(config.minters, index),
                node_time: ask.node_now_ms,
                previous: ask.previous.map(Previous::from),
            };
            let answer = registry_store::lease_minter(&self.env, request).await;
            let leased = self.with_rights(config, |h| {
                registry_store::lease_answered(h, answer, layout, now_ms())?;
                // The grant is proof after a restart, and a right is lent
                // only below a saved reservation: save now.
                self.save_row_if_due(&RIGHTS, h, now_ms(), true)
            });
            if let Err(e) = leased {
                self.with_ledger(layout, |l| l.lease_failed(now_ms()));
                return Err(e);
            }
        }
        let now = now_ms();
        self.with_rights(config, |h| {
            Ok(self.with_ledger(layout, |l| l.lend_from(now, h)))
        })
    }

    /// Runs `f` on the ledger (made on first use; in memory only). Never
    /// held across an await: another request may run meanwhile.
    fn with_ledger<T>(&self, layout: Layout, f: impl FnOnce(&mut RightLedger) -> T) -> T {
        let mut ledger = self.ledger.borrow_mut();
        f(ledger.get_or_insert_with(|| RightLedger::new(layout)))
    }

    /// Runs `f` on the rights holder, restored from its own row on first
    /// use.
    fn with_rights<T>(
        &self,
        config: &Config,
        f: impl FnOnce(&mut SnowflakeHolder<SplitMix64>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        let mut cell = self.rights.borrow_mut();
        if cell.is_none() {
            let holder_config = rights_holder_config(config.max_backward_ms);
            *cell = Some(self.restored(&RIGHTS, holder_config)?);
        }
        let holder = cell
            .as_mut()
            .ok_or_else(|| ApiError::store_error("minter: rights holder missing"))?;
        f(holder)
    }
}
