//! What a holder does with its grant afterwards, and the operator's eviction:
//! renew, release, evict.

use crate::error::{check_range, ClockReference, Error};
use crate::lease::Renewal;
use crate::secret::Proof;
use crate::snowflake::MAX_TOLERANCE_MS;

use super::minter::{minter_terms, ttl_for};
use super::{
    Lease, LeaseEvent, LeaseEventKind, Registry, SlotStatus, WorkerSlot, MINTER_KEY_PREFIX,
};

impl Registry {
    fn held(&mut self, owner: &str, proof: &Proof) -> Result<&mut WorkerSlot, Error> {
        let slot = self
            .slots
            .get_mut(proof.worker_id as usize)
            .and_then(Option::as_mut)
            .ok_or(Error::LeaseNotHeld {
                worker_id: proof.worker_id,
                generation: proof.generation,
            })?;
        Self::check_holder(slot, owner, proof, false)?;
        Ok(slot)
    }

    /// Extends a live lease for its holder: `owner`, presenting the hash of
    /// the grant's secret in the [`Renewal`]'s proof, with the node's clock and the latest
    /// timestamp it issued under the lease. A refusal changes nothing.
    ///
    /// # Errors
    /// [`Error::LeaseNotHeld`] for a wrong generation (fenced off by a newer
    /// grant), a released or an evicted lease, or a node's lease of a worker
    /// ID the minters' reserved range has since grown over (it must lease
    /// again, and gets an ID above the range); [`Error::NotLeaseHolder`] for
    /// another owner or a wrong secret (the lease stays its holder's);
    /// [`Error::LeaseExpired`] once the lease lapsed — the node must stop
    /// issuing and lease again; [`Error::ClockSkew`] against the registry's
    /// clock; [`Error::ClockBehindLastReport`] when the node's clock went
    /// back past what it reported before.
    pub fn renew(
        &mut self,
        owner: &str,
        renewal: &Renewal<Proof>,
        registry_now_ms: u64,
    ) -> Result<Lease, Error> {
        let max_skew_ms = self.config.max_skew_ms;
        let minters = self.config.minters;
        let Renewal {
            claim,
            node_now_ms,
            last_timestamp_ms,
        } = *renewal;
        let worker_id = claim.worker_id;
        let config = self.config;
        let slot = self.held(owner, &claim)?;
        // The minters' range grew over a node's ID (an upgrade raised their
        // count): renewed, the node would keep it for ever and that minter
        // never start. Refused, it stops at once and leases an ID above the
        // range; the minter takes this one once the grant lapsed, issuing
        // after its end. (After the holder check: a stranger is told only
        // that it is not one.)
        if worker_id < minters && !slot.node_key.starts_with(MINTER_KEY_PREFIX) {
            return Err(Error::LeaseNotHeld {
                worker_id,
                generation: claim.generation,
            });
        }
        // No holder issues further ahead of its clock than it may borrow: a
        // timestamp beyond that would fence its worker ID for ever. (After
        // the holder check: a stranger is told only that it is not one.)
        check_range(
            "last_timestamp_ms",
            last_timestamp_ms,
            0,
            node_now_ms.saturating_add(MAX_TOLERANCE_MS),
        )?;
        Self::check_renewal(slot, node_now_ms, registry_now_ms, max_skew_ms)?;
        let ttl_ms = ttl_for(&config, worker_id, &slot.node_key);
        let (expires_at_ms, floor_ms) = minter_terms(
            &config,
            worker_id,
            &slot.node_key,
            registry_now_ms + ttl_ms,
            Some(slot.expires_at_ms),
            slot.last_timestamp_ms.max(last_timestamp_ms),
        );
        let extends = expires_at_ms > slot.expires_at_ms;
        slot.last_timestamp_ms = floor_ms;
        slot.reported_clock_ms = node_now_ms;
        slot.reported_at_ms = registry_now_ms;
        slot.expires_at_ms = expires_at_ms;
        let lease = Lease {
            worker_id,
            generation: claim.generation,
            node_key: slot.node_key.clone(),
            expires_at_ms: slot.expires_at_ms,
            issue_after_ms: slot.last_timestamp_ms,
            ttl_ms,
        };
        // A renewal that does not extend the lease (a second one within the
        // same ms, or under a registry clock that went back) is no event.
        if extends {
            let renewed = LeaseEvent::new(LeaseEventKind::Renewed, registry_now_ms, slot);
            self.events.push(renewed);
        }
        Ok(lease)
    }

    /// Refuses a renewal of a lease that lapsed, or from a node whose clock
    /// is off from the registry's or went back past its last report.
    fn check_renewal(
        slot: &WorkerSlot,
        node_now_ms: u64,
        registry_now_ms: u64,
        max_skew_ms: u64,
    ) -> Result<(), Error> {
        let worker_id = slot.worker_id;
        if registry_now_ms >= slot.expires_at_ms {
            return Err(Error::LeaseExpired {
                worker_id,
                expired_at_ms: slot.expires_at_ms,
                now_ms: registry_now_ms,
            });
        }
        if node_now_ms.abs_diff(registry_now_ms) > max_skew_ms {
            return Err(Error::ClockSkew {
                reference: ClockReference::Registry,
                node_now_ms,
                reference_ms: registry_now_ms,
                max_skew_ms,
            });
        }
        // Against the node's last clock reading, not the timestamps it
        // reported: those may lie ahead of its clock (a restarted holder
        // reports the reservation it resumes after), and its own floor
        // already keeps it from minting below them.
        if node_now_ms < slot.reported_clock_ms {
            return Err(Error::ClockBehindLastReport {
                worker_id: Some(worker_id),
                last_timestamp_ms: slot.reported_clock_ms,
                node_now_ms,
            });
        }
        Ok(())
    }

    /// Gives a worker ID back for its holder (`owner`, presenting the hash
    /// of the grant's secret); it is free at once. The release's
    /// `last_timestamp_ms` is the latest timestamp issued under it, kept so
    /// the next holder issues after it — only the proved holder's word sets
    /// that floor, and while it lies further ahead than the skew bound the
    /// ID counts against the owner's share ([`Registry::withheld`]).
    ///
    /// A release after the grant's grace passed finds its ID back in the
    /// pool: it is refused ([`Error::LeaseNotHeld`]) and changes nothing.
    /// Its floor could only keep the free ID from everyone again, counted
    /// against an owner who may already hold its full share of others; the
    /// next holder's fence ([`Registry::grant_end_ms`]) already bounds what
    /// a holder may have issued under a lapsed grant.
    ///
    /// # Errors
    /// As [`Registry::renew`]'s [`Error::LeaseNotHeld`] (also once the ID is
    /// free again, above) and
    /// [`Error::NotLeaseHolder`]; [`Error::ReservedWorkerId`] for a minter's
    /// grant; [`Error::OutOfRange`] for a
    /// `last_timestamp_ms` further ahead than its holder could have minted:
    /// the registry's clock (the grant's expiry, if earlier) + `max_skew_ms`
    /// + [`MAX_TOLERANCE_MS`].
    pub fn release(
        &mut self,
        owner: &str,
        release: &Renewal<Proof>,
        registry_now_ms: u64,
    ) -> Result<(), Error> {
        let max_skew_ms = self.config.max_skew_ms;
        self.not_a_minters(release.claim.worker_id, Some(release.claim.generation))?;
        let free = self
            .slot(release.claim.worker_id)
            .is_some_and(|s| self.status(s, registry_now_ms) == SlotStatus::Free);
        let slot = self.held(owner, &release.claim)?;
        if free {
            return Err(Error::LeaseNotHeld {
                worker_id: release.claim.worker_id,
                generation: release.claim.generation,
            });
        }
        // No further ahead than its holder could have minted: by a clock
        // within the skew bound of the registry's now (and of the grant's
        // expiry, once it lapsed), plus the largest borrow or reservation.
        let latest = registry_now_ms
            .min(slot.expires_at_ms)
            .saturating_add(max_skew_ms + MAX_TOLERANCE_MS);
        check_range("last_timestamp_ms", release.last_timestamp_ms, 0, latest)?;
        slot.last_timestamp_ms = slot.last_timestamp_ms.max(release.last_timestamp_ms);
        if registry_now_ms >= slot.expires_at_ms {
            // Released after it lapsed: the holder's word is no better than
            // the lease's end, which bounds what it may have issued.
            slot.last_timestamp_ms = slot.last_timestamp_ms.max(slot.expires_at_ms);
        }
        slot.released = true;
        let released = LeaseEvent::new(LeaseEventKind::Released, registry_now_ms, slot);
        self.events.push(released);
        Ok(())
    }

    /// An operator's tool for a stuck node: ends the latest grant of
    /// `worker_id` without its holder. The holder is refused at its next
    /// renewal ([`Error::LeaseNotHeld`]: it stops), and since it may mint
    /// until then by its own clock, the ID is reused only after the grant's
    /// end ([`Registry::grant_end_ms`]: its expiry plus the largest skew)
    /// plus the grace period, and its next holder issues only after that
    /// end. Returns that end.
    ///
    /// # Errors
    /// [`Error::LeaseNotHeld`] when the ID has no grant to evict (never
    /// leased, released, already evicted, or free);
    /// [`Error::ReservedWorkerId`] for a minter's grant (the service's own).
    pub fn evict(&mut self, worker_id: u32, registry_now_ms: u64) -> Result<u64, Error> {
        self.not_a_minters(worker_id, None)?;
        let status = self
            .slot(worker_id)
            .map(|s| self.status(s, registry_now_ms));
        let slot = self
            .slots
            .get_mut(worker_id as usize)
            .and_then(Option::as_mut);
        match (slot, status) {
            (Some(s), Some(SlotStatus::Live | SlotStatus::Lapsed)) if !s.evicted => {
                s.evicted = true;
                s.secret = None;
                let end = s.expires_at_ms.saturating_add(self.config.max_skew_ms);
                let evicted = LeaseEvent::new(LeaseEventKind::Evicted, registry_now_ms, s);
                self.events.push(evicted);
                Ok(end)
            }
            (s, _) => Err(Error::LeaseNotHeld {
                worker_id,
                generation: s.map_or(0, |s| s.generation),
            }),
        }
    }
}
