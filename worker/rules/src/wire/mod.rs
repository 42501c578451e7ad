//! The service's wire types: what crosses a wire, as serde data. Each
//! Durable Object's one typed request enum, its bodies and its answers (a
//! module per object), and the bodies of the public HTTP routes; with their
//! pure conversions (a body to the core's type, a decimal string to a
//! number). The Worker sends and serves them (`edgeleaf-worker`: its client
//! functions and handlers); the JSON they make is the API, tested here.
//!
//! The rules every type keeps:
//! - IDs and other numbers that may pass 2^53 travel as decimal strings;
//! - field names are camelCase;
//! - a body a caller writes has `deny_unknown_fields` (a misspelt field is
//!   an error, and a caller cannot name what the Worker fills in: the owner);
//! - a message between an isolate and an object, or between two objects, is
//!   read tolerantly (an unknown field is ignored): during a deploy the
//!   release before this one sends and reads them too (docs/design.md, "Two
//!   releases at once"). So a new field must be one the previous release may
//!   ignore, or is sent only once the other side is known to understand it;
//!   an unknown request (variant) is still refused. (`registry::Previous` is
//!   also in a public body, so it stays strict.)
//! - an answer that the API has always given with its fields in alphabetical
//!   order declares them in that order (serde writes them as declared).

use alloc::string::String;
use core::fmt;

use edgeleaf::code::ErrorCode;

pub mod allocator;
pub mod api;
pub mod catalog;
pub mod keys;
pub mod minter;
pub mod registry;
pub mod tag;

/// A request to a Durable Object, as the Worker's one `call` sends it.
pub trait StoreRequest {
    /// Whether the request may run twice: a failure the platform marks
    /// retryable may come after the object ran it, and the core's
    /// `after_call_failed` makes only such requests again. Not repeatable:
    /// those whose second run would lose what the first did (a grant whose
    /// secret only the lost answer carried, a key made) or answer wrongly
    /// (a conditional write, a release, a delete).
    fn repeatable(&self) -> bool;
}

/// Why a wire value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// A value that does not read as what its field names (a bound that is
    /// not a decimal number, a key that is not hex): the store that sent it
    /// is broken, not the caller (the Worker answers a store error).
    Unreadable(String),
    /// A caller's value refused, with its code.
    Invalid(ErrorCode, String),
    /// A value the core's rules refuse.
    Core(edgeleaf::Error),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Unreadable(m) | WireError::Invalid(_, m) => f.write_str(m),
            WireError::Core(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl From<edgeleaf::Error> for WireError {
    fn from(e: edgeleaf::Error) -> Self {
        WireError::Core(e)
    }
}

/// A decimal string as a number; `what` names it in the error.
pub(crate) fn decimal(what: &str, s: &str) -> Result<u64, WireError> {
    s.parse::<u64>()
        .map_err(|_| WireError::Unreadable(alloc::format!("{what} {s:?} is not a number")))
}
