//! Randomness comes in from the host through this trait: the core owns no
//! entropy source. It is only used to pick where a time unit's sequence starts,
//! so it needs to be cheap, not cryptographic.

/// A source of random 32-bit values.
pub trait RandSource {
    /// The next random value.
    fn next_u32(&mut self) -> u32;
}

/// No randomness: every time unit's sequence starts at 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoRandom;

impl RandSource for NoRandom {
    #[inline]
    fn next_u32(&mut self) -> u32 {
        0
    }
}

/// Any closure returning a `u32` is a source (handy in tests and hosts).
impl<F: FnMut() -> u32> RandSource for F {
    #[inline]
    fn next_u32(&mut self) -> u32 {
        self()
    }
}

/// SplitMix64, seeded once by the host (from `getrandom`, `crypto`, ...).
/// Small, fast, and with no bad seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }
}

impl RandSource for SplitMix64 {
    #[inline]
    fn next_u32(&mut self) -> u32 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        // The high half of the mixed word.
        (z >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_varies_and_repeats_per_seed() {
        let mut a = SplitMix64::new(1);
        let mut b = SplitMix64::new(1);
        let xs: [u32; 4] = core::array::from_fn(|_| a.next_u32());
        let ys: [u32; 4] = core::array::from_fn(|_| b.next_u32());
        assert_eq!(xs, ys);
        assert!(xs.windows(2).all(|w| w[0] != w[1]));
        assert_eq!(NoRandom.next_u32(), 0);
    }
}
