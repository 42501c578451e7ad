//! Time and randomness in a Worker. `Date.now()` stands still while code runs
//! and moves across I/O and timers, so waiting is always an awaited timer.

use std::time::Duration;

/// Unix ms by the Worker's clock.
pub fn now_ms() -> u64 {
    let ms = js_sys::Date::now();
    // A clock before 1970 reads as 0, which every layout refuses as before its epoch.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    if ms > 0.0 {
        ms as u64
    } else {
        0
    }
}

/// Awaits a timer (never spins).
pub async fn sleep_ms(ms: u64) {
    worker::Delay::from(Duration::from_millis(ms)).await;
}

/// 64 random bits from crypto.getRandomValues (only ever called inside a
/// request). Seeds and node keys only: a failure leaves them less random,
/// never unsafe.
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b)
}

/// Key material from crypto.getRandomValues (the platform's CSPRNG); an
/// error, never a weak key, when it is missing.
pub fn random_bytes<const N: usize>() -> crate::api::ApiResult<[u8; N]> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b)
        .map_err(|e| crate::api::ApiError::store_error(format!("crypto.getRandomValues: {e}")))?;
    Ok(b)
}
