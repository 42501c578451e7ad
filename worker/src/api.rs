//! The HTTP edge of the service: the one error type and its mapping to a
//! status and a JSON body, request bodies with a size limit.

use edgeleaf::code::ErrorCode;
pub use edgeleaf_rules::status::status;
use edgeleaf_rules::wire::{api::whole_numbers, api::ErrorBody, WireError};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use worker::worker_sys::web_sys;
use worker::{ByteStream, Headers, Response};

use crate::incoming::Incoming;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 4096;
/// Most IDs one request may take.
pub const MAX_IDS_PER_REQUEST: u64 = 1000;

/// Checks an ID count: 1..=`MAX_IDS_PER_REQUEST`.
pub fn checked_count(n: u64) -> ApiResult<usize> {
    if (1..=MAX_IDS_PER_REQUEST).contains(&n) {
        // n ≤ 1000.
        Ok(usize::try_from(n).unwrap_or(1))
    } else {
        Err(edgeleaf::Error::OutOfRange {
            what: "count",
            min: 1,
            max: MAX_IDS_PER_REQUEST,
            found: n,
        }
        .into())
    }
}

/// An HTTP error: a code from the one list (its status follows from it), a
/// message, and how long to wait when waiting helps.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    pub retry_after_s: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after_s: None,
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// With `Retry-After`, for failures that waiting mends.
    pub fn unavailable(code: ErrorCode, message: impl Into<String>, retry_after_ms: u64) -> Self {
        ApiError {
            retry_after_s: Some(retry_after_ms.div_ceil(1000).max(1)),
            ..Self::new(code, message)
        }
    }

    /// A store's answer that cannot be read, or a row that breaks the rules.
    pub fn store_error(message: impl Into<String>) -> Self {
        Self::unavailable(ErrorCode::StoreError, message, 1000)
    }

    pub fn status(&self) -> u16 {
        status(self.code)
    }

    /// The JSON error response.
    pub fn response(&self) -> Response {
        let body = ErrorBody::new(self.code, self.message.as_str());
        let mut res = Response::from_json(&body)
            .unwrap_or_else(|_| Response::empty().expect("empty response"))
            .with_status(self.status());
        let retry = self
            .retry_after_s
            .or_else(|| (self.status() == 503).then_some(1));
        if let Some(s) = retry {
            let _ = res.headers_mut().set("Retry-After", &s.to_string());
        }
        res
    }

    /// Rebuilds an error a Durable Object answered with.
    pub async fn from_response(mut res: Response) -> Self {
        let status = res.status_code();
        let retry_after_s = res
            .headers()
            .get("Retry-After")
            .ok()
            .flatten()
            .and_then(|v| v.parse().ok());
        let parsed: Option<serde_json::Value> = res.json().await.ok();
        let error = parsed.as_ref().and_then(|v| v.get("error"));
        let field = |k: &str| {
            error
                .and_then(|e| e.get(k))
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        ApiError {
            code: field("code")
                .and_then(|c| ErrorCode::parse(&c))
                .unwrap_or(ErrorCode::StoreError),
            message: field("message").unwrap_or_else(|| format!("the store answered {status}")),
            retry_after_s,
        }
    }
}

/// The one mapping from the core's errors to HTTP.
impl From<edgeleaf::Error> for ApiError {
    fn from(e: edgeleaf::Error) -> Self {
        use edgeleaf::Error as E;
        let retry_ms = match &e {
            E::ClockMovedBackwards { last_ms, now_ms } => Some(last_ms.saturating_sub(*now_ms)),
            E::NoFreeWorkerId { .. } | E::WorkerIdLimit { .. } => Some(10_000),
            _ => None,
        };
        let err = ApiError::new(e.error_code(), e.to_string());
        match retry_ms {
            Some(ms) => ApiError::unavailable(err.code, err.message, ms),
            None => err,
        }
    }
}

impl From<edgeleaf_rules::AccessError> for ApiError {
    fn from(e: edgeleaf_rules::AccessError) -> Self {
        ApiError::new(e.error_code(), e.to_string())
    }
}

/// A wire value that cannot be used: a broken store answer is a store
/// error; a caller's value keeps its code.
impl From<WireError> for ApiError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Unreadable(message) => ApiError::store_error(message),
            WireError::Invalid(code, message) => ApiError::new(code, message),
            WireError::Core(e) => e.into(),
        }
    }
}

/// Failures of the platform (a Durable Object unreachable, storage errors).
impl From<worker::Error> for ApiError {
    fn from(e: worker::Error) -> Self {
        ApiError::unavailable(ErrorCode::StoreUnavailable, format!("store: {e}"), 1000)
    }
}

/// A JSON response.
pub fn json<T: serde::Serialize>(status: u16, body: &T) -> ApiResult<Response> {
    Ok(Response::from_json(body)?.with_status(status))
}

/// Largest request a Durable Object accepts. Only the Worker writes these,
/// and a public body within `MAX_BODY_BYTES` may grow when re-encoded (an
/// escaped string quoted again); a public body's own limit answers first.
pub const MAX_STORE_BODY_BYTES: usize = 64 * 1024;

/// Reads a JSON body of at most `MAX_BODY_BYTES`; an empty body reads as `{}`.
pub async fn body<T: DeserializeOwned>(req: &Incoming) -> ApiResult<T> {
    body_within(req.inner(), req.headers(), MAX_BODY_BYTES).await
}

/// Reads a JSON body of at most `max` bytes; an empty body reads as `{}`.
pub async fn body_within<T: DeserializeOwned>(
    req: &web_sys::Request,
    headers: &Headers,
    max: usize,
) -> ApiResult<T> {
    if let Some(len) = headers
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok())
    {
        if len > max {
            return Err(too_large(len, max));
        }
    }
    let bytes = read_at_most(req, max).await?;
    let text = if bytes.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        &bytes[..]
    };
    // `301.0` is an integer to JSON Schema (worker/openapi.yaml): read as one.
    serde_json::from_slice(&whole_numbers(text)).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidJson,
            format!("body: expected JSON of the documented shape, found an error: {e}"),
        )
    })
}

/// The body's bytes, read as they arrive: refused as soon as more than
/// `max` have (a body without a `Content-Length`, chunked, is never read
/// whole first); the rest is not read (the stream is cancelled).
async fn read_at_most(req: &web_sys::Request, max: usize) -> ApiResult<Vec<u8>> {
    let Some(body) = req.body() else {
        return Ok(Vec::new());
    };
    // A body read before is a locked stream: `into_stream` would throw.
    if req.body_used() {
        return Err(worker::Error::BodyUsed.into());
    }
    let mut stream = ByteStream::from(body);
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if bytes.len() + chunk.len() > max {
            // Dropping the stream cancels it.
            return Err(ApiError::new(
                ErrorCode::BodyTooLarge,
                format!(
                    "body: expected at most {max} bytes, found more ({} read before stopping)",
                    bytes.len() + chunk.len()
                ),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

fn too_large(len: usize, max: usize) -> ApiError {
    ApiError::new(
        ErrorCode::BodyTooLarge,
        format!("body: expected at most {max} bytes, found {len}"),
    )
}
