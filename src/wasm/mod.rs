//! JS bindings (feature `wasm`, built by wasm-pack into `pkg/`). Thin: convert
//! the JS value, call the core, convert back. The JS wrapper in `js/` reads the
//! clock in JS (passing it in is cheaper than reading it from wasm) and does the
//! awaiting; these classes are its engine and are not exported to users.
//!
//! Hot paths return a bare `u64` with a sentinel instead of a `Result`, so a
//! call costs one boundary crossing and no allocation; the reason behind a
//! sentinel is fetched with a second call only when it happens.

mod error;
mod layout;
mod options;
mod segment;
mod snowflake;
