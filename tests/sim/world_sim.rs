//! The planet: Cloudflare's 276 colos with their measured latencies to
//! Durable Objects, Worker isolates that arrive in them, serve requests at
//! their own rates and vanish, and the objects they load IDs from — each one
//! request at a time, ~1 ms of work, a queue, "overloaded" past its soft
//! limit, replaced on a deploy (memory lost, storage kept). Over the core's
//! real rules: `TagRecord` for a tag's root, `SegmentDriver` in isolates,
//! the regional allocator's rule, `MintedBuffer` and the `Registry` for
//! snowflake minters.
//!
//! Two designs run the same isolates side by side:
//! - today: one root object per tag, placed near its first caller; isolates
//!   load their segments from it; minters placed where each was first called;
//! - regional: per (tag, hosting region) an allocator created with that
//!   region's `locationHint`, as the Worker places them (`Region::hosting`:
//!   `sam`, `afr` and `me` isolates use `enam`'s, `weur`'s and `eeur`'s),
//!   holding blocks leased from the root and serving the segments of its
//!   regions' isolates (an isolate falls back to the root within its wait
//!   budget when its allocator does not answer); minters
//!   placed and chosen as the Worker does, by the core's own rules: the
//!   split over the hosting regions (`MinterPools::over_regions`), each
//!   isolate's order of minters (`MintConfig::for_region`), and its
//!   request's fallback and wait (`MintedBuffer::fetch_refused`,
//!   `MintTries`, `POLL_MS`, a fetch raced against the request's
//!   `WaitBudget` and, unanswered at its bound, awaited on in the
//!   background as `MintedBuffer::fetch_unanswered` says).
//!
//! The service's settings are read from `worker/wrangler.toml` (the
//! shipped `SNOWFLAKE_MINTERS` and `SNOWFLAKE_STALENESS_MS`), so that the
//! configuration simulated is the one deployed.
//!
//! Rights to mint (`src/minted/right.rs`), as the Worker lends them: on
//! when the registry can reserve `2 × minters` worker IDs (`rights_on`;
//! `--rights on|off` to compare), isolates ask for them
//! (`MintConfig::rights`) and take them with their batch
//! (`MintedBuffer::fetched_with_right`); each minter lends from a second
//! holder, its rights holder (`rights_holder_config`, leased from the
//! registry as `lease_minter(rights_worker_index(minters, i))`, its
//! reservation saved under a row of its own), through a `RightLedger`
//! kept in memory, in the Worker's order (`Sim::lend_right`).
//!
//! ```text
//! cargo run --release --example world_sim -- [--isolates 10000] [--minutes 60]
//!     [--minters N] [--scenario steady|storm|outage] [--tags 4] [--seed 1]
//!     [--short] [--rights on|off] [--rights-ttl-ms N]
//!     [--fault serve-before-persist|no-fallback|ignore-budget|forget-lent]
//!     [--no-retire] [--drop-refused]
//! ```
//! `--short` (used by `make test`) is 1,000 isolates, a 10-minute steady
//! scenario and shorter storm and outage windows. `--fault` plants a bug in
//! the regional design (to see the checks fail; `forget-lent`, a minter
//! that keeps no ledger of the rights it lent, in both). An allocator retires when
//! the core says it is due (`BlockAllocator::retire_due`) and hands its
//! blocks' unserved tails back to the root (`TagRecord::take_back`); the
//! tails the root refuses are served again (`BlockAllocator::keep`).
//! `--no-retire` leaves retirement out, `--drop-refused` the keep, to
//! compare.
//!
//! The model, stated (docs/benchmarks.md#the-world-simulation repeats it):
//! - Latency from a colo to an object in region `r` is the data's figure
//!   for (colo, r): a first call to a new object ("cold"). A caller's first
//!   call to an object costs that figure; its later calls a third of it
//!   ("warm"). An object's calls to another object (an allocator to its
//!   root) cost the median over the colos whose nearest hint is the caller's
//!   region. No jitter: the figure is already a measurement.
//! - A colo's continent is its nearest hint's (wnam, enam: North America;
//!   sam: South America; weur, eeur: Europe; apac: Asia-Pacific; oc:
//!   Oceania; afr: Africa; me: Middle East). Traffic per continent is in
//!   proportion to its Internet users (millions, rounded: `USERS`), spread
//!   evenly over its colos.
//! - An isolate lives an exponential time (mean 10 min), serves requests at
//!   a rate log-uniform in 0.05-5 req/s, 40% snowflake, 60% segment over the
//!   tags (weights 4:3:2:1...), each request waiting at most the core's
//!   `MAX_WAIT_MS` before a typed 503.
//! - An object works 1 ms per request, one at a time, first come first
//!   served; a request finding `OVERLOAD_QUEUE` requests queued is answered
//!   "overloaded" at once (a typed 503), as past its soft limit of 1,000
//!   req/s the queue only grows.
//!
//! Checked: no ID served twice (snowflake IDs minted under rights
//! included), no snowflake ID served past the staleness bound, no right
//! lent over another still out (`lent_check`), no ID of a rights holder's
//! worker ID served outside the rights lent to its isolate
//! (`within_rights`: a buffer minting past a right's end shows there at
//! once, where duplicates need two isolates in one unit) (both designs:
//! exit 1); for the regional design, exit 1 on: a route whose objects
//! cost more than issue 33's $0.003 a million IDs in the steady hour (the
//! full form only: `OBJECTS_TARGET_PER_MILLION`); an
//! object above half its soft limit in the steady hour or the storm; a
//! continent whose cold first-ID p99 (steady state) is above 1.5x its
//! isolates' nearest-region p99 (but for the colos whose hosting region is
//! beyond a first request's budget, `far_colo`: theirs, above 1.5x the p99
//! of that region's figure); a root above 100 req/s in the deploy
//! storm; an object above 1,000 req/s; an overloaded answer in steady
//! state; a request answered after its bound (`MAX_WAIT_MS` from its
//! arrival: isolates give up by their `WaitBudget`, which
//! `--fault ignore-budget` ignores); a
//! region whose isolates were served no ID in a scenario; a region down
//! whose cold isolates got no segment, or no snowflake, in their first
//! request while it was down (only the fallbacks can serve them: the root,
//! another region's minters; `--fault no-fallback` takes them away). Today's
//! design's checks are printed beside, not enforced.
//!
//! The bill: per scenario, design and route, what a million IDs served
//! cost at the dated prices of `tests/bench/bill.mjs` (`Prices`, the
//! bench's one table): Worker requests, object requests and rows written as
//! counted (the registry's calls, the rights holders' included, as object
//! requests and rows), duration estimated (`print_bill`). Beside it, per
//! design, what the rights did (`rights_line`): how many were lent, why
//! asks got none, the share of IDs minted under them, the registry's load
//! from the rights holders, and the floor of minter requests per ID that
//! isolate churn sets (each new isolate's first snowflake ID costs one).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use edgeleaf::{
    block::BlockAllocator, block::BlockAsk, block::HandBack, block::Serve, block::Tail,
    block::TailAnswer, code::ErrorCode, driver::SegmentDriver, driver::SegmentStep, holder::Grant,
    holder::HolderConfig, holder::HolderNext, holder::HolderState, holder::Renewal,
    holder::SnowflakeHolder, minted::batch_beside_right, minted::batch_ranges,
    minted::lends_rights, minted::minter_holder_config, minted::minter_restore_refused,
    minted::minter_step, minted::rights_holder_config, minted::rights_worker_index,
    minted::BatchAsk, minted::Fetched, minted::MintConfig, minted::MintRight, minted::MintStep,
    minted::MintTries, minted::MintedBuffer, minted::MinterPools, minted::MinterStep,
    minted::Refused, minted::RightLedger, minted::Unanswered, minted::MINTER_BORROW_MS,
    minted::MIN_RIGHT_MS, rand::SplitMix64, region::colo_region, region::Region,
    registry::Registry, registry::RegistryConfig, registry::DEFAULT_LENDER_TTL_MS,
    secret::LeaseSecret, secret::SecretHash, segment::Allocation, segment::StepPolicy,
    segment::DEFAULT_SEGMENT_DURATION_MS, segment::MAX_STEP, snowflake::DEFAULT_MAX_BACKWARD_MS,
    tag::Asker, tag::Remembered, tag::RememberedChange, tag::SegmentAnswer, tag::SegmentAsk,
    tag::TagRecord, tag::TakeBack, wait::WaitBudget, wait::MAX_WAIT_MS, wait::POLL_MS, Error,
    Layout,
};
use sha2::{Digest, Sha256};

const T0: u64 = 1_767_225_600_000;
/// An object's work per request, ms.
const WORK_MS: u64 = 1;
/// An object's soft limit, req/s.
const SOFT_LIMIT: u32 = 1_000;
/// Requests queued past which an object answers "overloaded" at once.
const OVERLOAD_QUEUE: u64 = 100;
/// The root's target in the storm: 10% of its soft limit.
const ROOT_TARGET: u32 = 100;
/// A tag's configured step (the service's `DEFAULT_STEP`).
const TAG_STEP: u64 = 1_000;
/// The regional cold first-ID p99 target, as a multiple of the nearest
/// region's.
const TARGET_RATIO: f64 = 1.5;
/// How long after its last call an object is still billed for duration
/// (Cloudflare: an object is billed while it runs or something is pending
/// in it, and until it is evicted ~10 s after; docs/benchmarks.md, "The
/// bill").
const IDLE_BILLED_MS: u64 = 10_000;
/// The memory an object is billed for, GB (128 MB).
const OBJECT_GB: f64 = 0.125;
/// A far colo's (`far_colo`) first-ID p99 target, as a multiple of the
/// p99 of its hosting region's cold figure: its first load or fetch is
/// waited for, not passed over.
const FAR_RATIO: f64 = 1.5;

/// The regions, by index (`Region::ALL`'s order).
fn region_name(r: usize) -> &'static str {
    Region::ALL[r].as_str()
}

const CONTINENTS: [&str; 7] = [
    "North America",
    "South America",
    "Europe",
    "Asia-Pacific",
    "Oceania",
    "Africa",
    "Middle East",
];
/// Internet users per continent, millions (rounded, ITU 2024 estimates):
/// the traffic weights.
const USERS: [f64; 7] = [350.0, 450.0, 700.0, 2_700.0, 30.0, 650.0, 250.0];

/// A region's index in `Region::ALL` (the data's and the tables' order).
fn region_index(r: Region) -> usize {
    Region::ALL.iter().position(|x| *x == r).expect("a region")
}

fn continent_of(region: usize) -> usize {
    match Region::ALL[region] {
        Region::Wnam | Region::Enam => 0,
        Region::Sam => 1,
        Region::Weur | Region::Eeur => 2,
        Region::Apac => 3,
        Region::Oc => 4,
        Region::Afr => 5,
        Region::Me => 6,
    }
}

fn sha256(s: &LeaseSecret) -> SecretHash {
    SecretHash(Sha256::digest(s.as_bytes()).into())
}

// ---------------------------------------------------------------- the data

struct Colo {
    code: String,
    /// The colo's nearest hint (the data's `nearestRegion`).
    region: usize,
    /// Cold (first-call) latency to an object in each region, ms.
    cold: [f64; 9],
}

/// The measured latencies (where.durableobjects.live; see
/// tests/sim/data/README.md).
fn data_file() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/sim/data/where-durableobjects-live.json"
    );
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    })
}

fn colos() -> Vec<Colo> {
    let v: serde_json::Value = serde_json::from_str(&data_file()).expect("the data is JSON");
    let mut out: Vec<Colo> = v["colos"]
        .as_object()
        .expect("colos")
        .iter()
        .map(|(code, c)| {
            let region_index = |name: &str| {
                let r = Region::parse(name).unwrap_or_else(|_| panic!("{code}: region {name}?"));
                Region::ALL.iter().position(|x| *x == r).expect("a region")
            };
            let mut cold = [0.0; 9];
            for (name, ms) in c["regions"].as_object().expect("regions") {
                cold[region_index(name)] = ms.as_f64().expect("a latency");
            }
            // The isolate's region: the core's colo -> region table (the
            // Worker's), which must agree with the data.
            let region = colo_region(code)
                .map(|r| region_index(r.as_str()))
                .unwrap_or_else(|| panic!("{code}: not in colo_region's table"));
            assert_eq!(
                region_name(region),
                c["nearestRegion"].as_str().expect("nearestRegion"),
                "{code}: colo_region disagrees with the data"
            );
            assert!(cold.iter().all(|ms| *ms > 0.0), "{code}: a region missing");
            Colo {
                code: code.clone(),
                region,
                cold,
            }
        })
        .collect();
    out.sort_by(|a, b| a.code.cmp(&b.code));
    out
}

// ------------------------------------------------------------- arguments

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// The regional allocator answers a range before persisting it: a
    /// replacement serves it again.
    ServeBeforePersist,
    /// Isolates do not fall back to the root when their allocator does not
    /// answer, nor to another region's minter within a request when theirs
    /// do not (the "first ID in the first request while down" check must
    /// catch it).
    NoFallback,
    /// Isolates ignore their requests' wait budget: a request waits for
    /// its IDs however long they take (the "answered after its bound"
    /// check must catch it).
    IgnoreBudget,
    /// A minter forgets what it lent: a fresh `RightLedger` for every
    /// right, so every right is its worker ID's first slice, overlapping
    /// those still out (the duplicate check must catch it).
    ForgetLent,
}

/// The settings of the service as shipped (`worker/wrangler.toml`'s
/// `[vars]`): what the simulation runs unless told otherwise, so that the
/// configuration simulated is the one deployed.
fn shipped_var(name: &str) -> Option<u64> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/worker/wrangler.toml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2)
    });
    let vars = text.split("\n[vars]\n").nth(1)?.split("\n[").next()?;
    vars.lines().find_map(|line| {
        let (key, rest) = line.split_once('=')?;
        (key.trim() == name).then_some(())?;
        let value = rest.trim().strip_prefix('"')?.split('"').next()?;
        value.trim().parse().ok()
    })
}

#[derive(Clone)]
struct Args {
    /// The short form (`--short`): no bill target checked.
    short: bool,
    isolates: u64,
    minutes: u64,
    /// Snowflake minters (`SNOWFLAKE_MINTERS` as shipped, unless
    /// `--minters`), placed as the service places them
    /// (`MinterPools::over_regions`) in the regional design.
    minters: u32,
    /// The staleness bound (`SNOWFLAKE_STALENESS_MS` as shipped).
    staleness_ms: u64,
    /// Only this scenario (`--scenario steady|storm|outage`), else all.
    only: Option<Scenario>,
    tags: usize,
    seed: u64,
    /// Mean isolate lifetime, s.
    lifetime_s: f64,
    rates: (f64, f64),
    /// Before the measured window: the population builds up.
    warmup_min: u64,
    /// How long the storm and the outage are watched, from their start.
    watch_s: u64,
    fault: Fault,
    /// Allocators never retire (to compare: no tail handed back).
    no_retire: bool,
    /// Tails the root refused are dropped, not kept (to compare: before
    /// `BlockAllocator::keep`).
    drop_refused: bool,
    /// Isolates ask for rights to mint and minters lend them (`--rights
    /// on|off`; unless told, as the service ships: on when the registry
    /// can reserve `2 × minters` worker IDs, `rights_on`).
    rights: Option<bool>,
    /// The rights holders' lease (the registry's `DEFAULT_LENDER_TTL_MS`, as
    /// the Worker runs it, unless `--rights-ttl-ms`: to explore).
    rights_ttl_ms: u64,
}

fn args() -> Args {
    let shipped = |name| {
        shipped_var(name).unwrap_or_else(|| {
            eprintln!("worker/wrangler.toml: [vars] {name} missing or not a number");
            std::process::exit(2)
        })
    };
    let mut a = Args {
        short: false,
        isolates: 10_000,
        minutes: 60,
        minters: u32::try_from(shipped("SNOWFLAKE_MINTERS")).unwrap_or(u32::MAX),
        staleness_ms: shipped("SNOWFLAKE_STALENESS_MS"),
        only: None,
        tags: 4,
        seed: 1,
        lifetime_s: 600.0,
        rates: (0.05, 5.0),
        warmup_min: 10,
        watch_s: 300,
        fault: Fault::None,
        no_retire: false,
        drop_refused: false,
        rights: None,
        rights_ttl_ms: DEFAULT_LENDER_TTL_MS,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = |i: usize| argv.get(i + 1).cloned().unwrap_or_default();
        let number = |i: usize| {
            value(i).parse::<u64>().unwrap_or_else(|_| {
                eprintln!("{}: expected a whole number, found {:?}", argv[i], value(i));
                std::process::exit(2)
            })
        };
        match argv[i].as_str() {
            "--short" => {
                a.short = true;
                a.isolates = 1_000;
                a.minutes = 10;
                a.warmup_min = 3;
                a.lifetime_s = 180.0;
                a.watch_s = 150;
                i += 1;
                continue;
            }
            "--isolates" => a.isolates = number(i),
            "--minutes" => a.minutes = number(i),
            "--minters" => a.minters = u32::try_from(number(i)).unwrap_or(u32::MAX).max(1),
            "--scenario" => {
                a.only = Some(match value(i).as_str() {
                    "steady" => Scenario::Steady,
                    "storm" => Scenario::Storm,
                    "outage" => Scenario::Outage,
                    other => {
                        eprintln!("--scenario: expected steady, storm or outage, found {other:?}");
                        std::process::exit(2)
                    }
                })
            }
            "--tags" => a.tags = usize::try_from(number(i)).unwrap_or(1).clamp(1, 16),
            "--seed" => a.seed = number(i),
            "--no-retire" => {
                a.no_retire = true;
                i += 1;
                continue;
            }
            "--drop-refused" => {
                a.drop_refused = true;
                i += 1;
                continue;
            }
            "--rights-ttl-ms" => a.rights_ttl_ms = number(i),
            "--rights" => {
                a.rights = Some(match value(i).as_str() {
                    "on" => true,
                    "off" => false,
                    other => {
                        eprintln!("--rights: expected on or off, found {other:?}");
                        std::process::exit(2)
                    }
                })
            }
            "--fault" => {
                a.fault = match value(i).as_str() {
                    "serve-before-persist" => Fault::ServeBeforePersist,
                    "no-fallback" => Fault::NoFallback,
                    "ignore-budget" => Fault::IgnoreBudget,
                    "forget-lent" => Fault::ForgetLent,
                    other => {
                        eprintln!(
                            "--fault: expected serve-before-persist, no-fallback, ignore-budget or forget-lent, found {other:?}"
                        );
                        std::process::exit(2)
                    }
                }
            }
            other => {
                eprintln!("unknown argument {other:?} (see the file's header)");
                std::process::exit(2)
            }
        }
        i += 2;
    }
    a
}

/// Whether the minters lend rights to mint: `--rights`, else as the service
/// ships them, on when the registry can reserve `2 × minters` worker IDs
/// (its limit: half its capacity; LEAF's 36 minters: 72 of 1,024).
fn rights_on(a: &Args, layout: &Layout) -> bool {
    a.rights
        .unwrap_or_else(|| lends_rights(a.minters, RegistryConfig::new(layout).capacity))
}

#[path = "rng.rs"]
mod rng;
use rng::Rng;

// ------------------------------------------------------- the regional rule

/// The allocator's state as its object stores it (JSON, as the Worker's
/// storage holds it): what a replacement reads back.
fn persist(a: &BlockAllocator) -> String {
    serde_json::to_string(a).expect("the allocator's state serialises")
}

fn restore(stored: &str) -> BlockAllocator {
    serde_json::from_str(stored).expect("the allocator's state reads back")
}

// ------------------------------------------------------------ the objects

enum ObjKind {
    Root {
        tag: usize,
        /// Storage: the tag's record and the segments remembered under
        /// request IDs.
        record: TagRecord,
        remembered: HashMap<String, Remembered>,
    },
    Allocator {
        tag: usize,
        /// Memory (`None` after a replacement or retirement, until read
        /// back from storage) and storage.
        live: Option<BlockAllocator>,
        stored: String,
        /// Calls waiting for a block.
        parked: Vec<usize>,
        /// Replacements so far: an answer to an earlier instance is lost.
        epoch: u32,
        /// Its randomness (block asks' request IDs).
        rand: SplitMix64,
        /// Its retirement's tails on their way back to the root, one at
        /// a time (the core's `HandBack`).
        hand_back: Option<HandBack>,
    },
    Minter {
        index: u32,
        holder: Option<SnowflakeHolder<SplitMix64>>,
        saved: HolderState,
        /// What it lends rights from.
        lender: Box<Lender>,
    },
}

/// A minter's rights holder (worker ID `rights_worker_index(minters,
/// index)`) in memory, its own stored row (`None`: never saved), and what
/// it lent (memory only: a replacement lends only after the reservation
/// saved).
struct Lender {
    holder: Option<SnowflakeHolder<SplitMix64>>,
    saved: Option<HolderState>,
    ledger: RightLedger,
}

impl Lender {
    fn new(layout: Layout) -> Box<Lender> {
        Box::new(Lender {
            holder: None,
            saved: None,
            ledger: RightLedger::new(layout),
        })
    }
}

struct Obj {
    kind: ObjKind,
    /// Where it lives (`None`: not created yet, placed at its first call).
    region: Option<usize>,
    busy_until: u64,
    window: u64,
    window_n: u32,
    peak_rps: u32,
    peak_queue: u64,
    overloaded: u64,
    calls: u64,
    /// Duration billed in the window (`IDLE_BILLED_MS` after each call
    /// counted), and until when it is billed so far.
    billed_ms: u64,
    billed_until: u64,
}

impl Obj {
    fn new(kind: ObjKind, region: Option<usize>) -> Obj {
        Obj {
            kind,
            region,
            busy_until: 0,
            window: 0,
            window_n: 0,
            peak_rps: 0,
            peak_queue: 0,
            overloaded: 0,
            calls: 0,
            billed_ms: 0,
            billed_until: 0,
        }
    }
    fn is_root(&self) -> bool {
        matches!(self.kind, ObjKind::Root { .. })
    }
    /// The route whose IDs it serves: 0 segment (roots, allocators), 1
    /// snowflake (minters).
    fn route(&self) -> usize {
        usize::from(matches!(self.kind, ObjKind::Minter { .. }))
    }
}

// ----------------------------------------------------------------- calls

#[derive(Clone, Copy, PartialEq, Eq)]
enum Caller {
    Isolate(usize),
    Object(usize),
}

#[derive(Clone, PartialEq, Eq)]
enum Ask {
    /// An isolate's segment (tag, step).
    Segment(usize, u64),
    /// An allocator's block (tag, its ask).
    Block(usize, BlockAsk),
    /// An allocator's tail handed back (tag, the tail).
    Back(usize, Tail),
    /// An isolate's batch of snowflake IDs (the buffer's ask: which
    /// minter, how many).
    Mint(BatchAsk),
}

enum Answer {
    Range(Allocation),
    /// A minter's batch, and the right it lent with it (if asked and it
    /// had one to lend).
    Ranges(Vec<(u64, u64)>, Option<MintRight>),
    /// The root's answer to a tail handed back: taken, or refused (it
    /// wrote nothing: the tail is still its allocator's alone).
    TakenBack(bool),
    /// Unreachable, overloaded, or nothing to answer (its own upstream
    /// failed): a typed 503.
    Failed,
    /// A minter minted nothing, answering this code (a typed 503).
    Refused(ErrorCode),
}

struct Call {
    from: Caller,
    obj: usize,
    ask: Ask,
    /// One-way latency, ms.
    one_way: u64,
    answer: Option<Answer>,
    /// Whether this is a fallback to the root (an isolate's segment), or
    /// its allocator's epoch when it asked (an allocator's call).
    attempt: u32,
    /// Which call this is (its slot is reused once answered).
    id: u64,
    /// A request's batch fetch: abandoned at the request's bound, as the
    /// Worker's call is raced against the request's budget; its answer,
    /// when it comes, is dropped.
    abandoned: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrive(usize),
    Request(usize),
    Vanish(usize),
    Deliver(usize),
    Reply(usize),
    /// A request of isolate i waiting on kind k (tag, or `tags` for
    /// snowflake) reaches its bound.
    Deadline(usize, usize),
    /// Isolate i's requests waiting on kind k poll their buffer again.
    Poll(usize, usize),
    /// The request that sent batch fetch (call, its id) reaches its bound:
    /// the call is abandoned (the Worker races it against the budget).
    Abandon(usize, u64),
    Replace(usize),
    /// Region r unreachable (true) or back (false).
    Down(usize, bool),
    /// The allocators' hosts ask whether to retire (every minute).
    RetireDue,
}

// -------------------------------------------------------------- isolates

struct Isolate {
    colo: usize,
    alive: bool,
    rate: f64,
    drivers: Vec<SegmentDriver>,
    /// Regional: per tag, what fallbacks to the root brought (served
    /// first, loaded by fallbacks alone), as the Worker's isolate keeps it.
    root_drivers: Vec<SegmentDriver>,
    /// Per kind (tags, then snowflake): requests waiting, since when.
    waiting: Vec<Vec<u64>>,
    /// Per kind: the first request's time, until the first ID is available.
    first: Vec<Option<u64>>,
    /// Per kind: the first ID was recorded.
    first_done: Vec<bool>,
    /// `None` once it vanished (its memory, as an isolate's, is gone).
    buffer: Option<MintedBuffer>,
    /// The minters that failed the request fetching for this buffer (the
    /// oldest waiting), as the Worker's request counts them.
    tries: MintTries,
    /// Objects called before (warm).
    called: Vec<usize>,
    /// Per tag: the run of IDs being served (start, last).
    runs: Vec<Option<(u64, u64)>>,
    /// Replaced by the deploy storm.
    stormed: bool,
    /// The rights its minters lent it, the latest last (a few kept: it
    /// mints under one at a time, the next asked before the last ends).
    rights: Vec<MintRight>,
}

// ---------------------------------------------------------------- report

/// IDs that appear more than once.
fn duplicates_in(mut ids: Vec<u64>) -> u64 {
    ids.sort_unstable();
    ids.windows(2).filter(|w| w[0] == w[1]).count() as u64
}

/// The IDs served, as runs `(first, last)`: compacted as they grow (sorted,
/// overlaps counted as duplicates, touching runs merged).
#[derive(Default)]
struct Runs {
    runs: Vec<(u64, u64)>,
    compacted: usize,
    duplicates: u64,
}

impl Runs {
    fn push(&mut self, r: (u64, u64)) {
        self.runs.push(r);
        if self.runs.len() > 2 * self.compacted + 1_000_000 {
            self.compact();
        }
    }

    fn compact(&mut self) {
        self.runs.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(self.runs.len());
        for &(a, b) in &self.runs {
            match out.last_mut() {
                Some(last) if a <= last.1 => {
                    self.duplicates += last.1.min(b) - a + 1;
                    last.1 = last.1.max(b);
                }
                Some(last) if a == last.1 + 1 => last.1 = b,
                _ => out.push((a, b)),
            }
        }
        self.runs = out;
        self.compacted = self.runs.len();
    }
}

#[derive(Default, Clone)]
struct Hist(Vec<u32>);

impl Hist {
    fn record(&mut self, ms: u64) {
        self.0.push(u32::try_from(ms).unwrap_or(u32::MAX));
    }
    fn pct(&self, p: f64) -> u64 {
        if self.0.is_empty() {
            return 0;
        }
        let mut v = self.0.clone();
        v.sort_unstable();
        let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
        u64::from(v[i.clamp(1, v.len()) - 1])
    }
    fn n(&self) -> usize {
        self.0.len()
    }
}

#[derive(Default)]
struct Report {
    /// Cold first-ID latency per continent, per kind (0 segment, 1
    /// snowflake), and the nearest region's cold figure of the same
    /// isolates.
    first: Vec<[Hist; 2]>,
    nearest: Vec<Hist>,
    /// The same, both kinds, of the colos not `Sim::far`: what the
    /// continents' target is checked on.
    first_near: Vec<Hist>,
    /// The far colos' first IDs (both kinds), and their hosting region's
    /// cold figure: checked against that instead.
    far_first: Hist,
    far_cold: Hist,
    requests: u64,
    served: u64,
    /// Typed 503s: budget reached, overloaded, unreachable.
    refused: u64,
    /// Served after the bound (a violation).
    late: u64,
    overloaded: u64,
    root_peak: u32,
    root_queue: u64,
    obj_peak: u32,
    obj_queue: u64,
    /// (name, peak req/s, peak queue) of the busiest objects.
    busiest: Vec<(String, u32, u64)>,
    /// Regions whose isolates were served IDs in the window.
    served_regions: [bool; 9],
    fallbacks: u64,
    isolates_replaced: u64,
    objects_replaced: u64,
    /// Ranges refused by a driver or buffer (overlap: a would-be duplicate).
    refused_ranges: u64,
    /// Ranges from the root after a fallback (into the root's driver).
    restarted: u64,
    /// Ranges refused by a full buffer (both halves hold IDs).
    refused_full: u64,
    /// Snowflake IDs served past the staleness bound.
    stale: u64,
    /// Cold first-ID latency, per kind (0 segment, 1 snowflake), of the
    /// isolates whose hosting region is down, counted when the request
    /// that asked first arrived while it was down and got that ID itself:
    /// only a fallback answers it (a segment from the root, a batch from
    /// another region's minter). A later request served instead (the first
    /// refused) is not counted: a snowflake buffer reaches another region's
    /// minter even without the fallback, one refused request at a time.
    first_down: [Hist; 2],
    /// IDs of tails the roots took back, and of tails they refused.
    handed_back: u64,
    not_handed_back: u64,
    /// Tails refused because the root had leased past them since.
    backs_followed: u64,
    /// Tails sent back.
    backs: u64,
    /// Allocator retirements.
    retired: u64,
    /// Refused tails served again (`BlockAllocator::keep`).
    kept: u64,
    /// Per route (0 segment, 1 snowflake): requests, IDs served, rows
    /// written (each state an object stores: a root's record on an
    /// allocation or a hand-back, an allocator's blocks, a minter's saved
    /// reservation, the registry's lease on a minter's lease or renewal),
    /// and the registry's calls (the simulation's registry is in-process:
    /// each of its calls would be an object request).
    route_requests: [u64; 2],
    route_served: [u64; 2],
    rows_written: [u64; 2],
    registry_calls: u64,
    /// Per route: object requests (calls delivered; the registry's
    /// added) and duration billed, ms.
    object_requests: [u64; 2],
    billed_ms: [u64; 2],
    /// Minter calls answered with no IDs, by the code of the answer.
    minter_empty: std::collections::BTreeMap<&'static str, u64>,
    /// The registry's calls per second (all, and the rights holders'
    /// leases and renewals), and the rights holders' calls.
    registry_load: Load,
    rights_registry_load: Load,
    rights_registry_calls: u64,
    /// Rows the rights holders wrote (their reservations saved; their
    /// registry calls' rows are the registry's).
    rights_rows: u64,
    /// Rights lent, their windows' total length (ms), and, by why, the
    /// asks for one answered with a batch alone.
    rights_lent: u64,
    right_ms: u64,
    rights_none: std::collections::BTreeMap<&'static str, u64>,
    /// Snowflake IDs served that were minted under a right (their worker
    /// ID a rights holder's); of them, served by an isolate holding no
    /// right they lie in (a violation).
    right_served: u64,
    outside_rights: u64,
    /// Sequence values lent in a right while a right lent before still
    /// held them (a violation).
    rights_overlap: u64,
    /// Isolates whose first snowflake ID came in the window: each paid at
    /// least one minter request (the floor of object requests per ID).
    first_snowflakes: u64,
    /// Snowflake IDs served whose time unit was ahead of the clock by more
    /// than a minter borrows (3 ms), and the most, ms.
    ahead: u64,
    ahead_max: u64,
}

impl Report {
    /// A call to the registry at `now` (`measuring`: 1 in the window),
    /// in-process here, an object request in the service and the lease it
    /// writes a row: counted for the bill, and per second for its load, the
    /// rights holders' apart.
    fn registry_call(&mut self, now: u64, measuring: u64, rights: bool) {
        if measuring == 0 {
            return;
        }
        self.registry_calls += 1;
        self.rows_written[1] += 1;
        self.registry_load.add(now / 1_000);
        if rights {
            self.rights_registry_calls += 1;
            self.rights_registry_load.add(now / 1_000);
        }
    }
}

/// Calls per second to one place, and the busiest second's.
#[derive(Default)]
struct Load {
    sec: u64,
    n: u32,
    peak: u32,
}

impl Load {
    fn add(&mut self, sec: u64) {
        if self.sec != sec {
            self.sec = sec;
            self.n = 0;
        }
        self.n += 1;
        self.peak = self.peak.max(self.n);
    }
}

struct Outcome {
    report: Report,
    duplicates: u64,
    skipped_per_hour: f64,
    /// The run's simulated hours, and the measured window's seconds.
    hours: f64,
    window_s: f64,
    down_region: Option<usize>,
    /// Isolates alive at the storm (or the outage).
    alive_at_event: u64,
    /// Per region hosting minters: how many, and the busiest one's peak
    /// req/s.
    minter_peaks: Vec<(String, u32, u32)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Steady,
    Storm,
    Outage,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::Storm => "deploy storm",
            Scenario::Outage => "region down",
        }
    }
}

// ------------------------------------------------------------- the world

struct Sim<'a> {
    args: Args,
    colos: &'a [Colo],
    regional: bool,
    /// Minters lend rights to mint, isolates ask for them (`rights_on`).
    rights: bool,
    layout: Layout,
    /// Arrivals, rates, requests: the same in both designs.
    rng: Rng,
    net: Rng,
    now: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    reg: Registry,
    objs: Vec<Obj>,
    /// Per tag: the root; per (tag, region): the allocator.
    roots: Vec<usize>,
    allocators: Vec<[usize; 9]>,
    /// Per colo (regional): the region hosting its allocators and minters
    /// (`Region::hosting`) is further than a request's budget for a first
    /// call (`far_colos`). No rule of an isolate makes a first call faster
    /// than that: their first IDs are checked against that region's figure,
    /// not the nearest hint's.
    far: Vec<bool>,
    minters: Vec<usize>,
    isolates: Vec<Isolate>,
    calls: Vec<Call>,
    free_calls: Vec<usize>,
    down: [bool; 9],
    /// When the outage began.
    down_at: u64,
    colo_cumulative: Vec<f64>,
    tag_cumulative: Vec<f64>,
    region_lat: [[f64; 9]; 9],
    /// Per tag: served runs.
    runs: Vec<Runs>,
    /// Snowflake IDs served, by the second of their time unit (the last
    /// few seconds), and the duplicates found in the seconds checked.
    snow: std::collections::BTreeMap<u64, Vec<u64>>,
    snow_duplicates: u64,
    /// Per rights holder's worker ID, per sequence value: the end of the
    /// latest right lent of it (`lent_check`).
    lent: HashMap<u32, Vec<u64>>,
    measure: (u64, u64),
    end: u64,
    alive_at_event: u64,
    down_region: Option<usize>,
    report: Report,
}

impl<'a> Sim<'a> {
    fn new(args: Args, colos: &'a [Colo], regional: bool, scenario: Scenario) -> Sim<'a> {
        let layout = Layout::LEAF;
        let minters = args.minters;
        let rights = rights_on(&args, &layout);
        let mut cfg = RegistryConfig::new(&layout);
        // With rights, a second worker ID per minter, its lender, as the
        // Worker's registry reserves.
        cfg.reserve_minters(minters, rights);
        cfg.lender_ttl_ms = args.rights_ttl_ms;
        let reg = Registry::new(cfg).expect("registry config");
        // Traffic: each continent's users, spread over its colos.
        let mut per_continent = [0usize; 7];
        for c in colos {
            per_continent[continent_of(c.region)] += 1;
        }
        let total: f64 = USERS.iter().sum();
        let mut acc = 0.0;
        let colo_cumulative = colos
            .iter()
            .map(|c| {
                let k = continent_of(c.region);
                acc += USERS[k] / total / per_continent[k] as f64;
                acc
            })
            .collect();
        let tw: f64 = (1..=args.tags).map(|t| t as f64).sum();
        let mut acc = 0.0;
        let tag_cumulative = (0..args.tags)
            .map(|t| {
                acc += (args.tags - t) as f64 / tw;
                acc
            })
            .collect();
        // Object to object: the median of the region's colos.
        let mut region_lat = [[0.0; 9]; 9];
        for (r, row) in region_lat.iter_mut().enumerate() {
            for (q, cell) in row.iter_mut().enumerate() {
                let mut v: Vec<f64> = colos
                    .iter()
                    .filter(|c| c.region == r)
                    .map(|c| c.cold[q])
                    .collect();
                v.sort_by(f64::total_cmp);
                *cell = v.get(v.len() / 2).copied().unwrap_or(300.0);
            }
        }
        let mut objs = Vec::new();
        let roots: Vec<usize> = (0..args.tags)
            .map(|t| {
                let record =
                    TagRecord::new(&format!("tag-{t}"), TAG_STEP, 0, "", T0).expect("a tag");
                objs.push(Obj::new(
                    ObjKind::Root {
                        tag: t,
                        record,
                        remembered: HashMap::new(),
                    },
                    None,
                ));
                objs.len() - 1
            })
            .collect();
        // Per (tag, hosting region) an allocator, as the Worker names and
        // hints them (`Region::hosting`: `sam`, `afr` and `me` isolates use
        // `enam`'s, `weur`'s and `eeur`'s); each isolate's region's slot is
        // its hosting region's allocator.
        let allocators = if regional {
            (0..args.tags)
                .map(|t| {
                    let mut row = [usize::MAX; 9];
                    for r in Region::HOSTING.map(region_index) {
                        objs.push(Obj::new(
                            ObjKind::Allocator {
                                tag: t,
                                live: None,
                                stored: persist(&BlockAllocator::new()),
                                parked: Vec::new(),
                                epoch: 0,
                                rand: SplitMix64::new((t * 9 + r) as u64 + 1),
                                hand_back: None,
                            },
                            Some(r),
                        ));
                        row[r] = objs.len() - 1;
                    }
                    for r in 0..9 {
                        row[r] = row[region_index(Region::ALL[r].hosting())];
                    }
                    row
                })
                .collect()
        } else {
            Vec::new()
        };
        let minters = (0..minters)
            .map(|i| {
                let holder = SnowflakeHolder::with_rand(holder_config(), SplitMix64::new(i.into()))
                    .expect("holder config");
                // Regional: where the service places minter i (its worker
                // ID is its index: regions never share one).
                let region = regional
                    .then(|| MinterPools::over_regions(minters).minter_region(i))
                    .flatten()
                    .map(|r| Region::ALL.iter().position(|x| *x == r).expect("a region"));
                objs.push(Obj::new(
                    ObjKind::Minter {
                        index: i,
                        holder: Some(holder),
                        saved: HolderState::default(),
                        lender: Lender::new(layout),
                    },
                    region,
                ));
                objs.len() - 1
            })
            .collect();
        let warm = T0 + args.warmup_min * 60_000;
        let event_at = warm + 60_000;
        let (measure, end) = match scenario {
            Scenario::Steady => {
                let end = warm + args.minutes * 60_000;
                ((warm, end), end)
            }
            Scenario::Storm | Scenario::Outage => {
                let end = event_at + args.watch_s * 1_000;
                ((event_at, end), end)
            }
        };
        let mut sim = Sim {
            runs: (0..args.tags).map(|_| Runs::default()).collect(),
            args,
            colos,
            regional,
            rights,
            layout,
            rng: Rng(0),
            net: Rng(0),
            now: T0,
            queue: BinaryHeap::new(),
            seq: 0,
            reg,
            objs,
            roots,
            allocators,
            far: colos
                .iter()
                .map(|c| regional && far_colo(c).is_some())
                .collect(),
            minters,
            isolates: Vec::new(),
            calls: Vec::new(),
            free_calls: Vec::new(),
            down: [false; 9],
            down_at: 0,
            colo_cumulative,
            tag_cumulative,
            region_lat,
            snow: std::collections::BTreeMap::new(),
            snow_duplicates: 0,
            lent: HashMap::new(),
            measure,
            end,
            alive_at_event: 0,
            down_region: None,
            report: Report {
                first: vec![Default::default(); 7],
                nearest: vec![Hist::default(); 7],
                first_near: vec![Hist::default(); 7],
                ..Report::default()
            },
        };
        sim.rng = Rng(sim.args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        sim.net = Rng(sim.args.seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        // The population: the first isolates arrive over the warm-up, then
        // as many as vanish.
        let n = sim.args.isolates;
        for _ in 0..n {
            let at = T0 + sim.rng.below(sim.args.warmup_min * 60_000);
            let c = sim.rng.pick(&sim.colo_cumulative);
            sim.born(at, c);
        }
        if regional {
            sim.at(T0 + 60_000, Event::RetireDue);
        }
        match scenario {
            Scenario::Steady => {}
            Scenario::Storm => sim.at(event_at, Event::Replace(usize::MAX)),
            Scenario::Outage => {
                sim.at(event_at, Event::Down(usize::MAX, true));
            }
        }
        sim
    }

    fn at(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, e)));
    }

    fn measuring(&self) -> bool {
        self.now >= self.measure.0 && self.now < self.measure.1
    }

    /// A new isolate at `colo`, arriving at `at`.
    fn born(&mut self, at: u64, colo: usize) {
        let i = self.isolates.len();
        let (lo, hi) = self.args.rates;
        let rate = (lo.ln() + (hi.ln() - lo.ln()) * self.rng.unit()).exp();
        let home = self.rng.next();
        let tags = self.args.tags;
        // Regional: the Worker's isolate's own settings (its colo's region's
        // minters first); today: every minter alike, from a random one.
        let minters = self.args.minters;
        let config = if self.regional {
            MintConfig::for_region(minters, Some(Region::ALL[self.colos[colo].region]), home)
        } else {
            MintConfig::new(minters, home)
        };
        let config = MintConfig {
            staleness_ms: self.args.staleness_ms,
            rights: self.rights,
            ..config
        };
        let buffer = MintedBuffer::new(self.layout, config).expect("mint");
        self.isolates.push(Isolate {
            colo,
            alive: false,
            rate,
            drivers: (0..tags)
                .map(|_| SegmentDriver::new(isolate_policy()))
                .collect(),
            root_drivers: (0..tags)
                .map(|_| SegmentDriver::new(isolate_policy()))
                .collect(),
            waiting: vec![Vec::new(); tags + 1],
            first: vec![None; tags + 1],
            first_done: vec![false; tags + 1],
            buffer: Some(buffer),
            tries: MintTries::default(),
            called: Vec::new(),
            runs: vec![None; tags],
            stormed: false,
            rights: Vec::new(),
        });
        self.at(at, Event::Arrive(i));
    }

    /// The steady population: an isolate that vanishes is followed by a
    /// new one, in a colo drawn by the traffic weights.
    fn next_arrival(&mut self, from: u64) {
        let at = from + self.rng.exp_ms(1_000.0);
        let c = self.rng.pick(&self.colo_cumulative);
        self.born(at, c);
    }

    fn run(mut self) -> Outcome {
        while let Some(Reverse((t, _, e))) = self.queue.pop() {
            if t > self.end {
                break;
            }
            self.now = t;
            match e {
                Event::Arrive(i) => self.arrive(i),
                Event::Request(i) => self.request(i),
                Event::Vanish(i) => self.vanish(i),
                Event::Deliver(c) => self.deliver(c),
                Event::Reply(c) => self.reply(c),
                Event::Deadline(i, k) => self.deadline(i, k),
                Event::Poll(i, k) => self.serve(i, k),
                Event::Abandon(c, id) => self.abandon(c, id),
                Event::Replace(o) => self.replace(o),
                Event::Down(r, down) => self.set_down(r, down),
                Event::RetireDue => self.retire_due(),
            }
        }
        self.finish()
    }

    fn arrive(&mut self, i: usize) {
        let now = self.now;
        if self.isolates[i].alive {
            return;
        }
        self.isolates[i].alive = true;
        let life = self.rng.exp_ms(self.args.lifetime_s * 1_000.0);
        let first = self.rng.exp_ms(1_000.0 / self.isolates[i].rate);
        self.at(now + life, Event::Vanish(i));
        self.at(now + first, Event::Request(i));
    }

    fn vanish(&mut self, i: usize) {
        let iso = &mut self.isolates[i];
        if !iso.alive {
            return;
        }
        iso.alive = false;
        iso.buffer = None;
        // Requests still waiting end with the isolate (a typed error).
        let waiting: usize = iso.waiting.iter().map(Vec::len).sum();
        for w in &mut iso.waiting {
            w.clear();
        }
        self.flush_runs(i);
        if self.measuring() {
            self.report.refused += waiting as u64;
        }
        // One born for each that vanishes, unless the storm replaced it
        // (with one of its own).
        if !self.isolates[i].stormed {
            let now = self.now;
            self.next_arrival(now);
        }
    }

    fn flush_runs(&mut self, i: usize) {
        let iso = &mut self.isolates[i];
        for (t, run) in iso.runs.iter_mut().enumerate() {
            if let Some(r) = run.take() {
                self.runs[t].push(r);
            }
        }
    }

    fn request(&mut self, i: usize) {
        if !self.isolates[i].alive {
            return;
        }
        let now = self.now;
        let tags = self.args.tags;
        let k = if self.rng.unit() < 0.4 {
            tags
        } else {
            self.rng.pick(&self.tag_cumulative)
        };
        let next = now + self.rng.exp_ms(1_000.0 / self.isolates[i].rate);
        self.at(next, Event::Request(i));
        if self.measuring() {
            self.report.requests += 1;
            self.report.route_requests[usize::from(k == tags)] += 1;
        }
        let iso = &mut self.isolates[i];
        iso.waiting[k].push(now);
        if iso.first[k].is_none() && !iso.first_done[k] {
            iso.first[k] = Some(now);
        }
        self.serve(i, k);
        if !self.isolates[i].waiting[k].is_empty() && self.args.fault != Fault::IgnoreBudget {
            let bound = WaitBudget::for_request(now).remaining_ms(now);
            self.at(now + bound, Event::Deadline(i, k));
        }
    }

    /// Serve what waits on kind `k` of isolate `i`; load as the core says.
    fn serve(&mut self, i: usize, k: usize) {
        let now = self.now;
        let tags = self.args.tags;
        let mut out = [0u64; 1];
        loop {
            let iso = &mut self.isolates[i];
            let Some(&since) = iso.waiting[k].first() else {
                return;
            };
            let (filled, load) = if k < tags && iso.root_drivers[k].available() > 0 {
                // First what fallbacks to the root brought.
                let poll = iso.root_drivers[k].poll(now, &mut out);
                if poll.next != (SegmentStep::Done { prefetch: None }) {
                    // A prefetch it will not send.
                    iso.root_drivers[k].load_failed();
                }
                (poll.filled, None)
            } else if k < tags {
                let poll = iso.drivers[k].poll(now, &mut out);
                let load = match poll.next {
                    SegmentStep::Done { prefetch } => prefetch,
                    SegmentStep::LoadNow { step } => Some(step),
                    SegmentStep::Wait => None,
                };
                (poll.filled, load.map(|s| (Ask::Segment(k, s), false)))
            } else {
                let poll = iso.buffer.as_mut().expect("alive").poll(now, &mut out);
                let ask = match poll.next {
                    MintStep::Done { prefetch } => prefetch,
                    MintStep::FetchNow(a) => Some(a),
                    MintStep::Wait => None,
                };
                let fetch_now = matches!(poll.next, MintStep::FetchNow(_));
                (poll.filled, ask.map(|a| (Ask::Mint(a), fetch_now)))
            };
            let (load, fetch_now) = match load {
                Some((ask, now_)) => (Some(ask), now_),
                None => (None, false),
            };
            if filled == 1 {
                iso.waiting[k].remove(0);
                self.served(i, k, out[0], since);
            }
            if let Some(ask) = load {
                let target = match ask {
                    Ask::Segment(t, _) => {
                        if self.regional {
                            self.allocators[t][self.colos[self.isolates[i].colo].region]
                        } else {
                            self.roots[t]
                        }
                    }
                    Ask::Mint(a) => self.minters[a.minter as usize],
                    _ => unreachable!("an isolate loads segments and batches"),
                };
                let c = self.send(Caller::Isolate(i), target, ask, 0);
                // A fetch a request sends (not a prefetch) is raced against
                // what is left of that request's budget: the oldest waiting.
                if fetch_now && self.args.fault != Fault::IgnoreBudget {
                    let bound = WaitBudget::for_request(since).remaining_ms(now);
                    let id = self.calls[c].id;
                    self.at(now + bound, Event::Abandon(c, id));
                }
            }
            if filled == 0 {
                return;
            }
        }
    }

    fn served(&mut self, i: usize, k: usize, id: u64, since: u64) {
        let now = self.now;
        let tags = self.args.tags;
        let measuring = self.measuring();
        if k == tags {
            self.served_snowflake(id);
            self.within_rights(i, id);
        }
        let iso = &mut self.isolates[i];
        if k < tags {
            let run = &mut iso.runs[k];
            let done = match run {
                Some((_, last)) if *last + 1 == id => {
                    *last = id;
                    None
                }
                _ => run.replace((id, id)),
            };
            if let Some(r) = done {
                self.runs[k].push(r);
            }
        }
        if measuring {
            self.report.served += 1;
            self.report.route_served[usize::from(k == tags)] += 1;
            // The API's bound, whatever the isolate did to keep it.
            if now - since > MAX_WAIT_MS {
                self.report.late += 1;
            }
            self.report.served_regions[self.colos[iso.colo].region] = true;
        }
    }

    /// A snowflake ID served: kept with the others of its second (the same
    /// ID always has the same second) until no correct isolate can serve
    /// one of that second any more; one served later than the staleness
    /// bound after its time unit is a violation of its own.
    fn served_snowflake(&mut self, id: u64) {
        let now = self.now;
        let parts = self.layout.decompose(id).ok();
        let unit = parts.map_or(0, |p| p.timestamp_ms);
        if now.saturating_sub(unit) > self.args.staleness_ms {
            self.report.stale += 1;
        }
        if self.measuring() {
            if parts.is_some_and(|p| p.worker_id >= self.args.minters) {
                self.report.right_served += 1;
            }
            let ahead = unit.saturating_sub(now);
            if ahead > MINTER_BORROW_MS {
                self.report.ahead += 1;
            }
            self.report.ahead_max = self.report.ahead_max.max(ahead);
        }
        self.snow.entry(unit / 1_000).or_default().push(id);
        while let Some(entry) = self.snow.first_entry() {
            if *entry.key() + 2 >= now / 1_000 {
                break;
            }
            let ids = entry.remove();
            self.snow_duplicates += duplicates_in(ids);
        }
    }

    /// A snowflake ID of a rights holder's worker ID (`minters..`) that
    /// isolate `i` served lies in a right lent to it: its sequence in the
    /// slice, its time unit in the window. One outside is a violation of
    /// its own (a buffer minting past a right's end would repeat IDs only
    /// when another isolate mints the same unit and sequence).
    fn within_rights(&mut self, i: usize, id: u64) {
        let Ok(p) = self.layout.decompose(id) else {
            return;
        };
        if p.worker_id < self.args.minters {
            return;
        }
        let inside = self.isolates[i].rights.iter().any(|r| {
            r.worker_id == p.worker_id
                && (r.seq_start..r.seq_start + r.seq_len).contains(&p.sequence)
                && (r.from_ms..r.until_ms).contains(&p.timestamp_ms)
        });
        if !inside {
            self.report.outside_rights += 1;
        }
    }

    /// Right `r`, lent now, overlaps no right lent before: for each worker
    /// ID, where each sequence's rights end (the ledger's promise, across
    /// a minter's replacements: the restarted one lends after its saved
    /// reservation).
    fn lent_check(&mut self, r: &MintRight) {
        let lent = self.lent.entry(r.worker_id).or_default();
        let (lo, hi) = (r.seq_start as usize, (r.seq_start + r.seq_len) as usize);
        if lent.len() < hi {
            lent.resize(hi, 0);
        }
        for end in &mut lent[lo..hi] {
            if *end > r.from_ms {
                self.report.rights_overlap += 1;
            }
            *end = (*end).max(r.until_ms);
        }
    }

    /// The first ID of kind `k` is available to isolate `i` now.
    fn first_available(&mut self, i: usize, k: usize) {
        let measuring = self.measuring();
        let iso = &mut self.isolates[i];
        let Some(since) = iso.first[k].take() else {
            return;
        };
        iso.first_done[k] = true;
        if !measuring {
            return;
        }
        let colo = &self.colos[iso.colo];
        let kind = usize::from(k == self.args.tags);
        self.report.first_snowflakes += kind as u64;
        let first_asked = iso.waiting[k].first() == Some(&since);
        if self.down[region_index(Region::ALL[colo.region].hosting())]
            && since >= self.down_at
            && first_asked
        {
            self.report.first_down[kind].record(self.now - since);
        }
        let cont = continent_of(colo.region);
        self.report.first[cont][kind].record(self.now - since);
        if self.far[iso.colo] {
            self.report.far_first.record(self.now - since);
            let host = region_index(Region::ALL[colo.region].hosting());
            self.report.far_cold.record(colo.cold[host].round() as u64);
        } else {
            self.report.first_near[cont].record(self.now - since);
        }
        self.report.nearest[cont].record(colo.cold[colo.region].round() as u64);
    }

    fn deadline(&mut self, i: usize, k: usize) {
        let now = self.now;
        let iso = &mut self.isolates[i];
        if !iso.alive {
            return;
        }
        let before = iso.waiting[k].len();
        // Out of budget (the core's `WaitBudget`): a typed 503.
        iso.waiting[k].retain(|&since| WaitBudget::for_request(since).remaining_ms(now) > 0);
        if iso.waiting[k].len() < before {
            // The request that fetched for the buffer is gone (its tries
            // with it); the next one fetches anew.
            iso.tries = MintTries::default();
        }
        let refused = (before - iso.waiting[k].len()) as u64;
        if self.measuring() {
            self.report.refused += refused;
        }
    }

    /// A request's batch fetch reaches the request's bound unanswered: the
    /// request answers 503 and the core says what becomes of the fetch
    /// (`MintedBuffer::fetch_unanswered`), as the Worker asks it: awaited on
    /// in the background (its answer still the buffer's; asked again when
    /// that wait is over), or failed (the call abandoned, the buffer on to
    /// the next minter). The requests still waiting poll again.
    fn abandon(&mut self, c: usize, id: u64) {
        let call = &self.calls[c];
        if call.id != id || call.abandoned {
            return;
        }
        let Ask::Mint(ask) = call.ask else {
            return;
        };
        let Caller::Isolate(i) = call.from else {
            return;
        };
        let now = self.now;
        let tags = self.args.tags;
        let iso = &mut self.isolates[i];
        let Some(buffer) = iso.buffer.as_mut() else {
            return;
        };
        iso.tries = MintTries::default();
        match buffer.fetch_unanswered(ask.ticket, now) {
            Unanswered::Await { for_ms } => self.at(now + for_ms, Event::Abandon(c, id)),
            Unanswered::Failed | Unanswered::Answered | Unanswered::TakenOver => {
                self.calls[c].abandoned = true;
            }
        }
        self.at(now, Event::Poll(i, tags));
    }

    /// Sends a call; the object sees it after the one-way latency. The
    /// call's slot.
    fn send(&mut self, from: Caller, obj: usize, ask: Ask, attempt: u32) -> usize {
        // Placement at the first call: near the caller.
        let from_region = match from {
            Caller::Isolate(i) => self.colos[self.isolates[i].colo].region,
            Caller::Object(o) => self.objs[o].region.expect("a caller exists"),
        };
        let region = *self.objs[obj].region.get_or_insert(from_region);
        let cold = match from {
            Caller::Isolate(i) => self.colos[self.isolates[i].colo].cold[region],
            Caller::Object(_) => self.region_lat[from_region][region],
        };
        let warm = match from {
            Caller::Isolate(i) => {
                let called = &mut self.isolates[i].called;
                let warm = called.contains(&obj);
                if !warm {
                    called.push(obj);
                }
                warm
            }
            Caller::Object(_) => true,
        };
        let rtt = if warm { cold / 3.0 } else { cold };
        let one_way = (rtt / 2.0).round().max(1.0) as u64;
        let call = Call {
            from,
            obj,
            ask,
            one_way,
            answer: None,
            attempt,
            id: self.seq,
            abandoned: false,
        };
        let c = match self.free_calls.pop() {
            Some(c) => {
                self.calls[c] = call;
                c
            }
            None => {
                self.calls.push(call);
                self.calls.len() - 1
            }
        };
        let now = self.now;
        self.at(now + one_way, Event::Deliver(c));
        c
    }

    fn answer(&mut self, c: usize, at: u64, answer: Answer) {
        let call = &mut self.calls[c];
        call.answer = Some(answer);
        let t = at + call.one_way;
        self.at(t, Event::Reply(c));
    }

    /// A call reaches its object: queued, worked, answered.
    fn deliver(&mut self, c: usize) {
        let now = self.now;
        let o = self.calls[c].obj;
        let measuring = self.measuring();
        let obj = &mut self.objs[o];
        if obj.region.is_some_and(|r| self.down[r]) {
            return self.answer(c, now, Answer::Failed);
        }
        let sec = now / 1_000;
        if obj.window != sec {
            obj.window = sec;
            obj.window_n = 0;
        }
        obj.window_n += 1;
        let queued = obj.busy_until.saturating_sub(now) / WORK_MS;
        if measuring {
            obj.calls += 1;
            // Billed from the call's arrival until IDLE_BILLED_MS after its
            // work, overlapping spans once.
            let end = now.max(obj.busy_until) + WORK_MS + IDLE_BILLED_MS;
            obj.billed_ms += end.saturating_sub(obj.billed_until.max(now));
            obj.billed_until = obj.billed_until.max(end);
            obj.peak_rps = obj.peak_rps.max(obj.window_n);
            obj.peak_queue = obj.peak_queue.max(queued);
        }
        if queued >= OVERLOAD_QUEUE {
            if measuring {
                obj.overloaded += 1;
            }
            return self.answer(c, now, Answer::Failed);
        }
        let done = now.max(obj.busy_until) + WORK_MS;
        obj.busy_until = done;
        let ask = self.calls[c].ask.clone();
        let is_allocator = matches!(self.objs[o].kind, ObjKind::Allocator { .. });
        match ask {
            // An allocator's segment: served from its blocks, or parked.
            Ask::Segment(..) if is_allocator => self.allocator_serve(o, vec![c], done),
            Ask::Segment(_, step) => {
                let ask = SegmentAsk {
                    step: Some(step),
                    request_id: None,
                    caller: Asker::Shared,
                    for_isolate: true,
                };
                let a = self.root_allocate(o, &ask);
                self.answer(c, done, a);
            }
            Ask::Block(_, block) => {
                let Caller::Object(from) = self.calls[c].from else {
                    return;
                };
                let name = self.name_of(from);
                let a = self.root_allocate(o, &block.as_lease(&name));
                self.answer(c, done, a);
            }
            Ask::Back(_, tail) => {
                let Caller::Object(from) = self.calls[c].from else {
                    return;
                };
                let answer = match self.root_take_back(o, &tail, from) {
                    Some(taken) => Answer::TakenBack(taken),
                    None => Answer::Failed,
                };
                self.answer(c, done, answer);
            }
            Ask::Mint(ask) => {
                let a = self.mint(o, ask.count as usize, ask.right, done);
                self.answer(c, done, a);
            }
        }
    }

    /// The root: a segment for an isolate, or a block (remembered under
    /// its request ID) for an allocator. Stored before it is answered.
    fn root_allocate(&mut self, o: usize, ask: &SegmentAsk<'_>) -> Answer {
        let now = self.now;
        let m = u64::from(self.measuring());
        let ObjKind::Root {
            record, remembered, ..
        } = &mut self.objs[o].kind
        else {
            return Answer::Failed;
        };
        let key = ask.remembered_as();
        let remembered_entry = key.as_ref().and_then(|k| remembered.get(k));
        match record.lease_segment(ask, remembered_entry) {
            Ok(SegmentAnswer::Again(a)) => Answer::Range(a),
            Ok(SegmentAnswer::Allocate { step }) => match record.allocate(Some(step), now) {
                Ok((a, next)) => {
                    *record = next;
                    self.report.rows_written[0] += m;
                    if let Some(k) = key {
                        remembered.insert(
                            k,
                            Remembered {
                                segment: a,
                                granted: step,
                            },
                        );
                    }
                    Answer::Range(a)
                }
                Err(_) => Answer::Failed,
            },
            Err(_) => Answer::Failed,
        }
    }

    /// An allocator's name, as its object's and its request IDs' owner.
    fn name_of(&self, o: usize) -> String {
        let region = self.objs[o].region.unwrap_or(0);
        match self.objs[o].kind {
            ObjKind::Allocator { tag, .. } => {
                format!("allocator:tag-{tag}@{}", region_name(region))
            }
            _ => String::new(),
        }
    }

    /// A tail handed back by allocator `from`: the root takes it if
    /// nothing followed it (`TagRecord::take_back`). Whether it took it
    /// (`None`: an error, no answer to rely on).
    fn root_take_back(&mut self, o: usize, tail: &Tail, from: usize) -> Option<bool> {
        let m = u64::from(self.measuring());
        let now = self.now;
        let caller = self.name_of(from);
        let ObjKind::Root {
            record, remembered, ..
        } = &mut self.objs[o].kind
        else {
            return None;
        };
        let back = tail.as_back(&caller);
        let key = back.remembered_as();
        let entry = key.as_ref().and_then(|k| remembered.get(k));
        match record.take_back(&back, entry, now) {
            Ok(TakeBack::Returned {
                record: next,
                remembered: change,
            }) => {
                *record = next;
                self.report.rows_written[0] += m;
                if let Some(k) = key {
                    remember(remembered, k, change);
                }
                self.report.handed_back += tail.range.step;
                Some(true)
            }
            Ok(TakeBack::Closed {
                remembered: change, ..
            }) => {
                // Refused with proof, closed in the same write.
                self.report.rows_written[0] += m;
                if let Some(k) = key {
                    remember(remembered, k, change);
                }
                self.report.not_handed_back += tail.range.step;
                self.report.backs_followed += 1;
                Some(false)
            }
            // Not provably never taken (the core's `proves_untaken`): a
            // gap, as a lost answer.
            Ok(TakeBack::Skipped(_)) => {
                self.report.not_handed_back += tail.range.step;
                None
            }
            Err(_) => {
                self.report.not_handed_back += tail.range.step;
                None
            }
        }
    }

    /// The allocator's instance: in memory, or read back from storage.
    fn allocator(&mut self, o: usize) -> Option<&mut BlockAllocator> {
        let ObjKind::Allocator { live, stored, .. } = &mut self.objs[o].kind else {
            return None;
        };
        Some(live.get_or_insert_with(|| restore(stored)))
    }

    /// The allocator serves calls `cs` (parked ones again after a block),
    /// as its host does: `serve`, persist when the core says (`persist_first`:
    /// a range past the stored reservation, an ask), then answer and send
    /// the ask.
    fn allocator_serve(&mut self, o: usize, cs: Vec<usize>, at: u64) {
        let now = self.now;
        let m = u64::from(self.measuring());
        let fault = self.args.fault;
        let mut asks = Vec::new();
        let mut answers = Vec::new();
        let mut wait = Vec::new();
        self.allocator(o);
        let ObjKind::Allocator {
            live,
            stored,
            parked,
            rand,
            ..
        } = &mut self.objs[o].kind
        else {
            return;
        };
        let state = live.as_mut().expect("read back");
        let mut write = false;
        for c in cs {
            let Ask::Segment(_, step) = self.calls[c].ask else {
                continue;
            };
            let next = state.serve(step, now, rand);
            write |= state.persist_first(&next);
            match next {
                Serve::Range { range, ask, .. } => {
                    answers.push((c, range));
                    asks.extend(ask);
                }
                Serve::Load(ask) => {
                    wait.push(c);
                    asks.push(ask);
                }
                Serve::Wait => wait.push(c),
            }
        }
        parked.extend(wait);
        // Stored before anything leaves when the core says (a range past
        // the reservation stored, an ask); the planted fault: ranges leave
        // first, and the state is stored only with a block ask.
        if write && (fault != Fault::ServeBeforePersist || !asks.is_empty()) {
            *stored = persist(state);
            self.report.rows_written[0] += m;
        }
        for (c, a) in answers {
            self.answer(c, at, Answer::Range(a));
        }
        let ObjKind::Allocator { tag, epoch, .. } = self.objs[o].kind else {
            return;
        };
        for ask in asks {
            let root = self.roots[tag];
            self.send(Caller::Object(o), root, Ask::Block(tag, ask), epoch);
        }
    }

    /// The root's answer to block ask `ask` reaches allocator `o` (lost if
    /// `o` was replaced since it asked: `asked_in`).
    fn allocator_block(&mut self, o: usize, ask: &BlockAsk, answer: Answer, asked_in: u32) {
        let now = self.now;
        let m = u64::from(self.measuring());
        match self.objs[o].kind {
            ObjKind::Allocator { epoch, .. } if epoch == asked_in => {}
            _ => return,
        }
        let state = self.allocator(o).expect("an allocator");
        let installed = match answer {
            Answer::Range(a) => match state.loaded(&ask.request_id, a, TAG_STEP, now) {
                Ok(_) => true,
                Err(_) => {
                    self.report.refused_ranges += 1;
                    false
                }
            },
            _ => {
                state.load_failed(&ask.request_id);
                false
            }
        };
        let ObjKind::Allocator {
            live,
            stored,
            parked,
            ..
        } = &mut self.objs[o].kind
        else {
            return;
        };
        *stored = persist(live.as_ref().expect("live"));
        self.report.rows_written[0] += m;
        let parked = std::mem::take(parked);
        if installed {
            self.allocator_serve(o, parked, now + WORK_MS);
        } else {
            // The calls waiting for a block: unavailable (the isolates fall
            // back to the root).
            for c in parked {
                self.answer(c, now, Answer::Failed);
            }
        }
    }

    /// The root's answer to tail `tail` handed back reaches allocator `o`
    /// (lost if `o` was replaced since: `asked_in`): the core's `HandBack`
    /// says whether to send the next tail, or to end, the tails still the
    /// allocator's served again (`BlockAllocator::keep`) and the state
    /// persisted.
    fn allocator_back(&mut self, o: usize, tail: Tail, answer: &Answer, asked_in: u32) {
        let now = self.now;
        let m = u64::from(self.measuring());
        let drop_refused = self.args.drop_refused;
        let ObjKind::Allocator {
            epoch,
            hand_back,
            tag,
            ..
        } = &mut self.objs[o].kind
        else {
            return;
        };
        if *epoch != asked_in {
            return;
        }
        let (tag, epoch) = (*tag, *epoch);
        let Some(mut back) = hand_back.take() else {
            return;
        };
        back.answered(
            tail,
            match answer {
                Answer::TakenBack(true) => TailAnswer::Taken,
                Answer::TakenBack(false) => TailAnswer::Refused {
                    untaken: !drop_refused,
                },
                _ => TailAnswer::Lost,
            },
        );
        if let Some(next) = back.to_send() {
            if let ObjKind::Allocator { hand_back, .. } = &mut self.objs[o].kind {
                *hand_back = Some(back);
            }
            self.report.backs += 1;
            let root = self.roots[tag];
            self.send(Caller::Object(o), root, Ask::Back(tag, next), epoch);
            return;
        }
        let state = self.allocator(o).expect("an allocator");
        let (_, kept) = back.finish(state, now);
        let ObjKind::Allocator { live, stored, .. } = &mut self.objs[o].kind else {
            return;
        };
        *stored = persist(live.as_ref().expect("live"));
        self.report.rows_written[0] += m;
        self.report.kept += kept as u64;
    }

    /// Allocators retire when the core says so (`retire_due`: a block
    /// leased half an hour ago, whose tail the root may soon forget), as
    /// their host's timer asks: their tails go back to the root.
    fn retire_due(&mut self) {
        let now = self.now;
        let no_retire = self.args.no_retire;
        let m = u64::from(self.measuring());
        for o in 0..self.objs.len() {
            let ObjKind::Allocator {
                live,
                stored,
                tag,
                parked,
                epoch,
                hand_back,
                ..
            } = &mut self.objs[o].kind
            else {
                continue;
            };
            if no_retire || !parked.is_empty() || hand_back.is_some() {
                continue;
            }
            let state = live.get_or_insert_with(|| restore(stored));
            if !state.retire_due(now) {
                continue;
            }
            let mut back = HandBack::new(state.retire());
            *stored = persist(state);
            self.report.rows_written[0] += m;
            let (tag, epoch) = (*tag, *epoch);
            self.report.retired += 1;
            if let Some(tail) = back.to_send() {
                *hand_back = Some(back);
                self.report.backs += 1;
                let root = self.roots[tag];
                self.send(Caller::Object(o), root, Ask::Back(tag, tail), epoch);
            }
        }
        self.at(now + 60_000, Event::RetireDue);
    }

    /// A minter's loop, as its Durable Object runs it (fleet_sim's); with
    /// a batch, a right to mint when the isolate asks for one
    /// (`lend_right`).
    fn mint(&mut self, o: usize, count: usize, right: bool, now: u64) -> Answer {
        let layout = self.layout;
        let m = u64::from(self.measuring());
        let ObjKind::Minter { index, .. } = &self.objs[o].kind else {
            return Answer::Failed;
        };
        let index = *index;
        // As the Worker's minter: the right first, and no batch beside one
        // that serves the ask alone.
        let right = if right && self.rights {
            self.lend_right(o, now)
        } else {
            None
        };
        if let Some(r) = &right {
            self.lent_check(r);
        }
        let count = batch_beside_right(&layout, count as u32, right.as_ref()) as usize;
        if count == 0 {
            return Answer::Ranges(Vec::new(), right);
        }
        let ObjKind::Minter { holder, saved, .. } = &mut self.objs[o].kind else {
            return Answer::Failed;
        };
        if holder.is_none() {
            match SnowflakeHolder::restore(holder_config(), SplitMix64::new(now), *saved, now) {
                Ok(h) => *holder = Some(h),
                Err(e) => {
                    // As the Worker's minter answers it: its own clock
                    // behind its saved reservation is a 503 to wait out.
                    let code = match minter_restore_refused(&e) {
                        Some(MinterStep::Unavailable { code, .. }) => code,
                        _ => e.error_code(),
                    };
                    if right.is_some() {
                        return Answer::Ranges(Vec::new(), right);
                    }
                    *self.report.minter_empty.entry(code.as_str()).or_default() += 1;
                    return Answer::Refused(code);
                }
            }
        }
        let h = holder.as_mut().expect("restored");
        let mut out = vec![0u64; count];
        let mut filled = 0;
        let mut leased = false;
        let mut unavailable = None;
        for _ in 0..64 {
            if h.save_due_in(now) == Some(0) {
                if let Some(state) = h.save_request(now) {
                    *saved = state;
                    self.report.rows_written[1] += m;
                    h.saved(&state);
                }
            }
            let Ok(poll) = h.poll(now, &mut out[filled..]) else {
                break;
            };
            filled += poll.filled;
            if let Some(r) = poll.renew {
                renew(&mut self.reg, h, r, now, layout);
                self.report.registry_call(now, m, false);
            }
            match minter_step(filled, poll.next, leased) {
                MinterStep::Answer => break,
                MinterStep::Unavailable { code, .. } => {
                    unavailable = Some(code);
                    break;
                }
                MinterStep::Lease(ask) => {
                    leased = true;
                    self.report.registry_call(now, m, false);
                    let secret = LeaseSecret::from_random([(index % 251) as u8; 16]);
                    let previous = ask.previous.map(|c| c.proof(sha256));
                    match self.reg.lease_minter(
                        index,
                        ask.node_now_ms,
                        previous,
                        sha256(&secret),
                        now,
                    ) {
                        Ok(l) => {
                            let _ = h.granted(Grant::from_lease(&l, Some(secret), layout), now);
                        }
                        Err(e) => {
                            h.lease_failed(Some(e.error_code()), now);
                            unavailable = Some(
                                match edgeleaf::minted::minter_lease_refused(e.error_code()) {
                                    Some(MinterStep::Unavailable { code, .. }) => code,
                                    _ => e.error_code(),
                                },
                            );
                            break;
                        }
                    }
                }
            }
        }
        out.truncate(filled);
        if out.is_empty() && right.is_some() {
            // As the Worker: a right lent is answered even when the batch
            // beside it fails.
            Answer::Ranges(Vec::new(), right)
        } else if out.is_empty() {
            let code = unavailable.unwrap_or(ErrorCode::StoreUnavailable);
            *self.report.minter_empty.entry(code.as_str()).or_default() += 1;
            Answer::Refused(code)
        } else {
            Answer::Ranges(batch_ranges(&layout, &out), right)
        }
    }

    /// Minter `o`'s rights holder lends a right, in the Worker's order
    /// (`minter_store/rights.rs`): it saves its reservation when due and
    /// polls with nothing to mint, renews when due, leases when it has no
    /// lease (at most once a request; refused, not again for
    /// `RIGHT_RETRY_MS`), saves at once after a grant (proof after a
    /// restart, and a right is lent only below a saved reservation), and
    /// lends from its ledger within what it may (`lendable`), recording the
    /// right's end (`lent_until`). Every failure is a batch answered
    /// without a right.
    fn lend_right(&mut self, o: usize, now: u64) -> Option<MintRight> {
        let layout = self.layout;
        let minters = self.args.minters;
        let m = u64::from(self.measuring());
        let forget = self.args.fault == Fault::ForgetLent;
        let ObjKind::Minter { index, lender, .. } = &mut self.objs[o].kind else {
            return None;
        };
        let index = *index;
        let Lender {
            holder: rights,
            saved: rights_saved,
            ledger,
        } = &mut **lender;
        let mut why: Option<&'static str> = None;
        let mut calls = 0;
        let mut rows = 0;
        // Its own row (`'rights'`), never the batch holder's.
        let save =
            |h: &mut SnowflakeHolder<SplitMix64>, row: &mut Option<HolderState>, force: bool| {
                if !force && h.save_due_in(now) != Some(0) {
                    return 0;
                }
                let Some(state) = h.save_request(now) else {
                    return 0;
                };
                *row = Some(state);
                h.saved(&state);
                1
            };
        let right = 'lend: {
            if rights.is_none() {
                let config = rights_holder_config(DEFAULT_MAX_BACKWARD_MS);
                let rand = SplitMix64::new(now ^ 0x5249_4748_5453);
                let restored = match rights_saved {
                    Some(state) => SnowflakeHolder::restore(config, rand, *state, now),
                    None => SnowflakeHolder::with_rand(config, rand),
                };
                match restored {
                    Ok(h) => *rights = Some(h),
                    Err(_) => {
                        why = Some("restore refused");
                        break 'lend None;
                    }
                }
            }
            let h = rights.as_mut().expect("restored");
            rows += save(h, rights_saved, false);
            let Ok(poll) = h.poll(now, &mut []) else {
                why = Some("holder stopped");
                break 'lend None;
            };
            if let Some(r) = poll.renew {
                renew(&mut self.reg, h, r, now, layout);
                calls += 1;
            }
            let asks = matches!(poll.next, HolderNext::Lease(_));
            let ask = ledger.lease_to_send(poll.next, h, now);
            if asks && ask.is_none() {
                // Refused lately: not asked again on every request.
                why = Some("refused lately");
                break 'lend None;
            }
            if let Some(ask) = ask {
                calls += 1;
                let secret = LeaseSecret::from_random([(index % 251) as u8 ^ 0x80; 16]);
                let previous = ask.previous.map(|c| c.proof(sha256));
                let leased = match self.reg.lease_minter(
                    rights_worker_index(minters, index),
                    ask.node_now_ms,
                    previous,
                    sha256(&secret),
                    now,
                ) {
                    Ok(l) => h
                        .granted(Grant::from_lease(&l, Some(secret), layout), now)
                        .map_err(|e| e.error_code()),
                    Err(e) => {
                        h.lease_failed(Some(e.error_code()), now);
                        Err(e.error_code())
                    }
                };
                if let Err(code) = leased {
                    ledger.lease_failed(now);
                    why = Some(code.as_str());
                    break 'lend None;
                }
                rows += save(h, rights_saved, true);
            }
            if forget {
                // The planted fault: nothing remembered of what was lent.
                *ledger = RightLedger::new(layout);
            }
            // Read for the report only: `lend_from` reads it itself.
            let lendable = h.lendable(now);
            let Some(right) = ledger.lend_from(now, h) else {
                why = Some(match lendable {
                    None => "no lease",
                    Some(l) if l.until_ms < l.from_ms.max(now + 1) + MIN_RIGHT_MS => {
                        "too little reserved"
                    }
                    // A restarted minter's floor, its saved reservation,
                    // still ahead of its clock (a ledger that lends no
                    // right starting that far ahead).
                    Some(l) if l.from_ms > now + 1_000 => "floor ahead of the clock",
                    Some(_) => "every slice lent",
                });
                break 'lend None;
            };
            Some(right)
        };
        self.report.rows_written[1] += rows * m;
        self.report.rights_rows += rows * m;
        for _ in 0..calls {
            self.report.registry_call(now, m, true);
        }
        match (right, why) {
            (Some(r), _) => {
                self.report.rights_lent += m;
                self.report.right_ms += (r.until_ms - r.from_ms) * m;
            }
            (None, Some(why)) if m == 1 => {
                *self.report.rights_none.entry(why).or_default() += 1;
            }
            _ => {}
        }
        right
    }

    /// An answer reaches its caller.
    fn reply(&mut self, c: usize) {
        let answer = self.calls[c].answer.take().expect("answered");
        let Call {
            from,
            obj,
            attempt,
            abandoned,
            ..
        } = self.calls[c];
        let ask = std::mem::replace(&mut self.calls[c].ask, Ask::Segment(0, 0));
        self.calls[c].id = u64::MAX;
        self.free_calls.push(c);
        if abandoned {
            // Its request answered 503 at its bound; the call's answer has
            // nobody to go to.
            return;
        }
        let i = match from {
            Caller::Object(o) => {
                match ask {
                    Ask::Block(_, block) => self.allocator_block(o, &block, answer, attempt),
                    Ask::Back(_, tail) => self.allocator_back(o, tail, &answer, attempt),
                    _ => {}
                }
                return;
            }
            Caller::Isolate(i) => i,
        };
        if !self.isolates[i].alive {
            return;
        }
        let now = self.now;
        let tags = self.args.tags;
        match (ask, answer) {
            (Ask::Segment(t, _), Answer::Range(a)) => {
                // A fallback's range goes to the root's driver (the
                // allocator's blocks are below the root's latest ranges).
                let fallback = self.regional && self.objs[obj].is_root();
                if fallback && self.measuring() {
                    self.report.restarted += 1;
                }
                let iso = &mut self.isolates[i];
                let driver = if fallback {
                    // The regional driver's load is over, without a range.
                    iso.drivers[t].load_failed();
                    &mut iso.root_drivers[t]
                } else {
                    &mut iso.drivers[t]
                };
                match driver.loaded(a, now) {
                    Ok(()) => {}
                    // Both halves still hold IDs (two fallbacks' ranges
                    // before the first is used): the range is refused, its
                    // IDs skipped, never served.
                    Err(Error::SegmentBufferFull) => self.report.refused_full += 1,
                    Err(_) => self.report.refused_ranges += 1,
                }
                self.first_available(i, t);
                self.serve(i, t);
            }
            (Ask::Segment(t, step), Answer::Failed) => {
                // The allocator did not answer: the root, within the budget
                // (the same load, still in flight for the driver).
                let from_allocator = !self.objs[obj].is_root();
                let oldest = self.isolates[i].waiting[t].first().copied();
                let in_budget = oldest.is_none_or(|s| now - s < MAX_WAIT_MS);
                // (The regional driver's load stays in flight until the
                // root answers: one load per tag per isolate.)
                if from_allocator && in_budget && self.args.fault != Fault::NoFallback {
                    if self.measuring() {
                        self.report.fallbacks += 1;
                    }
                    let root = self.roots[t];
                    self.send(Caller::Isolate(i), root, Ask::Segment(t, step), 1);
                } else {
                    self.isolates[i].drivers[t].load_failed();
                    self.refuse_waiting(i, t);
                }
            }
            (Ask::Mint(ask), Answer::Ranges(r, right)) => {
                let iso = &mut self.isolates[i];
                if let Some(right) = right {
                    if iso.rights.len() == 4 {
                        iso.rights.remove(0);
                    }
                    iso.rights.push(right);
                }
                let buffer = iso.buffer.as_mut().expect("alive");
                match buffer.fetched_with_right(ask.ticket, &r, right, now) {
                    Ok(Fetched::Kept) => {
                        iso.tries = MintTries::default();
                        self.first_available(i, tags);
                        self.serve(i, tags);
                    }
                    // All stale on arrival: counted as a failed fetch.
                    Ok(Fetched::Stale) => self.mint_failed(i, Refused::Next),
                    // A later fetch took over from it: that one is awaited.
                    Ok(Fetched::Late) => {}
                    Err(_) => {
                        self.report.refused_ranges += 1;
                        buffer.fetch_failed();
                        self.mint_failed(i, Refused::Next);
                    }
                }
            }
            (Ask::Mint(ask), answer) => {
                let code = match answer {
                    Answer::Refused(code) => code,
                    _ => ErrorCode::StoreUnavailable,
                };
                let iso = &mut self.isolates[i];
                let left = iso.waiting[tags]
                    .first()
                    .map_or(0, |&since| WaitBudget::for_request(since).remaining_ms(now));
                let then = iso
                    .buffer
                    .as_mut()
                    .expect("alive")
                    .fetch_refused(ask.ticket, code, now, left);
                self.mint_failed(i, then);
            }
            _ => {}
        }
    }

    /// A batch fetch of isolate `i` failed and its buffer said `then`: the
    /// request that sent it (the oldest waiting) does what the Worker's does
    /// (`isolate/minted.rs`): ask the same minter again after a poll, ask
    /// the buffer's next minter while the core's `MintTries` allows, or
    /// answer 503 — and the requests still waiting fetch anew. Nothing
    /// waiting: a prefetch, whose failure only the buffer hears.
    fn mint_failed(&mut self, i: usize, then: Refused) {
        let now = self.now;
        let tags = self.args.tags;
        let no_fallback = self.args.fault == Fault::NoFallback;
        let measuring = self.measuring();
        let iso = &mut self.isolates[i];
        if iso.waiting[tags].is_empty() {
            iso.tries = MintTries::default();
            return;
        }
        let buffer = iso.buffer.as_ref().expect("alive");
        match then {
            Refused::Again => self.at(now + POLL_MS, Event::Poll(i, tags)),
            Refused::Next if !no_fallback && iso.tries.failed(buffer) => {
                if measuring {
                    self.report.fallbacks += 1;
                }
                self.serve(i, tags);
            }
            Refused::Next | Refused::GiveUp { .. } => {
                iso.tries = MintTries::default();
                iso.waiting[tags].remove(0);
                if measuring {
                    self.report.refused += 1;
                }
                self.serve(i, tags);
            }
        }
    }

    fn refuse_waiting(&mut self, i: usize, k: usize) {
        let n = self.isolates[i].waiting[k].len() as u64;
        self.isolates[i].waiting[k].clear();
        if self.measuring() {
            self.report.refused += n;
        }
    }

    /// The deploy storm: every isolate and every object replaced within
    /// 30 s.
    fn replace(&mut self, o: usize) {
        let now = self.now;
        if o == usize::MAX {
            let alive: Vec<usize> = (0..self.isolates.len())
                .filter(|i| self.isolates[*i].alive)
                .collect();
            self.alive_at_event = alive.len() as u64;
            self.report.isolates_replaced = alive.len() as u64;
            for i in alive {
                self.isolates[i].stormed = true;
                let at = now + self.net.below(30_000);
                self.at(at, Event::Vanish(i));
                let colo = self.isolates[i].colo;
                self.born(at, colo);
            }
            self.report.objects_replaced = self.objs.len() as u64;
            for o in 0..self.objs.len() {
                let at = now + self.net.below(30_000);
                self.at(at, Event::Replace(o));
            }
            return;
        }
        // Memory lost, storage kept.
        match &mut self.objs[o].kind {
            ObjKind::Root { .. } => {}
            ObjKind::Allocator {
                live,
                parked,
                epoch,
                hand_back,
                ..
            } => {
                *live = None;
                *epoch += 1;
                // The answers to its hand-backs are lost with it.
                *hand_back = None;
                // Calls in its memory are lost with it: their callers see a
                // failure.
                for c in std::mem::take(parked) {
                    self.answer(c, now, Answer::Failed);
                }
            }
            ObjKind::Minter { holder, lender, .. } => {
                *holder = None;
                lender.holder = None;
                lender.ledger = RightLedger::new(self.layout);
            }
        }
    }

    fn set_down(&mut self, r: usize, down: bool) {
        if r == usize::MAX {
            // The busiest region where objects live (`Region::HOSTING`,
            // by the traffic of the isolates whose objects it hosts) that
            // holds no root: its allocators and minters (and, today,
            // whatever objects were placed there) unreachable for a minute.
            // (A hint that hosts nothing, `afr`, would take nothing down.)
            let mut weight = [0.0; 9];
            let mut before = 0.0;
            for (c, cum) in self.colo_cumulative.iter().enumerate() {
                let host = region_index(Region::ALL[self.colos[c].region].hosting());
                weight[host] += cum - before;
                before = *cum;
            }
            let roots: Vec<Option<usize>> =
                self.roots.iter().map(|&o| self.objs[o].region).collect();
            let r = Region::HOSTING
                .map(region_index)
                .into_iter()
                .filter(|r| !roots.contains(&Some(*r)))
                .max_by(|a, b| weight[*a].total_cmp(&weight[*b]))
                .unwrap_or(0);
            self.alive_at_event = self.isolates.iter().filter(|i| i.alive).count() as u64;
            self.down_region = Some(r);
            self.down[r] = true;
            let now = self.now;
            self.down_at = now;
            self.at(now + 60_000, Event::Down(r, false));
            return;
        }
        self.down[r] = down;
    }

    fn finish(mut self) -> Outcome {
        for i in 0..self.isolates.len() {
            self.flush_runs(i);
        }
        let mut duplicates = self.snow_duplicates;
        for ids in std::mem::take(&mut self.snow).into_values() {
            duplicates += duplicates_in(ids);
        }
        for runs in &mut self.runs {
            runs.compact();
            duplicates += runs.duplicates;
        }
        // Skipped: allocated by the roots, never served, not held.
        let allocated: u64 = self
            .roots
            .iter()
            .map(|&o| match &self.objs[o].kind {
                ObjKind::Root { record, .. } => record.max_id,
                _ => 0,
            })
            .sum();
        let served: u64 = self
            .runs
            .iter()
            .flat_map(|r| &r.runs)
            .map(|(a, b)| b - a + 1)
            .sum();
        let held_isolates: u64 = self
            .isolates
            .iter()
            .filter(|i| i.alive)
            .flat_map(|i| i.drivers.iter().map(SegmentDriver::available))
            .sum();
        let held_allocators: u64 = self
            .objs
            .iter()
            .map(|o| match &o.kind {
                ObjKind::Allocator { live, stored, .. } => live
                    .as_ref()
                    .map_or_else(|| restore(stored).available(), BlockAllocator::available),
                _ => 0,
            })
            .sum();
        let hours = (self.end - T0) as f64 / 3_600_000.0;
        let skipped = allocated.saturating_sub(served + held_isolates + held_allocators);
        let mut r = self.report;
        for (o, obj) in self.objs.iter().enumerate() {
            r.overloaded += obj.overloaded;
            r.obj_peak = r.obj_peak.max(obj.peak_rps);
            r.obj_queue = r.obj_queue.max(obj.peak_queue);
            if obj.is_root() {
                r.root_peak = r.root_peak.max(obj.peak_rps);
                r.root_queue = r.root_queue.max(obj.peak_queue);
            }
            let name = match &obj.kind {
                ObjKind::Root { tag, .. } => format!("root tag-{tag}"),
                ObjKind::Allocator { tag, .. } => {
                    format!(
                        "allocator tag-{tag}@{}",
                        region_name(obj.region.unwrap_or(0))
                    )
                }
                ObjKind::Minter { index, .. } => format!("minter-{index}"),
            };
            r.object_requests[obj.route()] += obj.calls;
            r.billed_ms[obj.route()] += obj.billed_ms;
            let at = obj.region.map_or("-", |r| region_name(r));
            let _ = o;
            r.busiest
                .push((format!("{name} ({at})"), obj.peak_rps, obj.peak_queue));
        }
        r.object_requests[1] += r.registry_calls;
        r.busiest.sort_by_key(|b| Reverse(b.1));
        r.busiest.truncate(3);
        let mut minter_peaks: Vec<(String, u32, u32)> = Vec::new();
        for obj in &self.objs {
            if let ObjKind::Minter { .. } = obj.kind {
                let at = obj.region.map_or("-", region_name).to_string();
                match minter_peaks.iter_mut().find(|m| m.0 == at) {
                    Some(m) => {
                        m.1 += 1;
                        m.2 = m.2.max(obj.peak_rps);
                    }
                    None => minter_peaks.push((at, 1, obj.peak_rps)),
                }
            }
        }
        Outcome {
            report: r,
            duplicates,
            skipped_per_hour: skipped as f64 / hours,
            hours,
            window_s: (self.measure.1 - self.measure.0) as f64 / 1_000.0,
            down_region: self.down_region,
            alive_at_event: self.alive_at_event,
            minter_peaks,
        }
    }
}

/// What the rights to mint did in a scenario, for one design.
fn rights_line(name: &str, o: &Outcome, minters: u32, on: bool) -> String {
    let r = &o.report;
    let snow = r.route_served[1].max(1) as f64;
    let per_s = |n: u64| n as f64 / o.window_s.max(1.0);
    let registry = format!(
        "registry {:.2} req/s (peak {}), of which the rights holders' leases and renewals {:.2} req/s (peak {}), {} in all",
        per_s(r.registry_calls),
        r.registry_load.peak,
        per_s(r.rights_registry_calls),
        r.rights_registry_load.peak,
        r.rights_registry_calls,
    );
    let floor = format!(
        "{} isolates' first snowflake ID in the window: a floor of {:.4} minter requests per ID (actual {:.4})",
        r.first_snowflakes,
        r.first_snowflakes as f64 / snow,
        r.object_requests[1].saturating_sub(r.registry_calls) as f64 / snow,
    );
    if !on {
        return format!(
            "Rights to mint, {name}: off ({minters} minters: --rights off, or 2 x {minters} worker IDs above half the registry's); {registry}; {floor}."
        );
    }
    format!(
        "Rights to mint, {name}: {} lent (mean window {:.1} s), asks answered without one {:?}; {} snowflake IDs minted under them ({:.1}%); {} rows written by the rights holders ({:.1} a second); {registry}; {floor}; IDs ahead of the clock by more than {MINTER_BORROW_MS} ms: {} (at most {} ms).",
        r.rights_lent,
        r.right_ms as f64 / r.rights_lent.max(1) as f64 / 1_000.0,
        r.rights_none,
        r.right_served,
        r.right_served as f64 * 100.0 / snow,
        r.rights_rows,
        per_s(r.rights_rows),
        r.ahead,
        r.ahead_max,
    )
}

/// The dated price list: `PRICES` in `tests/bench/bill.mjs`, the one table
/// the bench and this simulation both price with (docs/benchmarks.md,
/// "The bill", gives it and its date). USD per unit.
struct Prices {
    date: String,
    worker_request: f64,
    object_request: f64,
    row_written: f64,
    row_read: f64,
    gb_second: f64,
}

impl Prices {
    fn read() -> Prices {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bench/bill.mjs");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let body = text
            .split_once("export const PRICES = {")
            .and_then(|(_, rest)| rest.split_once("};"))
            .unwrap_or_else(|| panic!("{path}: expected `export const PRICES = {{ ... }};`"))
            .0;
        let field = |name: &str| -> &str {
            body.lines()
                .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
                .unwrap_or_else(|| panic!("{path}: PRICES.{name} missing"))
                .trim()
                .trim_end_matches(',')
        };
        // `0.30 / 1e6`: dollars a million, per unit.
        let per_unit = |name: &str| -> f64 {
            let (a, b) = field(name)
                .split_once('/')
                .unwrap_or_else(|| panic!("{path}: PRICES.{name}: expected `N / 1e6`"));
            let num = |x: &str| -> f64 {
                x.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{path}: PRICES.{name}: {x}?"))
            };
            num(a) / num(b)
        };
        Prices {
            date: field("date").trim_matches('\'').to_string(),
            worker_request: per_unit("workerRequest"),
            object_request: per_unit("objectRequest"),
            row_written: per_unit("rowWritten"),
            row_read: per_unit("rowRead"),
            gb_second: per_unit("gbSecond"),
        }
    }
}

/// Issue 33's target for the objects' share of the IDs: 1% of the Worker
/// request that carries a single ID ($0.30 a million), checked per route on
/// the regional design's steady hour in the full form (the short form's
/// isolates live 3 minutes and pay their first loads over fewer IDs).
const OBJECTS_TARGET_PER_MILLION: f64 = 0.003;

/// The objects' dollars (their requests and rows written) per million IDs,
/// given those per million IDs.
fn objects_cost(prices: &Prices, object_requests: f64, rows_written: f64) -> f64 {
    object_requests * prices.object_request + rows_written * prices.row_written
}

/// The objects' dollars per million IDs of route `k` (0 segment, 1
/// snowflake) in a run.
fn route_objects_cost(prices: &Prices, r: &Report, k: usize) -> f64 {
    let served = r.route_served[k].max(1) as f64;
    objects_cost(
        prices,
        r.object_requests[k] as f64 * 1e6 / served,
        r.rows_written[k] as f64 * 1e6 / served,
    )
}

/// What a million IDs of each route cost in a scenario, per design, at
/// `prices`: the Worker's requests (one per ID: each simulated request
/// asks one), the objects' requests and rows written as counted (`Report`),
/// and their duration as estimated (`IDLE_BILLED_MS` after each call, at
/// `OBJECT_GB`; it cannot be measured locally). Rows read are not
/// simulated (objects keep their state in memory; a few per call at
/// the bench's count, $0.001 a million).
fn print_bill(prices: &Prices, today: &Outcome, regional: &Outcome) {
    println!();
    println!(
        "The bill, per million IDs served, at the prices of {} (tests/bench/bill.mjs; duration estimated):",
        prices.date
    );
    println!();
    println!("| design | route | IDs served | per million IDs: Worker requests / object requests / rows written / GB-s | $ Worker | $ objects (requests + rows) | $ duration | $ total |");
    println!("|---|---|---|---|---|---|---|---|");
    let _ = prices.row_read;
    for (name, o) in [("today", today), ("regional", regional)] {
        let r = &o.report;
        for (k, route) in ["segment", "snowflake"].iter().enumerate() {
            let served = r.route_served[k].max(1) as f64;
            let per_m = |n: f64| n * 1e6 / served;
            let (wr, or, rw) = (
                per_m(r.route_requests[k] as f64),
                per_m(r.object_requests[k] as f64),
                per_m(r.rows_written[k] as f64),
            );
            let gbs = per_m(r.billed_ms[k] as f64 / 1_000.0 * OBJECT_GB);
            let (dw, dobj, ddur) = (
                wr * prices.worker_request,
                objects_cost(prices, or, rw),
                gbs * prices.gb_second,
            );
            println!(
                "| {name} | {route} | {} | {wr:.0} / {or:.1} / {rw:.1} / {gbs:.0} | ${dw:.4} | ${dobj:.5} | ${ddur:.4} | ${:.4} |",
                r.route_served[k],
                dw + dobj + ddur
            );
        }
    }
}

/// An isolate's policy, as the Worker's (the floor is the tag's step,
/// which the root or allocator applies).
fn isolate_policy() -> StepPolicy {
    StepPolicy {
        min_step: 1,
        max_step: MAX_STEP,
        duration_ms: DEFAULT_SEGMENT_DURATION_MS,
    }
}

fn holder_config() -> HolderConfig {
    HolderConfig {
        reserve_ms: 3_000,
        ..minter_holder_config(DEFAULT_MAX_BACKWARD_MS)
    }
}

fn renew(
    reg: &mut Registry,
    holder: &mut SnowflakeHolder<SplitMix64>,
    r: Renewal,
    now: u64,
    layout: Layout,
) {
    match reg.renew("", &r.proof(sha256), now) {
        Ok(l) => holder.renewed(Grant::from_lease(&l, None, layout), now),
        Err(e) => holder.renewal_failed(r.claim.generation, Some(e.error_code()), now),
    }
}

// ------------------------------------------------------------ the table

/// A colo's hosting region (`Region::hosting`, where the Worker places its
/// isolates' allocators and minters: `MinterPools::over_regions` pools by
/// it too) and its cold figure there, when that is further than a request's
/// budget for a first call: a new isolate's first request there answers 503
/// at its bound, and its load or fetch, awaited on (a segment load; a batch
/// fetch in the background, `MintedBuffer::fetch_unanswered`), serves the
/// requests after it. No isolate's rule makes a first call faster than the
/// data's figure: such a colo's first IDs are checked against it
/// (`FAR_RATIO`), not against the nearest hint's.
fn far_colo(c: &Colo) -> Option<(Region, f64)> {
    let host = Region::ALL[c.region].hosting();
    let ms = c.cold[region_index(host)];
    (ms > MAX_WAIT_MS as f64).then_some((host, ms))
}

/// The far colos (`far_colo`), named on every run's second line.
fn far_note(colos: &[Colo]) -> String {
    let far: Vec<String> = colos
        .iter()
        .filter_map(|c| {
            let (host, ms) = far_colo(c)?;
            let own = Region::ALL[c.region];
            Some(format!(
                "{} ({own}: its objects in {host}, {ms:.0} ms cold)",
                c.code
            ))
        })
        .collect();
    if far.is_empty() {
        "every colo's hosting region within a first request's budget".to_string()
    } else {
        format!(
            "colos whose hosting region is beyond a first request's {MAX_WAIT_MS} ms budget (their first IDs checked against its cold figure, not the nearest region's): {}",
            far.join(", ")
        )
    }
}

/// The service's split of `minters` over the hosting regions, as text.
fn minter_split(minters: u32) -> String {
    let pools = MinterPools::over_regions(minters);
    edgeleaf::minted::MINTER_REGIONS
        .iter()
        .map(|r| format!("{r} {}", pools.region_pool(*r).len()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() {
    let a = args();
    let colos = colos();
    let started = std::time::Instant::now();
    println!(
        "world: {} colos (where.durableobjects.live), {} isolates alive (mean life {:.0} s, {}-{} req/s each; 40% snowflake, 60% segment over {} tags), {} minters per design (regional: {}), staleness bound {} ms, tag step {}",
        colos.len(),
        a.isolates,
        a.lifetime_s,
        a.rates.0,
        a.rates.1,
        a.tags,
        a.minters,
        minter_split(a.minters),
        a.staleness_ms,
        TAG_STEP,
    );
    println!("{}", far_note(&colos));
    println!(
        "latency: the data's figure for a caller's first call to an object (cold), a third of it after (warm); objects: {WORK_MS} ms a request, one at a time, \"overloaded\" at {OVERLOAD_QUEUE} queued (soft limit {SOFT_LIMIT} req/s); a request waits at most {MAX_WAIT_MS} ms, then a typed 503"
    );
    let prices = Prices::read();
    let scenarios: Vec<Scenario> = [Scenario::Steady, Scenario::Storm, Scenario::Outage]
        .into_iter()
        .filter(|s| a.only.is_none_or(|o| o == *s))
        .collect();
    let mut results = Vec::new();
    for s in scenarios {
        // The two designs side by side, one thread each (2 cores).
        let (today, regional) = std::thread::scope(|scope| {
            let today = scope.spawn(|| Sim::new(a.clone(), &colos, false, s).run());
            let regional = Sim::new(a.clone(), &colos, true, s).run();
            (today.join().expect("today's run"), regional)
        });
        results.push((s, today, regional));
    }
    let mut violations = Vec::new();
    let mut today_fails = Vec::new();
    let mut duplicates = 0;
    let (mut p99_today, mut p99_regional, mut worst_ratio) = (0, 0, 0.0f64);
    let mut storm_root_peak = 0;
    let mut overloaded_regional = 0;
    for (s, today, regional) in &results {
        let window = match s {
            Scenario::Steady => format!("{} min after {} min warm-up", a.minutes, a.warmup_min),
            Scenario::Storm => format!(
                "{} isolates and every object replaced within 30 s; watched {} s",
                regional.alive_at_event, a.watch_s
            ),
            Scenario::Outage => format!(
                "{}'s objects unreachable for 60 s; watched {} s",
                region_name(regional.down_region.unwrap_or(5)),
                a.watch_s
            ),
        };
        println!();
        println!("### {} ({window})", s.name());
        println!();
        println!("| continent | nearest region p99 (cold) | today segment p50 / p99 / p999 | today snowflake p50 / p99 / p999 | regional segment p50 / p99 / p999 | regional snowflake p50 / p99 / p999 | regional p99 / nearest p99 |");
        println!("|---|---|---|---|---|---|---|");
        for (k, name) in CONTINENTS.iter().enumerate() {
            let f = |o: &Outcome, kind: usize| {
                let h = &o.report.first[k][kind];
                format!("{} / {} / {} ms", h.pct(50.0), h.pct(99.0), h.pct(99.9))
            };
            let near = regional.report.nearest[k].pct(99.0);
            let both = |o: &Outcome| {
                let mut h = o.report.first[k][0].clone();
                h.0.extend_from_slice(&o.report.first[k][1].0);
                h
            };
            let reg_near = &regional.report.first_near[k];
            let reg_p99 = reg_near.pct(99.0);
            let ratio = reg_p99 as f64 / near.max(1) as f64;
            let today_ratio = both(today).pct(99.0) as f64 / near.max(1) as f64;
            println!(
                "| {name} | {near} ms | {} | {} | {} | {} | {ratio:.2}x (today {today_ratio:.2}x) |",
                f(today, 0),
                f(today, 1),
                f(regional, 0),
                f(regional, 1),
            );
            if *s == Scenario::Steady && reg_near.n() > 0 {
                worst_ratio = worst_ratio.max(ratio);
                if ratio > TARGET_RATIO {
                    violations.push(format!(
                        "regional, steady: {name}'s cold first-ID p99 {reg_p99} ms is {ratio:.2}x its nearest region's {near} ms (target <= {TARGET_RATIO}x)"
                    ));
                }
                if today_ratio > TARGET_RATIO {
                    today_fails.push(format!(
                        "{name}'s cold first-ID p99 {:.0}x its nearest region's",
                        today_ratio
                    ));
                }
            }
        }
        let (far, far_cold) = (&regional.report.far_first, &regional.report.far_cold);
        if far.n() > 0 {
            let ratio = far.pct(99.0) as f64 / far_cold.pct(99.0).max(1) as f64;
            println!();
            println!(
                "Far colos (regional; both kinds): cold first-ID p50 / p99 / p999 {} / {} / {} ms over {} first IDs, {ratio:.2}x their hosting region's cold p99 {} ms (target <= {FAR_RATIO}x).",
                far.pct(50.0),
                far.pct(99.0),
                far.pct(99.9),
                far.n(),
                far_cold.pct(99.0),
            );
            if *s == Scenario::Steady && ratio > FAR_RATIO {
                violations.push(format!(
                    "regional, steady: the far colos' cold first-ID p99 {} ms is {ratio:.2}x their hosting region's {} ms (target <= {FAR_RATIO}x)",
                    far.pct(99.0),
                    far_cold.pct(99.0)
                ));
            }
        }
        if *s == Scenario::Outage {
            let first_down = |o: &Outcome| {
                let [seg, snow] = &o.report.first_down;
                format!(
                    "{} segments (p50 / p99 {} / {} ms), {} snowflakes ({} / {} ms)",
                    seg.n(),
                    seg.pct(50.0),
                    seg.pct(99.0),
                    snow.n(),
                    snow.pct(50.0),
                    snow.pct(99.0)
                )
            };
            println!();
            println!(
                "Cold isolates whose objects are in {} given their first ID in their first request while they were unreachable (regional: only a fallback can, to the root or to another region's minters): regional {}; today {}.",
                region_name(regional.down_region.unwrap_or(0)),
                first_down(regional),
                first_down(today)
            );
        }
        println!();
        println!("| design | requests | served | typed 503s | overloaded | root peak req/s (queue) | busiest objects: peak req/s (queue) | fallbacks (ranges from the root) | IDs skipped per hour | IDs handed back per hour (refused) | duplicates |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|");
        for (name, o) in [("today", today), ("regional", regional)] {
            let r = &o.report;
            let busiest: Vec<String> = r
                .busiest
                .iter()
                .map(|(n, p, q)| format!("{n} {p} ({q})"))
                .collect();
            println!(
                "| {name} | {} | {} | {} | {} | {} ({}) | {} | {} ({}; {} refused, buffer full) | {:.0} | {:.0} ({:.0}; {} retirements, {} of {} tails refused as followed, {} kept) | {} |",
                r.requests,
                r.served,
                r.refused,
                r.overloaded,
                r.root_peak,
                r.root_queue,
                busiest.join("; "),
                r.fallbacks,
                r.restarted,
                r.refused_full,
                o.skipped_per_hour,
                r.handed_back as f64 / o.hours,
                r.not_handed_back as f64 / o.hours,
                r.retired,
                r.backs_followed,
                r.backs,
                r.kept,
                o.duplicates,
            );
        }
        for (name, o) in [("today", today), ("regional", regional)] {
            let peaks: Vec<String> = o
                .minter_peaks
                .iter()
                .map(|(r, n, p)| format!("{r} ({n}) {p}"))
                .collect();
            println!(
                "Minters' peak req/s, the busiest of each region's (how many), {name}: {}.",
                peaks.join(", ")
            );
        }
        println!(
            "Minter calls answered without IDs, by code (a replaced minter's clock is behind the reservation it saved for up to 3 s: clock_moved_backwards): today {:?}, regional {:?}.",
            today.report.minter_empty, regional.report.minter_empty
        );
        for (name, o) in [("today", today), ("regional", regional)] {
            println!(
                "{}",
                rights_line(name, o, a.minters, rights_on(&a, &Layout::LEAF))
            );
        }
        print_bill(&prices, today, regional);
        // The checks, per design.
        for (name, o) in [("today", today), ("regional", regional)] {
            let r = &o.report;
            let mut fails = Vec::new();
            if o.duplicates > 0 {
                fails.push(format!("{} IDs served twice", o.duplicates));
            }
            if r.outside_rights > 0 {
                fails.push(format!(
                    "{} snowflake IDs of a rights holder's worker ID served outside every right lent to their isolate",
                    r.outside_rights
                ));
            }
            if r.rights_overlap > 0 {
                fails.push(format!(
                    "{} sequence values lent in a right while an earlier right held them",
                    r.rights_overlap
                ));
            }
            if r.refused_ranges > 0 {
                fails.push(format!(
                    "{} ranges refused as overlapping IDs loaded before",
                    r.refused_ranges
                ));
            }
            if r.stale > 0 {
                fails.push(format!(
                    "{} snowflake IDs served more than {} ms after their time unit",
                    r.stale, a.staleness_ms
                ));
            }
            if r.late > 0 {
                fails.push(format!("{} requests answered after their bound", r.late));
            }
            if r.obj_peak > SOFT_LIMIT {
                fails.push(format!(
                    "an object at {} req/s (soft limit {SOFT_LIMIT})",
                    r.obj_peak
                ));
            } else if *s != Scenario::Outage && r.obj_peak > SOFT_LIMIT / 2 {
                // The room the shipped minters are sized for: half the
                // limit in the steady hour and the storm.
                fails.push(format!(
                    "an object at {} req/s (target <= {}, half its soft limit)",
                    r.obj_peak,
                    SOFT_LIMIT / 2
                ));
            }
            if *s == Scenario::Steady && r.overloaded > 0 {
                fails.push(format!(
                    "{} overloaded answers in steady state",
                    r.overloaded
                ));
            }
            if *s == Scenario::Steady && !a.short {
                for (k, route) in ["segment", "snowflake"].iter().enumerate() {
                    let cost = route_objects_cost(&prices, r, k);
                    if cost > OBJECTS_TARGET_PER_MILLION {
                        fails.push(format!(
                            "the {route} route's objects at ${cost:.4} a million IDs (target <= ${OBJECTS_TARGET_PER_MILLION})"
                        ));
                    }
                }
            }
            if *s == Scenario::Storm && r.root_peak > ROOT_TARGET {
                fails.push(format!(
                    "a root at {} req/s in the storm (target <= {ROOT_TARGET})",
                    r.root_peak
                ));
            }
            let unserved: Vec<&str> = (0..9)
                .filter(|&g| colos.iter().any(|c| c.region == g) && !r.served_regions[g])
                .map(|g| region_name(g))
                .collect();
            if !unserved.is_empty() {
                fails.push(format!("regions served no ID: {}", unserved.join(", ")));
            }
            if *s == Scenario::Outage {
                let down = region_name(o.down_region.unwrap_or(0));
                for (kind, what, through) in [
                    (0, "segment", "the root"),
                    (1, "snowflake", "another region's minters"),
                ] {
                    if r.first_down[kind].n() == 0 {
                        fails.push(format!(
                            "no cold isolate whose objects are in {down} got its first {what} in its first request while they were unreachable (the fallback to {through})"
                        ));
                    }
                }
            }
            duplicates += o.duplicates;
            if name == "regional" {
                overloaded_regional += r.overloaded;
                for f in &fails {
                    violations.push(format!("regional, {}: {f}", s.name()));
                }
            } else {
                if o.duplicates > 0 {
                    violations.push(format!(
                        "today, {}: {} IDs served twice",
                        s.name(),
                        o.duplicates
                    ));
                }
                // The rights' promises are the IDs', whatever the design.
                if r.outside_rights + r.rights_overlap > 0 {
                    violations.push(format!(
                        "today, {}: {} snowflake IDs served outside their isolate's rights, {} sequence values lent twice",
                        s.name(),
                        r.outside_rights,
                        r.rights_overlap
                    ));
                }
                // Staleness is a promise of the IDs, whatever the design.
                if r.stale > 0 {
                    violations.push(format!(
                        "today, {}: {} snowflake IDs served more than {} ms after their time unit",
                        s.name(),
                        r.stale,
                        a.staleness_ms
                    ));
                }
                for f in fails {
                    today_fails.push(format!("{}: {f}", s.name()));
                }
            }
        }
        if *s == Scenario::Steady {
            let all = |o: &Outcome| {
                let mut h = Hist::default();
                for k in &o.report.first {
                    h.0.extend_from_slice(&k[0].0);
                    h.0.extend_from_slice(&k[1].0);
                }
                h.pct(99.0)
            };
            p99_today = all(today);
            p99_regional = all(regional);
        }
        if *s == Scenario::Storm {
            storm_root_peak = regional.report.root_peak;
        }
    }
    println!();
    println!(
        "Checks, today's design (shown, not enforced): {}",
        if today_fails.is_empty() {
            "all pass".to_string()
        } else {
            today_fails.join("; ")
        }
    );
    println!(
        "Checks, regional design (exit 1 on any): {}",
        if violations.is_empty() {
            "all pass".to_string()
        } else {
            format!("{} violations", violations.len())
        }
    );
    println!("(simulated in {:.1} s)", started.elapsed().as_secs_f64());
    for v in &violations {
        eprintln!("VIOLATION: {v}");
    }
    println!(
        "world: cold first-ID p99 today {p99_today} ms, regional {p99_regional} ms ({worst_ratio:.2}x nearest region); root peak {storm_root_peak} req/s; overloaded {overloaded_regional}; duplicates {duplicates}"
    );
    if !violations.is_empty() {
        std::process::exit(1);
    }
}

/// A root's memory of a request ID after a take-back or a close.
fn remember(remembered: &mut HashMap<String, Remembered>, key: String, change: RememberedChange) {
    match change {
        RememberedChange::Shorten(r) => {
            remembered.insert(key, r);
        }
        RememberedChange::Remove => {
            remembered.remove(&key);
        }
    }
}
