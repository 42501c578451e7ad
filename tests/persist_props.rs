//! A regional allocator's host writes its state exactly when the core says
//! (`BlockAllocator::persist_first` for each serve; always once a block's
//! answer is reported), and is killed at any point and restored from what
//! it last wrote (through serde), under block answers delivered late, twice
//! or never. Then no ID is handed on twice, and an ask leaves unwritten only
//! from an allocator that never handed an ID on (its first, sent in the
//! same call; a replacement only leaves that block a gap). Liveness: once
//! the answers are delivered, a serve hands a range on.

#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashMap;

use edgeleaf::block::{BlockAllocator, BlockAsk, Serve};
use edgeleaf::rand::SplitMix64;
use edgeleaf::segment::Allocation;
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

const TAG_STEP: u64 = 5;

#[derive(Debug, Clone)]
enum Op {
    Serve(u64),
    Deliver(usize),
    Duplicate(usize),
    Lose(usize),
    /// The platform kills the allocator: the next request reads storage.
    Kill,
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u64..30).prop_map(Op::Serve),
        4 => any::<usize>().prop_map(Op::Deliver),
        1 => any::<usize>().prop_map(Op::Duplicate),
        1 => any::<usize>().prop_map(Op::Lose),
        2 => Just(Op::Kill),
        1 => (0u64..10_000).prop_map(Op::Tick),
    ]
}

/// The tag's root: blocks above its `max_id`, the same block for an ask
/// sent again under its request ID.
#[derive(Default)]
struct Root {
    max_id: u64,
    asked: HashMap<String, Allocation>,
}

impl Root {
    fn lease(&mut self, ask: &BlockAsk) -> Allocation {
        if let Some(b) = self.asked.get(&ask.request_id) {
            return *b;
        }
        let step = ask.step.unwrap_or(TAG_STEP);
        let b = Allocation::new(self.max_id + 1, self.max_id + step).unwrap();
        self.max_id = b.end;
        self.asked.insert(ask.request_id.clone(), b);
        b
    }
}

struct Host {
    memory: Option<BlockAllocator>,
    stored: Option<String>,
    root: Root,
    net: Vec<BlockAsk>,
    handed: Vec<Allocation>,
    now: u64,
    rand: SplitMix64,
}

impl Host {
    fn allocator(&mut self) -> &mut BlockAllocator {
        let stored = self.stored.as_deref();
        self.memory.get_or_insert_with(|| {
            stored.map_or_else(BlockAllocator::new, |s| serde_json::from_str(s).unwrap())
        })
    }

    fn write(&mut self) {
        self.stored = self
            .memory
            .as_ref()
            .map(|a| serde_json::to_string(a).unwrap());
    }

    fn serve(&mut self, step: u64) -> Result<Option<Allocation>, String> {
        let (now, mut rand) = (self.now, self.rand);
        let a = self.allocator();
        let next = a.serve(step, now, &mut rand);
        let persist = a.persist_first(&next);
        self.rand = rand;
        if persist {
            self.write();
        }
        let (range, ask) = match next {
            Serve::Range { range, ask, .. } => (Some(range), ask),
            Serve::Load(ask) => (None, Some(ask)),
            Serve::Wait => (None, None),
        };
        if let Some(r) = range {
            if let Some(prev) = self
                .handed
                .iter()
                .find(|h| h.start <= r.end && r.start <= h.end)
            {
                return Err(format!("{r:?} handed on again (after {prev:?})"));
            }
            self.handed.push(r);
        }
        if let Some(ask) = ask {
            if !persist && !self.handed.is_empty() {
                return Err(format!("{ask:?} sent unwritten after IDs were handed on"));
            }
            self.net.push(ask);
        }
        Ok(range)
    }

    fn deliver(&mut self, i: usize, keep: bool) {
        let ask = if keep {
            self.net[i].clone()
        } else {
            self.net.remove(i)
        };
        let block = self.root.lease(&ask);
        let now = self.now;
        let a = self.allocator();
        if a.loaded(&ask.request_id, block, TAG_STEP, now).is_err() {
            a.load_failed(&ask.request_id);
        }
        // The host writes every answer it reports.
        self.write();
    }
}

proptest! {
    #![proptest_config(props::config(300))]

    #[test]
    fn written_when_the_core_says_and_never_handed_on_twice(
        ops in prop::collection::vec(op(), 1..120),
        seed in any::<u64>(),
    ) {
        let mut h = Host {
            memory: None,
            stored: None,
            root: Root::default(),
            net: Vec::new(),
            handed: Vec::new(),
            now: 0,
            rand: SplitMix64::new(seed),
        };
        for op in ops {
            match op {
                Op::Serve(step) => { h.serve(step).map_err(TestCaseError::fail)?; }
                Op::Deliver(i) if !h.net.is_empty() => h.deliver(i % h.net.len(), false),
                Op::Duplicate(i) if !h.net.is_empty() => h.deliver(i % h.net.len(), true),
                Op::Lose(i) if !h.net.is_empty() => { h.net.remove(i % h.net.len()); }
                Op::Kill => h.memory = None,
                Op::Tick(ms) => h.now += ms,
                _ => {}
            }
        }
        // Liveness: with its answers delivered (and a lost ask's take-over
        // due), the allocator hands a range on.
        let mut served = false;
        for _ in 0..20 {
            h.now += 60_000;
            if h.serve(1).map_err(TestCaseError::fail)?.is_some() {
                served = true;
                break;
            }
            while !h.net.is_empty() {
                h.deliver(0, false);
            }
        }
        prop_assert!(served, "no range handed on");
    }
}
