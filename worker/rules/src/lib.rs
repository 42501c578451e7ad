//! The service's own rules, pure and natively tested: who may call what (API
//! keys and scopes, [`access`]), what the stores' past says (allocation
//! history and runway, [`history`]), the hash of lease secrets ([`lease`]),
//! and what each error code means over HTTP ([`status`]). The ID rules are the core's (`edgeleaf`);
//! the Worker (`edgeleaf-worker`) does the I/O around both.
#![no_std]
#![warn(missing_docs)]
#![warn(clippy::cast_possible_truncation, clippy::cast_sign_loss)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod access;
pub mod error;
pub mod history;
pub mod lease;
pub mod status;

pub use error::AccessError;
