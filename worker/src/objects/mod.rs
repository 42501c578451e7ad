//! The Durable Objects, one folder each.

pub mod allocator_store;
pub mod catalog;
pub mod key_store;
pub mod minter_store;
pub mod registry_store;
pub mod tag_store;

pub use allocator_store::RegionalAllocator;
pub use catalog::Catalog;
pub use key_store::{ApiKey, KeyStore};
pub use minter_store::SnowflakeMinter;
pub use registry_store::WorkerRegistry;
pub use tag_store::TagStore;
