//! The regional allocators' rule (src/block.rs) with the root's (src/tag.rs)
//! over one tag: see the properties below.

use edgeleaf::block::{BlockAllocator, Serve};
use edgeleaf::rand::SplitMix64;

#[test]
fn an_allocator_state_survives_serde() {
    let mut rand = SplitMix64::new(1);
    let mut a = BlockAllocator::new();
    let Serve::Load(ask) = a.serve(5, 0, &mut rand) else {
        panic!()
    };
    let saved = serde_json::to_string(&a).unwrap();
    let mut restored: BlockAllocator = serde_json::from_str(&saved).unwrap();
    assert_eq!(restored.pending(), Some(&ask));
    assert_eq!(restored.serve(5, 1, &mut rand), Serve::Load(ask));
}
