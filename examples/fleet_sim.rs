//! A fleet of Worker isolates serving snowflake IDs, simulated over the core's
//! real `Registry`, `SnowflakeHolder` and `MintedBuffer`: isolates arrive,
//! serve requests at their own rates and vanish without a word (as isolates
//! do), with clocks skewed within the registry's bound, while minters restart
//! from their saved state. The same scenario runs twice — every isolate
//! leasing its own worker ID (before), and isolates serving batches of a
//! bounded set of minters (now) — and prints both side by side.
//!
//! ```text
//! cargo run --release --example fleet_sim -- [--isolates 10000] [--minutes 60]
//!     [--minters 16] [--layout leaf|jsSafe] [--seed 1] [--short]
//! ```
//! `--short` (used by `make test`) is 1,000 isolates for 10 minutes. The exit
//! status is 1 if any ID was served twice.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use edgeleaf::{
    batch_ranges, minter_step, Grant, GrantRequest, HolderConfig, HolderNext, HolderState, Layout,
    LeaseSecret, MintConfig, MintStep, MintedBuffer, MinterStep, Registry, RegistryConfig, Renewal,
    SlotStatus, SnowflakeHolder, SplitMix64, StalenessHistogram, DEFAULT_STALENESS_MS,
};

const T0: u64 = 1_767_225_600_000;

struct Args {
    isolates: u64,
    minutes: u64,
    minters: u32,
    layout: Layout,
    seed: u64,
    /// Mean isolate lifetime, s.
    lifetime_s: f64,
    /// Request rates per isolate are log-uniform in this range, req/s.
    rates: (f64, f64),
}

fn args() -> Args {
    let mut a = Args {
        isolates: 10_000,
        minutes: 60,
        minters: 16,
        layout: Layout::LEAF,
        seed: 1,
        lifetime_s: 900.0,
        rates: (0.2, 20.0),
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
                a.isolates = 1_000;
                a.minutes = 10;
                a.lifetime_s = 300.0;
                i += 1;
                continue;
            }
            "--isolates" => a.isolates = number(i),
            "--minutes" => a.minutes = number(i),
            "--minters" => a.minters = u32::try_from(number(i)).unwrap_or(u32::MAX),
            "--seed" => a.seed = number(i),
            "--layout" => {
                a.layout = match value(i).as_str() {
                    "leaf" => Layout::LEAF,
                    "jsSafe" => Layout::JS_SAFE,
                    other => {
                        eprintln!("--layout: expected leaf or jsSafe, found {other:?}");
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

/// xorshift64*: the simulation's own randomness, seeded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn exp_ms(&mut self, mean_ms: f64) -> u64 {
        (-mean_ms * (1.0 - self.unit()).ln()).max(1.0) as u64
    }
    fn offset(&mut self, bound: i64) -> i64 {
        i64::try_from(self.below(2 * bound as u64 + 1)).unwrap_or(0) - bound
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrive(usize),
    Request(usize),
    Vanish(usize),
    /// A batch answer reaches isolate i: (isolate, index into `answers`).
    Answer(usize, usize),
    RestartMinter(u32),
    Sample,
}

struct Isolate {
    alive: bool,
    offset: i64,
    rate: f64,
    /// Before: its own worker ID.
    holder: Option<SnowflakeHolder<SplitMix64>>,
    /// Now: minted batches.
    buffer: Option<MintedBuffer>,
    /// Requests waiting for a batch: when each started.
    waiting: Vec<u64>,
    tries: u32,
}

struct Minter {
    holder: SnowflakeHolder<SplitMix64>,
    saved: HolderState,
    offset: i64,
    /// A Durable Object runs one request at a time: busy until then.
    busy_until: u64,
}

#[derive(Default)]
struct Report {
    requests: u64,
    served: u64,
    refused: u64,
    waited: u64,
    wait_ms: StalenessHistogram,
    staleness: StalenessHistogram,
    max_in_use: u32,
    minter_calls: u64,
    dropped: u64,
    duplicates: u64,
}

struct Sim {
    args: Args,
    minted_mode: bool,
    /// The scenario (arrivals, rates, lifetimes, requests): the same in both runs.
    rng: Rng,
    /// Latencies and minter restarts.
    net: Rng,
    now: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    reg: Registry,
    isolates: Vec<Isolate>,
    minters: Vec<Minter>,
    answers: Vec<Option<Vec<(u64, u64)>>>,
    ids: Vec<u64>,
    report: Report,
}

const LATENCY_MS: (u64, u64) = (2, 40);

fn holder_config(reserve: bool) -> HolderConfig {
    HolderConfig {
        lease_again: true,
        reserve_ms: if reserve { 3_000 } else { 0 },
        ..HolderConfig::default()
    }
}

impl Sim {
    fn new(args: Args, minted_mode: bool) -> Sim {
        let mut cfg = RegistryConfig::new(&args.layout);
        cfg.minters = if minted_mode { args.minters } else { 0 };
        let reg = Registry::new(cfg).expect("registry config");
        let rng = Rng(args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut net = Rng(args.seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        let minters = (0..cfg.minters)
            .map(|i| Minter {
                holder: SnowflakeHolder::with_rand(holder_config(true), SplitMix64::new(i.into()))
                    .expect("holder config"),
                saved: HolderState::default(),
                offset: net.offset(300),
                busy_until: 0,
            })
            .collect();
        let mut sim = Sim {
            args,
            minted_mode,
            rng,
            net,
            now: T0,
            queue: BinaryHeap::new(),
            seq: 0,
            reg,
            isolates: Vec::new(),
            minters,
            answers: Vec::new(),
            ids: Vec::new(),
            report: Report::default(),
        };
        let span = sim.args.minutes * 60_000;
        for i in 0..sim.args.isolates as usize {
            let at = T0 + sim.rng.below(span);
            sim.at(at, Event::Arrive(i));
        }
        for m in 0..cfg.minters {
            let at = T0 + sim.net.exp_ms(1_200_000.0);
            sim.at(at, Event::RestartMinter(m));
        }
        sim.at(T0, Event::Sample);
        sim
    }

    fn at(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, e)));
    }

    fn latency(&mut self) -> u64 {
        LATENCY_MS.0 + self.net.below(LATENCY_MS.1 - LATENCY_MS.0)
    }

    fn run(mut self) -> Report {
        let end = T0 + self.args.minutes * 60_000;
        while let Some(Reverse((t, _, e))) = self.queue.pop() {
            if t > end {
                break;
            }
            self.now = t;
            match e {
                Event::Arrive(i) => self.arrive(i),
                Event::Request(i) => self.request(i),
                Event::Vanish(i) => {
                    // No goodbye: its lease (if any) lapses on its own.
                    let iso = &mut self.isolates[i];
                    iso.alive = false;
                    iso.holder = None;
                    iso.buffer = None;
                    self.report.refused += iso.waiting.len() as u64;
                    iso.waiting.clear();
                }
                Event::Answer(i, k) => self.answer(i, k),
                Event::RestartMinter(m) => {
                    let now = self.now;
                    let mm = &mut self.minters[m as usize];
                    let clock = now.saturating_add_signed(mm.offset);
                    if let Ok(h) = SnowflakeHolder::restore(
                        holder_config(true),
                        SplitMix64::new(now),
                        mm.saved,
                        clock,
                    ) {
                        mm.holder = h;
                    }
                    let next = now + self.net.exp_ms(1_200_000.0);
                    self.at(next, Event::RestartMinter(m));
                }
                Event::Sample => {
                    let now = self.now;
                    let in_use = self
                        .reg
                        .slots()
                        .filter(|s| self.reg.status(s, now) != SlotStatus::Free)
                        .count();
                    let in_use = u32::try_from(in_use).unwrap_or(u32::MAX);
                    self.report.max_in_use = self.report.max_in_use.max(in_use);
                    self.at(now + 1_000, Event::Sample);
                }
            }
        }
        let mut report = self.report;
        for iso in &self.isolates {
            if let Some(b) = &iso.buffer {
                report.staleness.merge(b.staleness());
                report.dropped += b.dropped();
            }
        }
        let mut ids = self.ids;
        ids.sort_unstable();
        report.duplicates = ids.windows(2).filter(|w| w[0] == w[1]).count() as u64;
        report
    }

    fn arrive(&mut self, i: usize) {
        while self.isolates.len() <= i {
            self.isolates.push(Isolate {
                alive: false,
                offset: 0,
                rate: 0.0,
                holder: None,
                buffer: None,
                waiting: Vec::new(),
                tries: 0,
            });
        }
        let (lo, hi) = self.args.rates;
        let rate = (lo.ln() + (hi.ln() - lo.ln()) * self.rng.unit()).exp();
        let offset = self.rng.offset(500);
        let home = self.rng.next();
        let iso = &mut self.isolates[i];
        iso.alive = true;
        iso.offset = offset;
        iso.rate = rate;
        if self.minted_mode {
            let config = MintConfig::new(self.args.minters, home);
            iso.buffer = Some(MintedBuffer::new(self.args.layout, config).expect("mint config"));
        } else {
            iso.holder = Some(
                SnowflakeHolder::with_rand(holder_config(false), SplitMix64::new(home))
                    .expect("holder config"),
            );
        }
        let life = self.rng.exp_ms(self.args.lifetime_s * 1_000.0);
        let first = self.rng.exp_ms(1_000.0 / rate);
        let now = self.now;
        self.at(now + life, Event::Vanish(i));
        self.at(now + first, Event::Request(i));
    }

    fn request(&mut self, i: usize) {
        if !self.isolates[i].alive {
            return;
        }
        self.report.requests += 1;
        if self.minted_mode {
            let now = self.now;
            self.isolates[i].waiting.push(now);
            self.serve_minted(i);
        } else {
            self.serve_leased(i);
        }
        let next = self.now + self.rng.exp_ms(1_000.0 / self.isolates[i].rate);
        self.at(next, Event::Request(i));
    }

    /// Before: the isolate mints under its own lease (leasing it first).
    fn serve_leased(&mut self, i: usize) {
        let now = self.now;
        let layout = self.args.layout;
        let clock = now.saturating_add_signed(self.isolates[i].offset);
        let mut out = [0u64; 1];
        let mut waited = 0;
        for _ in 0..4 {
            let holder = self.isolates[i].holder.as_mut().expect("alive");
            let Ok(poll) = holder.poll(clock + waited, &mut out) else {
                break;
            };
            if let Some(r) = poll.renew {
                renew(&mut self.reg, holder, r, now, clock, layout);
            }
            match poll.next {
                HolderNext::Done => {
                    self.ids.push(out[0]);
                    self.report.served += 1;
                    self.report.staleness.record(0, 1);
                    if waited > 0 {
                        self.report.waited += 1;
                        self.report.wait_ms.record(waited, 1);
                    }
                    return;
                }
                HolderNext::Lease(ask) => {
                    waited += LATENCY_MS.1 / 2;
                    let key = format!("isolate-{i}");
                    let secret = LeaseSecret::from_random([(i % 251) as u8; 16]);
                    match self
                        .reg
                        .lease(GrantRequest::from_ask(&ask, "", &key, secret), now)
                    {
                        Ok(l) => {
                            let _ =
                                holder.granted(Grant::from_lease(&l, Some(secret), layout), clock);
                        }
                        Err(e) => {
                            holder.lease_failed(Some(e.error_code()), clock);
                            break;
                        }
                    }
                }
                HolderNext::LeaseInFlight => break,
                HolderNext::RetryAfter { ms, .. } => waited += ms,
            }
        }
        self.report.refused += 1;
    }

    /// Now: serve the waiting requests from the buffer; fetch as it says.
    fn serve_minted(&mut self, i: usize) {
        let now = self.now;
        let clock = now.saturating_add_signed(self.isolates[i].offset);
        let mut out = [0u64; 1];
        let mut ask = None;
        while let Some(&since) = self.isolates[i].waiting.first() {
            let buf = self.isolates[i].buffer.as_mut().expect("alive");
            let poll = buf.poll(clock, &mut out);
            match poll.next {
                MintStep::Done { prefetch } => ask = ask.or(prefetch),
                MintStep::FetchNow(a) => ask = Some(a),
                MintStep::Wait => {}
            }
            if poll.filled == 0 {
                break;
            }
            self.isolates[i].waiting.remove(0);
            self.ids.push(out[0]);
            self.report.served += 1;
            if now > since {
                self.report.waited += 1;
                self.report.wait_ms.record(now - since, 1);
            }
        }
        if let Some(ask) = ask {
            self.report.minter_calls += 1;
            let latency = self.latency();
            let (ids, done) = self.mint(ask.minter, ask.count as usize, now + latency / 2);
            let ranges = (!ids.is_empty()).then(|| batch_ranges(&self.args.layout, &ids));
            self.answers.push(ranges);
            let k = self.answers.len() - 1;
            self.at(done + latency / 2, Event::Answer(i, k));
        }
    }

    fn answer(&mut self, i: usize, k: usize) {
        let ranges = self.answers[k].take();
        let iso = &mut self.isolates[i];
        if !iso.alive {
            return;
        }
        let clock = self.now.saturating_add_signed(iso.offset);
        let buf = iso.buffer.as_mut().expect("alive");
        match ranges {
            Some(r) => {
                buf.fetched(&r, clock).expect("a minter's batch is valid");
                iso.tries = 0;
            }
            None => {
                buf.fetch_failed();
                iso.tries += 1;
                if iso.tries >= MintConfig::new(self.args.minters, 0).tries_per_request() {
                    // Every minter tried failed: refuse what waits.
                    self.report.refused += iso.waiting.len() as u64;
                    iso.waiting.clear();
                    iso.tries = 0;
                }
            }
        }
        self.serve_minted(i);
    }

    /// A minter's loop, as its Durable Object runs it: the IDs, and when it
    /// answered.
    fn mint(&mut self, index: u32, count: usize, arrives: u64) -> (Vec<u64>, u64) {
        let layout = self.args.layout;
        let m = &mut self.minters[index as usize];
        let now = arrives.max(m.busy_until);
        let clock = now.saturating_add_signed(m.offset);
        let mut out = vec![0u64; count];
        let mut filled = 0;
        let mut leased = false;
        for _ in 0..64 {
            let at = clock;
            if m.holder.save_due_in(at) == Some(0) {
                if let Some(state) = m.holder.save_request(at) {
                    m.saved = state;
                    m.holder.saved(&state);
                }
            }
            let Ok(poll) = m.holder.poll(at, &mut out[filled..]) else {
                break;
            };
            filled += poll.filled;
            if let Some(r) = poll.renew {
                renew(&mut self.reg, &mut m.holder, r, now, at, layout);
            }
            // As the Durable Object: it never waits, and leases at most once.
            match minter_step(filled, poll.next, leased) {
                MinterStep::Answer | MinterStep::Unavailable { .. } => break,
                MinterStep::Lease(ask) => {
                    leased = true;
                    let secret = LeaseSecret::from_random([(index % 251) as u8; 16]);
                    match self
                        .reg
                        .lease_minter(index, ask.node_now_ms, ask.previous, secret, now)
                    {
                        Ok(l) => {
                            let _ = m
                                .holder
                                .granted(Grant::from_lease(&l, Some(secret), layout), at);
                        }
                        Err(e) => {
                            m.holder.lease_failed(Some(e.error_code()), at);
                            break;
                        }
                    }
                }
            }
        }
        m.busy_until = now;
        out.truncate(filled);
        (out, now)
    }
}

/// A holder's renewal, answered by the registry at once (`now`: the
/// registry's clock; `clock`: the holder's).
fn renew(
    reg: &mut Registry,
    holder: &mut SnowflakeHolder<SplitMix64>,
    r: Renewal,
    now: u64,
    clock: u64,
    layout: Layout,
) {
    match reg.renew("", &r, now) {
        Ok(l) => holder.renewed(Grant::from_lease(&l, None, layout), clock),
        Err(e) => holder.renewal_failed(r.claim.generation, Some(e.error_code()), clock),
    }
}

fn row(name: &str, r: &Report) -> String {
    let pct = |n: u64| 100.0 * n as f64 / r.requests.max(1) as f64;
    format!(
        "| {name} | {} | {} | {} ({:.2}%) | {} ({:.2}%), p99 {} ms | {} | {} / {} / {} ms | {:.1} | {} |",
        r.max_in_use,
        r.requests,
        r.refused,
        pct(r.refused),
        r.waited,
        pct(r.waited),
        r.wait_ms.percentile(99),
        r.duplicates,
        r.staleness.percentile(50),
        r.staleness.percentile(99),
        r.staleness.max(),
        1000.0 * r.minter_calls as f64 / r.served.max(1) as f64,
        r.dropped,
    )
}

fn main() {
    let a = args();
    let describe = format!(
        "{} isolates over {} simulated minutes (mean life {:.0} s, {:.1}-{:.0} req/s each), layout {}-bit worker IDs, staleness bound {} ms",
        a.isolates,
        a.minutes,
        a.lifetime_s,
        a.rates.0,
        a.rates.1,
        a.layout.worker_bits(),
        DEFAULT_STALENESS_MS,
    );
    let started = std::time::Instant::now();
    let before = Sim::new(args(), false).run();
    let minters = a.minters;
    let now = Sim::new(args(), true).run();
    println!("{describe}");
    println!("| design | worker IDs in use (max) | requests | refused | waited on a lease/minter | duplicates | staleness p50 / p99 / max | minter calls per 1,000 IDs | IDs dropped stale |");
    println!("|---|---|---|---|---|---|---|---|---|");
    println!("{}", row("per-isolate leasing", &before));
    println!("{}", row(&format!("{minters} minters"), &now));
    println!("(simulated in {:.1} s)", started.elapsed().as_secs_f64());
    if before.duplicates + now.duplicates > 0 {
        eprintln!("DUPLICATES: an ID was served twice");
        std::process::exit(1);
    }
}
