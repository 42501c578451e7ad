//! The one mapping from errors to JS: an `Error` whose `code` property names
//! what went wrong (and, where waiting helps, `retryAfterMs`), and how a JS
//! value reads in its message (`describe`).

use std::{format, string::String, string::ToString};

use wasm_bindgen::JsValue;

/// A JS `Error` with `code` and any extra numeric properties.
pub fn coded(code: &str, message: &str, extra: &[(&str, f64)]) -> JsValue {
    let err = js_sys::Error::new(message);
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(&err, &"code".into(), &code.into());
    for (key, value) in extra {
        let _ = js_sys::Reflect::set(&err, &(*key).into(), &(*value).into());
    }
    err.into()
}

/// A core error as a JS `Error` with its `code`.
pub fn from_core(e: &edgeleaf::Error) -> JsValue {
    coded(e.code(), &e.to_string(), &[])
}

/// A bad options object or argument (wrong type, unknown field).
pub fn invalid_option(what: &str, e: impl core::fmt::Display) -> JsValue {
    coded("invalid_option", &format!("{what}: {e}"), &[])
}

/// A JS number as u64 when it is finite, whole and in 0..=2^53.
pub fn whole(value: f64) -> Option<u64> {
    const MAX: f64 = 9_007_199_254_740_992.0;
    // Checked: a whole number in 0..=2^53.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    ((0.0..=MAX).contains(&value) && value.fract() == 0.0).then_some(value as u64)
}

/// A numeric argument (ms, IDs parts): `invalid_argument` unless whole and in 0..=2^53.
pub fn ms(what: &str, value: f64) -> Result<u64, JsValue> {
    whole(value).ok_or_else(|| {
        coded(
            "invalid_argument",
            &format!(
                "{what}: expected a whole number in 0..=2^53, found {}",
                describe(&JsValue::from_f64(value))
            ),
            &[],
        )
    })
}

/// How JS would print a value, for messages (JS formats the numbers).
pub fn describe(value: &JsValue) -> String {
    if let Some(s) = value.as_string() {
        return format!("{s:?}");
    }
    if value.is_object() && !value.is_function() {
        return String::from("an object");
    }
    let kind = value.js_typeof().as_string().unwrap_or_default();
    match value.as_f64() {
        // JS formats the number (the wasm carries no float formatting).
        Some(n) => match js_sys::Number::from(n).to_string_with_radix(10) {
            Ok(shown) => format!("{kind} {}", String::from(shown)),
            Err(_) => kind,
        },
        None => format!("{kind} {value:?}"),
    }
}
