//! The registry's grant as the holder takes it.

use crate::code::ErrorCode;
use crate::error::Error;
use crate::layout::Layout;
use crate::rand::RandSource;
use crate::secret::{Claim, LeaseSecret};
use crate::snowflake::{SnowflakeConfig, SnowflakeGenerator};
use crate::wait::InFlight;

use super::{Phase, SavedLease, SnowflakeHolder};

/// A lease as the holder needs it: the registry's grant or renewal, and the
/// layout to mint under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct Grant {
    /// The worker ID to stamp into IDs.
    pub worker_id: u32,
    /// The fencing token of the grant.
    pub generation: u64,
    /// Stop minting at this instant (node clock) unless renewed.
    pub expires_at_ms: u64,
    /// Mint only IDs whose time unit starts after this (Unix ms).
    pub issue_after_ms: u64,
    /// The lease's time to live.
    pub ttl_ms: u64,
    /// The layout of the IDs.
    pub layout: Layout,
    /// The grant's secret, which renewals, the release and a restart's
    /// reclaim present (`None`: a grant from before secrets).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub secret: Option<LeaseSecret>,
}

impl Grant {
    /// A registry [`Lease`](crate::lease::Lease) under `layout`, with the secret
    /// the registry's host answered with it (a renewal's answer has none:
    /// the holder keeps the one it has).
    #[cfg(feature = "alloc")]
    pub fn from_lease(
        lease: &crate::lease::Lease,
        secret: Option<LeaseSecret>,
        layout: Layout,
    ) -> Grant {
        Grant {
            worker_id: lease.worker_id,
            generation: lease.generation,
            expires_at_ms: lease.expires_at_ms,
            issue_after_ms: lease.issue_after_ms,
            ttl_ms: lease.ttl_ms,
            layout,
            secret,
        }
    }

    /// What this grant's holder presents to the registry.
    pub fn claim(&self) -> Claim {
        Claim {
            worker_id: self.worker_id,
            generation: self.generation,
            secret: self.secret,
        }
    }

    /// When to renew: half the TTL before the lease ends.
    pub fn renew_at_ms(&self) -> u64 {
        self.expires_at_ms.saturating_sub(self.ttl_ms / 2)
    }
}

impl<R: RandSource + Clone> SnowflakeHolder<R> {
    /// The registry granted a lease (answer to [`HolderNext::Lease`](super::HolderNext::Lease)).
    ///
    /// # Errors
    /// As [`SnowflakeGenerator::resume_after`] for a grant the layout cannot
    /// mint under (a worker ID outside it, a time past its end);
    /// [`Error::LeaseExpired`] for a grant that lapsed before it arrived.
    /// The holder then has no lease, and the next poll asks for one.
    pub fn granted(&mut self, grant: Grant, now_ms: u64) -> Result<(), Error> {
        self.leasing.done();
        if !matches!(self.phase, Phase::Idle) {
            // Already holding (a taken-over request answered late), or
            // stopped: the extra grant lapses unused.
            return Ok(());
        }
        if now_ms >= grant.expires_at_ms {
            return Err(Error::LeaseExpired {
                worker_id: grant.worker_id,
                expired_at_ms: grant.expires_at_ms,
                now_ms,
            });
        }
        let mut cfg = SnowflakeConfig::new(grant.layout, grant.worker_id);
        cfg.max_backward_ms = self.config.max_backward_ms;
        cfg.max_borrow_ms = self.config.max_borrow_ms;
        if let Some(bound) = self.config.sequence_start_bound {
            cfg.sequence_start_bound = bound;
        }
        let after = grant
            .issue_after_ms
            .max(self.floor_ms)
            .max(grant.layout.epoch_ms());
        let gen = SnowflakeGenerator::resume_after(cfg, self.rand.clone(), after)?;
        self.rand.next_u32();
        let layout = grant.layout;
        let first_ms = layout
            .tick(after)
            .map_or(after, |t| layout.tick_start_ms(t.saturating_add(1)));
        self.saved = Some(SavedLease {
            worker_id: grant.worker_id,
            generation: grant.generation,
            expires_at_ms: grant.expires_at_ms,
            ttl_ms: grant.ttl_ms,
            layout: Some(grant.layout),
            secret: grant.secret,
        });
        self.phase = Phase::Holding {
            grant,
            gen,
            first_ms,
            granted_wait_ms: first_ms.saturating_sub(now_ms),
            renew_not_before: 0,
            renewing: InFlight::default(),
        };
        Ok(())
    }

    /// A lease request failed: `cause` is the registry's refusal, or `None`
    /// when it did not answer. Either way the holder holds no lease, and the
    /// next poll asks again. A saved lease is never minted under without
    /// the registry's answer: a store may be shared by two processes (one
    /// config, one file), and the other one may hold that lease now.
    pub fn lease_failed(&mut self, cause: Option<ErrorCode>, now_ms: u64) {
        let _ = (cause, now_ms);
        self.leasing.done();
    }
}
