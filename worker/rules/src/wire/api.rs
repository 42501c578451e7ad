//! The public routes' own bodies, shared by several routes or owned by no
//! object: a list of IDs, an error, the snowflake layout, a decoded ID,
//! health. (Fields in alphabetical order: the order the API has always
//! answered them in.)

use alloc::borrow::ToOwned;
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

/// A path segment (a route's `{…}`) percent-decoded, as clients encode it:
/// `encodeURIComponent` and most HTTP clients send the tag `a:b` as `a%3Ab`.
/// The Worker decodes only after it split the path, so a `%2F` never adds a
/// segment (it decodes to a `/`, which no tag or ID has). Bytes that are not
/// UTF-8 stay encoded: every check refuses the `%`.
pub fn percent_decoded(segment: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    }
    let raw = segment.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let pair = raw.get(i + 1).zip(raw.get(i + 2));
        match pair.and_then(|(h, l)| Some((hex(*h)? << 4) | hex(*l)?)) {
            Some(b) if raw[i] == b'%' => {
                out.push(b);
                i += 3;
            }
            _ => {
                out.push(raw[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| segment.to_owned())
}

/// The longest integer [`whole_numbers`] writes, in digits: far past
/// `u64::MAX` (20), so every value an integer field holds is reached.
const MAX_WHOLE_DIGITS: usize = 40;

/// A body's JSON with every number whose value is whole written as an
/// integer: `301.0` as `301`, `1.5e3` as `1500`, `1e+16` as
/// `10000000000000000`. JSON Schema counts those as integers (so
/// worker/openapi.yaml's `integer` fields allow them, and schemathesis sends
/// them), while serde reads a number with a fraction or an exponent only
/// into a float. Exact: the digits are moved, never read as a float, so no
/// value is rounded into another. Strings are copied as they are; a number
/// with a fraction that is not zero, or one longer than
/// [`MAX_WHOLE_DIGITS`] once whole, is left for serde to refuse.
pub fn whole_numbers(json: &[u8]) -> alloc::borrow::Cow<'_, [u8]> {
    // Most bodies have no digit before a `.` or an `e`: nothing to rewrite.
    let fraction_or_exponent =
        |w: &[u8]| w[0].is_ascii_digit() && matches!(w[1], b'.' | b'e' | b'E');
    if !json.windows(2).any(fraction_or_exponent) {
        return alloc::borrow::Cow::Borrowed(json);
    }
    let mut out = Vec::with_capacity(json.len());
    let mut i = 0;
    while i < json.len() {
        match json[i] {
            b'"' => {
                // A string, to its closing quote (an escaped one is not).
                let start = i;
                i += 1;
                while i < json.len() && json[i] != b'"' {
                    i += if json[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(json.len());
                out.extend_from_slice(&json[start..i]);
            }
            b'-' | b'0'..=b'9' => {
                let end = i + json[i..]
                    .iter()
                    .position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .unwrap_or(json.len() - i);
                let number = &json[i..end];
                match whole(number) {
                    Some(integer) => out.extend_from_slice(integer.as_bytes()),
                    None => out.extend_from_slice(number),
                }
                i = end;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    alloc::borrow::Cow::Owned(out)
}

/// `number` (a JSON number's text) as an integer's, if it has a fraction
/// or an exponent and its value is whole; else `None` (left as written).
fn whole(number: &[u8]) -> Option<String> {
    let text = core::str::from_utf8(number).ok()?;
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (mantissa, None),
    };
    let digits_only = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits_only(int) || frac.is_some_and(|f| !digits_only(f)) {
        return None;
    }
    let exponent: i64 = match exponent {
        None if frac.is_none() => return None,
        None => 0,
        Some(e) => {
            let unsigned = e.strip_prefix(['+', '-']).unwrap_or(e);
            if !digits_only(unsigned) || unsigned.len() > 4 {
                return None;
            }
            e.parse().ok()?
        }
    };
    let digits: String = [int, frac.unwrap_or("")].concat();
    // Where the decimal point falls in `digits`.
    let point = i64::try_from(int.len()).ok()? + exponent;
    let whole_digits = if point <= 0 {
        ""
    } else {
        &digits[..usize::try_from(point).ok()?.min(digits.len())]
    };
    let fraction = &digits[whole_digits.len()..];
    if fraction.bytes().any(|b| b != b'0') {
        return None;
    }
    let zeros = usize::try_from(point)
        .unwrap_or(0)
        .saturating_sub(digits.len());
    let significant = whole_digits.trim_start_matches('0');
    if significant.len() + zeros > MAX_WHOLE_DIGITS {
        return None;
    }
    if significant.is_empty() {
        return Some("0".into());
    }
    let mut integer = String::with_capacity(significant.len() + zeros + 1);
    if negative {
        integer.push('-');
    }
    integer.push_str(significant);
    integer.extend(core::iter::repeat_n('0', zeros));
    Some(integer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(json: &str) -> String {
        String::from_utf8(whole_numbers(json.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn path_segments_are_percent_decoded() {
        for (given, read) in [
            ("a%3Ab", "a:b"),
            ("a%3ab%2E", "a:b."),
            ("order", "order"),
            ("%31", "1"),
            ("a%2Fb", "a/b"),
            ("%E2%80%AE", "\u{202e}"),
            // Not an escape, or not UTF-8: as it came.
            ("100%", "100%"),
            ("%zz%4", "%zz%4"),
            ("%FF", "%FF"),
        ] {
            assert_eq!(percent_decoded(given), read, "{given}");
        }
    }

    #[test]
    fn whole_numbers_become_integers_exactly() {
        for (given, read) in [
            (r#"{"step":301.0}"#, r#"{"step":301}"#),
            (
                r#"{"a":45330539143683.0,"b":-2.50e1}"#,
                r#"{"a":45330539143683,"b":-25}"#,
            ),
            (
                r#"[1e+16,1.5E3,0.0,-0.0,0e5,120e-1]"#,
                r#"[10000000000000000,1500,0,0,0,12]"#,
            ),
            ("[18446744073709551615.000]", "[18446744073709551615]"),
            ("[1.8446744073709552e19]", "[18446744073709552000]"),
            ("[007.0]", "[7]"),
        ] {
            assert_eq!(rewritten(given), read, "{given}");
        }
    }

    #[test]
    fn other_numbers_and_strings_are_left_as_written() {
        for same in [
            r#"{"step":301}"#,
            r#"{"a":1.5,"b":1e-1,"c":9007199254740993.5}"#,
            r#"{"s":"1.0","t":"say \"2.0\"","u":3.0e}"#,
            "[1e99999, 1.e3, .5, 1e400]",
            "[true, false, null]",
        ] {
            assert_eq!(rewritten(same), same, "{same}");
        }
        assert_eq!(rewritten(r#"{"t":"2.0","n":2.0}"#), r#"{"t":"2.0","n":2}"#);
        assert!(matches!(
            whole_numbers(br#"{"step":301}"#),
            alloc::borrow::Cow::Borrowed(_)
        ));
    }
}
