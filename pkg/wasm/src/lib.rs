//! The JS bindings of the core, built by wasm-pack into `pkg/` (`make pkg`). Thin: check
//! the JS value, call the core, convert back. The JS API in `pkg/*.mjs` reads
//! the clock in JS (passing it in is cheaper than reading it from wasm) and
//! does the awaiting and the I/O; these classes are its engine and are not
//! exported to users. Options objects are checked here, and only here.
//!
//! Hot paths return a bare `u64` with a sentinel instead of a `Result`, so a
//! call costs one boundary crossing and no allocation; the reason behind a
//! sentinel is fetched with a second call only when it happens.

#![warn(missing_docs)]

mod client;
mod error;
mod holder;
mod layout;
mod leaf;
mod opaque;
mod options;
mod segment;
mod snowflake;

use wasm_bindgen::prelude::wasm_bindgen;

/// The benchmark floor: a bare export that takes the clock and returns a u64,
/// the least any wasm ID call can cost. Not re-exported by the package API.
#[doc(hidden)]
#[wasm_bindgen(js_name = __floor)]
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn floor(now: f64) -> u64 {
    now as u64
}
