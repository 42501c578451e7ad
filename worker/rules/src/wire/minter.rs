//! A snowflake minter (`SnowflakeMinter`): its request and its answer.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use super::WireError;

/// What a minter is asked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum MinterRequest {
    /// A batch of IDs: answers [`Batch`].
    Mint(MintRequest),
}

impl super::StoreRequest for MinterRequest {
    fn repeatable(&self) -> bool {
        // A batch minted again leaves the first unused: a gap, never an ID
        // twice.
        true
    }
}

/// A batch to mint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MintRequest {
    /// Which minter this object is (it is named `minter-{index}`).
    pub index: u32,
    /// How many IDs.
    pub count: u32,
}

/// The answer: ranges `[start, end)` as decimal strings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    /// The minter's worker ID.
    pub worker_id: u32,
    /// `[start, end)`, decimal.
    pub ranges: Vec<(String, String)>,
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
