//! The simulations' own seeded randomness (tests/sim/fleet_sim.rs and
//! world_sim.rs): xorshift64*, small and reproducible. Not every simulation
//! uses every draw.
#![allow(dead_code)]

/// xorshift64*: the simulation's own randomness, seeded.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn exp_ms(&mut self, mean_ms: f64) -> u64 {
        (-mean_ms * (1.0 - self.unit()).ln()).max(1.0) as u64
    }
    /// Uniform in `-bound..=bound`.
    pub fn offset(&mut self, bound: i64) -> i64 {
        i64::try_from(self.below(2 * bound as u64 + 1)).unwrap_or(0) - bound
    }
    /// An index drawn by `weights` (cumulative, ending at 1.0).
    pub fn pick(&mut self, cumulative: &[f64]) -> usize {
        let u = self.unit();
        cumulative
            .iter()
            .position(|c| u < *c)
            .unwrap_or(cumulative.len() - 1)
    }
}
