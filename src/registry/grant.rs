//! The grant algorithm: which worker ID a node gets, and after which
//! instant it may issue under it.

use crate::error::{ClockReference, Error};
use crate::lease::LeaseAsk;
use crate::name::check_name;
use crate::secret::{LeaseSecret, Proof, SecretHash};

use super::minter::{minter_terms, ttl_for};
use super::{
    Chosen, Lease, LeaseEvent, LeaseEventKind, Registry, SlotStatus, WorkerSlot, MINTER_KEY_PREFIX,
};

/// A node's request for a lease.
#[derive(Debug, Clone, Copy)]
pub struct GrantRequest<'a> {
    /// The credential asking (empty: the service itself). It alone may
    /// renew, release or reclaim the grant, and it may hold at most
    /// [`RegistryConfig::per_owner`](super::RegistryConfig::per_owner) live worker IDs.
    pub owner: &'a str,
    /// The node's name (Leaf used ip:port).
    pub node_key: &'a str,
    /// The node's clock, Unix ms.
    pub node_now_ms: u64,
    /// The grant the node held before, from its own cache: with the hash
    /// of its secret, a restarted node gets its worker ID back.
    pub previous: Option<Proof>,
    /// The hash of the new grant's secret. The host draws the secret from
    /// its CSPRNG, gives the registry its hash, and answers the secret to
    /// the caller alone.
    pub secret_hash: SecretHash,
}

impl<'a> GrantRequest<'a> {
    /// A holder's [`LeaseAsk`], from `owner`'s node `node_key`, for a grant
    /// under `secret`: the host hashes it and the previous grant's secret
    /// with `hash` (its SHA-256).
    pub fn from_ask(
        ask: &LeaseAsk,
        owner: &'a str,
        node_key: &'a str,
        secret: &LeaseSecret,
        hash: impl Fn(&LeaseSecret) -> SecretHash,
    ) -> Self {
        GrantRequest {
            owner,
            node_key,
            node_now_ms: ask.node_now_ms,
            previous: ask.previous.map(|c| c.proof(&hash)),
            secret_hash: hash(secret),
        }
    }
}

impl Registry {
    /// Leases a worker ID to a node.
    ///
    /// The node gets, in order of preference: the ID named by `previous` if
    /// that grant is still the latest one of that ID, no longer live, and
    /// the node proves it holds it (same owner, node key and secret) — it
    /// restarts, issuing after that grant's expiry; else its own earlier ID
    /// (same node key and owner) if free; else the lowest free ID whose
    /// floor its clock has passed; else the lowest free ID whose floor is at
    /// most `max_skew_ms` ahead of the registry's clock (the node issues
    /// after it, waiting). A node proving a grant that is still live gets
    /// another ID: the proof may be a copy (two processes sharing one
    /// store), and the grant's holder may still be minting. A node that
    /// cannot prove it holds a live grant never shares its ID, and naming a
    /// live grant without proof is refused, not passed over.
    ///
    /// # Errors
    /// [`Error::InvalidKey`] for a bad node key; [`Error::ReservedNodeKey`]
    /// for a minter's; [`Error::ReservedWorkerId`] when `previous` names a
    /// minter's grant; [`Error::WorkerIdLimit`] when the owner already keeps
    /// its limit of worker IDs from the others ([`Registry::withheld`]);
    /// [`Error::NotLeaseHolder`] when `previous` names a live grant with
    /// another owner or a wrong (or no) secret; [`Error::ClockSkew`] when the
    /// node's clock is off from the registry's or from the average of its
    /// owner's live nodes; [`Error::ClockBehindLastReport`] when the chosen
    /// ID is the node's own and its clock is behind its last reading on
    /// record, or more than `max_skew_ms` behind the ID's floor;
    /// [`Error::NoFreeWorkerId`].
    pub fn lease(&mut self, ask: GrantRequest<'_>, registry_now_ms: u64) -> Result<Lease, Error> {
        check_name("node_key", ask.node_key)?;
        if ask.node_key.starts_with(MINTER_KEY_PREFIX) {
            return Err(Error::ReservedNodeKey {
                prefix: MINTER_KEY_PREFIX,
            });
        }
        if let Some(p) = ask.previous {
            self.not_a_minters(p.worker_id, Some(p.generation))?;
        }
        let limit = self.config.per_owner.filter(|_| !ask.owner.is_empty());
        let ids = self.config.minters..self.config.capacity;
        self.grant(ask, registry_now_ms, ids, false, limit)
    }

    pub(super) fn grant(
        &mut self,
        ask: GrantRequest<'_>,
        registry_now_ms: u64,
        ids: core::ops::Range<u32>,
        minter: bool,
        limit: Option<u32>,
    ) -> Result<Lease, Error> {
        let node_now_ms = ask.node_now_ms;
        self.check_skew(ClockReference::Registry, node_now_ms, registry_now_ms)?;
        if let Some(avg) = self.live_clock_average(ask.owner, registry_now_ms) {
            self.check_skew(ClockReference::LiveNodesAverage, node_now_ms, avg)?;
        }
        let chosen = self.choose(&ask, registry_now_ms, ids, minter);
        if let Some(limit) = limit {
            self.check_limit(ask.owner, &chosen, limit, registry_now_ms)?;
        }
        let (worker_id, chosen) = chosen?;
        if self.slots.len() <= worker_id as usize {
            self.slots.resize(worker_id as usize + 1, None);
        }
        let generation = self.next_generation;
        let ttl_ms = ttl_for(&self.config, worker_id, ask.node_key);
        let issue_after_ms = match self.slot(worker_id) {
            Some(s) => self.issue_after(s, chosen, node_now_ms, registry_now_ms)?,
            None => 0,
        };
        let (expires_at_ms, floor_ms) = minter_terms(
            &self.config,
            worker_id,
            ask.node_key,
            registry_now_ms + ttl_ms,
            self.slot(worker_id).map(|old| old.expires_at_ms),
            issue_after_ms,
        );
        // A grant it replaces that was neither given back nor evicted
        // lapsed when its lease ran out (one a node proving it held it takes
        // over before then did not).
        if let Some(old) = &self.slots[worker_id as usize] {
            if !old.released && !old.evicted && old.expires_at_ms <= registry_now_ms {
                let lapsed = LeaseEvent::new(LeaseEventKind::Lapsed, old.expires_at_ms, old);
                self.events.push(lapsed);
            }
        }
        let slot = WorkerSlot {
            worker_id,
            node_key: ask.node_key.into(),
            generation,
            expires_at_ms,
            released: false,
            last_timestamp_ms: floor_ms,
            reported_clock_ms: node_now_ms,
            reported_at_ms: registry_now_ms,
            owner: ask.owner.into(),
            secret: Some(ask.secret_hash),
            evicted: false,
        };
        let granted = LeaseEvent::new(LeaseEventKind::Granted, registry_now_ms, &slot);
        self.events.push(granted);
        self.slots[worker_id as usize] = Some(slot);
        self.next_generation += 1;
        Ok(Lease {
            worker_id,
            generation,
            node_key: ask.node_key.into(),
            expires_at_ms,
            issue_after_ms,
            ttl_ms,
        })
    }

    /// Refuses a grant to an owner that already keeps its `limit` of
    /// worker IDs from the others ([`Registry::withheld`]).
    fn check_limit(
        &self,
        owner: &str,
        chosen: &Result<(u32, Chosen), Error>,
        limit: u32,
        registry_now_ms: u64,
    ) -> Result<(), Error> {
        // Everything the owner keeps from the others counts (a live ID
        // `previous` proves too: the node gets another), but the ID it
        // is given now only once.
        let replaced = chosen.as_ref().ok().map(|&(id, _)| id);
        let held = self
            .slots()
            .filter(|s| {
                s.owner == owner
                    && Some(s.worker_id) != replaced
                    && self.withheld(s, registry_now_ms)
            })
            .count();
        if held >= limit as usize && !matches!(chosen, Err(Error::NotLeaseHolder { .. })) {
            return Err(Error::WorkerIdLimit { limit });
        }
        Ok(())
    }

    /// The instant after which the new holder of `s`'s worker ID may issue:
    /// past everything its earlier grants may have issued.
    fn issue_after(
        &self,
        s: &WorkerSlot,
        chosen: Chosen,
        node_now_ms: u64,
        registry_now_ms: u64,
    ) -> Result<u64, Error> {
        let worker_id = s.worker_id;
        let end_ms = self.grant_end_ms(s);
        // The node's own earlier ID or grant: a clock behind its
        // last reading on record went back (Leaf's check), and one
        // further behind the floor than the skew bound would wait
        // too long for it. A floor a little ahead (a reservation it
        // reported, a lease's expiry set by a late release) is
        // waited for, as is another node's ID whose floor is a
        // little ahead: the node issues after the floor.
        if chosen != Chosen::Free {
            let behind = if node_now_ms < s.reported_clock_ms {
                Some(s.reported_clock_ms)
            } else if node_now_ms.saturating_add(self.config.max_skew_ms) < s.last_timestamp_ms {
                Some(s.last_timestamp_ms)
            } else {
                None
            };
            if let Some(last_timestamp_ms) = behind {
                return Err(Error::ClockBehindLastReport {
                    worker_id: Some(worker_id),
                    last_timestamp_ms,
                    node_now_ms,
                });
            }
        }
        // Given back by its proved holder: it told how far it got.
        // Reclaimed while live (a minter): its previous incarnation
        // may have issued up to now, past its last report. Reclaimed
        // after it lapsed: its holder may have issued up to its
        // expiry (by its own clock, whatever the reclaimer's says).
        // Otherwise the earlier grant may have issued up to its end.
        Ok(if s.released {
            s.last_timestamp_ms
        } else if chosen == Chosen::Reclaimed && registry_now_ms < s.expires_at_ms {
            s.last_timestamp_ms.max(node_now_ms.min(s.expires_at_ms))
        } else if chosen == Chosen::Reclaimed {
            s.last_timestamp_ms.max(s.expires_at_ms)
        } else {
            s.last_timestamp_ms.max(end_ms)
        })
    }

    /// Whether `owner`, presenting `proof`, holds `slot`'s latest grant.
    /// `legacy`: a grant from before secrets is proved by its generation.
    pub(super) fn check_holder(
        slot: &WorkerSlot,
        owner: &str,
        proof: &Proof,
        legacy: bool,
    ) -> Result<(), Error> {
        let refused = |mismatch| Error::NotLeaseHolder {
            worker_id: proof.worker_id,
            mismatch,
        };
        // The owner first: another credential learns nothing of the grant
        // (its generation, whether it was released or evicted).
        if slot.owner != owner {
            return Err(refused("owner"));
        }
        if slot.generation != proof.generation || slot.released || slot.evicted {
            return Err(Error::LeaseNotHeld {
                worker_id: proof.worker_id,
                generation: proof.generation,
            });
        }
        match (slot.secret, proof.secret_hash) {
            (Some(held), Some(given)) if held == given => Ok(()),
            (None, None) if legacy => Ok(()),
            _ => Err(refused("secret")),
        }
    }

    /// The worker ID `ask.previous` names, if the node proves it held that
    /// grant and may take it back; a refusal if it names a live grant it
    /// cannot prove; else `None` (the proof is passed over).
    fn reclaimed(
        &self,
        ask: &GrantRequest<'_>,
        registry_now_ms: u64,
        ids: &core::ops::Range<u32>,
        minter: bool,
    ) -> Result<Option<u32>, Error> {
        if let Some(p) = ask.previous.filter(|p| ids.contains(&p.worker_id)) {
            if let Some(s) = self.slot(p.worker_id) {
                // Both from before secrets: the node has nothing to prove
                // with, and is not told off for it (it gets another ID).
                let legacy = s.secret.is_none() && p.secret_hash.is_none();
                // A proof of a grant that is no longer the latest proves
                // nothing (whoever holds the ID now): no refusal either.
                let current = s.generation == p.generation;
                let checked = if current {
                    Self::check_holder(s, ask.owner, &p, minter)
                } else {
                    Err(Error::LeaseNotHeld {
                        worker_id: p.worker_id,
                        generation: p.generation,
                    })
                };
                match checked {
                    // A grant that is no longer live: its holder stopped
                    // minting at its expiry, so the node takes the ID back
                    // (issuing after that expiry). A live grant is not taken
                    // over by an ordinary node: whoever has its saved grant
                    // may be another process still minting under it (two
                    // processes from one config and one store), so the node
                    // gets another ID, and the live grant stays its holder's
                    // until it lapses. A minter does take its live grant
                    // back: its store is its Durable Object's own storage,
                    // which the platform fences (an old instance cannot
                    // write once a new one has), and its holder resumes
                    // after the reservation it saved there.
                    Ok(())
                        if s.node_key == ask.node_key
                            && (minter || self.status(s, registry_now_ms) != SlotStatus::Live) =>
                    {
                        return Ok(Some(p.worker_id))
                    }
                    // Someone names a live grant it cannot prove to hold:
                    // refused, so that it learns its proof is wrong.
                    Err(e @ Error::NotLeaseHolder { .. })
                        if current
                            && !legacy
                            && self.status(s, registry_now_ms) == SlotStatus::Live =>
                    {
                        return Err(e)
                    }
                    // A grant that is gone, or not this node's: no proof.
                    _ => {}
                }
            }
        }
        Ok(None)
    }

    fn choose(
        &self,
        ask: &GrantRequest<'_>,
        registry_now_ms: u64,
        ids: core::ops::Range<u32>,
        minter: bool,
    ) -> Result<(u32, Chosen), Error> {
        if let Some(id) = self.reclaimed(ask, registry_now_ms, &ids, minter)? {
            return Ok((id, Chosen::Reclaimed));
        }
        let free = |id: &u32| {
            self.slot(*id)
                .is_none_or(|s| self.status(s, registry_now_ms) == SlotStatus::Free)
        };
        // The node's own earlier ID: same node key *and* same owner. Node
        // keys are guessable (and public to monitors), so another
        // credential's ID under this key is not this node's: it neither
        // gets it as its own nor is refused for its floor.
        let own = ids.clone().find(|id| {
            free(id)
                && self
                    .slot(*id)
                    .is_some_and(|s| s.node_key == ask.node_key && s.owner == ask.owner)
        });
        if let Some(id) = own {
            return Ok((id, Chosen::Own));
        }
        // Another node's freed ID: first one whose floor this node's clock
        // has passed, else one whose floor is at most the skew bound ahead
        // of the registry's clock (the node waits for it: it issues after
        // its `issue_after_ms`). A floor further ahead keeps the ID from
        // everyone, and counts against its owner's share
        // ([`Registry::withheld`]).
        let within = |bound: u64| {
            move |id: &u32| free(id) && self.slot(*id).is_none_or(|s| s.last_timestamp_ms <= bound)
        };
        let ahead = registry_now_ms.saturating_add(self.config.max_skew_ms);
        ids.clone()
            .find(within(ask.node_now_ms))
            .or_else(|| ids.clone().find(within(ahead)))
            .map(|id| (id, Chosen::Free))
            .ok_or(Error::NoFreeWorkerId {
                capacity: self.config.capacity,
            })
    }
}
