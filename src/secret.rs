//! A worker-ID lease as a capability: each grant carries a fresh secret that
//! only the caller who leased receives. The registry keeps only its hash and
//! asks for the secret before it renews, releases or hands the grant back to
//! a restarted holder. Worker IDs, generations, node keys and owners are
//! public (views show them); the secret is what proves "I hold this grant".
//!
//! The registry sees [`SecretHash`]es only: its host hashes the secret a
//! caller presents (SHA-256; the core holds no hash function), the registry
//! keeps the hash of each grant's secret and compares in constant time. The
//! holder keeps and sends the secret itself ([`Claim`]); the registry is
//! given its hash ([`Proof`]).

use core::fmt;

/// A lease secret's length: 128 bits from the host's CSPRNG.
pub const LEASE_SECRET_BYTES: usize = 16;

/// Reads `2 * N` hex digits (either case) as `N` bytes.
pub(crate) fn decode_hex<const N: usize>(hex: &str) -> Option<[u8; N]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 2 * N {
        return None;
    }
    let digit = |b: u8| char::from(b).to_digit(16);
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *o = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

/// Writes bytes as lowercase hex into `out` (twice as long).
fn encode_hex<'a>(bytes: &[u8], out: &'a mut [u8]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0xf)];
    }
    // Only ASCII digits were written.
    core::str::from_utf8(out).unwrap_or_default()
}

/// Bytes as lowercase hex: the one encoding of keys, secrets, request IDs
/// and hashes wherever they are stored or sent as text.
#[cfg(feature = "alloc")]
pub fn to_hex(bytes: &[u8]) -> alloc::string::String {
    let mut out = alloc::vec![0u8; 2 * bytes.len()];
    encode_hex(bytes, &mut out).into()
}

/// Compares in time independent of where the first difference is.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// The secret of one grant. Its `Debug` never shows it; its text form
/// ([`LeaseSecret::to_hex`]) is what the holder receives and saves.
#[derive(Clone, Copy)]
pub struct LeaseSecret([u8; LEASE_SECRET_BYTES]);

impl LeaseSecret {
    /// A secret from random bytes the host drew from its CSPRNG.
    pub const fn from_random(bytes: [u8; LEASE_SECRET_BYTES]) -> Self {
        LeaseSecret(bytes)
    }

    /// A secret written as 32 hex digits; `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Self> {
        decode_hex(hex).map(LeaseSecret)
    }

    /// The 32 hex digits the holder keeps.
    pub fn to_hex(&self) -> HexSecret {
        let mut text = [0u8; 2 * LEASE_SECRET_BYTES];
        encode_hex(&self.0, &mut text);
        HexSecret(text)
    }

    /// The secret's bytes, for the host to hash into the [`SecretHash`]
    /// the registry is given.
    pub fn as_bytes(&self) -> &[u8; LEASE_SECRET_BYTES] {
        &self.0
    }
}

impl PartialEq for LeaseSecret {
    fn eq(&self, other: &Self) -> bool {
        constant_time_eq(&self.0, &other.0)
    }
}

impl Eq for LeaseSecret {}

impl fmt::Debug for LeaseSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LeaseSecret(..)")
    }
}

/// A secret's text, without an allocation (`Deref`s to `str`).
#[derive(Clone, Copy)]
pub struct HexSecret([u8; 2 * LEASE_SECRET_BYTES]);

impl core::ops::Deref for HexSecret {
    type Target = str;
    fn deref(&self) -> &str {
        core::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// The SHA-256 of a [`LeaseSecret`], computed by the registry's host: what
/// the registry keeps of a grant and compares. Equality is constant-time.
#[derive(Clone, Copy)]
pub struct SecretHash(pub [u8; 32]);

impl SecretHash {
    /// Read from 64 hex digits (how a store keeps it).
    pub fn from_hex(hex: &str) -> Option<Self> {
        decode_hex(hex).map(SecretHash)
    }

    /// As 64 hex digits, for a store (never for a view).
    #[cfg(feature = "alloc")]
    pub fn to_hex(&self) -> alloc::string::String {
        let mut text = [0u8; 64];
        alloc::string::String::from(encode_hex(&self.0, &mut text))
    }
}

impl PartialEq for SecretHash {
    fn eq(&self, other: &Self) -> bool {
        constant_time_eq(&self.0, &other.0)
    }
}

impl Eq for SecretHash {}

impl fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHash(..)")
    }
}

/// A holder's claim on its grant, as it sends it: the grant's numbers and
/// its secret (`None`: saved before grants had secrets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// The worker ID.
    pub worker_id: u32,
    /// The grant's generation.
    pub generation: u64,
    /// The grant's secret.
    pub secret: Option<LeaseSecret>,
}

impl Claim {
    /// What the registry is given for this claim: its secret hashed by
    /// `hash` (the host's SHA-256).
    pub fn proof(&self, hash: impl FnOnce(&LeaseSecret) -> SecretHash) -> Proof {
        Proof {
            worker_id: self.worker_id,
            generation: self.generation,
            secret_hash: self.secret.as_ref().map(hash),
        }
    }
}

/// A [`Claim`] as the registry sees it: the grant's numbers and the hash of
/// the secret the caller presented (`None`: it presented none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proof {
    /// The worker ID.
    pub worker_id: u32,
    /// The grant's generation.
    pub generation: u64,
    /// The hash of the secret presented.
    pub secret_hash: Option<SecretHash>,
}

#[cfg(feature = "serde")]
mod serde_impls {
    //! Secrets travel and are saved as hex text.
    use super::{LeaseSecret, SecretHash};
    use serde::de::Error as _;

    impl serde::Serialize for LeaseSecret {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&self.to_hex())
        }
    }

    impl<'de> serde::Deserialize<'de> for LeaseSecret {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let text: &str = serde::Deserialize::deserialize(d)?;
            LeaseSecret::from_hex(text)
                .ok_or_else(|| D::Error::custom("lease secret: expected 32 hex digits"))
        }
    }

    impl serde::Serialize for SecretHash {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut text = [0u8; 64];
            s.serialize_str(super::encode_hex(&self.0, &mut text))
        }
    }

    impl<'de> serde::Deserialize<'de> for SecretHash {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let text: &str = serde::Deserialize::deserialize(d)?;
            SecretHash::from_hex(text)
                .ok_or_else(|| D::Error::custom("secret hash: expected 64 hex digits"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_debug_hides_the_secret() {
        let s = LeaseSecret::from_random([0xab; LEASE_SECRET_BYTES]);
        assert_eq!(&*s.to_hex(), "abababababababababababababababab");
        assert_eq!(LeaseSecret::from_hex(&s.to_hex()), Some(s));
        assert_eq!(LeaseSecret::from_hex("ab"), None);
        assert_eq!(LeaseSecret::from_hex(&"zz".repeat(16)), None);
        let shown = std::format!("{s:?} {:?}", SecretHash([0xab; 32]));
        assert!(!shown.contains("ab"), "{shown}");
    }

    #[test]
    fn hashes_compare_equal_only_when_equal() {
        let (a, b) = (SecretHash([1; 32]), SecretHash([2; 32]));
        assert_eq!(a, a);
        assert_ne!(a, b);
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(constant_time_eq(b"abc", b"abc"));
    }

    #[test]
    fn a_proof_carries_the_hash_of_the_claims_secret() {
        let claim = Claim {
            worker_id: 3,
            generation: 7,
            secret: Some(LeaseSecret::from_random([9; LEASE_SECRET_BYTES])),
        };
        let first_byte = |s: &LeaseSecret| SecretHash([s.as_bytes()[0]; 32]);
        let proof = claim.proof(first_byte);
        assert_eq!((proof.worker_id, proof.generation), (3, 7));
        assert_eq!(proof.secret_hash, Some(SecretHash([9; 32])));
        let none = Claim {
            secret: None,
            ..claim
        };
        assert_eq!(none.proof(first_byte).secret_hash, None);
    }
}
