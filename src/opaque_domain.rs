//! The width of an opaque ID domain, as plain data: the error type carries
//! it, so it sits below `error` and imports nothing. Its rules (`validate`,
//! `max_id`) are in `opaque`, where it is re-exported from.

/// An opaque ID domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub enum OpaqueDomain {
    /// IDs below 2^bits, `bits` in 32..=63 (53 keeps them exact as JS numbers).
    Bits(u8),
    /// IDs of at most `digits` decimal digits, `digits` in 6..=18.
    Digits(u8),
}
