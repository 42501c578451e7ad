//! The registry's host's hash of lease secrets (SHA-256), as the property
//! tests that drive a real `Registry` give it its proofs.

use edgeleaf::secret::{LeaseSecret, SecretHash};
use sha2::{Digest, Sha256};

/// The registry's host hashes the lease secrets it is given.
pub fn sha256(s: &LeaseSecret) -> SecretHash {
    SecretHash(Sha256::digest(s.as_bytes()).into())
}
