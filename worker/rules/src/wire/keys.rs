//! The API keys' Durable Objects: the index of keys (`KeyStore`, one) and a
//! key's own object (`ApiKey`, one per key ID): their requests and answers,
//! and the bodies of the public key routes. No answer but the creation's
//! carries a token, and none carries a hash to the public.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use super::WireError;
use crate::access::{Access, KeyRecord, KeySpec, Scopes, TagLimit};

/// What the index of keys (`KeyStore`) is asked. It lists the keys and
/// makes and revokes them (its row and the key's own object); it is no
/// longer asked to check a token (isolates ask the key's own object), except
/// by `Lookup`, which isolates of the previous version send during a deploy.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum KeyRequest {
    /// Makes a new key (its row, then its own object): answers its [`KeyView`].
    Create(NewKey),
    /// A key's record, from its own object (and marks it used): answers
    /// [`Lookup`]. Sent by isolates of the previous version only.
    Lookup {
        /// The key's ID.
        id: String,
    },
    /// Every key: answers [`KeyList`].
    List,
    /// Revokes a key (its own object, then its row): answers [`Revoked`].
    Revoke {
        /// The key's ID.
        id: String,
    },
    /// Sent when a key's own object has no record of it while keys kept
    /// before each key had its own object may remain: copies such keys out
    /// (this one first) and answers [`Adopted`].
    Adopt {
        /// The key's ID.
        id: String,
    },
    /// A key's own object reports when the key was last used: answers
    /// [`Done`](super::catalog::Done).
    Used {
        /// The key's ID.
        id: String,
        /// Last used at, Unix ms.
        at_ms: u64,
    },
}

impl super::StoreRequest for KeyRequest {
    fn repeatable(&self) -> bool {
        match self {
            KeyRequest::Lookup { .. }
            | KeyRequest::List
            | KeyRequest::Adopt { .. }
            | KeyRequest::Used { .. } => true,
            // A key made twice leaves one whose token nobody was told; a
            // revocation run twice answers not_found.
            KeyRequest::Create(_) | KeyRequest::Revoke { .. } => false,
        }
    }
}

/// What a key's own object (`ApiKey`, named by the key's ID) is asked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum ApiKeyRequest {
    /// Keeps the key (again: the same key is no change): answers [`Lookup`],
    /// `None` if it was revoked.
    Create(KeyEntry),
    /// The key's record (and marks it used): answers [`Lookup`]. An object
    /// with no key writes nothing.
    Lookup {
        /// The key's ID.
        id: String,
    },
    /// Revokes the key for good (a later `Create` of it is refused): answers
    /// [`Lookup`], what it held before.
    Revoke {
        /// The key's ID.
        id: String,
    },
}

impl super::StoreRequest for ApiKeyRequest {
    fn repeatable(&self) -> bool {
        match self {
            // Keeping the same key again is no change.
            ApiKeyRequest::Create(_) | ApiKeyRequest::Lookup { .. } => true,
            // Run twice, it answers what the first left: nothing held.
            ApiKeyRequest::Revoke { .. } => false,
        }
    }
}

/// A key as its own object keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyEntry {
    /// The key's ID.
    pub id: String,
    /// A name for people.
    pub name: String,
    /// Scope names.
    pub scopes: Vec<String>,
    /// The tag limit.
    pub tags: String,
    /// SHA-256 of the token, hex.
    pub hash: String,
    /// Made at, Unix ms.
    pub created_ms: u64,
    /// Last used at, Unix ms.
    pub last_used_ms: Option<u64>,
}

impl KeyEntry {
    /// What checking a token needs of it.
    pub fn stored(&self) -> StoredKey {
        StoredKey {
            hash: self.hash.clone(),
            scopes: self.scopes.clone(),
            tags: self.tags.clone(),
        }
    }
}

/// [`KeyRequest::Adopt`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Adopted {
    /// The key's record, now in its own object; `None`: no such key.
    pub key: Option<StoredKey>,
    /// Whether keys kept before each key had its own object remain to be
    /// copied out (while they do, an isolate asks again on a miss).
    pub pending: bool,
}

/// `POST /v1/keys`'s body.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KeyBody {
    /// A name for people.
    pub name: String,
    /// Scope names.
    pub scopes: Vec<String>,
    /// `"*"` (the default), a tag, or `"prefix*"`.
    pub tags: Option<String>,
}

/// A key to store: checked by the core, its ID and the hash of its token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewKey {
    /// The key's ID (public).
    pub id: String,
    /// A name for people.
    pub name: String,
    /// Scope names.
    pub scopes: Vec<String>,
    /// The tag limit.
    pub tags: String,
    /// SHA-256 of the token, hex.
    pub hash: String,
}

impl NewKey {
    /// The key `spec` checked, as key `id` with its token's `hash`.
    pub fn new(id: String, spec: KeySpec, hash: String) -> Self {
        NewKey {
            id,
            name: spec.name,
            scopes: spec
                .access
                .scopes
                .iter()
                .map(|s| String::from(s.as_str()))
                .collect(),
            tags: spec.access.tags.to_string(),
            hash,
        }
    }
}

/// A key as the API shows it: never its token or hash. (Fields in
/// alphabetical order: the order the API has always answered them in.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    /// Made at, Unix ms.
    pub created_ms: u64,
    /// The key's ID.
    pub id: String,
    /// When an isolate last looked the key up (isolates cache lookups, so
    /// this is to within the cache's lifetime); `None`: never used.
    pub last_used_ms: Option<u64>,
    /// A name for people.
    pub name: String,
    /// Scope names.
    pub scopes: Vec<String>,
    /// `"*"`, a tag, or `"prefix*"`.
    pub tags: String,
}

/// `POST /v1/keys`'s answer: the key and its token, which only this answer
/// carries (`token` last: the fields stay in alphabetical order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedKey {
    /// The key.
    #[serde(flatten)]
    pub key: KeyView,
    /// The bearer token.
    pub token: String,
}

/// `GET /v1/keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyList {
    /// Oldest first.
    pub keys: Vec<KeyView>,
}

/// `DELETE /v1/keys/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revoked {
    /// The key as it was.
    pub revoked: KeyView,
}

/// The stored record of a key, or `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lookup {
    /// The record.
    pub key: Option<StoredKey>,
}

/// What the store keeps of a key that checking a token needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredKey {
    /// SHA-256 of the token, hex.
    pub hash: String,
    /// Scope names.
    pub scopes: Vec<String>,
    /// The tag limit.
    pub tags: String,
}

impl StoredKey {
    /// The access rules' record; a row they cannot read is the store's fault.
    pub fn record(&self) -> Result<KeyRecord, WireError> {
        let bad = |e: crate::AccessError| WireError::Unreadable(format!("key store: row: {e}"));
        Ok(KeyRecord {
            hash: self.hash.clone(),
            access: Access {
                scopes: Scopes::parse(self.scopes.iter().map(String::as_str)).map_err(bad)?,
                tags: TagLimit::parse(&self.tags).map_err(bad)?,
            },
        })
    }
}
