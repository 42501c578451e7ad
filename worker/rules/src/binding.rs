//! Who a service binding is, and what it may do. A binding reaches the
//! Worker's RPC entrypoint without a token: only Workers of the account
//! configured with it can call, and no public request reaches the
//! entrypoint. The operator still limits it: `RPC_TAGS` (the tags its calls
//! may name; none by default, so an unconfigured Worker refuses every call)
//! and `RPC_REVEAL` (the opaque tags whose IDs it may reveal; none by
//! default).

use alloc::vec::Vec;

use crate::access::{Access, Scope, Scopes, TagLimit};
use crate::error::AccessError;

/// The owner of every binding's calls: who leased a segment or a worker ID
/// (`lease:binding` in a tag's history). Never a key's ID (12 hex digits)
/// nor a root token's name, so no HTTP caller is ever this owner.
pub const BINDING_OWNER: &str = "binding";

/// What the service binding may do: `RPC_TAGS` and `RPC_REVEAL` as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindingAccess {
    tags: Vec<TagLimit>,
    reveal: Vec<TagLimit>,
}

/// `""` (none), or comma-separated limits as a key's: `*`, a tag, a prefix
/// ending in `*`.
fn limits(raw: &str) -> Result<Vec<TagLimit>, AccessError> {
    raw.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(TagLimit::parse)
        .collect()
}

impl BindingAccess {
    /// Reads `RPC_TAGS` and `RPC_REVEAL`.
    ///
    /// # Errors
    /// [`AccessError::InvalidKeySpec`] for a limit that is not `*`, a tag or
    /// a tag prefix; a reveal limit is allowed only within `RPC_TAGS`'s
    /// (checked per call: a tag must pass both).
    pub fn parse(tags: &str, reveal: &str) -> Result<BindingAccess, AccessError> {
        Ok(BindingAccess {
            tags: limits(tags)?,
            reveal: limits(reveal)?,
        })
    }

    /// Whether any call is allowed (`RPC_TAGS` not empty).
    pub fn enabled(&self) -> bool {
        !self.tags.is_empty()
    }

    /// What a call that needs `need`, naming `tag` if it names one, may do:
    /// `ids` and `registry` within `RPC_TAGS`; `admin` only to reveal a tag
    /// within both `RPC_TAGS` and `RPC_REVEAL`; never `monitor`.
    ///
    /// # Errors
    /// [`AccessError::BindingNotAllowed`] while `RPC_TAGS` is empty;
    /// [`AccessError::TagNotAllowed`] for a tag outside the limits;
    /// [`AccessError::ScopeMissing`] for anything else.
    pub fn permits(&self, need: Scope, tag: Option<&str>) -> Result<Access, AccessError> {
        if !self.enabled() {
            return Err(AccessError::BindingNotAllowed);
        }
        let within = |list: &[TagLimit]| match tag {
            None => list.first().cloned(),
            Some(t) => list.iter().find(|l| l.allows(t)).cloned(),
        };
        let tags = match need {
            Scope::Ids | Scope::Registry => within(&self.tags),
            Scope::Admin if tag.is_some() && !self.reveal.is_empty() => {
                within(&self.tags).and(within(&self.reveal))
            }
            Scope::Admin | Scope::Monitor => {
                return Err(AccessError::ScopeMissing {
                    need: need.as_str(),
                })
            }
        };
        let tags = tags.ok_or(AccessError::TagNotAllowed)?;
        let access = Access {
            scopes: Scopes::only(need),
            tags,
        };
        access.permits(need, tag)?;
        Ok(access)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::lease_asker;
    use edgeleaf::tag::Asker;

    #[test]
    fn nothing_is_allowed_by_default() {
        let none = BindingAccess::parse("", "").unwrap();
        for need in Scope::ALL {
            for tag in [None, Some("order")] {
                assert_eq!(none.permits(need, tag), Err(AccessError::BindingNotAllowed));
            }
        }
        assert!(!BindingAccess::parse(" , ", "*").unwrap().enabled());
    }

    #[test]
    fn tags_are_limited_as_keys_are() {
        let some = BindingAccess::parse("order, user*", "").unwrap();
        assert!(some.permits(Scope::Ids, Some("order")).is_ok());
        assert!(some.permits(Scope::Ids, Some("user.eu")).is_ok());
        assert!(some.permits(Scope::Ids, None).is_ok());
        assert!(some.permits(Scope::Registry, None).is_ok());
        assert_eq!(
            some.permits(Scope::Ids, Some("orders")),
            Err(AccessError::TagNotAllowed)
        );
        assert_eq!(
            some.permits(Scope::Monitor, None),
            Err(AccessError::ScopeMissing { need: "monitor" })
        );
        let any = BindingAccess::parse("*", "").unwrap();
        assert!(any.permits(Scope::Ids, Some("anything")).is_ok());
        assert!(BindingAccess::parse("order,bad tag", "").is_err());
        assert!(BindingAccess::parse("*", "o*rder").is_err());
    }

    #[test]
    fn reveal_needs_both_lists() {
        let no_reveal = BindingAccess::parse("*", "").unwrap();
        assert_eq!(
            no_reveal.permits(Scope::Admin, Some("order")),
            Err(AccessError::ScopeMissing { need: "admin" })
        );
        let some = BindingAccess::parse("order*", "order.opaque,user").unwrap();
        assert!(some.permits(Scope::Admin, Some("order.opaque")).is_ok());
        assert_eq!(
            some.permits(Scope::Admin, Some("order.plain")),
            Err(AccessError::TagNotAllowed)
        );
        assert_eq!(
            some.permits(Scope::Admin, Some("user")),
            Err(AccessError::TagNotAllowed)
        );
        assert_eq!(
            some.permits(Scope::Admin, None),
            Err(AccessError::ScopeMissing { need: "admin" })
        );
    }

    #[test]
    fn a_binding_is_shared_by_every_bound_worker() {
        // One owner for every Worker of the account bound to `Ids`: a
        // request ID sent by one would answer another's range.
        assert_eq!(lease_asker(BINDING_OWNER), Asker::Shared);
    }
}
