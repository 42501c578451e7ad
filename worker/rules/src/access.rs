//! Who may call what: the scopes of API keys, a key's limit to some tags, the
//! keys' secrets (made from randomness the caller supplies, stored only as
//! SHA-256 hashes, compared in constant time), and how long a host may trust
//! a key it looked up before — the bound on how late a revocation bites.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use sha2::{Digest, Sha256};

use crate::error::AccessError;
use edgeleaf::name::check_name;
use edgeleaf::secret::constant_time_eq;
use edgeleaf::tag::Asker;

/// What a credential may do. A route needs one scope (or none: open).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Draw IDs and lease segments.
    Ids,
    /// Lease, renew and release snowflake worker IDs.
    Registry,
    /// Read-only views: tags, workers, history, monitor, metrics.
    Monitor,
    /// Create, change and delete tags; manage keys.
    Admin,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 4] = [Scope::Ids, Scope::Registry, Scope::Monitor, Scope::Admin];

    /// Its name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Ids => "ids",
            Scope::Registry => "registry",
            Scope::Monitor => "monitor",
            Scope::Admin => "admin",
        }
    }

    /// The scope named `name`.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scopes(u8);

impl Scopes {
    /// Every scope: the root key's.
    pub const ALL: Scopes = Scopes(0b1111);

    /// Just `scope`.
    pub const fn only(scope: Scope) -> Scopes {
        Scopes(scope.bit())
    }

    /// Whether `scope` is in the set.
    pub const fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// The scopes named, each once; at least one.
    ///
    /// # Errors
    /// [`AccessError::InvalidKeySpec`] for none, an unknown name or a repeated one.
    pub fn parse<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Scopes, AccessError> {
        let bad = AccessError::InvalidKeySpec {
            field: "scopes",
            expected: "one or more of \"ids\", \"registry\", \"monitor\", \"admin\", each once",
        };
        let mut set = Scopes::default();
        for name in names {
            let scope = Scope::parse(name).ok_or_else(|| bad.clone())?;
            if set.contains(scope) {
                return Err(bad);
            }
            set.0 |= scope.bit();
        }
        if set.0 == 0 {
            return Err(bad);
        }
        Ok(set)
    }

    /// The scopes in the set, in [`Scope::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }
}

/// The tags a key may use: any, one, or those starting with a prefix
/// (`"order*"`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TagLimit {
    /// Every tag.
    #[default]
    Any,
    /// This tag only.
    Exact(String),
    /// Tags starting with this (non-empty) prefix.
    Prefix(String),
}

impl TagLimit {
    /// `"*"` (any), `"order"` (that tag) or `"order*"` (tags starting with
    /// `order`); the characters are a tag's.
    ///
    /// # Errors
    /// [`AccessError::InvalidKeySpec`] for anything else.
    pub fn parse(raw: &str) -> Result<TagLimit, AccessError> {
        let bad = || AccessError::InvalidKeySpec {
            field: "tags",
            expected: "\"*\", a tag, or a tag prefix ending in \"*\" (characters [A-Za-z0-9._:-])",
        };
        if raw == "*" {
            return Ok(TagLimit::Any);
        }
        let (body, prefix) = match raw.strip_suffix('*') {
            Some(p) => (p, true),
            None => (raw, false),
        };
        check_name("tags", body).map_err(|_| bad())?;
        Ok(if prefix {
            TagLimit::Prefix(body.to_string())
        } else {
            TagLimit::Exact(body.to_string())
        })
    }

    /// Whether the limit lets a key use `tag`.
    pub fn allows(&self, tag: &str) -> bool {
        match self {
            TagLimit::Any => true,
            TagLimit::Exact(t) => t == tag,
            TagLimit::Prefix(p) => tag.starts_with(p.as_str()),
        }
    }
}

impl fmt::Display for TagLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TagLimit::Any => f.write_str("*"),
            TagLimit::Exact(t) => f.write_str(t),
            TagLimit::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

/// What a credential may do: its scopes, and the tags it may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Its scopes.
    pub scopes: Scopes,
    /// The tags routes that name one may use.
    pub tags: TagLimit,
}

impl Access {
    /// The root key (`ADMIN_TOKEN`): everything.
    pub fn root() -> Access {
        Access {
            scopes: Scopes::ALL,
            tags: TagLimit::Any,
        }
    }

    /// One scope, every tag (`CLIENT_TOKEN`: `ids`).
    pub fn only(scope: Scope) -> Access {
        Access {
            scopes: Scopes::only(scope),
            tags: TagLimit::Any,
        }
    }

    /// Whether this credential may call a route that needs `need`, naming
    /// `tag` if it names one.
    ///
    /// # Errors
    /// [`AccessError::ScopeMissing`], or [`AccessError::TagNotAllowed`] when the route's
    /// tag is outside the key's limit.
    pub fn permits(&self, need: Scope, tag: Option<&str>) -> Result<(), AccessError> {
        if !self.scopes.contains(need) {
            return Err(AccessError::ScopeMissing {
                need: need.as_str(),
            });
        }
        match tag {
            Some(t) if !self.tags.allows(t) => Err(AccessError::TagNotAllowed),
            _ => Ok(()),
        }
    }

    /// Whether a view that covers many tags (the tag list, the per-tag parts
    /// of a monitor or of metrics) shows `tag` to this credential: the tags
    /// its limit allows, as for a route naming one ([`Access::permits`]).
    pub fn sees_tag(&self, tag: &str) -> bool {
        self.tags.allows(tag)
    }

    /// Whether this credential sees what belongs to no tag: the worker-ID
    /// registry (its leases name the nodes and the keys that hold them, its
    /// events are every tenant's) and a host's own state (counters that sum
    /// every tag's traffic, its snowflake lease). Only without a tag limit: a
    /// key limited to some tags is one tenant's view, and these are every
    /// tenant's. (Acting on the registry is another matter: a route that
    /// names no tag, such as leasing a worker ID, is open to a limited key
    /// with the scope.)
    pub fn sees_fleet(&self) -> bool {
        self.tags == TagLimit::Any
    }

    /// Whether this credential may call a route that needs `need` and shows
    /// only what belongs to no tag.
    ///
    /// # Errors
    /// [`AccessError::ScopeMissing`], or [`AccessError::FleetViewNotAllowed`] for a key
    /// limited to some tags.
    pub fn permits_fleet_view(&self, need: Scope) -> Result<(), AccessError> {
        self.permits(need, None)?;
        if self.sees_fleet() {
            Ok(())
        } else {
            Err(AccessError::FleetViewNotAllowed)
        }
    }
}

/// The longest key name, in characters (as JSON Schema's `maxLength`
/// counts them).
pub const MAX_KEY_NAME_LEN: usize = 100;

/// A key as asked for: `POST /v1/keys` `{"name", "scopes", "tags"?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    /// A label for people (1..=100 characters, no control characters).
    pub name: String,
    /// What the key may do.
    pub access: Access,
}

impl KeySpec {
    /// Checks a request for a key.
    ///
    /// # Errors
    /// [`AccessError::InvalidKeySpec`] naming the field: a bad name, scopes or tag
    /// limit, or a tag limit on a key with the `admin` scope (an admin could
    /// make itself a key without the limit: the limit would be a pretence).
    pub fn new<'a>(
        name: &str,
        scopes: impl IntoIterator<Item = &'a str>,
        tags: Option<&str>,
    ) -> Result<KeySpec, AccessError> {
        let len = name.chars().count();
        if len == 0 || len > MAX_KEY_NAME_LEN || name.chars().any(char::is_control) {
            return Err(AccessError::InvalidKeySpec {
                field: "name",
                expected: "1..=100 characters, none of them a control character",
            });
        }
        let scopes = Scopes::parse(scopes)?;
        let tags = match tags {
            None => TagLimit::Any,
            Some(raw) => TagLimit::parse(raw)?,
        };
        if scopes.contains(Scope::Admin) && tags != TagLimit::Any {
            return Err(AccessError::InvalidKeySpec {
                field: "tags",
                expected: "no tag limit on a key with the admin scope",
            });
        }
        Ok(KeySpec {
            name: name.to_string(),
            access: Access { scopes, tags },
        })
    }
}

/// Every key's secret starts with this, so that scanners and people can tell
/// one at a glance (and so it is never mistaken for a root token).
pub const KEY_TOKEN_PREFIX: &str = "elk_";
/// Random bytes a new key takes: 6 for its public ID, 32 for its secret.
pub const KEY_RANDOM_BYTES: usize = 38;

fn hex(bytes: &[u8]) -> String {
    edgeleaf::secret::to_hex(bytes)
}

/// A new key made from `random` (from a CSPRNG): its public ID (12 hex
/// digits) and the token its holder presents, `elk_<id>_<64 hex digits>`.
/// The token is shown once; only [`token_hash`] of it is kept.
pub fn new_key(random: &[u8; KEY_RANDOM_BYTES]) -> (String, String) {
    let id = hex(&random[..6]);
    let token = alloc::format!("{KEY_TOKEN_PREFIX}{id}_{}", hex(&random[6..]));
    (id, token)
}

/// The key ID a presented token names, if it has a key's shape (anything
/// else is compared with the root tokens only).
pub fn token_key_id(token: &str) -> Option<&str> {
    let rest = token.strip_prefix(KEY_TOKEN_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let is_hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    (is_hex(id, 12) && is_hex(secret, 64)).then_some(id)
}

/// Whether `owner` (a caller's name: an API key's ID, or `root`, `client`,
/// `anonymous` for `ADMIN_TOKEN`, `CLIENT_TOKEN` and no token) names a key.
fn is_key_id(owner: &str) -> bool {
    owner.len() == 12
        && owner
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Who asks for a segment lease, as the core's rule of request IDs sees it
/// (`TagRecord::lease_segment`): a request ID belongs to a credential of the
/// caller's own, and only an API key is one. No token (`anonymous`), the
/// `CLIENT_TOKEN` every client is given, the one `ADMIN_TOKEN` and the
/// service binding (every Worker of the account configured with it, one
/// owner) are each held by whoever was given them: two unrelated callers
/// sending the same request ID would be answered the same range, so they
/// may send none (`request_id_needs_key`). Any owner name that is not a
/// key's ID is shared.
pub fn lease_asker(owner: &str) -> Asker<'_> {
    if is_key_id(owner) {
        Asker::Own(owner)
    } else {
        Asker::Shared
    }
}

/// SHA-256 of a token, hex: what the key store keeps.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// A stored key as a host looks it up: its hash and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// [`token_hash`] of its token.
    pub hash: String,
    /// What it may do.
    pub access: Access,
}

/// What a presented token may do, given the store's record of its key
/// (`None`: no such key, or revoked).
///
/// # Errors
/// [`AccessError::KeyRefused`] for an unknown or revoked key or a wrong secret.
pub fn check_token(record: Option<&KeyRecord>, token: &str) -> Result<Access, AccessError> {
    match record {
        Some(r) if constant_time_eq(token_hash(token).as_bytes(), r.hash.as_bytes()) => {
            Ok(r.access.clone())
        }
        _ => Err(AccessError::KeyRefused),
    }
}

/// How long a host may use a key record it looked up: a revoked key is
/// refused everywhere at most this long after the revocation.
pub const KEY_CACHE_MS: u64 = 10_000;
/// Most keys the service holds (the index of keys refuses more).
pub const MAX_KEYS: usize = 1000;
/// How often at most a key's own object tells the index of keys when the
/// key was last used: the listing's `lastUsedMs` lags by at most this (plus
/// [`KEY_CACHE_MS`]), and the index hears from each key at most this often.
pub const KEY_USE_REPORT_MS: u64 = 60_000;
/// Most records of existing keys a host keeps: as many as there can be keys,
/// so a key in use is never pushed out by another (only a lookup of the same
/// key replaces it), and never by an unknown one (kept apart, below).
pub const KEY_CACHE_ENTRIES: usize = MAX_KEYS;
/// Most "no such key" answers a host keeps, apart from the records: a flood
/// of made-up key IDs pushes out older made-up IDs, never a key in use. The
/// answer kept longest goes first.
pub const KEY_CACHE_UNKNOWN: usize = 2048;

/// Entries by key ID with the time of their lookup, at most `cap`: the
/// entry put longest ago goes first.
#[derive(Debug)]
struct Bounded<V> {
    cap: usize,
    /// ID -> (value, lookup time, put number).
    entries: BTreeMap<String, (V, u64, u64)>,
    /// Put number -> ID: the order entries were put in.
    order: BTreeMap<u64, String>,
    puts: u64,
}

impl<V> Bounded<V> {
    const fn new(cap: usize) -> Self {
        Bounded {
            cap,
            entries: BTreeMap::new(),
            order: BTreeMap::new(),
            puts: 0,
        }
    }

    fn get(&self, id: &str) -> Option<(&V, u64)> {
        self.entries.get(id).map(|(v, at, _)| (v, *at))
    }

    fn remove(&mut self, id: &str) {
        if let Some((_, _, n)) = self.entries.remove(id) {
            self.order.remove(&n);
        }
    }

    fn insert(&mut self, id: &str, value: V, at: u64) {
        self.remove(id);
        while self.entries.len() >= self.cap {
            let Some((_, first)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&first);
        }
        self.puts += 1;
        self.entries.insert(id.to_string(), (value, at, self.puts));
        self.order.insert(self.puts, id.to_string());
    }
}

/// A host's cache of key lookups, answers "no such key" included (a token
/// for a key that does not exist must not reach the store on every request),
/// in two bounded parts: records of existing keys ([`KEY_CACHE_ENTRIES`])
/// and unknown IDs ([`KEY_CACHE_UNKNOWN`]). An unknown ID never takes a
/// record's place.
#[derive(Debug)]
pub struct KeyCache {
    known: Bounded<KeyRecord>,
    unknown: Bounded<()>,
}

impl Default for KeyCache {
    fn default() -> Self {
        KeyCache {
            known: Bounded::new(KEY_CACHE_ENTRIES),
            unknown: Bounded::new(KEY_CACHE_UNKNOWN),
        }
    }
}

/// What [`KeyCache::get`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyLookup<'a> {
    /// A lookup younger than [`KEY_CACHE_MS`]: use it.
    Cached(Option<&'a KeyRecord>),
    /// Ask the store, then [`KeyCache::put`] its answer.
    Fetch,
}

impl KeyCache {
    /// The record of key `id` if it was looked up less than
    /// [`KEY_CACHE_MS`] before `now_ms` (a clock that went back counts as
    /// stale).
    pub fn get(&self, id: &str, now_ms: u64) -> KeyLookup<'_> {
        let fresh = |at: u64| now_ms >= at && now_ms - at < KEY_CACHE_MS;
        if let Some((record, at)) = self.known.get(id) {
            if fresh(at) {
                return KeyLookup::Cached(Some(record));
            }
        } else if let Some(((), at)) = self.unknown.get(id) {
            if fresh(at) {
                return KeyLookup::Cached(None);
            }
        }
        KeyLookup::Fetch
    }

    /// Keeps the store's answer for key `id`, looked up at `fetched_ms`
    /// (when the lookup was sent: the answer is at least that fresh). A
    /// record goes with the records, "none" with the unknown IDs; either
    /// replaces what was kept of `id`.
    pub fn put(&mut self, id: &str, record: Option<KeyRecord>, fetched_ms: u64) {
        match record {
            Some(record) => {
                self.unknown.remove(id);
                self.known.insert(id, record, fetched_ms);
            }
            None => {
                self.known.remove(id);
                self.unknown.insert(id, (), fetched_ms);
            }
        }
    }

    /// Forgets key `id` (this host revoked it).
    pub fn forget(&mut self, id: &str) {
        self.known.remove(id);
        self.unknown.remove(id);
    }

    /// The IDs of existing keys kept, for tests.
    pub fn ids(&self) -> Vec<&str> {
        self.known.entries.keys().map(String::as_str).collect()
    }

    /// How many unknown IDs are kept, for tests.
    pub fn unknown_len(&self) -> usize {
        self.unknown.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_limits_parse_and_refuse() {
        let s = Scopes::parse(["ids", "monitor"]).unwrap();
        assert!(s.contains(Scope::Ids) && s.contains(Scope::Monitor) && !s.contains(Scope::Admin));
        assert!(Scopes::parse([]).is_err());
        assert!(Scopes::parse(["ids", "ids"]).is_err());
        assert!(Scopes::parse(["root"]).is_err());
        assert_eq!(TagLimit::parse("*").unwrap(), TagLimit::Any);
        assert_eq!(
            TagLimit::parse("order*").unwrap(),
            TagLimit::Prefix("order".into())
        );
        assert_eq!(
            TagLimit::parse("order").unwrap(),
            TagLimit::Exact("order".into())
        );
        for bad in ["", "**", "a*b", "a/b*", "*x"] {
            assert!(TagLimit::parse(bad).is_err(), "{bad}");
        }
        assert!(TagLimit::Prefix("order".into()).allows("order-eu"));
        assert!(!TagLimit::Prefix("order".into()).allows("orde"));
        assert!(!TagLimit::Exact("order".into()).allows("order-eu"));
        assert!(KeySpec::new("ops", ["admin"], Some("a*")).is_err());
        assert!(KeySpec::new("", ["ids"], None).is_err());
        assert!(KeySpec::new("a\nb", ["ids"], None).is_err());
    }

    #[test]
    fn a_tag_limited_key_sees_its_tags_and_nothing_fleet_wide() {
        let limited = |raw: &str| Access {
            scopes: Scopes::only(Scope::Monitor),
            tags: TagLimit::parse(raw).unwrap(),
        };
        let prefix = limited("a*");
        assert!(prefix.sees_tag("a") && prefix.sees_tag("ab") && !prefix.sees_tag("ba"));
        let exact = limited("ab");
        assert!(exact.sees_tag("ab") && !exact.sees_tag("abc") && !exact.sees_tag("a"));
        for key in [&prefix, &exact] {
            assert!(!key.sees_fleet());
            assert_eq!(
                key.permits_fleet_view(Scope::Monitor),
                Err(AccessError::FleetViewNotAllowed)
            );
            // Routes that name no tag but act (lease a worker ID) stay open.
            assert_eq!(key.permits(Scope::Monitor, None), Ok(()));
        }
        let all = limited("*");
        assert!(all.sees_tag("anything") && all.sees_fleet());
        assert_eq!(all.permits_fleet_view(Scope::Monitor), Ok(()));
        assert_eq!(
            all.permits_fleet_view(Scope::Admin),
            Err(AccessError::ScopeMissing { need: "admin" })
        );
        assert!(Access::root().sees_fleet());
    }

    #[test]
    fn a_token_opens_only_its_own_record() {
        let (id, token) = new_key(&[7; KEY_RANDOM_BYTES]);
        assert_eq!(token_key_id(&token), Some(id.as_str()));
        assert_eq!(token.len(), 4 + 12 + 1 + 64);
        let record = KeyRecord {
            hash: token_hash(&token),
            access: Access::root(),
        };
        assert!(check_token(Some(&record), &token).is_ok());
        let mut other = token.clone();
        other.pop();
        other.push('0');
        assert_eq!(
            check_token(Some(&record), &other),
            Err(AccessError::KeyRefused)
        );
        assert_eq!(check_token(None, &token), Err(AccessError::KeyRefused));
        assert_eq!(token_key_id("elk_abc_def"), None);
        assert_eq!(token_key_id("test-admin-token"), None);
    }

    #[test]
    fn only_an_api_key_owns_its_request_ids() {
        let (id, _) = new_key(&[9; KEY_RANDOM_BYTES]);
        assert_eq!(lease_asker(&id), Asker::Own(id.as_str()));
        for shared in [
            "anonymous",
            "client",
            "root",
            "",
            "ABCDEF012345",
            "abcdef01234",
            "abcdef0123456",
        ] {
            assert_eq!(lease_asker(shared), Asker::Shared, "{shared}");
        }
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
