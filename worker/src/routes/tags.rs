//! Tags (Leaf's `biz_tag`s): the catalog, each tag's object, and revealing
//! an opaque tag's IDs.

use edgeleaf::{code::ErrorCode, region::Region};
use edgeleaf_rules::wire::allocator::AllocatorViews;
use edgeleaf_rules::wire::tag::{Deleted, GivenId, RevealBody, Revealed, TagPut, TagViews};
use worker::{Env, Response};

use super::Cx;
use crate::api::{json, ApiResult};
use crate::isolate;
use crate::objects::allocator_store::stubs as allocator_store;
use crate::objects::catalog::stubs as catalog;
use crate::objects::tag_store::stubs as tag_store;

/// `GET /v1/tags`: the tags the caller may see (a key limited to some tags
/// sees only those).
pub async fn list(cx: Cx) -> ApiResult<Response> {
    let access = cx.access()?;
    let tags = catalog::list(&cx.env).await?;
    let seen: Vec<&String> = tags.iter().filter(|t| access.sees_tag(t)).collect();
    let views = futures::future::join_all(seen.iter().map(|t| tag_store::get(&cx.env, t))).await;
    let (mut listed, mut unavailable) = (Vec::new(), Vec::new());
    for (name, view) in seen.into_iter().zip(views) {
        match view {
            Ok(v) => listed.push(v),
            // Deleted since the catalog was read: no longer a tag.
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(_) => unavailable.push(name.clone()),
        }
    }
    json(
        200,
        &TagViews {
            tags: listed,
            unavailable,
        },
    )
}

/// `GET /v1/tags/{tag}`.
pub async fn get(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    json(200, &tag_store::get(&cx.env, &tag).await?)
}

/// `PUT /v1/tags/{tag}`: creates the tag or updates it, and lists it.
pub async fn put(cx: Cx) -> ApiResult<Response> {
    let default_step = cx.config()?.default_step;
    let tag = cx.tag()?;
    let put: TagPut = cx.body().await?;
    let upsert = put.upsert(tag.clone(), default_step)?;
    // Listed first: a write that then fails or runs out of time leaves a
    // name the list passes over (not_found), never a tag nobody lists.
    catalog::add(&cx.env, &tag).await?;
    let view = tag_store::put(&cx.env, &tag, upsert).await?;
    json(200, &view)
}

/// `DELETE /v1/tags/{tag}`: its `max_id` is kept, so a tag made again with
/// the name continues after every ID it ever handed out.
pub async fn delete(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    let regional = cx.config()?.regional_allocators;
    let view = tag_store::delete(&cx.env, &tag).await?;
    catalog::remove(&cx.env, &tag).await?;
    isolate::forget_tag(&tag);
    if regional {
        // Its allocators stop serving it (their blocks kept as gaps: the
        // tag keeps its max_id). One that does not answer now serves what
        // its blocks hold, as other isolates' buffers do, then not_found.
        let _ = futures::future::join_all(
            Region::HOSTING
                .iter()
                .map(|r| allocator_store::retire(&cx.env, &tag, *r, false)),
        )
        .await;
    }
    json(200, &Deleted { deleted: view })
}

/// `POST /v1/tags/{tag}/reveal`: an opaque ID's counter.
pub async fn reveal(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    let RevealBody { id } = cx.body().await?;
    json(200, &revealed(&cx.env, &tag, &id).await?)
}

/// The counter of `id` (as the caller gave it) in the opaque `tag`: the
/// reveal route's and the service binding's.
pub async fn revealed(env: &Env, tag: &str, id: &serde_json::Value) -> ApiResult<Revealed> {
    tag_store::reveal(env, tag, GivenId::from_json(id)).await
}

/// `GET /v1/tags/{tag}/allocators`: the tag's allocator in each hosting
/// region (its blocks and runway), those that did not answer listed.
pub async fn allocators(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    // The tag exists (an unknown name creates no allocator views).
    tag_store::get(&cx.env, &tag).await?;
    let views = futures::future::join_all(
        Region::HOSTING
            .iter()
            .map(|r| allocator_store::view(&cx.env, &tag, *r)),
    )
    .await;
    let (mut allocators, mut unavailable) = (Vec::new(), Vec::new());
    for (region, view) in Region::HOSTING.into_iter().zip(views) {
        match view {
            Ok(v) => allocators.push(v),
            Err(_) => unavailable.push(region),
        }
    }
    json(
        200,
        &AllocatorViews {
            allocators,
            unavailable,
        },
    )
}

/// `POST /v1/tags/{tag}/allocators/{region}/retire`: the allocator gives
/// its blocks up; their unused tails go back to the tag when nothing was
/// handed out after them (IDs stay dense).
pub async fn retire_allocator(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    let region = Region::parse(cx.args.get(1).map_or("", String::as_str))?;
    json(
        200,
        &allocator_store::retire(&cx.env, &tag, region.hosting(), true).await?,
    )
}
