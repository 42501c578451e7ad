//! Moving a tag from Leaf, for the command line's `import-leaf`: the core's
//! `leaf::continue_after`, as a plain JS object.

use js_sys::Object;
use wasm_bindgen::prelude::*;

use super::error::from_core;
use super::options::set;
use edgeleaf::leaf::{continue_after, default_margin, Conflict, Move, ServiceTag};

/// `{ action, margin, targetMaxId?, conflict?, serviceMaxId? }` for Leaf's
/// row (`leafMaxId`, `leafStep`) and the service's tag (`serviceMaxId`
/// absent: none). `margin` absent: the core's default for `leafStep`.
/// `force`: a target past the core's `MAX_IMPORT_TARGET` is accepted.
#[wasm_bindgen(js_name = leafContinuation)]
pub fn leaf_continuation(
    leaf_max_id: u64,
    leaf_step: u64,
    margin: Option<u64>,
    service_max_id: Option<u64>,
    service_opaque: bool,
    force: bool,
) -> Result<Object, JsValue> {
    let margin = margin.unwrap_or(default_margin(leaf_step));
    let service = service_max_id.map(|max_id| ServiceTag {
        max_id,
        opaque: service_opaque,
    });
    let plan = continue_after(leaf_max_id, margin, service, force).map_err(|e| from_core(&e))?;
    let out = Object::new();
    set(&out, "margin", margin);
    match plan {
        Ok((target, mv)) => {
            let action = match mv {
                Move::Create => "create",
                Move::Raise => "raise",
                Move::Unchanged => "unchanged",
            };
            set(&out, "action", action);
            set(&out, "targetMaxId", target);
        }
        Err(conflict) => {
            set(&out, "action", "conflict");
            let name = match conflict {
                Conflict::PastLastId => "past_last_id",
                Conflict::ShortRunway { .. } => "short_runway",
                Conflict::Opaque => "opaque",
                Conflict::Allotted { .. } => "allotted",
            };
            set(&out, "conflict", name);
        }
    }
    Ok(out)
}

/// Leaf's largest dynamic step (the core's `leaf::LEAF_MAX_STEP`), for the
/// command line's help.
#[wasm_bindgen(js_name = leafMaxStep)]
#[allow(clippy::cast_precision_loss)] // 1,000,000
pub fn leaf_max_step() -> f64 {
    edgeleaf::leaf::LEAF_MAX_STEP as f64
}
