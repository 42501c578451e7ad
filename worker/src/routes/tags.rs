//! Tags (Leaf's `biz_tag`s): the catalog, each tag's object, and revealing
//! an opaque tag's IDs.

use edgeleaf::{code::ErrorCode, region::Region};
use edgeleaf_rules::access::{Access, TagLimit};
use edgeleaf_rules::wire::allocator::AllocatorViews;
use edgeleaf_rules::wire::catalog::{PageQuery, TagEntry, TagSummary};
use edgeleaf_rules::wire::tag::{
    Deleted, GivenId, RevealBody, Revealed, TagPut, TagView, TagViews,
};
use worker::{Env, Response};

use super::Cx;
use crate::api::{json, ApiError, ApiResult};
use crate::isolate;
use crate::objects::allocator_store::stubs as allocator_store;
use crate::objects::catalog::{stubs as catalog, MAX_PAGE};
use crate::objects::tag_store::stubs as tag_store;

/// A listing's default page size (`?limit=`, at most `catalog::MAX_PAGE`).
pub const DEFAULT_PAGE: u32 = 100;

/// The most tags of one page read from their own objects (those the catalog
/// holds no summary of): with the catalog's page and its report, well
/// within the 50 subrequests a request of Cloudflare's Free plan may make.
pub const MAX_READ_PER_PAGE: usize = 32;

/// `?cursor=`, `?limit=` and `?q=` of a listing.
pub struct ListQuery {
    pub cursor: Option<String>,
    pub limit: u32,
    pub contains: Option<String>,
}

impl ListQuery {
    pub fn from_url(url: &worker::Url, default_limit: u32) -> ApiResult<ListQuery> {
        let get = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        let limit = match get("limit") {
            None => default_limit,
            Some(raw) => raw
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_PAGE).contains(n))
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::OutOfRange,
                        format!("limit: expected 1..={MAX_PAGE}, found {raw:?}"),
                    )
                })?,
        };
        let text = |name: &str| -> ApiResult<Option<String>> {
            match get(name).filter(|v| !v.is_empty()) {
                Some(v) if v.len() > 64 => Err(ApiError::new(
                    ErrorCode::OutOfRange,
                    format!("{name}: expected at most 64 characters, found {}", v.len()),
                )),
                v => Ok(v),
            }
        };
        Ok(ListQuery {
            cursor: text("cursor")?,
            limit,
            contains: text("q")?,
        })
    }

    /// The catalog's query for a caller with `access`.
    pub fn page(&self, access: &Access, by_rate: bool) -> PageQuery {
        let (exact, prefix) = match &access.tags {
            TagLimit::Any => (None, None),
            TagLimit::Exact(t) => (Some(t.clone()), None),
            TagLimit::Prefix(p) => (None, Some(p.clone())),
        };
        PageQuery {
            after: self.cursor.clone(),
            limit: self.limit,
            exact,
            prefix,
            contains: self.contains.clone(),
            by_rate,
        }
    }
}

/// `GET /v1/tags`: one page of the tags the caller may see (a key limited
/// to some tags sees only those), by name, from the summaries the catalog
/// holds; `next` is the cursor of the page after.
pub async fn list(cx: Cx) -> ApiResult<Response> {
    let access = cx.access()?;
    let query = ListQuery::from_url(cx.req.url(), DEFAULT_PAGE)?;
    let Some(page) = catalog::page(&cx.env, query.page(access, false)).await? else {
        return list_each(&cx, access, &query).await;
    };
    let (views, unavailable, next) = views_of(&cx.env, page.entries, page.next).await;
    json(
        200,
        &TagViews {
            tags: views,
            unavailable,
            next,
            total: Some(page.total),
        },
    )
}

/// The views of a page's tags: from their summaries, and for at most
/// `MAX_READ_PER_PAGE` tags without one, from their objects (then kept by
/// the catalog: each listing leaves fewer to read). A page with more is cut
/// after its last tag read (its `next` then starts after it). A page of at
/// most `MAX_READ_PER_PAGE` tags is read from its tags.
pub async fn views_of(
    env: &worker::Env,
    mut entries: Vec<TagEntry>,
    mut next: Option<String>,
) -> (Vec<TagView>, Vec<String>, Option<String>) {
    let unread = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.summary.is_none());
    if let Some((cut, _)) = unread.clone().nth(MAX_READ_PER_PAGE) {
        entries.truncate(cut);
        next = entries.last().map(|e| e.biz_tag.clone());
    }
    // A page small enough is read whole from its tags (exact, as before
    // summaries: a few tags' listing shows each one's max_id of now).
    if entries.len() <= MAX_READ_PER_PAGE {
        for e in &mut entries {
            e.summary = None;
        }
    }
    let unread: Vec<String> = entries
        .iter()
        .filter(|e| e.summary.is_none())
        .map(|e| e.biz_tag.clone())
        .collect();
    let read = futures::future::join_all(unread.iter().map(|t| tag_store::get(env, t))).await;
    let mut found = std::collections::BTreeMap::new();
    let mut unavailable = Vec::new();
    for (name, view) in unread.into_iter().zip(read) {
        match view {
            Ok(v) => {
                found.insert(name, v);
            }
            // Deleted since the catalog was read: no longer a tag.
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(_) => unavailable.push(name),
        }
    }
    if !found.is_empty() {
        let summaries = found
            .values()
            .map(|v| TagSummary {
                tag: v.clone(),
                stats: None,
            })
            .collect();
        // Kept for the next listing; one not kept is read again then.
        let _ = catalog::report(env, summaries).await;
    }
    let views = entries
        .into_iter()
        .filter_map(|e| match e.summary {
            Some(s) => Some(s.tag),
            None => found.remove(&e.biz_tag),
        })
        .collect();
    (views, unavailable, next)
}

/// `GET /v1/tags` from a catalog of the release before (during a deploy):
/// its names, each tag's view from its object, a page at a time (of at
/// most `MAX_READ_PER_PAGE`, so that it too stays within the Free plan's
/// subrequests).
async fn list_each(cx: &Cx, access: &Access, query: &ListQuery) -> ApiResult<Response> {
    let tags = catalog::list(&cx.env).await?;
    let mut seen: Vec<&String> = tags
        .iter()
        .filter(|t| access.sees_tag(t))
        .filter(|t| {
            query
                .contains
                .as_ref()
                .is_none_or(|c| t.contains(c.as_str()))
        })
        .collect();
    let total = seen.len() as u64;
    seen.retain(|t| {
        query
            .cursor
            .as_ref()
            .is_none_or(|c| t.as_str() > c.as_str())
    });
    let limit = (query.limit as usize).min(MAX_READ_PER_PAGE);
    let more = seen.len() > limit;
    seen.truncate(limit);
    let next = more.then(|| seen.last().map(|t| (*t).clone())).flatten();
    let views = futures::future::join_all(seen.iter().map(|t| tag_store::get(&cx.env, t))).await;
    let (mut listed, mut unavailable) = (Vec::new(), Vec::new());
    for (name, view) in seen.into_iter().zip(views) {
        match view {
            Ok(v) => listed.push(v),
            Err(e) if e.code == ErrorCode::NotFound => {}
            Err(_) => unavailable.push(name.clone()),
        }
    }
    json(
        200,
        &TagViews {
            tags: listed,
            unavailable,
            next,
            total: Some(total),
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
    // Listings show the change at once (its stats follow from the tag's
    // own report); one not kept is read from the tag by the next listing.
    let summary = TagSummary {
        tag: view.clone(),
        stats: None,
    };
    let _ = catalog::report(&cx.env, vec![summary]).await;
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
