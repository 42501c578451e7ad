//! The service's side of a lease secret: the registry keeps its SHA-256,
//! never the secret (the core compares the hashes it is given, and holds no
//! hash function of its own).

use edgeleaf::secret::{LeaseSecret, SecretHash};
use sha2::{Digest, Sha256};

/// SHA-256 of a lease secret: what the registry keeps and compares.
pub fn secret_hash(secret: &LeaseSecret) -> SecretHash {
    SecretHash(Sha256::digest(secret.as_bytes()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_sha256_of_the_secret_bytes() {
        // SHA-256 of 16 zero bytes.
        let h = secret_hash(&LeaseSecret::from_random([0; 16]));
        assert_eq!(h.0[..4], [0x37, 0x47, 0x08, 0xff]);
        assert_ne!(secret_hash(&LeaseSecret::from_random([1; 16])), h);
    }
}
