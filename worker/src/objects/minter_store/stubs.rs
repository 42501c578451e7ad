//! What callers use of a minter: a batch of snowflake IDs, and perhaps a
//! right to mint.

use edgeleaf::minted::{MintRight, MinterPools};
use edgeleaf_rules::wire::{minter::Batch, minter::MintRequest, minter::MinterRequest};
use worker::Env;

use crate::api::{ApiError, ApiResult};
use crate::config::Config;
use crate::objects::call::{call, not_understood, Store};

/// A batch of `count` IDs from minter `index` (in its region): ranges
/// `[start, end)`, and the right to mint it lent along with them when
/// `right` asked for one (`None`: it lent none).
pub async fn mint(
    env: &Env,
    index: u32,
    count: u32,
    right: bool,
) -> ApiResult<(Vec<(u64, u64)>, Option<MintRight>)> {
    let config = Config::cached(env)?;
    let region = MinterPools::over_regions(config.minters).minter_region(index);
    let ask = |right| {
        MinterRequest::Mint(MintRequest {
            index,
            count,
            regional: true,
            right,
        })
    };
    let store = Store::Minter(index, region);
    let batch: Batch = match call(env, store, &ask(right)).await {
        // A minter of 0.1.0 refuses a field it does not know (docs/design.md,
        // "Two releases at once"): asked again as that release asks, it lends
        // nothing, and the buffer asks for no right for a while.
        Err(e) if right && not_understood(&e) => call(env, store, &ask(false)).await?,
        answer => answer?,
    };
    let ranges = batch
        .numbers()
        .map_err(|e| ApiError::store_error(format!("minter {index}: {e}")))?;
    Ok((ranges, batch.right))
}
