//! Views: the dashboard and its assets, health and the layout, decoding a
//! snowflake ID, this isolate's monitor, Prometheus metrics and a tag's
//! history.

use edgeleaf::{code::ErrorCode, Layout};
use edgeleaf_rules::wire::api::{Decoded, Health, LayoutView, Ping};
use worker::Response;

use super::{Cx, ROUTES};
use crate::api::{json, ApiError, ApiResult};
use crate::fleet;
use crate::history;
use crate::metrics;
use crate::monitor;

/// The dashboard page (`www/index.html`), served at `/`, and its chart
/// library (uPlot, from the npm packages `make test` / `make dev` install).
const DASHBOARD: &str = include_str!("../../../www/index.html");
const UPLOT_JS: &str = include_str!("../../../node_modules/uplot/dist/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../../node_modules/uplot/dist/uPlot.min.css");

fn asset(body: &str, content_type: &str) -> ApiResult<Response> {
    let mut res = Response::ok(body)?;
    res.headers_mut().set("Content-Type", content_type)?;
    Ok(res)
}

/// `GET /`: the dashboard, a static page that talks to this API with the
/// token its user types in. No other page may frame it (a framed page
/// with a token typed in could be clicked through by the framing one).
pub async fn dashboard(_: Cx) -> ApiResult<Response> {
    let mut res = asset(DASHBOARD, "text/html; charset=utf-8")?;
    deny_framing(&mut res)?;
    Ok(res)
}

/// Sets `frame-ancestors 'none'` in the response's Content-Security-Policy
/// (kept with any other directive it has, replacing any other
/// `frame-ancestors`) and `X-Frame-Options: DENY` (for browsers without
/// CSP level 2).
fn deny_framing(res: &mut Response) -> ApiResult<()> {
    let headers = res.headers_mut();
    let existing = headers.get("Content-Security-Policy")?.unwrap_or_default();
    let mut directives: Vec<&str> = existing
        .split(';')
        .map(str::trim)
        .filter(|d| !d.is_empty() && !d.to_ascii_lowercase().starts_with("frame-ancestors"))
        .collect();
    directives.push("frame-ancestors 'none'");
    headers.set("Content-Security-Policy", &directives.join("; "))?;
    headers.set("X-Frame-Options", "DENY")?;
    Ok(())
}

/// `GET /assets/uplot.js`.
pub async fn uplot_js(_: Cx) -> ApiResult<Response> {
    asset(UPLOT_JS, "text/javascript; charset=utf-8")
}

/// `GET /assets/uplot.css`.
pub async fn uplot_css(_: Cx) -> ApiResult<Response> {
    asset(UPLOT_CSS, "text/css; charset=utf-8")
}

/// `GET /v1/ping`.
pub async fn ping(_: Cx) -> ApiResult<Response> {
    json(200, &Ping { ok: true })
}

/// `GET /v1/health`: the layout and every route.
pub async fn health(cx: Cx) -> ApiResult<Response> {
    let routes: Vec<String> = ROUTES
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let health = Health {
        layout: LayoutView::from(&cx.config()?.layout),
        ok: true,
        routes,
    };
    json(200, &health)
}

/// `GET /v1/snowflake/{id}`: an ID's parts under the service's layout.
pub async fn decode(cx: Cx) -> ApiResult<Response> {
    json(200, &decoded(cx.config()?.layout, cx.arg())?)
}

/// The parts of the ID `raw` (decimal) under `layout`: the decode route's
/// and the service binding's.
pub fn decoded(layout: Layout, raw: &str) -> ApiResult<Decoded> {
    let id: u64 = raw
        .parse()
        .ok()
        .filter(|_| raw.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidId,
                format!(
                    "id: expected a decimal integer in 0..={}, found {raw:?}",
                    layout.max_id()
                ),
            )
        })?;
    let parts = layout.decompose(id)?;
    let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(parts.timestamp_ms as f64));
    Ok(Decoded::new(id, &parts, String::from(date.to_iso_string())))
}

/// `GET /v1/monitor`.
pub async fn monitor(cx: Cx) -> ApiResult<Response> {
    json(200, &monitor::monitor(cx.access()?))
}

/// `GET /metrics?top=N&tag=a&tag=b`.
pub async fn metrics(cx: Cx) -> ApiResult<Response> {
    let query = metrics::query(cx.req.url())?;
    let text = metrics::metrics(&cx.env, cx.access()?, &query).await?;
    let mut res = Response::ok(text)?;
    res.headers_mut()
        .set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")?;
    Ok(res)
}

/// `GET /v1/fleet?minutes=N&top=K`: the dashboard's charts.
pub async fn fleet(cx: Cx) -> ApiResult<Response> {
    let minutes = history::minutes_or(cx.req.url(), fleet::DEFAULT_MINUTES)?;
    let top = fleet::top(cx.req.url())?;
    json(
        200,
        &fleet::answer(&cx.env, cx.access()?, minutes, top).await?,
    )
}

/// `GET /v1/tags/{tag}/history?minutes=N`.
pub async fn history(cx: Cx) -> ApiResult<Response> {
    let tag = cx.tag()?;
    let minutes = history::minutes(cx.req.url())?;
    json(200, &history::answer(&cx.env, &tag, minutes).await?)
}
