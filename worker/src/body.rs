//! Request bodies: JSON of at most a size, read as they arrive (a public
//! request's, and a Durable Object's from the Worker).

use edgeleaf::code::ErrorCode;
use edgeleaf_rules::wire::api::whole_numbers;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use worker::worker_sys::web_sys;
use worker::{ByteStream, Headers};

use crate::api::{ApiError, ApiResult};
use crate::incoming::Incoming;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 4096;

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
