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

    /// The JSON of `IdList::of(ids)`, written straight into one buffer: the
    /// bytes serde_json writes for it (tests/wire.rs), without a `String`
    /// per ID, `core::fmt`, or an escape check per byte (decimal digits need
    /// none). The batch routes answer with it.
    pub fn json_of(ids: &[u64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + ids.len() * 23);
        out.extend_from_slice(b"{\"ids\":[");
        for (i, &id) in ids.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.push(b'"');
            push_decimal(&mut out, id);
            out.push(b'"');
        }
        out.extend_from_slice(b"]}");
        out
    }

    /// The IDs as numbers.
    pub fn numbers(&self) -> Result<Vec<u64>, WireError> {
        self.ids.iter().map(|s| decimal("store: ID", s)).collect()
    }
}

/// "00" to "99".
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// `n` in decimal (as `u64::to_string`). At most two divisions of 64 bits
/// (slow in wasm: no multiply-high to replace them), splitting `n` into
/// parts below 10^8, then two digits per 32-bit step (divisions by a
/// constant, which compile to multiplications).
#[allow(clippy::cast_possible_truncation)] // each cast's value is below 10^8 (said where)
fn push_decimal(out: &mut Vec<u8>, n: u64) {
    const E8: u64 = 100_000_000;
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut rest = n;
    // The parts below the leading one: eight digits each, zeros kept.
    let mut parts = [0u32; 2];
    let mut full = 0;
    while rest >= E8 {
        // rest % E8 < 10^8 < 2^32.
        parts[full] = (rest % E8) as u32;
        rest /= E8;
        full += 1;
    }
    for &part in &parts[..full] {
        let mut p = part;
        for _ in 0..4 {
            let pair = (p % 100) as usize * 2;
            p /= 100;
            at -= 2;
            buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        }
    }
    // The leading part, below 10^8 after at most two divisions (u64::MAX < 10^20).
    let mut p = rest as u32;
    while p >= 100 {
        let pair = (p % 100) as usize * 2;
        p /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if p >= 10 {
        let pair = p as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        // p < 10.
        at -= 1;
        buf[at] = b'0' + p as u8;
    }
    out.extend_from_slice(&buf[at..]);
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
