/// A fault planted in the segment protocol's hosts or root, to show a
/// property fail: `block_props` plants them in random plans,
/// `model_segment` in its model (one list, so that each finds every one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    None,
    /// The root takes a tail back whatever followed it.
    TakeBackWithoutCondition,
    /// The root takes a tail back but keeps the range remembered whole.
    KeepRemembered,
    /// The root finds the remembered range by request ID alone, whoever
    /// hands the tail back.
    RememberedByRequestIdOnly,
    /// An allocator's host answers a range although its write failed.
    ServeBeforePersist,
    /// An allocator's host hands tails back although its write failed.
    HandBackBeforePersist,
    /// An allocator serves a tail again although the root took it back.
    KeepTakenTail,
    /// An allocator serves a tail again on any refusal, even one that does
    /// not prove the root never took it (a second copy of a hand-back).
    KeepUnprovenRefusal,
}
