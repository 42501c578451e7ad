//! A public request as the routes read it: its method, path, headers and
//! URL, each read from the platform's `Request` once.
//!
//! Not `worker::Request`: building one reads `request.cf`, and workerd
//! builds that object from the platform's JSON the first time it is read
//! in a request: 13–15% of the CPU of any request, the no-op's included
//! (tests/bench/profile.mjs; docs/benchmarks.md). The routes need one field
//! of it, the colo, which is the isolate's own (`scope::isolate_region`).

use worker::worker_sys::web_sys;
use worker::{Headers, Method, Url};

use crate::api::{ApiError, ApiResult};

/// An incoming request of the public API.
pub struct Incoming {
    inner: web_sys::Request,
    /// `None`: a method outside `worker::Method`'s list (its `From<String>`
    /// reads those as GET: `QUERY` would reach GET routes).
    method: Option<Method>,
    path: String,
    headers: Headers,
    url: Url,
}

impl Incoming {
    /// Reads what every route needs of `inner`; a URL that does not parse
    /// (the platform's always does) names no route.
    pub fn new(inner: web_sys::Request) -> ApiResult<Incoming> {
        let raw = inner.url();
        let url = raw.parse::<Url>().map_err(|e| {
            ApiError::not_found(format!("route: expected a URL, found {raw:?} ({e})"))
        })?;
        Ok(Incoming {
            method: known_method(&inner.method()),
            path: url.path().into(),
            headers: Headers(inner.headers()),
            url,
            inner,
        })
    }

    /// The platform's request (its body, its `cf`).
    pub fn inner(&self) -> &web_sys::Request {
        &self.inner
    }

    /// The method, if `worker::Method` names it (`None`: answered 405).
    pub fn method(&self) -> Option<Method> {
        self.method.clone()
    }

    /// The URL's path, percent-encoded as the URL is.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// Whether the URL's host is a loopback one (`localhost`, 127.0.0.0/8,
    /// ::1): only such a request may meet a test setting (never a deployed
    /// Worker's).
    pub fn on_loopback(&self) -> bool {
        match self.url.host() {
            Some(worker::url::Host::Domain(d)) => d == "localhost",
            Some(worker::url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(worker::url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        }
    }
}

/// The method of that exact name (methods are case-sensitive; fetch has
/// already upper-cased the six it normalizes).
fn known_method(name: &str) -> Option<Method> {
    Method::all().into_iter().find(|m| m.as_ref() == name)
}
