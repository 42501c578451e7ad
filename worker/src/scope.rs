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

/// TESTS ONLY: what the request made the objects do, as Cloudflare bills it
/// (`Cost::header`): on a Worker's answer, and on an object's answer to a
/// call whose caller counts (`TEST_COUNT_HEADER`), where it says what that
/// call made its object and the objects it called do.
pub const TEST_COST_HEADER: &str = "Edgeleaf-Test-Cost";

/// TESTS ONLY: on a Worker's answer, what every request this isolate
/// handled since it started made the objects do (`Cost::header`), the
/// calls made in `waitUntil` after their answers left included.
pub const TEST_COST_TOTAL_HEADER: &str = "Edgeleaf-Test-Cost-Total";

/// TESTS ONLY: set by `send` on a call whose scope counts, so that the
/// object counts too and answers `TEST_COST_HEADER`.
pub(crate) const TEST_COUNT_HEADER: &str = "Edgeleaf-Test-Count";

/// TESTS ONLY: what requests made the Durable Objects do, in the units
/// Cloudflare bills (developers.cloudflare.com/durable-objects/platform/pricing):
/// object requests and the rows its SQLite read and wrote.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct Cost {
    /// Calls to objects this scope made itself (subrequests: the Free plan
    /// allows 50 a request).
    pub calls: u32,
    /// Object requests billed: these calls and those their objects made.
    pub requests: u64,
    /// Rows read by the objects' SQLite (the cursors' `rowsRead`).
    pub rows_read: u64,
    /// Rows written (the cursors' `rowsWritten`; an alarm set is one).
    pub rows_written: u64,
}

impl Cost {
    /// As the headers carry it: `requests rows_read rows_written`.
    pub fn header(&self) -> String {
        format!("{} {} {}", self.requests, self.rows_read, self.rows_written)
    }

    /// From `header`'s text (nothing for another text).
    fn from_header(text: &str) -> Option<Cost> {
        let mut n = text.split(' ').map(str::parse::<u64>);
        let (requests, rows_read, rows_written) =
            (n.next()?.ok()?, n.next()?.ok()?, n.next()?.ok()?);
        Some(Cost {
            calls: 0,
            requests,
            rows_read,
            rows_written,
        })
    }

    fn add(self, o: Cost) -> Cost {
        Cost {
            calls: self.calls.saturating_add(o.calls),
            requests: self.requests.saturating_add(o.requests),
            rows_read: self.rows_read.saturating_add(o.rows_read),
            rows_written: self.rows_written.saturating_add(o.rows_written),
        }
    }
}

thread_local! {
    /// TESTS ONLY: what the Worker's requests in this isolate made the
    /// objects do since it started (`TEST_COST_TOTAL_HEADER`).
    static TOTAL: Cell<Cost> = const { Cell::new(Cost { calls: 0, requests: 0, rows_read: 0, rows_written: 0 }) };
}

/// TESTS ONLY: what a counting scope has made the objects do.
#[derive(Clone)]
pub(crate) struct Tally {
    cost: Rc<Cell<Cost>>,
    /// A Worker's request (not an object's): its counts go to `TOTAL` too.
    isolate: bool,
}

impl Tally {
    fn new(isolate: bool) -> Tally {
        Tally {
            cost: Rc::new(Cell::new(Cost::default())),
            isolate,
        }
    }

    fn add(&self, c: Cost) {
        self.cost.set(self.cost.get().add(c));
        if self.isolate {
            TOTAL.with(|t| t.set(t.get().add(c)));
        }
    }
}

/// TESTS ONLY: the isolate's `TOTAL`.
pub fn total_cost() -> Cost {
    TOTAL.with(Cell::get)
}

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
    /// TESTS ONLY: one minter (its index) waits this long before it answers
    /// (`Config::test_minter_delay`; none but on a loopback host).
    pub(crate) minter_delay: Option<(u32, u64)>,
    /// TESTS ONLY: the objects this scope calls on its behalf delay their
    /// calls to the root (`Config::test_root_delay_ms`, loopback hosts only).
    pub(crate) root_delay: bool,
    /// TESTS ONLY: what its object calls cost so far
    /// (`Config::test_count_calls`, loopback hosts only; an object's, when
    /// its caller counts), its background's calls included.
    pub(crate) cost: Option<Tally>,
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
            minter_delay: test.as_ref().and_then(|c| c.test_minter_delay),
            root_delay: test.as_ref().is_some_and(|c| c.test_root_delay_ms > 0),
            cost: test
                .filter(|c| c.test_count_calls)
                .map(|_| Tally::new(true)),
        }
    }

    /// The scope of a call through the service binding (`binding`), which
    /// starts now: a fresh budget of the core's size, as a request's; the
    /// isolate's region if a request has told it (a call has no `cf`); no
    /// test setting (a call has no URL, so never a loopback host's) but
    /// the count of what it costs, which changes nothing it does and goes
    /// to the isolate's total alone (`TEST_COST_TOTAL_HEADER`).
    pub fn for_binding(env: &Env) -> RequestScope {
        RequestScope {
            budget: Cell::new(WaitBudget::for_request(now_ms())),
            test_delay_ms: 0,
            region: ISOLATE_REGION.with(|r| r.get().copied().flatten()),
            root_unreachable: false,
            allocators_unreachable: false,
            allocator_delay_ms: 0,
            root_delay_ms: 0,
            minter_delay: None,
            root_delay: false,
            cost: Config::cached(env)
                .ok()
                .filter(|c| c.test_count_calls)
                .map(|_| Tally::new(true)),
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
            minter_delay: None,
            root_delay: false,
            // Counted when its caller counts (a header only `send` sets).
            cost: req
                .headers()
                .has(TEST_COUNT_HEADER)
                .unwrap_or(false)
                .then(|| Tally::new(false)),
        }
    }

    /// TESTS ONLY: what this scope's object calls cost, if it counts them.
    pub fn cost(&self) -> Option<Rc<Cell<Cost>>> {
        self.cost.as_ref().map(|t| t.cost.clone())
    }

    /// Whether it counts what its calls cost (`send` asks the object to).
    pub(crate) fn counts(&self) -> bool {
        self.cost.is_some()
    }

    /// Counts one object call (a subrequest), if this scope counts them.
    pub(crate) fn count_call(&self) {
        if let Some(t) = &self.cost {
            t.add(Cost {
                calls: 1,
                requests: 1,
                ..Cost::default()
            });
        }
    }

    /// Adds what an object said its call cost (`TEST_COST_HEADER`).
    pub(crate) fn count_answer(&self, header: &str) {
        if let (Some(t), Some(c)) = (&self.cost, Cost::from_header(header)) {
            t.add(c);
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
    Budget(
        CURRENT
            .with(|c| c.borrow().clone())
            .unwrap_or_else(|| Rc::new(background_of(None))),
    )
}

/// An object's alarm: the background budget, no test fault; with
/// `Config::test_count_calls`, what it costs counted into this isolate's
/// total — the alarm itself one object request — which a Worker's answer
/// reports (`TEST_COST_TOTAL_HEADER`) when, as in tests (Miniflare), the
/// objects run in the Worker's isolate.
pub fn for_alarm(env: &Env) -> RequestScope {
    let scope = RequestScope {
        cost: Config::cached(env)
            .ok()
            .filter(|c| c.test_count_calls)
            .map(|_| Tally::new(true)),
        ..background_of(None)
    };
    if let Some(t) = &scope.cost {
        t.add(Cost {
            requests: 1,
            ..Cost::default()
        });
    }
    scope
}

/// An object's own timer (a tag's report, `report.rs`): `for_alarm`'s
/// scope without its request — the timer is none; what it calls is counted
/// (its request to the object, the rows and calls that one makes) into this
/// isolate's total, with `Config::test_count_calls`.
pub fn for_timer(env: &Env) -> RequestScope {
    RequestScope {
        cost: Config::cached(env)
            .ok()
            .filter(|c| c.test_count_calls)
            .map(|_| Tally::new(true)),
        ..background_of(None)
    }
}

/// TESTS ONLY: counts rows an object's storage read and wrote, for the
/// request being handled, if its scope counts (`sql`; nothing otherwise).
pub fn count_rows(rows_read: u64, rows_written: u64) {
    CURRENT.with(|c| {
        if let Some(t) = c.borrow().as_ref().and_then(|s| s.cost.as_ref()) {
            t.add(Cost {
                rows_read,
                rows_written,
                ..Cost::default()
            });
        }
    });
}

/// Whether the request being handled counts what it costs (so that the
/// rows of a statement are worth reading: `sql`).
pub fn counting() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(|s| s.cost.is_some()))
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
    background_of(Some(&budget().0))
}

/// `of`'s region and test settings with the background budget (none of
/// them without one).
fn background_of(of: Option<&RequestScope>) -> RequestScope {
    let Some(scope) = of else {
        return RequestScope {
            budget: Cell::new(WaitBudget::for_background(now_ms())),
            test_delay_ms: 0,
            region: None,
            root_unreachable: false,
            allocators_unreachable: false,
            allocator_delay_ms: 0,
            root_delay_ms: 0,
            minter_delay: None,
            root_delay: false,
            cost: None,
        };
    };
    RequestScope {
        budget: Cell::new(WaitBudget::for_background(now_ms())),
        test_delay_ms: scope.test_delay_ms,
        region: scope.region,
        root_unreachable: scope.root_unreachable,
        allocators_unreachable: scope.allocators_unreachable,
        allocator_delay_ms: scope.allocator_delay_ms,
        root_delay_ms: scope.root_delay_ms,
        minter_delay: scope.minter_delay,
        root_delay: scope.root_delay,
        // An object's work after its answer left cannot answer its count:
        // it goes to the isolate's total alone, as an alarm's does.
        cost: scope.cost.as_ref().map(|t| {
            if t.isolate {
                t.clone()
            } else {
                Tally::new(true)
            }
        }),
    }
}
