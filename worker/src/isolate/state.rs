//! What one Worker isolate keeps in memory between requests: a segment
//! driver per tag, its snowflake holder or buffer of minted batches, and the
//! counters `/v1/monitor` and `/metrics` show. Requests interleave at every
//! await, so it is borrowed (`with`) only between awaits.

use std::cell::RefCell;
use std::collections::BTreeMap;

use edgeleaf::{
    holder::HolderConfig, holder::SnowflakeHolder, minted::MintConfig, minted::MintedBuffer,
    opaque::OpaqueIds, rand::SplitMix64, sources::TagSources,
};
use serde::Serialize;

use crate::api::ApiResult;
use crate::clock::random_u64;
use crate::config::Config;

#[derive(Default, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    pub segment_ids: u64,
    pub snowflake_ids: u64,
    pub refills: u64,
    pub refills_that_blocked: u64,
    pub store_calls: u64,
    pub minter_calls: u64,
    pub errors: u64,
    /// Segments loaded from the region's allocator.
    pub allocator_loads: u64,
    /// Loads that went to the tag's root because the allocator missed.
    pub root_fallbacks: u64,
}

#[derive(Default)]
pub(crate) struct TagState {
    /// Its segments, from the root and from each region's allocator: the
    /// core decides which driver a range goes to and the drain order.
    pub(crate) sources: TagSources,
    /// An opaque tag's permutation: the drivers hand out counters, and
    /// this turns them into the IDs served.
    pub(crate) opaque: Option<OpaqueIds>,
}

#[derive(Default)]
pub(crate) struct Isolate {
    pub(crate) tags: BTreeMap<String, TagState>,
    pub(crate) snowflake: Option<SnowflakeHolder<SplitMix64>>,
    pub(crate) minted: Option<MintedBuffer>,
    pub(crate) node_key: Option<String>,
    pub(crate) counters: Counters,
    pub(crate) started_ms: u64,
    /// A random name for this isolate (metrics labels, tag histories).
    id: String,
}

impl Isolate {
    /// The minted buffer, made on first use: the configured minters and
    /// staleness bound, starting at a random minter.
    pub(crate) fn minted(&mut self, config: &Config) -> ApiResult<&mut MintedBuffer> {
        Ok(match self.minted {
            Some(ref mut b) => b,
            None => self
                .minted
                .insert(MintedBuffer::new(config.layout, mint_config(config))?),
        })
    }

    /// The snowflake holder, made on first use.
    pub(crate) fn holder(
        &mut self,
        config: &Config,
    ) -> ApiResult<&mut SnowflakeHolder<SplitMix64>> {
        if let Some(ref mut h) = self.snowflake {
            return Ok(h);
        }
        let holder_config = HolderConfig {
            max_backward_ms: config.max_backward_ms,
            // An isolate has no store to restart from: after a lapse or
            // refusal it simply leases again.
            lease_again: true,
            ..HolderConfig::default()
        };
        let rand = SplitMix64::new(random_u64());
        Ok(self
            .snowflake
            .insert(SnowflakeHolder::with_rand(holder_config, rand)?))
    }
}

/// This isolate's buffer settings: the configured minters and staleness
/// bound, its region's minters first (the region of the request that made
/// it: an isolate runs in one colo), from a random one of them; rights to
/// mint asked for when the minters lend them (`SNOWFLAKE_RIGHTS`).
pub(crate) fn mint_config(config: &Config) -> MintConfig {
    let region = crate::scope::region();
    MintConfig {
        staleness_ms: config.staleness_ms,
        rights: config.rights,
        ..MintConfig::for_region(config.minters, region, random_u64())
    }
}

thread_local! {
    static ISOLATE: RefCell<Isolate> = RefCell::new(Isolate::default());
}

/// Runs `f` on this isolate's state (never across an await).
pub(crate) fn with<T>(f: impl FnOnce(&mut Isolate) -> T) -> T {
    ISOLATE.with(|i| f(&mut i.borrow_mut()))
}

/// This isolate's name: 8 random hex digits, drawn at its first use.
pub fn isolate_id() -> String {
    with(|i| {
        if i.id.is_empty() {
            i.id = format!("{:08x}", random_u64() & 0xffff_ffff);
        }
        i.id.clone()
    })
}

/// Counts an error answered by this isolate.
pub fn count_error() {
    with(|i| i.counters.errors += 1);
}

/// Forgets a deleted tag's buffer.
pub fn forget_tag(tag: &str) {
    with(|i| i.tags.remove(tag));
}
