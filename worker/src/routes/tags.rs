//! Tags (Leaf's `biz_tag`s): the catalog, each tag's object, and revealing
//! an opaque tag's IDs.

use edgeleaf_rules::wire::tag::{Deleted, GivenId, RevealBody, TagPut, TagView, TagViews};
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
    let views = futures::future::join_all(
        tags.iter()
            .filter(|t| access.sees_tag(t))
            .map(|t| tag_store::get(&cx.env, t)),
    )
    .await;
    let tags: Vec<TagView> = views.into_iter().filter_map(Result::ok).collect();
    json(200, &TagViews { tags })
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
    let view = tag_store::put(&cx.env, &tag, upsert).await?;
    catalog::add(&cx.env, &tag).await?;
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
