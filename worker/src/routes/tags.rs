//! Tags (Leaf's `biz_tag`s): the catalog, each tag's object, and revealing
//! an opaque tag's IDs.

use edgeleaf::code::ErrorCode;
use edgeleaf_rules::wire::tag::{Deleted, GivenId, RevealBody, TagPut, TagViews};
use worker::Response;

use super::Cx;
use crate::api::{json, ApiResult};
use crate::tag_store;
use crate::{catalog, isolate};

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
pub async fn put(mut cx: Cx) -> ApiResult<Response> {
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
    let view = tag_store::delete(&cx.env, &tag).await?;
    catalog::remove(&cx.env, &tag).await?;
    isolate::forget_tag(&tag);
    json(200, &Deleted { deleted: view })
}

/// `POST /v1/tags/{tag}/reveal`: an opaque ID's counter.
pub async fn reveal(mut cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    let RevealBody { id } = cx.body().await?;
    json(
        200,
        &tag_store::reveal(&cx.env, &tag, GivenId::from_json(&id)).await?,
    )
}
