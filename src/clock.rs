//! The system clock, for `std` hosts. The core itself never reads a clock:
//! every generator takes the time as an argument.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch by the system clock (0 if the clock reads
/// before 1970).
pub fn unix_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
