//! Tags (Leaf's `biz_tag`s): the catalog, each tag's object, and revealing
//! an opaque tag's IDs.

use edgeleaf::{code::ErrorCode, opaque::OpaqueDomain};
use serde::Deserialize;
use serde_json::json;
use worker::Response;

use super::Cx;
use crate::api::{json, ApiError, ApiResult};
use crate::tag_store::{self, GivenId, TagUpsert, TagView};
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
    json(200, &json!({ "tags": tags }))
}

/// `GET /v1/tags/{tag}`.
pub async fn get(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    json(200, &tag_store::get(&cx.env, &tag).await?)
}

/// `PUT /v1/tags/{tag}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TagPut {
    step: Option<u64>,
    max_id: Option<serde_json::Value>,
    description: Option<String>,
    monotonic: Option<bool>,
    /// `{"bits": 32..=63}` or `{"digits": 6..=18}`, at creation.
    opaque: Option<OpaqueDomain>,
    /// The largest step granted: `step..=1,000,000`.
    max_step: Option<u64>,
}

/// `PUT /v1/tags/{tag}`: creates the tag or updates it, and lists it.
pub async fn put(mut cx: Cx) -> ApiResult<Response> {
    let default_step = cx.config()?.default_step;
    let tag = cx.tag()?;
    let put: TagPut = cx.body().await?;
    let max_id = match put.max_id {
        None => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Number(n)) if n.is_u64() => Some(n.to_string()),
        Some(other) => {
            return Err(ApiError::new(
                ErrorCode::OutOfRange,
                format!("maxId: expected a decimal string, found {other}"),
            ));
        }
    };
    let upsert = TagUpsert {
        biz_tag: tag.clone(),
        step: put.step,
        max_id,
        description: put.description,
        monotonic: put.monotonic,
        opaque: put.opaque.map(OpaqueDomain::validate).transpose()?,
        max_step: put.max_step,
        default_step,
    };
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
    json(200, &json!({ "deleted": view }))
}

/// `POST /v1/tags/{tag}/reveal`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevealBody {
    /// A decimal string (or a number below 2^53).
    id: serde_json::Value,
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
