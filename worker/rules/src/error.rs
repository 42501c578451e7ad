//! What the access rules refuse: each refusal has its code in the core's one
//! list ([`ErrorCode`]), and the Worker answers it with that code's status.

use core::fmt;

use edgeleaf::code::ErrorCode;

/// Why a credential, or a request for one, was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccessError {
    /// A token that names an API key the store does not hold (never made,
    /// or revoked), or the key's ID with another secret.
    KeyRefused,
    /// The credential lacks the scope the route needs.
    ScopeMissing {
        /// The scope's name.
        need: &'static str,
    },
    /// The route names a tag outside the key's tag limit.
    TagNotAllowed,
    /// The route shows what belongs to no tag (every tenant's), and the key
    /// is limited to some tags (`Access::sees_fleet` in `access`, which
    /// imports this error: named here, not linked, so that the error imports
    /// nothing above it).
    FleetViewNotAllowed,
    /// A call through the service binding while the Worker allows none
    /// (`RPC_TAGS` empty, the default).
    BindingNotAllowed,
    /// A request for an API key that breaks a rule.
    InvalidKeySpec {
        /// The field (`"name"`, `"scopes"`, `"tags"`).
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
}

impl AccessError {
    /// The error's entry in the one list of codes.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            AccessError::KeyRefused
            | AccessError::ScopeMissing { .. }
            | AccessError::TagNotAllowed
            | AccessError::FleetViewNotAllowed
            | AccessError::BindingNotAllowed => ErrorCode::Forbidden,
            AccessError::InvalidKeySpec { .. } => ErrorCode::InvalidKeySpec,
        }
    }

    /// The code's snake_case name.
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AccessError::KeyRefused => f.write_str(
                "authorization: expected a live API key, found an unknown or revoked key or a wrong secret",
            ),
            AccessError::ScopeMissing { need } => write!(
                f,
                "authorization: expected a credential with the {need:?} scope, found one without it"
            ),
            AccessError::TagNotAllowed => f.write_str(
                "authorization: expected a tag within the key's tag limit, found another",
            ),
            AccessError::FleetViewNotAllowed => f.write_str(
                "authorization: expected a credential without a tag limit (this view covers every tag), found a key limited to some tags",
            ),
            AccessError::BindingNotAllowed => f.write_str(
                "binding: expected RPC_TAGS to allow the service binding some tags, found none allowed (the default)",
            ),
            AccessError::InvalidKeySpec { field, expected } => write!(f, "{field}: expected {expected}"),
        }
    }
}

impl core::error::Error for AccessError {}
