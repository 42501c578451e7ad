//! The service's settings, from `wrangler.toml` `[vars]` and secrets, checked
//! once per isolate at the first request.

use std::cell::RefCell;

use edgeleaf::{
    code::ErrorCode, layout::LayoutSpec, minted::MintConfig, minted::DEFAULT_STALENESS_MS,
    registry::RegistryConfig, segment::StepPolicy, Layout,
};
use edgeleaf_rules::binding::BindingAccess;
use worker::Env;

use crate::api::ApiError;

#[derive(Debug, Clone)]
pub struct Config {
    pub layout: Layout,
    pub default_step: u64,
    pub registry: RegistryConfig,
    pub max_backward_ms: u64,
    /// Snowflake minters (`SNOWFLAKE_MINTERS`; 0: every isolate leases its
    /// own worker ID) and the staleness bound of the IDs they mint.
    pub minters: u32,
    pub staleness_ms: u64,
    /// Minters lend rights to mint and isolates ask for them
    /// (`SNOWFLAKE_RIGHTS`, "1" by default; "0" off): on only with minters
    /// and when the layout has room for their rights holders' worker IDs
    /// (`2 × minters` at most half its IDs). Then the registry reserves
    /// `2 × minters` IDs (`registry.minters`): `minters..2 × minters` for
    /// the rights holders (`rights_worker_index`); `minters` stays the
    /// number of minters, their pools and their placement.
    pub rights: bool,
    /// Origins whose pages may call the service (`CORS_ORIGINS`,
    /// comma-separated; `*` any; none by default).
    pub cors_origins: Vec<String>,
    pub admin_token: Option<String>,
    pub client_token: Option<String>,
    /// What the service binding may do (`RPC_TAGS`, `RPC_REVEAL`; nothing
    /// by default): the rules' `BindingAccess`.
    pub binding: BindingAccess,
    /// TESTS ONLY (`TEST_OBJECT_DELAY_MS`, default 0): every Durable Object
    /// call of a request makes the object wait this long before it answers,
    /// so tests can check that every route answers within its budget. It
    /// applies only to requests whose URL names a loopback host (localhost,
    /// 127.0.0.0/8, ::1: `scope::RequestScope::for_request`), as under
    /// Miniflare or `wrangler dev`. Cloudflare routes a request to a deployed
    /// Worker by a hostname of its zone or of workers.dev, never by a
    /// loopback one, so a deployed Worker never applies it, even if the
    /// variable was set there by mistake.
    pub test_object_delay_ms: u64,
    /// `REGIONAL_ALLOCATORS` ("1" on, the default; "0" off): an isolate loads its
    /// segments from its region's `RegionalAllocator` (the region of
    /// `request.cf.colo`), and from the tag's object when that one does not
    /// answer in time; off, from the tag's object alone.
    pub regional_allocators: bool,
    /// TESTS ONLY (`TEST_COLO_HEADER = "1"`): a request's colo may be set
    /// by the header `Edgeleaf-Test-Colo`, on a loopback host only (as
    /// `test_object_delay_ms`); never set in a deployed Worker's config, and
    /// even then never honoured there (no loopback host).
    pub test_colo_header: bool,
    /// TESTS ONLY (`TEST_ROOT_UNREACHABLE = "1"`, loopback hosts only):
    /// every call to a tag's root object fails as if it could not be
    /// reached (the isolate's own and the allocators' on its behalf).
    pub test_root_unreachable: bool,
    /// TESTS ONLY (`TEST_ALLOCATORS_UNREACHABLE = "1"`, loopback hosts
    /// only): every call to a regional allocator fails as if it could not
    /// be reached.
    pub test_allocators_unreachable: bool,
    /// TESTS ONLY (`TEST_ALLOCATOR_DELAY_MS`, 0..=60000, loopback hosts
    /// only): every regional allocator waits this long before it answers
    /// (as `test_object_delay_ms`, for the allocators alone).
    pub test_allocator_delay_ms: u64,
    /// TESTS ONLY (`TEST_BENCH_FLOOR`, default unset): serve the HTTP
    /// bench's same-bytes floor (`routes/floor.rs`), on loopback hosts alone
    /// (as `test_object_delay_ms`).
    pub test_bench_floor: bool,
    /// TESTS ONLY (`TEST_ROOT_DELAY_MS`, 0..=60000, loopback hosts only):
    /// every regional allocator's call to its tag's root waits this long
    /// before the root answers (a root an ocean away, or struggling); the
    /// isolates' own calls to the root are not delayed.
    pub test_root_delay_ms: u64,
    /// TESTS ONLY (`TEST_MINTER_DELAY_MS`, 0..=60000, with
    /// `TEST_SLOW_MINTER`, a minter's index; loopback hosts only): that one
    /// minter waits this long before it answers (a minter that hangs).
    pub test_minter_delay: Option<(u32, u64)>,
    /// TESTS ONLY (`TEST_COUNT_CALLS = "1"`, loopback hosts only): each
    /// answer says in `Edgeleaf-Test-Object-Calls` how many object calls
    /// its request made (the Free plan allows 50 subrequests a request).
    /// A service binding's call has no host: it is counted whenever the
    /// variable is set (`RequestScope::for_binding`), which costs a header
    /// to each object and reads the SQL cursors' counters, and shows the
    /// caller nothing (the totals are answered on loopback hosts only).
    pub test_count_calls: bool,
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

/// An on/off setting: "1" on, "0" or unset off.
fn flag(env: &Env, name: &str) -> Result<bool, ApiError> {
    flag_or(env, name, false)
}

/// A "0"/"1" flag, `default` when the variable is not set.
fn flag_or(env: &Env, name: &str, default: bool) -> Result<bool, ApiError> {
    match var(env, name).as_deref().map(str::trim) {
        None => Ok(default),
        Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(other) => Err(invalid(name, &format!("\"0\" or \"1\", found {other:?}"))),
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
        let minters = number(env, "SNOWFLAKE_MINTERS", 0)?;
        let minters = u32::try_from(minters)
            .ok()
            .filter(|m| *m <= registry.capacity / 2)
            .ok_or_else(|| {
                invalid(
                    "SNOWFLAKE_MINTERS",
                    &format!(
                        "0..={} (half the layout's worker IDs), found {minters}",
                        registry.capacity / 2
                    ),
                )
            })?;
        // A layout without room for the rights holders (jsSafe with 36
        // minters: 72 > 64) runs its minters without rights.
        let rights = flag_or(env, "SNOWFLAKE_RIGHTS", true)?
            && edgeleaf::minted::lends_rights(minters, registry.capacity);
        registry.reserve_minters(minters, rights);
        let per_owner = number(env, "MAX_WORKERS_PER_KEY", registry.half_share().into())?;
        registry.per_owner = Some(u32::try_from(per_owner).unwrap_or(u32::MAX));
        registry.validate().map_err(|e| {
            invalid(
                "LEASE_TTL_MS / LEASE_GRACE_MS / MAX_SKEW_MS / MAX_WORKERS_PER_KEY",
                &e.to_string(),
            )
        })?;
        let staleness_ms = number(env, "SNOWFLAKE_STALENESS_MS", DEFAULT_STALENESS_MS)?;
        if minters > 0 {
            MintConfig {
                staleness_ms,
                ..MintConfig::new(minters, 0)
            }
            .validate(&layout)
            .map_err(|e| invalid("SNOWFLAKE_STALENESS_MS", &e.to_string()))?;
        }
        let max_backward_ms = number(
            env,
            "MAX_BACKWARD_MS",
            edgeleaf::snowflake::DEFAULT_MAX_BACKWARD_MS,
        )?;
        if max_backward_ms > edgeleaf::snowflake::MAX_TOLERANCE_MS {
            return Err(invalid("MAX_BACKWARD_MS", "at most 60000"));
        }
        let cors_origins = cors_origins(var(env, "CORS_ORIGINS").as_deref().unwrap_or(""))?;
        let binding = BindingAccess::parse(
            var(env, "RPC_TAGS").as_deref().unwrap_or(""),
            var(env, "RPC_REVEAL").as_deref().unwrap_or(""),
        )
        .map_err(|e| invalid("RPC_TAGS / RPC_REVEAL", &e.to_string()))?;
        let test_object_delay_ms = number(env, "TEST_OBJECT_DELAY_MS", 0)?;
        if test_object_delay_ms > 60_000 {
            return Err(invalid("TEST_OBJECT_DELAY_MS", "at most 60000"));
        }
        let regional_allocators = flag_or(env, "REGIONAL_ALLOCATORS", true)?;
        let test_colo_header = flag(env, "TEST_COLO_HEADER")?;
        let test_root_unreachable = flag(env, "TEST_ROOT_UNREACHABLE")?;
        let test_allocators_unreachable = flag(env, "TEST_ALLOCATORS_UNREACHABLE")?;
        let test_allocator_delay_ms = number(env, "TEST_ALLOCATOR_DELAY_MS", 0)?;
        if test_allocator_delay_ms > 60_000 {
            return Err(invalid("TEST_ALLOCATOR_DELAY_MS", "at most 60000"));
        }
        let test_bench_floor = flag(env, "TEST_BENCH_FLOOR")?;
        let test_count_calls = flag(env, "TEST_COUNT_CALLS")?;
        let test_root_delay_ms = number(env, "TEST_ROOT_DELAY_MS", 0)?;
        if test_root_delay_ms > 60_000 {
            return Err(invalid("TEST_ROOT_DELAY_MS", "at most 60000"));
        }
        let test_minter_delay_ms = number(env, "TEST_MINTER_DELAY_MS", 0)?;
        if test_minter_delay_ms > 60_000 {
            return Err(invalid("TEST_MINTER_DELAY_MS", "at most 60000"));
        }
        let test_slow_minter = u32::try_from(number(env, "TEST_SLOW_MINTER", 0)?)
            .map_err(|_| invalid("TEST_SLOW_MINTER", "a minter's index"))?;
        let test_minter_delay =
            (test_minter_delay_ms > 0).then_some((test_slow_minter, test_minter_delay_ms));
        Ok(Config {
            layout,
            default_step,
            registry,
            max_backward_ms,
            minters,
            staleness_ms,
            rights,
            cors_origins,
            admin_token: secret(env, "ADMIN_TOKEN"),
            client_token: secret(env, "CLIENT_TOKEN"),
            binding,
            test_object_delay_ms,
            regional_allocators,
            test_colo_header,
            test_root_unreachable,
            test_allocators_unreachable,
            test_allocator_delay_ms,
            test_bench_floor,
            test_root_delay_ms,
            test_minter_delay,
            test_count_calls,
        })
    }
}

/// `CORS_ORIGINS`: `*`, or origins such as `https://app.example.com` (a
/// scheme, a host and perhaps a port: what a browser sends in `Origin`).
fn cors_origins(raw: &str) -> Result<Vec<String>, ApiError> {
    raw.split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|o| {
            let host = o
                .strip_prefix("https://")
                .or_else(|| o.strip_prefix("http://"));
            let ok = o == "*"
                || host.is_some_and(|h| {
                    !h.is_empty()
                        && h.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
                });
            if ok {
                Ok(o.to_owned())
            } else {
                Err(invalid(
                    "CORS_ORIGINS",
                    &format!("\"*\" or origins like https://app.example.com, found {o:?}"),
                ))
            }
        })
        .collect()
}

thread_local! {
    static CACHED: RefCell<Option<Config>> = const { RefCell::new(None) };
}

impl Config {
    /// The settings of this isolate's Worker, read and checked once.
    ///
    /// # Errors
    /// As [`Config::from_env`] (and again at every call until they are valid).
    pub fn cached(env: &Env) -> Result<Config, ApiError> {
        if let Some(c) = CACHED.with(|c| c.borrow().clone()) {
            return Ok(c);
        }
        let c = Config::from_env(env)?;
        CACHED.with(|cell| *cell.borrow_mut() = Some(c.clone()));
        Ok(c)
    }

    /// Whether a page from `origin` may call the service.
    pub fn cors_allows(&self, origin: &str) -> bool {
        self.cors_origins.iter().any(|o| o == "*" || o == origin)
    }
}
