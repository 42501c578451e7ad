//! The public routes' own bodies, shared by several routes or owned by no
//! object: a list of IDs, an error, the snowflake layout, a decoded ID,
//! health. (Fields in alphabetical order: the order the API has always
//! answered them in.)

use alloc::string::{String, ToString};
use alloc::vec;
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
    /// none). The batch routes answer with it. Batches are mostly runs of
    /// consecutive IDs (a segment's, a millisecond's sequence): an ID one
    /// above the last is the last's digits copied and raised by one, the
    /// carry included (no division at all; only 9…9 + 1 is written anew).
    pub fn json_of(ids: &[u64]) -> Vec<u8> {
        // At most 20 digits, two quotes and a comma per ID, the frame, and
        // room for the whole `entry` copied after the last ID.
        let mut out = vec![0u8; 10 + 23 * ids.len() + 24];
        out[..8].copy_from_slice(b"{\"ids\":[");
        let mut at = 8;
        // The last ID's `"digits",` (`len` digits after the quote): copied
        // whole (24 bytes, a fixed size: no call) and advanced past.
        let mut entry = [0u8; 24];
        let mut len = 0;
        let mut next = None;
        for &id in ids {
            if next != Some(id) || !raise_last_digit(&mut entry[1..=len]) {
                entry[0] = b'"';
                len = write_decimal(&mut entry, 1, id) - 1;
                entry[len + 1] = b'"';
                entry[len + 2] = b',';
            }
            out[at..at + 24].copy_from_slice(&entry);
            at += len + 3;
            next = id.checked_add(1);
        }
        // The last comma.
        at -= usize::from(!ids.is_empty());
        out[at..at + 2].copy_from_slice(b"]}");
        out.truncate(at + 2);
        out
    }

    /// The IDs as numbers.
    pub fn numbers(&self) -> Result<Vec<u64>, WireError> {
        self.ids.iter().map(|s| decimal("store: ID", s)).collect()
    }
}

/// Adds one to the decimal `digits` in place, carrying past nines; false
/// (and the digits all zeros) when every digit was a nine, as the number
/// then needs one digit more.
fn raise_last_digit(digits: &mut [u8]) -> bool {
    for d in digits.iter_mut().rev() {
        if *d != b'9' {
            *d += 1;
            return true;
        }
        *d = b'0';
    }
    false
}

/// "00" to "99".
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// 10^0 to 10^19.
const POWERS_OF_TEN: [u64; 20] = {
    let mut p = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        p[i] = p[i - 1] * 10;
        i += 1;
    }
    p
};

/// `n` in decimal (as `u64::to_string`) at `out[at..]`; returns where it
/// ends. The length first (from the bit length, one comparison), then the
/// digits from the right, in place: no copy of a variable length (a call in
/// wasm). At most two divisions of 64 bits (slow in wasm: no multiply-high
/// to replace them) split `n` into parts below 10^8, then two digits per
/// 32-bit step (divisions by a constant, which compile to multiplications).
#[allow(clippy::cast_possible_truncation)] // each cast's value is below 10^8 (said where)
fn write_decimal(out: &mut [u8], at: usize, n: u64) -> usize {
    const E8: u64 = 100_000_000;
    // floor(log10(2) * bit length) is the digit count less one, or one more.
    let guess = (((64 - (n | 1).leading_zeros()) * 1233) >> 12) as usize;
    let end = at + guess + usize::from((n | 1) >= POWERS_OF_TEN[guess]);
    let mut pos = end;
    let mut pair = |pos: &mut usize, two: u32| {
        let i = two as usize * 2;
        *pos -= 2;
        out[*pos..*pos + 2].copy_from_slice(&DIGIT_PAIRS[i..i + 2]);
    };
    let mut rest = n;
    while rest >= E8 {
        // rest % E8 < 10^8 < 2^32: eight digits, zeros kept.
        let mut part = (rest % E8) as u32;
        rest /= E8;
        for _ in 0..4 {
            pair(&mut pos, part % 100);
            part /= 100;
        }
    }
    // Below 10^8 now (u64::MAX < 10^20).
    let mut part = rest as u32;
    while part >= 100 {
        pair(&mut pos, part % 100);
        part /= 100;
    }
    if part >= 10 {
        pair(&mut pos, part);
    } else {
        // part < 10.
        out[pos - 1] = b'0' + part as u8;
    }
    end
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
