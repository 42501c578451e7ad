//! The store of API keys (`KeyStore`): its requests and answers, and the
//! bodies of the public key routes. No answer but the creation's carries a
//! token, and none carries a hash to the public.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

use super::WireError;
use crate::access::{Access, KeyRecord, KeySpec, Scopes, TagLimit};

/// What the key store is asked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum KeyRequest {
    /// Stores a new key: answers its [`KeyView`].
    Create(NewKey),
    /// A key's stored record (and marks it used): answers [`Lookup`].
    Lookup {
        /// The key's ID.
        id: String,
    },
    /// Every key: answers [`KeyList`].
    List,
    /// Deletes a key: answers [`Revoked`].
    Revoke {
        /// The key's ID.
        id: String,
    },
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
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
