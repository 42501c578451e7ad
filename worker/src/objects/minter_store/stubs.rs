//! What callers use of a minter: a batch of snowflake IDs.

use edgeleaf::minted::MinterPools;
use edgeleaf_rules::wire::{minter::Batch, minter::MintRequest, minter::MinterRequest};
use worker::Env;

use crate::api::{ApiError, ApiResult};
use crate::config::Config;
use crate::objects::call::{call, Store};

/// A batch of `count` IDs from minter `index` (in its region):
/// ranges `[start, end)`.
pub async fn mint(env: &Env, index: u32, count: u32) -> ApiResult<Vec<(u64, u64)>> {
    let config = Config::cached(env)?;
    let region = MinterPools::over_regions(config.minters).minter_region(index);
    let request = MinterRequest::Mint(MintRequest {
        index,
        count,
        regional: true,
    });
    let batch: Batch = call(env, Store::Minter(index, region), &request).await?;
    batch
        .numbers()
        .map_err(|e| ApiError::store_error(format!("minter {index}: {e}")))
}
