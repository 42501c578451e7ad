//! Reading JS option objects: known keys only, whole numbers only. Done by
//! hand rather than through serde so the .wasm carries no serde or float
//! formatting (it must stay small: it ships to browsers and Workers).

use std::{format, vec::Vec};

use js_sys::{Object, Reflect};
use wasm_bindgen::{JsCast, JsValue};

use super::error::{coded, describe};

/// An options object whose keys have been checked against the allowed ones.
pub struct Options {
    what: &'static str,
    obj: Object,
}

impl Options {
    /// `undefined` reads as `{}`; anything but a plain object is refused, and
    /// so is any key outside `allowed` (a typo must not pass silently).
    pub fn new(what: &'static str, value: &JsValue, allowed: &[&str]) -> Result<Self, JsValue> {
        if value.is_undefined() {
            return Ok(Options {
                what,
                obj: Object::new(),
            });
        }
        let Some(obj) = value
            .dyn_ref::<Object>()
            .filter(|_| !value.is_function() && !js_sys::Array::is_array(value))
        else {
            return Err(coded(
                "invalid_option",
                &format!("{what}: expected an object, found {}", describe(value)),
                &[],
            ));
        };
        for key in Object::keys(obj).iter() {
            let key = key.as_string().unwrap_or_default();
            if !allowed.contains(&key.as_str()) {
                let known: Vec<&str> = allowed.to_vec();
                return Err(coded(
                    "invalid_option",
                    &format!(
                        "{what}: expected only {}, found unknown option {key:?}",
                        known.join(", ")
                    ),
                    &[],
                ));
            }
        }
        Ok(Options {
            what,
            obj: obj.clone(),
        })
    }

    /// The raw value of a key (`undefined` when absent).
    pub fn get(&self, key: &str) -> JsValue {
        Reflect::get(&self.obj, &key.into()).unwrap_or(JsValue::UNDEFINED)
    }

    /// A whole number 0..=2^53, or `None` when absent.
    pub fn number(&self, key: &'static str) -> Result<Option<u64>, JsValue> {
        let value = self.get(key);
        if value.is_undefined() {
            return Ok(None);
        }
        whole_value(&value).map(Some).ok_or_else(|| {
            coded(
                "invalid_option",
                &format!(
                    "{} {key}: expected a whole number in 0..=2^53, found {}",
                    self.what,
                    describe(&value)
                ),
                &[],
            )
        })
    }

    /// A required whole number.
    pub fn required(&self, key: &'static str) -> Result<u64, JsValue> {
        self.number(key)?.ok_or_else(|| {
            coded(
                "invalid_option",
                &format!("{}: expected {key}, found none", self.what),
                &[],
            )
        })
    }

    /// Checks that an optional key holds a function (JS calls it; the
    /// bindings only check it).
    pub fn function(&self, key: &'static str) -> Result<(), JsValue> {
        let value = self.get(key);
        if value.is_undefined() || value.is_function() {
            return Ok(());
        }
        Err(coded(
            "invalid_option",
            &format!(
                "{} {key}: expected a function, found {}",
                self.what,
                describe(&value)
            ),
            &[],
        ))
    }

    /// A whole number that must fit `T` (else `out_of_range`).
    pub fn small<T: TryFrom<u64>>(&self, key: &'static str, max: T) -> Result<Option<T>, JsValue>
    where
        u64: From<T>,
    {
        let max = u64::from(max);
        match self.number(key)? {
            None => Ok(None),
            Some(n) => edgeleaf::error::check_range(key, n, 0, max)
                .ok()
                .and_then(|n| T::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    super::error::from_core(&edgeleaf::Error::OutOfRange {
                        what: key,
                        min: 0,
                        max,
                        found: n,
                    })
                }),
        }
    }
}

/// A JS number, bigint or Date (its Unix ms) that is a whole number in 0..=2^53.
fn whole_value(value: &JsValue) -> Option<u64> {
    if let Some(n) = value.as_f64() {
        return super::error::whole(n);
    }
    if let Some(date) = value.dyn_ref::<js_sys::Date>() {
        return super::error::whole(date.get_time());
    }
    let n = u64::try_from(value.dyn_ref::<js_sys::BigInt>()?.clone()).ok()?;
    (n <= 1 << 53).then_some(n)
}

/// Sets `key` on a plain object (cannot fail on a fresh object).
pub fn set(obj: &Object, key: &str, value: impl Into<JsValue>) {
    let _ = Reflect::set(obj, &key.into(), &value.into());
}
