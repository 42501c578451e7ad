//! The block ask: the lease the allocator records before it sends it to the
//! root, under a random request ID, and sends again until answered.

use crate::rand::RandSource;
use crate::tag::{Asker, SegmentAsk};
use crate::wait::DEFAULT_TAKE_OVER_MS;
use alloc::string::String;

use super::BlockAllocator;

/// The random bytes of a block ask's request ID (written as hex): 128 bits,
/// so that no two asks of any allocator ever share one.
pub const BLOCK_REQUEST_ID_BYTES: usize = 16;

/// A block lease, as the allocator asks the root for it: recorded in the
/// state before it is sent, and sent again unchanged until answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct BlockAsk {
    /// The lease's request ID (hex of [`BLOCK_REQUEST_ID_BYTES`] random bytes).
    pub request_id: String,
    /// The step asked for (`None`: the tag's own step, for the first block,
    /// before the allocator knows it).
    pub step: Option<u64>,
}

impl BlockAsk {
    /// The ask as the root's lease rule takes it
    /// ([`TagRecord::lease_segment`](crate::tag::TagRecord::lease_segment)):
    /// from `allocator` (the allocator's own name, e.g. `"{tag}@{region}"`,
    /// a credential no one else holds), one of the service's own.
    pub fn as_lease<'a>(&'a self, allocator: &'a str) -> SegmentAsk<'a> {
        SegmentAsk {
            step: self.step,
            request_id: Some(&self.request_id),
            caller: Asker::Own(allocator),
            for_isolate: true,
        }
    }
}

/// A request ID of [`BLOCK_REQUEST_ID_BYTES`] random bytes, as hex.
fn request_id(rand: &mut impl RandSource) -> String {
    let mut bytes = [0u8; BLOCK_REQUEST_ID_BYTES];
    for chunk in bytes.chunks_exact_mut(4) {
        chunk.copy_from_slice(&rand.next_u32().to_be_bytes());
    }
    crate::secret::to_hex(&bytes)
}

impl BlockAllocator {
    /// Records a new block ask (the buffer asked for a load), in flight from
    /// `now_ms`.
    pub(super) fn new_ask(&mut self, now_ms: u64, rand: &mut impl RandSource) -> BlockAsk {
        let ask = BlockAsk {
            request_id: request_id(rand),
            step: self.block_step(now_ms),
        };
        self.pending = Some(ask.clone());
        self.in_flight.start(now_ms);
        ask
    }

    /// The recorded ask again, when no copy of it is in flight from this
    /// instance (restored from storage, failed, or presumed lost).
    pub(super) fn ask_to_send_again(&mut self, now_ms: u64) -> Option<BlockAsk> {
        let ask = self.pending.as_ref()?;
        self.in_flight
            .claim(now_ms, DEFAULT_TAKE_OVER_MS)
            .then(|| ask.clone())
    }
}
