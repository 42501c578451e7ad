//! How long a request may wait, as property tests: whatever its clock does
//! (stand still, step back, step forward), a request's granted waits never
//! add up past its budget, and it is never refused while waits it asked for
//! and the time its clock showed both stay within the budget; a minter never
//! waits and leases at most once; something in flight is taken over after
//! its time or a large clock step, and never before; a store that says it is
//! overloaded is never called again within a request, a retryable failure is
//! called again only after a jittered, growing backoff that the budget holds
//! with room for the call, at most `MAX_CALL_ATTEMPTS` calls in all — and it
//! is called again whenever that fits (liveness).

#![cfg(not(target_arch = "wasm32"))]

use edgeleaf::{
    holder::HolderNext, holder::LeaseAsk, minted::minter_step, minted::MinterStep, snowflake::Wait,
    wait::after_call_failed, wait::after_told_to_wait, wait::retry_backoff_ceiling_ms,
    wait::AfterFailure, wait::CallFailure, wait::InFlight, wait::WaitBudget,
    wait::MAX_BACKGROUND_WAIT_MS, wait::MAX_CALL_ATTEMPTS, wait::MAX_WAIT_MS, wait::MIN_CALL_MS,
    wait::RETRY_AFTER_MS,
};
use proptest::prelude::*;

#[path = "support/props.rs"]
mod props;

const T0: u64 = 1_735_689_600_000;

proptest! {
    #![proptest_config(props::config(2_000))]

    #[test]
    fn granted_waits_never_exceed_the_budget(
        steps in prop::collection::vec((-70_000i64..70_000, 0u64..400), 1..200),
    ) {
        let mut budget = WaitBudget::new(T0, MAX_WAIT_MS);
        let mut granted = 0u64;
        let mut clock = T0;
        for (step, ask) in steps {
            clock = clock.saturating_add_signed(step);
            let spent = budget.spent_ms(clock);
            if budget.wait(clock, ask) {
                granted += ask;
                prop_assert!(spent + ask <= MAX_WAIT_MS);
            } else {
                prop_assert!(spent + ask > MAX_WAIT_MS, "refused with {} spent, {} asked", spent, ask);
            }
            prop_assert!(granted <= MAX_WAIT_MS, "granted {} ms", granted);
            // Time the clock shows passed counts too.
            prop_assert!(budget.spent_ms(clock) >= clock.saturating_sub(T0));
        }
    }

    #[test]
    fn a_clock_moving_with_the_waits_ends_the_request_within_the_budget(asks in prop::collection::vec(1u64..50, 1..500)) {
        let mut budget = WaitBudget::new(T0, MAX_WAIT_MS);
        let mut clock = T0;
        for ask in asks {
            if !budget.wait(clock, ask) {
                break;
            }
            clock += ask;
        }
        prop_assert!(clock - T0 <= MAX_WAIT_MS);
    }

    #[test]
    fn a_minter_never_waits_and_leases_at_most_once(
        filled in 0usize..3, leased in any::<bool>(), ms in 0u64..120_000, which in 0u8..6,
    ) {
        let ask = LeaseAsk { node_now_ms: T0, previous: None };
        let next = match which {
            0 => HolderNext::Done,
            1 => HolderNext::Lease(ask),
            2 => HolderNext::LeaseInFlight,
            3 => HolderNext::RetryAfter { ms, reason: Wait::SequenceExhausted },
            4 => HolderNext::RetryAfter { ms, reason: Wait::ClockBehind },
            _ => HolderNext::RetryAfter { ms, reason: Wait::Saving },
        };
        match minter_step(filled, next, leased) {
            MinterStep::Answer => prop_assert!(filled > 0 || next == HolderNext::Done),
            MinterStep::Lease(_) => prop_assert!(!leased && filled == 0),
            MinterStep::Unavailable { retry_after_ms, .. } => {
                prop_assert_eq!(filled, 0, "IDs minted are answered");
                prop_assert!(retry_after_ms >= 1);
                if let HolderNext::RetryAfter { ms, .. } = next {
                    prop_assert_eq!(retry_after_ms, ms.max(1), "the holder's wait is the Retry-After");
                }
            }
        }
    }

    #[test]
    fn in_flight_is_taken_over_exactly_when_presumed_lost(
        sent_at in 0u64..1_000_000, later in -100_000i64..100_000, take_over_ms in 1u64..60_000,
    ) {
        let mut f = InFlight::default();
        prop_assert!(f.claim(T0 + sent_at, take_over_ms));
        let now = (T0 + sent_at).saturating_add_signed(later);
        prop_assert_eq!(f.claim(now, take_over_ms), later.unsigned_abs() >= take_over_ms);
    }

    #[test]
    fn a_failed_call_is_called_again_only_when_it_may_mend_and_fits(
        failure in prop_oneof![Just(CallFailure::Overloaded), Just(CallFailure::Retryable), Just(CallFailure::Other)],
        repeatable in any::<bool>(),
        attempts in 1u32..8,
        remaining in prop_oneof![0u64..200, 0u64..=MAX_WAIT_MS],
        rand in any::<u64>(),
    ) {
        match after_call_failed(failure, repeatable, attempts, remaining, rand) {
            AfterFailure::Retry { after_ms } => {
                prop_assert_eq!(failure, CallFailure::Retryable, "only a retryable failure is called again");
                prop_assert!(repeatable, "a call that may not run twice is never called again");
                prop_assert!(attempts < MAX_CALL_ATTEMPTS);
                let ceiling = retry_backoff_ceiling_ms(attempts);
                prop_assert!(after_ms >= 1 && after_ms >= ceiling / 2 && after_ms <= ceiling, "backoff {} of {}", after_ms, ceiling);
                prop_assert!(after_ms + MIN_CALL_MS <= remaining, "backoff {} with {} left", after_ms, remaining);
            }
            AfterFailure::GiveUp { retry_after_ms } => {
                prop_assert!(retry_after_ms >= RETRY_AFTER_MS);
                if failure == CallFailure::Overloaded {
                    prop_assert!(retry_after_ms <= 3 * RETRY_AFTER_MS);
                }
                // Liveness: a retryable failure is called again whenever that fits.
                let fits = repeatable
                    && attempts < MAX_CALL_ATTEMPTS
                    && retry_backoff_ceiling_ms(attempts) + MIN_CALL_MS <= remaining;
                prop_assert!(failure != CallFailure::Retryable || !fits, "gave up with {} left after {} calls", remaining, attempts);
            }
        }
    }

    #[test]
    fn a_caller_told_to_wait_waits_at_least_that_and_within_its_budget(
        retry_after in prop_oneof![0u64..100, 0u64..=3 * RETRY_AFTER_MS, any::<u64>()],
        attempts in 1u32..8,
        remaining in prop_oneof![0u64..200, 0u64..=MAX_BACKGROUND_WAIT_MS],
    ) {
        match after_told_to_wait(retry_after, attempts, remaining) {
            AfterFailure::Retry { after_ms } => {
                prop_assert_eq!(after_ms, retry_after, "back sooner (or later) than the service asked");
                prop_assert!(attempts < MAX_CALL_ATTEMPTS);
                prop_assert!(after_ms + MIN_CALL_MS <= remaining, "waits {} with {} left", after_ms, remaining);
            }
            AfterFailure::GiveUp { retry_after_ms } => {
                prop_assert_eq!(retry_after_ms, retry_after, "the service's Retry-After is passed on");
                // Liveness: called again whenever that fits.
                let fits = attempts < MAX_CALL_ATTEMPTS && retry_after.saturating_add(MIN_CALL_MS) <= remaining;
                prop_assert!(!fits, "gave up with {} left after {} calls", remaining, attempts);
            }
        }
    }

    #[test]
    fn a_request_calling_a_failing_store_ends_within_its_budget(
        calls in prop::collection::vec((0u64..400, 0u8..4, any::<u64>()), 1..20),
    ) {
        // Each call takes some time, then fails (or is answered: kind 3);
        // the request follows the rule with its one budget.
        let mut budget = WaitBudget::for_request(T0);
        let mut clock = T0;
        let mut attempts = 0u32;
        for (took, kind, rand) in calls {
            // A call is raced against what is left: it ends by then.
            let left = budget.remaining_ms(clock);
            prop_assert!(attempts == 0 || left >= MIN_CALL_MS, "called again with {} ms left", left);
            attempts += 1;
            clock += took.min(left);
            if took >= left {
                break;
            }
            let failure = match kind {
                0 => CallFailure::Overloaded,
                1 => CallFailure::Retryable,
                2 => CallFailure::Other,
                _ => break,
            };
            match after_call_failed(failure, true, attempts, budget.remaining_ms(clock), rand) {
                AfterFailure::Retry { after_ms } => {
                    prop_assert!(budget.wait(clock, after_ms), "a backoff the budget refuses");
                    clock += after_ms;
                }
                AfterFailure::GiveUp { .. } => break,
            }
        }
        prop_assert!(attempts <= MAX_CALL_ATTEMPTS);
        prop_assert!(clock - T0 <= MAX_WAIT_MS, "answered after {} ms", clock - T0);
    }
}
