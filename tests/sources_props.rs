//! An isolate's client of one tag (`TagSources`), fed by the tag's root and
//! by two regions' allocators (each serving ranges of blocks it leased from
//! the root), driven as the isolate drives it: requests of either region or
//! of none (no allocators), loads answered late, in any order, by their
//! region's allocator, by the root when the allocator missed (a fallback),
//! or failed; time passing. Properties:
//! - no ID is handed out twice;
//! - the drain order: a request that comes back short (it must wait or
//!   load) leaves no ID the root brought unserved;
//! - a request waits only while a load its driver asked for is out (a
//!   fallback's answer ends its region's load), or one was taken over;
//! - a tag found monotonic polls no driver again;
//! - liveness: once the loads are answered, a request is served.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashSet;

use edgeleaf::code::ErrorCode;
use edgeleaf::driver::SegmentStep;
use edgeleaf::region::Region;
use edgeleaf::segment::Allocation;
use edgeleaf::sources::TagSources;
use edgeleaf::tag::TagRecord;
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

/// A load lost for this long is taken over (`wait::DEFAULT_TAKE_OVER_MS`).
const TAKE_OVER_MS: u64 = 3_000;

#[derive(Debug, Clone)]
enum Op {
    /// A request of region `r` (of two; 2: none) for `count` IDs.
    Poll {
        r: usize,
        count: usize,
    },
    /// Answers the `pick`-th load out.
    Deliver {
        pick: usize,
        how: How,
    },
    Tick(u64),
}

#[derive(Debug, Clone, Copy)]
enum How {
    /// By the request's region's allocator (by the root without one).
    Region,
    /// By the root, the allocator having missed.
    Fallback,
    /// Failed (the root or allocator unreachable).
    Fail,
    /// Refused: the tag is monotonic.
    Monotonic,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..3, 1usize..30).prop_map(|(r, count)| Op::Poll { r, count }),
        6 => (any::<usize>(), prop_oneof![
            6 => Just(How::Region), 3 => Just(How::Fallback), 2 => Just(How::Fail),
            1 => Just(How::Monotonic),
        ]).prop_map(|(pick, how)| Op::Deliver { pick, how }),
        1 => (0u64..5_000).prop_map(Op::Tick),
    ]
}

/// A region's allocator: ranges of its current block, a new block from the
/// root when it runs out.
#[derive(Default)]
struct Allocator {
    block: Option<(u64, u64)>,
}

struct World {
    client: TagSources,
    regions: [Region; 2],
    root: TagRecord,
    allocators: [Allocator; 2],
    /// Loads out: the request's region and the step.
    out: Vec<(Option<Region>, u64, u64)>,
    handed: HashSet<u64>,
    /// Ranges the root answered into the client directly (fallbacks, or no
    /// allocators), and how many of their IDs were handed out.
    from_root: Vec<Allocation>,
    root_loaded: u64,
    root_handed: u64,
    now: u64,
    monotonic: bool,
}

impl World {
    fn root_range(&mut self, step: u64) -> Allocation {
        let (a, next) = self.root.allocate(Some(step), self.now).unwrap();
        self.root = next;
        a
    }

    fn allocator_range(&mut self, i: usize, step: u64) -> Allocation {
        let (lo, hi) = match self.allocators[i].block {
            Some(b) => b,
            None => {
                let b = self.root_range(step.max(50));
                (b.start, b.end)
            }
        };
        let end = (lo + step - 1).min(hi);
        self.allocators[i].block = (end < hi).then_some((end + 1, hi));
        Allocation::new(lo, end).unwrap()
    }

    fn poll(&mut self, region: Option<Region>, count: usize) -> Result<(), TestCaseError> {
        let mut out = vec![0u64; count];
        let Some(p) = self.client.poll(region, self.now, &mut out) else {
            prop_assert!(self.monotonic, "a plain tag's poll answered monotonic");
            return Ok(());
        };
        prop_assert!(!self.monotonic, "a monotonic tag's driver was polled");
        for id in &out[..p.filled] {
            prop_assert!(self.handed.insert(*id), "{} handed out twice", id);
            if self
                .from_root
                .iter()
                .any(|a| a.start <= *id && *id <= a.end)
            {
                self.root_handed += 1;
            }
        }
        if p.filled < count {
            prop_assert_eq!(
                self.root_loaded,
                self.root_handed,
                "a short request left IDs the root brought"
            );
        }
        if p.next == SegmentStep::Wait {
            let asked = region;
            let out_for_it = self
                .out
                .iter()
                .any(|(r, _, at)| *r == asked && self.now.saturating_sub(*at) < TAKE_OVER_MS);
            prop_assert!(out_for_it, "waits with no load out for {:?}", asked);
        }
        if let Some(step) = p.next.load() {
            self.out.push((region, step, self.now));
        }
        Ok(())
    }

    fn deliver(&mut self, pick: usize, how: How) {
        let (region, step, _) = self.out.remove(pick);
        let answer = match (how, region) {
            (How::Region, Some(r)) => {
                let i = self.regions.iter().position(|x| *x == r).unwrap();
                Ok((self.allocator_range(i, step), Some(r)))
            }
            (How::Region | How::Fallback, _) => Ok((self.root_range(step), None)),
            (How::Fail, _) => Err(ErrorCode::StoreUnavailable),
            (How::Monotonic, _) => Err(ErrorCode::MonotonicTag),
        };
        let loaded = answer.and_then(|(alloc, from)| {
            self.client
                .loaded(region, from, alloc, self.now)
                .map_err(|e| e.error_code())?;
            if from.is_none() {
                self.from_root.push(alloc);
                self.root_loaded += alloc.end - alloc.start + 1;
            }
            Ok(())
        });
        if let Err(code) = loaded {
            let forget = self.client.load_failed(region, code);
            assert!(!forget, "only not_found forgets");
            self.monotonic |= code == ErrorCode::MonotonicTag;
        }
    }
}

proptest! {
    #![proptest_config(props::config(500))]

    #[test]
    fn two_sources_never_hand_an_id_out_twice(ops in prop::collection::vec(op(), 1..150)) {
        let mut w = World {
            client: TagSources::new(),
            regions: [Region::ALL[0], Region::ALL[1]],
            root: TagRecord::new("t", 1, 0, "", 0).unwrap(),
            allocators: Default::default(),
            out: Vec::new(),
            handed: HashSet::new(),
            from_root: Vec::new(),
            root_loaded: 0,
            root_handed: 0,
            now: 0,
            monotonic: false,
        };
        for op in ops {
            match op {
                Op::Poll { r, count } => {
                    let region = w.regions.get(r).copied();
                    w.poll(region, count)?;
                }
                Op::Deliver { pick, how } if !w.out.is_empty() => {
                    let pick = pick % w.out.len();
                    w.deliver(pick, how);
                }
                Op::Deliver { .. } => {}
                Op::Tick(ms) => w.now += ms,
            }
        }
        // Liveness: answered loads serve every region's requests.
        if !w.monotonic {
            for region in [Some(w.regions[0]), Some(w.regions[1]), None] {
                let before = w.handed.len();
                for _ in 0..10 {
                    w.poll(region, 3)?;
                    while !w.out.is_empty() {
                        w.deliver(0, How::Region);
                    }
                    if w.handed.len() >= before + 3 {
                        break;
                    }
                    w.now += TAKE_OVER_MS;
                }
                prop_assert!(w.handed.len() >= before + 3, "{:?} not served", region);
            }
        }
    }
}
