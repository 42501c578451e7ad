//! The service's settings, from `wrangler.toml` `[vars]` and secrets, checked
//! once per isolate at the first request.

use edgeleaf::{ErrorCode, Layout, LayoutSpec, RegistryConfig, StepPolicy};
use worker::Env;

use crate::api::ApiError;

#[derive(Debug, Clone)]
pub struct Config {
    pub layout: Layout,
    pub default_step: u64,
    pub registry: RegistryConfig,
    pub max_backward_ms: u64,
    pub admin_token: Option<String>,
    pub client_token: Option<String>,
}

fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name)
        .ok()
        .map(|v| v.to_string())
        .filter(|v| !v.trim().is_empty())
}

fn secret(env: &Env, name: &str) -> Option<String> {
    env.secret(name)
        .ok()
        .map(|v| v.to_string())
        .or_else(|| var(env, name))
        .filter(|v| !v.is_empty())
}

fn number(env: &Env, name: &str, default: u64) -> Result<u64, ApiError> {
    match var(env, name) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| invalid(name, &format!("a whole number, found {v:?}"))),
    }
}

fn invalid(name: &str, what: &str) -> ApiError {
    ApiError::unavailable(
        ErrorCode::ConfigInvalid,
        format!("configuration {name}: expected {what}"),
        60_000,
    )
}

impl Config {
    /// Reads and checks every setting.
    ///
    /// # Errors
    /// A 503 `config_invalid` naming the setting.
    pub fn from_env(env: &Env) -> Result<Config, ApiError> {
        let layout = match var(env, "LAYOUT").as_deref() {
            None | Some("leaf") => Layout::LEAF,
            Some("jsSafe") => Layout::JS_SAFE,
            Some(other) => {
                return Err(invalid(
                    "LAYOUT",
                    &format!("\"leaf\" or \"jsSafe\", found {other:?}"),
                ))
            }
        };
        let layout = match var(env, "EPOCH_MS") {
            None => layout,
            Some(_) => Layout::new(LayoutSpec {
                epoch_ms: number(env, "EPOCH_MS", 0)?,
                ..layout.spec()
            })
            .map_err(|e| invalid("EPOCH_MS", &e.to_string()))?,
        };
        let default_step = number(env, "DEFAULT_STEP", 1000)?;
        StepPolicy::new(default_step).map_err(|e| invalid("DEFAULT_STEP", &e.to_string()))?;
        let mut registry = RegistryConfig::new(&layout);
        registry.ttl_ms = number(env, "LEASE_TTL_MS", registry.ttl_ms)?;
        registry.grace_ms = number(env, "LEASE_GRACE_MS", registry.grace_ms)?;
        registry.max_skew_ms = number(env, "MAX_SKEW_MS", registry.max_skew_ms)?;
        registry.validate().map_err(|e| {
            invalid(
                "LEASE_TTL_MS / LEASE_GRACE_MS / MAX_SKEW_MS",
                &e.to_string(),
            )
        })?;
        let max_backward_ms = number(env, "MAX_BACKWARD_MS", edgeleaf::DEFAULT_MAX_BACKWARD_MS)?;
        if max_backward_ms > edgeleaf::MAX_TOLERANCE_MS {
            return Err(invalid("MAX_BACKWARD_MS", "at most 60000"));
        }
        Ok(Config {
            layout,
            default_step,
            registry,
            max_backward_ms,
            admin_token: secret(env, "ADMIN_TOKEN"),
            client_token: secret(env, "CLIENT_TOKEN"),
        })
    }
}
