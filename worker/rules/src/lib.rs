//! The service's own rules, pure and natively tested: who may call what (API
//! keys and scopes, [`access`]; a service binding, [`binding`]), what the stores' past says (allocation
//! history and runway, [`history`]), the hash of lease secrets ([`lease`]),
//! what each error code means over HTTP ([`status`]), and the types that
//! cross a wire, with their JSON ([`wire`]). The ID rules are the core's
//! (`edgeleaf`); the Worker (`edgeleaf-worker`) does the I/O around both.
#![no_std]
#![warn(missing_docs)]
#![warn(clippy::cast_possible_truncation, clippy::cast_sign_loss)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod access;
pub mod binding;
pub mod error;
pub mod history;
pub mod lease;
pub mod status;
pub mod wire;

pub use error::AccessError;
