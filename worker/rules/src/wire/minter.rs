//! A snowflake minter (`SnowflakeMinter`): its request and its answer.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use edgeleaf::minted::MintRight;
use serde::{Deserialize, Serialize};

use super::WireError;

/// What a minter is asked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MinterRequest {
    /// A batch of IDs: answers [`Batch`].
    Mint(MintRequest),
    /// From its regional successor (`minter-{region}-{index}`) to a minter
    /// of before regions (`minter-{index}`): give me your saved state and
    /// never mint again. Answers [`HandedOver`].
    HandOver(HandOverRequest),
}

impl super::StoreRequest for MinterRequest {
    fn repeatable(&self) -> bool {
        // A batch minted again leaves the first unused: a gap, never an ID
        // twice; a right lent again leaves the first one's slice unused
        // until it ends. A state is handed over once: asked again, the answer is
        // none (the successor waits for the old grant to lapse).
        matches!(self, MinterRequest::Mint(_))
    }
}

/// A batch to mint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MintRequest {
    /// Which minter this object is (it is named `minter-{region}-{index}`;
    /// before regions, `minter-{index}`).
    pub index: u32,
    /// How many IDs.
    pub count: u32,
    /// Sent to a regional minter (`minter-{region}-{index}`): at its first
    /// request it takes over from `minter-{index}`. `false` (absent): from
    /// an isolate of before regions, to `minter-{index}` itself.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub regional: bool,
    /// Lend a right to mint too (`Batch::right`), if the minter has one to
    /// lend. `false` (absent): a batch alone, as from an isolate of before
    /// rights. A minter of 0.1.0 refuses the field (it refused unknown
    /// fields): the isolate asks that one again without it.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub right: bool,
}

/// A hand-over to minter `index`'s regional successor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandOverRequest {
    /// Which minter (the worker ID both objects mint under).
    pub index: u32,
}

/// The answer to a hand-over: the old minter's saved holder state (its
/// JSON, as stored), the first time it is asked; `None` after (or when it
/// never minted).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandedOver {
    /// The state, as the old object stored it.
    pub state: Option<String>,
}

/// The answer: ranges `[start, end)` as decimal strings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    /// The minter's worker ID.
    pub worker_id: u32,
    /// `[start, end)`, decimal.
    pub ranges: Vec<(String, String)>,
    /// The right to mint lent along with the batch, when asked for
    /// (`MintRequest::right`) and the minter had one to lend; absent
    /// otherwise, and from a minter of before rights. Its numbers are
    /// JSON numbers (Unix ms and small counts: all below 2^53).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub right: Option<MintRight>,
}

impl Batch {
    /// The ranges as numbers.
    pub fn numbers(&self) -> Result<Vec<(u64, u64)>, WireError> {
        self.ranges
            .iter()
            .map(|(s, e)| match (s.parse(), e.parse()) {
                (Ok(s), Ok(e)) => Ok((s, e)),
                _ => Err(WireError::Unreadable(format!(
                    "range [{s}, {e}) is not two integers"
                ))),
            })
            .collect()
    }
}
