//! The scope of one request: what its handling may still wait (the core's
//! `WaitBudget`), its region, and its test settings, shared by everything
//! it awaits.
//!
//! Every request answers within a bound: [`RequestScope::run`] gives the
//! handling of each request one budget, the core's `WaitBudget` (sized by
//! the core), and every call to an object (`objects::call`, the only way the
//! Worker reaches one) is raced against what is left of it; so is every wait
//! of the isolate's loop (`isolate::run`). Out of budget, a request answers
//! 503 `store_unavailable` with `Retry-After`.

use std::cell::{Cell, OnceCell, RefCell};
use std::future::Future;
use std::rc::Rc;

use edgeleaf::region::{colo_region, Region};
use edgeleaf::wait::WaitBudget;
use futures::future;
use wasm_bindgen::JsValue;
use worker::worker_sys::web_sys;
use worker::{Env, Request};

use crate::clock::now_ms;
use crate::config::Config;
use crate::incoming::Incoming;

/// The header that carries a test's object delay to the object (only ever
/// set by `send`, for a request with a `RequestScope` that has one).
pub(crate) const TEST_DELAY_HEADER: &str = "Edgeleaf-Test-Delay-Ms";

/// The header that carries a test's fault to an object that calls others on
/// the request's behalf (a regional allocator calling its tag's root): only
/// ever set by `send`, for a request whose `RequestScope` has one.
pub(crate) const TEST_FAULT_HEADER: &str = "Edgeleaf-Test-Fault";

/// A fault `TEST_FAULT_HEADER` names (its value: faults, comma-separated;
/// an object honours each only with its own `Config::test_*` setting).
pub(crate) const ROOT_UNREACHABLE: &str = "root-unreachable";

/// The other: the object's calls to the root are slow
/// (`Config::test_root_delay_ms`).
pub(crate) const ROOT_DELAY: &str = "root-delay";

/// TESTS ONLY: the header that sets a request's colo (honoured on a
/// loopback host with `TEST_COLO_HEADER = "1"`, never otherwise).
pub const TEST_COLO_HEADER: &str = "Edgeleaf-Test-Colo";

/// TESTS ONLY: the answer's header that counts its request's object calls
/// (`Config::test_count_calls`, loopback hosts only).
pub const TEST_CALLS_HEADER: &str = "Edgeleaf-Test-Object-Calls";

/// What one request to the Worker may still wait, shared by everything its
/// handling awaits.
pub struct RequestScope {
    pub(crate) budget: Cell<WaitBudget>,
    /// TESTS ONLY: how long each object it calls waits before answering
    /// (`Config::test_object_delay_ms`; 0 but on a loopback host).
    pub(crate) test_delay_ms: u64,
    /// The isolate's region (`isolate_region`; in tests the request's
    /// `Edgeleaf-Test-Colo` header), if the colo is a known one.
    pub(crate) region: Option<Region>,
    /// TESTS ONLY: every call to a tag's root object fails
    /// (`Config::test_root_unreachable`, loopback hosts only).
    pub(crate) root_unreachable: bool,
    /// TESTS ONLY: every call to a regional allocator fails
    /// (`Config::test_allocators_unreachable`, loopback hosts only).
    pub(crate) allocators_unreachable: bool,
    /// TESTS ONLY: how long each regional allocator waits before answering
    /// (`Config::test_allocator_delay_ms`; 0 but on a loopback host).
    pub(crate) allocator_delay_ms: u64,
    /// TESTS ONLY: how long each tag's root waits before answering this
    /// scope's calls (an object's scope: `Config::test_root_delay_ms`).
    pub(crate) root_delay_ms: u64,
    /// TESTS ONLY: the objects this scope calls on its behalf delay their
    /// calls to the root (`Config::test_root_delay_ms`, loopback hosts only).
    pub(crate) root_delay: bool,
    /// TESTS ONLY: the object calls made so far (`Config::test_count_calls`,
    /// loopback hosts only), its background's calls included.
    pub(crate) calls: Option<Rc<Cell<u32>>>,
}

thread_local! {
    /// The scope of the request being polled (`RequestScope::run`).
    static CURRENT: RefCell<Option<Rc<RequestScope>>> = const { RefCell::new(None) };
}

impl RequestScope {
    /// The scope of `req`, which starts now: a fresh budget of the core's
    /// size; the test delay only for a URL on a loopback host (see
    /// `Config::test_object_delay_ms`: never the case of a deployed Worker).
    pub fn for_request(req: &Incoming, env: &Env) -> RequestScope {
        // Test settings only on a loopback host (never a deployed Worker's).
        let test = Config::cached(env).ok().filter(|_| req.on_loopback());
        let test_delay_ms = test.as_ref().map_or(0, |c| c.test_object_delay_ms);
        let test_colo = test
            .as_ref()
            .filter(|c| c.test_colo_header)
            .and_then(|_| req.headers().get(TEST_COLO_HEADER).ok().flatten());
        let region = match test_colo {
            Some(colo) => colo_region(&colo),
            None => isolate_region(req),
        };
        RequestScope {
            budget: Cell::new(WaitBudget::for_request(now_ms())),
            test_delay_ms,
            region,
            root_unreachable: test.as_ref().is_some_and(|c| c.test_root_unreachable),
            allocators_unreachable: test.as_ref().is_some_and(|c| c.test_allocators_unreachable),
            allocator_delay_ms: test.as_ref().map_or(0, |c| c.test_allocator_delay_ms),
            root_delay_ms: 0,
            root_delay: test.as_ref().is_some_and(|c| c.test_root_delay_ms > 0),
            calls: test
                .filter(|c| c.test_count_calls)
                .map(|_| Rc::new(Cell::new(0))),
        }
    }

    /// The scope of a call through the service binding (`binding`), which
    /// starts now: a fresh budget of the core's size, as a request's; the
    /// isolate's region if a request has told it (a call has no `cf`); no
    /// test setting (a call has no URL, so never a loopback host's).
    pub fn for_binding() -> RequestScope {
        RequestScope {
            budget: Cell::new(WaitBudget::for_request(now_ms())),
            test_delay_ms: 0,
            region: ISOLATE_REGION.with(|r| r.get().copied().flatten()),
            root_unreachable: false,
            allocators_unreachable: false,
            allocator_delay_ms: 0,
            root_delay_ms: 0,
            root_delay: false,
            calls: None,
        }
    }

    /// The scope of an object's request that calls other objects on its
    /// caller's behalf (a regional allocator): the background budget (its
    /// handler narrows it to the caller's limit: `limit_budget`), and the
    /// caller's test faults (a header only `send` sets), each honoured only
    /// when the object's own config allows it too.
    pub fn for_object(req: &Request, env: &Env) -> RequestScope {
        let header = req.headers().get(TEST_FAULT_HEADER).ok().flatten();
        let faults: Vec<&str> = header
            .as_deref()
            .map_or(Vec::new(), |h| h.split(',').collect());
        let test = Config::cached(env).ok();
        let named = |fault: &str| faults.contains(&fault);
        RequestScope {
            budget: Cell::new(WaitBudget::for_background(now_ms())),
            test_delay_ms: 0,
            region: None,
            root_unreachable: named(ROOT_UNREACHABLE)
                && test.as_ref().is_some_and(|c| c.test_root_unreachable),
            allocators_unreachable: false,
            allocator_delay_ms: 0,
            root_delay_ms: test
                .as_ref()
                .filter(|_| named(ROOT_DELAY))
                .map_or(0, |c| c.test_root_delay_ms),
            root_delay: false,
            calls: None,
        }
    }

    /// TESTS ONLY: the count of this scope's object calls, if it keeps one.
    pub fn calls(&self) -> Option<Rc<Cell<u32>>> {
        self.calls.clone()
    }

    /// Counts one object call (a subrequest), if this scope counts them.
    pub(crate) fn count_call(&self) {
        if let Some(c) = &self.calls {
            c.set(c.get().saturating_add(1));
        }
    }

    /// Runs `handling` (all of one request's) within this scope: whenever
    /// it is polled, `budget()` is this one. Requests interleave at every
    /// await, so the scope is set for each poll, not once.
    pub async fn run<T>(self, handling: impl Future<Output = T>) -> T {
        let scope = Rc::new(self);
        let mut handling = std::pin::pin!(handling);
        future::poll_fn(|cx| {
            let outer = CURRENT.with(|c| c.replace(Some(scope.clone())));
            let polled = handling.as_mut().poll(cx);
            CURRENT.with(|c| *c.borrow_mut() = outer);
            polled
        })
        .await
    }
}

/// The budget of the request being handled; outside one (a call in
/// `waitUntil`, an object's own call to another: a minter's lease from the
/// registry, which a cut-off would leave granted and unusable), the core's
/// longer background budget, so that no wait is ever unbounded.
pub fn budget() -> Budget {
    Budget(CURRENT.with(|c| c.borrow().clone()).unwrap_or_else(|| {
        Rc::new(RequestScope {
            budget: Cell::new(WaitBudget::for_background(now_ms())),
            test_delay_ms: 0,
            region: None,
            root_unreachable: false,
            allocators_unreachable: false,
            allocator_delay_ms: 0,
            root_delay_ms: 0,
            root_delay: false,
            calls: None,
        })
    }))
}

/// Narrows the budget of the request being handled to at most `ms` from
/// now (an object's request whose caller gives up sooner than the
/// object's own budget: a regional allocator's serve).
pub fn limit_budget(ms: u64) {
    let scope = budget().0;
    let now = now_ms();
    let left = scope.budget.get().remaining_ms(now);
    scope.budget.set(WaitBudget::new(now, left.min(ms)));
}

thread_local! {
    /// The isolate's region (`None` in it: a colo the table lacks), set by
    /// the first request whose `cf` has a colo; unset, `cf` is read again.
    static ISOLATE_REGION: OnceCell<Option<Region>> = const { OnceCell::new() };
}

/// The region of the isolate's colo (`request.cf.colo`), read from the first
/// request that has one and kept: an isolate runs in one data centre, and
/// each read of `cf` builds the object anew from the platform's JSON
/// (`incoming`). `None`: no request said, or a colo the table lacks.
fn isolate_region(req: &Incoming) -> Option<Region> {
    if let Some(region) = ISOLATE_REGION.with(|r| r.get().copied()) {
        return region;
    }
    let region = colo_region(&request_colo(req.inner())?);
    ISOLATE_REGION.with(|r| r.set(region).ok());
    region
}

/// `request.cf.colo`, if the platform set it (read without `Cf::colo`,
/// which panics when it is missing).
fn request_colo(req: &web_sys::Request) -> Option<String> {
    let cf = js_sys::Reflect::get(req, &JsValue::from_str("cf")).ok()?;
    if !cf.is_object() {
        return None;
    }
    js_sys::Reflect::get(&cf, &JsValue::from_str("colo"))
        .ok()?
        .as_string()
}

/// The region of the request being handled (`request.cf.colo` through the
/// core's colo → region table), if known; `None` outside a request.
pub fn region() -> Option<Region> {
    CURRENT.with(|c| c.borrow().as_ref().and_then(|s| s.region))
}

/// A request's budget, as its awaits draw on it.
#[derive(Clone)]
pub struct Budget(Rc<RequestScope>);

impl Budget {
    /// The scope it is the budget of (its region and test settings).
    pub(crate) fn scope(&self) -> &RequestScope {
        &self.0
    }

    /// Ms it may still wait now.
    pub fn remaining_ms(&self) -> u64 {
        self.0.budget.get().remaining_ms(now_ms())
    }

    /// Before waiting `ms` more: `true` (and counted) if it fits.
    pub fn wait(&self, ms: u64) -> bool {
        let mut b = self.0.budget.get();
        let fits = b.wait(now_ms(), ms);
        self.0.budget.set(b);
        fits
    }

    /// The most the request may wait in all.
    pub fn max_ms(&self) -> u64 {
        self.0.budget.get().max_ms()
    }
}

/// For a call in the background of the request being handled
/// (`ctx.wait_until`): its region and test settings with the background
/// budget. Run the background call in it (`RequestScope::run`).
pub fn background() -> RequestScope {
    let scope = budget().0;
    RequestScope {
        budget: Cell::new(WaitBudget::for_background(now_ms())),
        test_delay_ms: scope.test_delay_ms,
        region: scope.region,
        root_unreachable: scope.root_unreachable,
        allocators_unreachable: scope.allocators_unreachable,
        allocator_delay_ms: scope.allocator_delay_ms,
        root_delay_ms: scope.root_delay_ms,
        root_delay: scope.root_delay,
        calls: scope.calls.clone(),
    }
}
