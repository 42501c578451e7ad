//! `Catalog`: one Durable Object that lists every tag, for the admin API and
//! the dashboard. The tag objects stay the owners of `max_id`; the catalog
//! knows which tags exist and holds what each last reported of itself (its
//! view and stats: `TagSummary`), so that a listing or a scrape reads one
//! object whatever the number of tags.
//!
//! Its table's `summary`, `rate` and `quiet_ms` columns are new in 0.2, added to the
//! table the release before made (which reads only `biz_tag`, so a rollback
//! reads it still).

pub mod stubs;

use edgeleaf_rules::wire::catalog::{
    CatalogRequest, Done, PageQuery, TagEntry, TagList, TagPage, TagSummary,
};
use serde::Deserialize;
use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, SqlStorageValue, State,
};

use crate::api::{json, ApiError, ApiResult};
use crate::clock::now_ms;
use crate::objects::serve::serve;
use crate::objects::sql::{create_tables, Sql};

/// The most entries of one page.
pub const MAX_PAGE: u32 = 1000;

#[durable_object]
pub struct Catalog {
    sql: Sql,
    env: Env,
    /// Set when the table could not be made: every call answers it.
    broken: Option<ApiError>,
}

#[derive(Deserialize)]
struct Entry {
    biz_tag: String,
}

#[derive(Deserialize)]
struct Row {
    biz_tag: String,
    summary: Option<String>,
}

#[derive(Deserialize)]
struct Count {
    n: i64,
}

impl Catalog {
    fn list(&self) -> ApiResult<Response> {
        let rows: Vec<Entry> = self
            .sql
            .exec("SELECT biz_tag FROM tags ORDER BY biz_tag", None)?
            .to_array()?;
        let tags: Vec<String> = rows.into_iter().map(|r| r.biz_tag).collect();
        json(200, &TagList { tags })
    }

    /// Keeps each summary of a tag still listed; stats not given keep the
    /// last ones reported.
    fn report(&self, summaries: Vec<TagSummary>) -> ApiResult<Response> {
        for s in summaries {
            let old = self.summary_of(&s.tag.biz_tag)?;
            let stats = s.stats.or(old.and_then(|o| o.stats));
            #[allow(clippy::cast_possible_wrap)] // a rate far below 2^63
            let rate = stats.as_ref().map_or(0, |st| st.ids_per_hour as i64);
            #[allow(clippy::cast_possible_wrap)] // a time far below 2^63
            let quiet = stats.as_ref().map_or(0, |st| st.quiet_at_ms() as i64);
            let name = s.tag.biz_tag.clone();
            let text = serde_json::to_string(&TagSummary { tag: s.tag, stats })
                .map_err(|e| ApiError::store_error(format!("catalog: summary: {e}")))?;
            self.sql.exec(
                "UPDATE tags SET summary = ?, rate = ?, quiet_ms = ? WHERE biz_tag = ?",
                vec![text.into(), rate.into(), quiet.into(), name.into()],
            )?;
        }
        json(200, &Done {})
    }

    fn summary_of(&self, tag: &str) -> ApiResult<Option<TagSummary>> {
        let rows: Vec<Row> = self
            .sql
            .exec(
                "SELECT biz_tag, summary FROM tags WHERE biz_tag = ?",
                vec![tag.into()],
            )?
            .to_array()?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| read_summary(r.summary)))
    }

    fn page(&self, q: &PageQuery) -> ApiResult<Response> {
        let mut filter = Vec::new();
        let mut args: Vec<SqlStorageValue> = Vec::new();
        if let Some(t) = &q.exact {
            filter.push("biz_tag = ?");
            args.push(t.as_str().into());
        }
        if let Some(p) = &q.prefix {
            filter.push("substr(biz_tag, 1, length(?)) = ?");
            args.push(p.as_str().into());
            args.push(p.as_str().into());
        }
        if let Some(c) = q.contains.as_deref().filter(|c| !c.is_empty()) {
            filter.push("instr(biz_tag, ?) > 0");
            args.push(c.into());
        }
        let matching = if filter.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", filter.join(" AND "))
        };
        let total: Vec<Count> = self
            .sql
            .exec(
                &format!("SELECT COUNT(*) AS n FROM tags {matching}"),
                args.clone(),
            )?
            .to_array()?;
        let total = total.first().map_or(0, |c| c.n.max(0).unsigned_abs());
        let limit = q.limit.clamp(1, MAX_PAGE);
        let mut page_args = args;
        let now = now_ms();
        let order = if q.by_rate {
            // The rate reported, 0 once its last allocation left the hour
            // (no tag reports as its rate falls: `TagStats::at`). Within
            // the hour, the order is by the rates reported.
            #[allow(clippy::cast_possible_wrap)] // a time far below 2^63
            page_args.push((now as i64).into());
            "ORDER BY (CASE WHEN quiet_ms > ? THEN rate ELSE 0 END) DESC, biz_tag"
        } else {
            if let Some(after) = &q.after {
                filter.push("biz_tag > ?");
                page_args.push(after.as_str().into());
            }
            "ORDER BY biz_tag"
        };
        let page_filter = if filter.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", filter.join(" AND "))
        };
        // One more than the page, to know whether another follows.
        page_args.push(i64::from(limit + 1).into());
        let mut rows: Vec<Row> = self
            .sql
            .exec(
                &format!("SELECT biz_tag, summary FROM tags {page_filter} {order} LIMIT ?"),
                page_args,
            )?
            .to_array()?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next = (more && !q.by_rate)
            .then(|| rows.last().map(|r| r.biz_tag.clone()))
            .flatten();
        let entries = rows
            .into_iter()
            .map(|r| TagEntry {
                // Its rate as of now: its minutes aged (`TagStats::at`).
                summary: read_summary(r.summary).map(|s| TagSummary {
                    stats: s.stats.map(|st| st.at(now)),
                    ..s
                }),
                biz_tag: r.biz_tag,
            })
            .collect();
        json(
            200,
            &TagPage {
                entries,
                total,
                next,
            },
        )
    }
}

/// A summary kept; one that no longer reads is as none (the next report
/// or listing writes it again).
fn read_summary(text: Option<String>) -> Option<TagSummary> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

/// Adds a column the table of the release before lacks (a no-op when it
/// has it).
fn add_column(sql: &Sql, ddl: &str) -> ApiResult<()> {
    match sql.exec(ddl, None) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().contains("duplicate column") => Ok(()),
        Err(e) => Err(ApiError::store_error(format!(
            "store: adding a column: {e}"
        ))),
    }
}

impl DurableObject for Catalog {
    fn new(state: State, env: Env) -> Self {
        let sql = Sql::new(&state);
        let broken = create_tables(
            &sql,
            &["CREATE TABLE IF NOT EXISTS tags(biz_tag TEXT PRIMARY KEY)"],
        )
        .and_then(|()| add_column(&sql, "ALTER TABLE tags ADD COLUMN summary TEXT"))
        .and_then(|()| {
            add_column(
                &sql,
                "ALTER TABLE tags ADD COLUMN rate INTEGER NOT NULL DEFAULT 0",
            )
        })
        .and_then(|()| {
            add_column(
                &sql,
                "ALTER TABLE tags ADD COLUMN quiet_ms INTEGER NOT NULL DEFAULT 0",
            )
        })
        .err();
        Catalog { sql, env, broken }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(&self.env, self.broken.as_ref(), &req, async |r| match r {
            CatalogRequest::List => self.list(),
            CatalogRequest::Add { biz_tag } => self
                .sql
                .exec(
                    "INSERT OR IGNORE INTO tags(biz_tag) VALUES (?)",
                    vec![biz_tag.into()],
                )
                .map_err(ApiError::from)
                .and_then(|_| json(200, &Done {})),
            CatalogRequest::Remove { biz_tag } => self
                .sql
                .exec("DELETE FROM tags WHERE biz_tag = ?", vec![biz_tag.into()])
                .map_err(ApiError::from)
                .and_then(|_| json(200, &Done {})),
            CatalogRequest::Report { summaries } => self.report(summaries),
            CatalogRequest::Page(q) => self.page(&q),
        })
        .await
    }
}
