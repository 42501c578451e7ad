//! The Durable Objects, one folder each: its stubs (`stubs.rs`: the client
//! functions callers use, each sending the object's one typed request
//! enum), its storage (`schema.rs`: tables, rows, load and save) and its
//! handlers (`handlers.rs`: one per request), the object itself in
//! `mod.rs`. What every object shares: the Worker's side of a call
//! (`call`), the object's side (`serve`), and SQLite helpers (`sql`).

pub mod allocator_store;
pub mod api_key;
pub mod call;
pub mod catalog;
pub mod key_store;
pub mod minter_store;
pub mod registry_store;
pub mod serve;
pub mod sql;
pub mod tag_store;

pub use allocator_store::RegionalAllocator;
pub use api_key::ApiKey;
pub use catalog::Catalog;
pub use key_store::KeyStore;
pub use minter_store::SnowflakeMinter;
pub use registry_store::WorkerRegistry;
pub use tag_store::TagStore;
