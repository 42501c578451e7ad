//! What callers use of a tag's object: one function per `TagRequest`.

use edgeleaf_rules::wire::{
    api::IdList, tag::AllocateRequest, tag::GivenId, tag::Revealed, tag::SegmentLease,
    tag::TagHistory, tag::TagRequest, tag::TagUpsert, tag::TagView, tag::TakeBackRequest,
    tag::TakenBack,
};
use worker::Env;

use edgeleaf_rules::wire::catalog::Done;

use crate::api::ApiResult;
use crate::objects::call::{call, Store};

/// Creates or updates `tag` as `upsert` says.
pub async fn put(env: &Env, tag: &str, upsert: TagUpsert) -> ApiResult<TagView> {
    call(env, Store::Tag(tag), &TagRequest::Put(upsert)).await
}

/// The live tag `tag` (404 if none).
pub async fn get(env: &Env, tag: &str) -> ApiResult<TagView> {
    call(env, Store::Tag(tag), &TagRequest::Get).await
}

/// Deletes `tag`: its last view.
pub async fn delete(env: &Env, tag: &str) -> ApiResult<TagView> {
    call(env, Store::Tag(tag), &TagRequest::Delete).await
}

/// `tag` and its remembered allocations.
pub async fn history(env: &Env, tag: &str) -> ApiResult<TagHistory> {
    call(env, Store::Tag(tag), &TagRequest::History).await
}

/// A segment of `tag`.
pub async fn allocate(env: &Env, tag: &str, request: AllocateRequest) -> ApiResult<SegmentLease> {
    call(env, Store::Tag(tag), &TagRequest::Allocate(request)).await
}

/// Hands a leased range's unused tail back to `tag`'s root: a regional
/// allocator's retired block is taken only if nothing followed it; a
/// client's tail becomes a credit of its own key.
pub async fn take_back(env: &Env, tag: &str, request: TakeBackRequest) -> ApiResult<TakenBack> {
    call(env, Store::Tag(tag), &TagRequest::TakeBack(request)).await
}

/// What the opaque tag `tag` says of an ID.
pub async fn reveal(env: &Env, tag: &str, id: GivenId) -> ApiResult<Revealed> {
    call(env, Store::Tag(tag), &TagRequest::Reveal { id }).await
}

/// `count` IDs of the monotonic tag `tag`, from its object.
pub async fn ids(env: &Env, tag: &str, count: usize) -> ApiResult<Vec<u64>> {
    let count = count as u64;
    let list: IdList = call(env, Store::Tag(tag), &TagRequest::Ids { count }).await?;
    Ok(list.numbers()?)
}

/// Asks `tag`'s object to report its summary to the catalog (its own timer).
pub async fn report(env: &Env, tag: &str) -> ApiResult<Done> {
    call(env, Store::Tag(tag), &TagRequest::Report).await
}
