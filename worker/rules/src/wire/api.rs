//! The public routes' own bodies, shared by several routes or owned by no
//! object: a list of IDs, an error, the snowflake layout, a decoded ID,
//! health. (Fields in alphabetical order: the order the API has always
//! answered them in.)

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use edgeleaf::{code::ErrorCode, layout::Parts, Layout};
use serde::{Deserialize, Serialize};

use super::{decimal, WireError};

/// IDs as decimal strings: `{"ids": ["…"]}` (`GET /v1/segment/{tag}`, `GET
/// /v1/snowflake`, and a monotonic tag's object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdList {
    /// Decimal strings.
    pub ids: Vec<String>,
}

impl IdList {
    /// `ids` as decimal strings.
    pub fn of(ids: &[u64]) -> Self {
        IdList {
            ids: ids.iter().map(u64::to_string).collect(),
        }
    }

    /// The IDs as numbers.
    pub fn numbers(&self) -> Result<Vec<u64>, WireError> {
        self.ids.iter().map(|s| decimal("store: ID", s)).collect()
    }
}

/// Every error answer: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// An error's code (snake_case, from the core's one list) and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// The code.
    pub code: ErrorCode,
    /// "what: expected X, found Y".
    pub message: String,
}

impl ErrorBody {
    /// The body of an error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            error: ErrorDetail {
                code,
                message: message.into(),
            },
        }
    }
}

/// The service's snowflake layout, as health and every worker-ID lease
/// answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LayoutView {
    /// Unix ms of timestamp 0.
    pub epoch: u64,
    /// Unix ms after which no ID can be made.
    pub expires_at: u64,
    /// Bits of the sequence.
    pub sequence_bits: u8,
    /// Bits of the timestamp.
    pub timestamp_bits: u8,
    /// Milliseconds per timestamp unit.
    pub unit_ms: u64,
    /// Bits of the worker ID.
    pub worker_bits: u8,
}

impl From<&Layout> for LayoutView {
    fn from(l: &Layout) -> Self {
        LayoutView {
            epoch: l.epoch_ms(),
            expires_at: l.expires_at(),
            sequence_bits: l.sequence_bits(),
            timestamp_bits: l.timestamp_bits(),
            unit_ms: l.unit_ms(),
            worker_bits: l.worker_bits(),
        }
    }
}

/// `GET /v1/snowflake/{id}`: an ID's parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decoded {
    /// The timestamp as an ISO 8601 date (made by the host's `Date`).
    pub date: String,
    /// The ID, decimal.
    pub id: String,
    /// The sequence number.
    pub sequence: u32,
    /// Unix ms at the start of the ID's time unit.
    pub timestamp: u64,
    /// The worker ID.
    pub worker_id: u32,
}

impl Decoded {
    /// ID `id`'s `parts`, its timestamp written as `date`.
    pub fn new(id: u64, parts: &Parts, date: String) -> Self {
        Decoded {
            date,
            id: id.to_string(),
            sequence: parts.sequence,
            timestamp: parts.timestamp_ms,
            worker_id: parts.worker_id,
        }
    }
}

/// `GET /v1/ping`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    /// Always `true`.
    pub ok: bool,
}

/// `GET /v1/health`: the layout and every route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// The snowflake layout.
    pub layout: LayoutView,
    /// Always `true`.
    pub ok: bool,
    /// `"METHOD /path"`, as the route table lists them.
    pub routes: Vec<String>,
}
