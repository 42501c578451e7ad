//! The bit layout of a snowflake ID and the arithmetic between IDs and their parts.

use crate::error::{check_range, Error};

/// A snowflake ID. Always below 2^63, so it stays positive as a Java/SQL
/// `bigint`; under [`Layout::JS_SAFE`] it stays below 2^53.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
#[repr(transparent)]
pub struct Id(u64);

impl Id {
    /// The ID as an integer.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl From<Id> for u64 {
    fn from(id: Id) -> u64 {
        id.0
    }
}

impl core::fmt::Display for Id {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.0, f)
    }
}

/// The three fields of a snowflake ID, with the timestamp as Unix milliseconds
/// (the start of its time unit), not as the raw offset from the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Parts {
    /// Unix milliseconds at the start of the ID's time unit.
    pub timestamp_ms: u64,
    /// The worker ID.
    pub worker_id: u32,
    /// The sequence number within the time unit.
    pub sequence: u32,
}

/// How the 63 usable bits of an ID are split, from the top:
/// `0 | timestamp | worker | sequence`. The timestamp counts `unit_ms`
/// milliseconds since `epoch_ms` (Unix ms).
///
/// A `Layout` is always valid: [`Layout::new`] checks it, and the presets are
/// checked by the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "LayoutSpec", into = "LayoutSpec"))]
pub struct Layout {
    timestamp_bits: u8,
    worker_bits: u8,
    sequence_bits: u8,
    epoch_ms: u64,
    unit_ms: u64,
}

/// A layout's fields as plain data, before validation (what a config file or a
/// JS options object holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct LayoutSpec {
    /// Bits of the timestamp field.
    pub timestamp_bits: u8,
    /// Bits of the worker-ID field.
    pub worker_bits: u8,
    /// Bits of the sequence field.
    pub sequence_bits: u8,
    /// The epoch, Unix ms.
    pub epoch_ms: u64,
    /// Milliseconds per timestamp unit.
    pub unit_ms: u64,
}

/// The longest time unit accepted: one hour.
pub const MAX_UNIT_MS: u64 = 3_600_000;

impl Layout {
    /// Leaf's (and Twitter's) layout: 41 bits of milliseconds since
    /// 2010-11-04 09:42:54.657 UTC, 10 worker bits, 12 sequence bits.
    /// Good until 2080-07-10.
    pub const LEAF: Layout = Layout {
        timestamp_bits: 41,
        worker_bits: 10,
        sequence_bits: 12,
        epoch_ms: 1_288_834_974_657,
        unit_ms: 1,
    };

    /// A layout whose IDs stay below 2^53, so a JS `number` holds them exactly:
    /// 38 bits of 10 ms units since 2024-01-01 UTC (87 years, to 2111),
    /// 7 worker bits (128 workers), 8 sequence bits (256 IDs per 10 ms, 25,600
    /// per second per worker). 53 bits cannot have Leaf's 69 years of
    /// milliseconds *and* room for workers, so this trades resolution (10 ms,
    /// as sonyflake does) for decades of range and a useful worker count.
    pub const JS_SAFE: Layout = Layout {
        timestamp_bits: 38,
        worker_bits: 7,
        sequence_bits: 8,
        epoch_ms: 1_704_067_200_000,
        unit_ms: 10,
    };

    /// A validated layout.
    ///
    /// # Errors
    /// [`Error::LayoutTooWide`] when the widths add to more than 63;
    /// [`Error::OutOfRange`] when the timestamp or sequence field is empty, the
    /// worker field is wider than 31 bits, `unit_ms` is not 1..=3,600,000, or
    /// the last encodable instant would not fit in a `u64` of milliseconds.
    pub fn new(spec: LayoutSpec) -> Result<Layout, Error> {
        let LayoutSpec {
            timestamp_bits,
            worker_bits,
            sequence_bits,
            epoch_ms,
            unit_ms,
        } = spec;
        let total = u32::from(timestamp_bits) + u32::from(worker_bits) + u32::from(sequence_bits);
        if total > 63 {
            return Err(Error::LayoutTooWide { total_bits: total });
        }
        check_range("timestamp_bits", timestamp_bits.into(), 1, 62)?;
        check_range("sequence_bits", sequence_bits.into(), 1, 31)?;
        check_range("worker_bits", worker_bits.into(), 0, 31)?;
        check_range("unit_ms", unit_ms, 1, MAX_UNIT_MS)?;
        let ticks = 1u64 << timestamp_bits;
        let max_epoch = ticks
            .checked_mul(unit_ms)
            .and_then(|span| u64::MAX.checked_sub(span))
            .unwrap_or(0);
        check_range("epoch_ms", epoch_ms, 0, max_epoch)?;
        Ok(Layout {
            timestamp_bits,
            worker_bits,
            sequence_bits,
            epoch_ms,
            unit_ms,
        })
    }

    /// The layout's fields as plain data.
    pub const fn spec(&self) -> LayoutSpec {
        LayoutSpec {
            timestamp_bits: self.timestamp_bits,
            worker_bits: self.worker_bits,
            sequence_bits: self.sequence_bits,
            epoch_ms: self.epoch_ms,
            unit_ms: self.unit_ms,
        }
    }

    /// Bits of the timestamp field.
    pub const fn timestamp_bits(&self) -> u8 {
        self.timestamp_bits
    }
    /// Bits of the worker-ID field.
    pub const fn worker_bits(&self) -> u8 {
        self.worker_bits
    }
    /// Bits of the sequence field.
    pub const fn sequence_bits(&self) -> u8 {
        self.sequence_bits
    }
    /// The epoch, Unix ms.
    pub const fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }
    /// Milliseconds per timestamp unit.
    pub const fn unit_ms(&self) -> u64 {
        self.unit_ms
    }
    /// The largest worker ID.
    #[allow(clippy::cast_possible_truncation)] // at most 31 bits (Layout::new)
    pub const fn max_worker_id(&self) -> u32 {
        ((1u64 << self.worker_bits) - 1) as u32
    }
    /// The largest sequence number.
    #[allow(clippy::cast_possible_truncation)] // at most 31 bits (Layout::new)
    pub const fn max_sequence(&self) -> u32 {
        ((1u64 << self.sequence_bits) - 1) as u32
    }
    /// The largest timestamp field value (in units since the epoch).
    pub const fn max_tick(&self) -> u64 {
        (1u64 << self.timestamp_bits) - 1
    }
    /// The largest ID the layout can hold.
    pub const fn max_id(&self) -> u64 {
        (1u64 << (self.timestamp_bits + self.worker_bits + self.sequence_bits)) - 1
    }
    /// The most IDs one worker can issue per second (2^sequence_bits per unit).
    pub const fn ceiling_per_second(&self) -> u64 {
        (1u64 << self.sequence_bits) * 1000 / self.unit_ms
    }

    /// The last instant (Unix ms) the layout can encode. At any later time
    /// generation fails with [`Error::LayoutExpired`] rather than wrap or go
    /// negative.
    pub const fn expires_at(&self) -> u64 {
        // Layout::new checked that this cannot overflow.
        self.epoch_ms + (self.max_tick() + 1) * self.unit_ms - 1
    }

    /// The timestamp field for an instant.
    ///
    /// # Errors
    /// [`Error::ClockBeforeEpoch`] before the epoch, [`Error::LayoutExpired`]
    /// after [`Layout::expires_at`].
    #[inline]
    pub fn tick(&self, now_ms: u64) -> Result<u64, Error> {
        let Some(since) = now_ms.checked_sub(self.epoch_ms) else {
            return Err(Error::ClockBeforeEpoch {
                epoch_ms: self.epoch_ms,
                now_ms,
            });
        };
        let tick = if self.unit_ms == 1 {
            since
        } else {
            since / self.unit_ms
        };
        if tick > self.max_tick() {
            return Err(Error::LayoutExpired {
                expires_at_ms: self.expires_at(),
                now_ms,
            });
        }
        Ok(tick)
    }

    /// Unix ms at the start of a timestamp unit. `tick` must be at most
    /// [`Layout::max_tick`] + 1.
    #[inline]
    pub(crate) const fn tick_start_ms(&self, tick: u64) -> u64 {
        self.epoch_ms + tick * self.unit_ms
    }

    /// Builds an ID from raw field values, without range checks. Callers keep
    /// every field inside its width.
    #[inline]
    pub(crate) const fn pack(&self, tick: u64, worker_id: u32, sequence: u32) -> u64 {
        (tick << (self.worker_bits + self.sequence_bits))
            | ((worker_id as u64) << self.sequence_bits)
            | sequence as u64
    }

    /// Builds an ID from its parts.
    ///
    /// # Errors
    /// [`Error::ClockBeforeEpoch`] or [`Error::LayoutExpired`] for a timestamp
    /// outside the layout, [`Error::OutOfRange`] for a worker ID or sequence
    /// wider than its field.
    pub fn compose(&self, parts: Parts) -> Result<Id, Error> {
        let tick = self.tick(parts.timestamp_ms)?;
        check_range(
            "worker_id",
            parts.worker_id.into(),
            0,
            self.max_worker_id().into(),
        )?;
        check_range(
            "sequence",
            parts.sequence.into(),
            0,
            self.max_sequence().into(),
        )?;
        Ok(Id(self.pack(tick, parts.worker_id, parts.sequence)))
    }

    /// Splits an ID into its parts, counting the timestamp from this layout's
    /// epoch.
    ///
    /// # Errors
    /// [`Error::IdOutOfLayout`] when the ID has bits above the layout's width.
    #[allow(clippy::cast_possible_truncation)] // fields masked to at most 31 bits
    pub fn decompose(&self, id: u64) -> Result<Parts, Error> {
        if id > self.max_id() {
            return Err(Error::IdOutOfLayout {
                id,
                max_id: self.max_id(),
            });
        }
        let tick = id >> (self.worker_bits + self.sequence_bits);
        let worker = (id >> self.sequence_bits) & u64::from(self.max_worker_id());
        let sequence = id & u64::from(self.max_sequence());
        Ok(Parts {
            timestamp_ms: self.tick_start_ms(tick),
            worker_id: worker as u32,
            sequence: sequence as u32,
        })
    }

    /// Wraps an integer known to be an ID of this layout.
    ///
    /// # Errors
    /// [`Error::IdOutOfLayout`] when it is wider than the layout.
    pub fn id(&self, raw: u64) -> Result<Id, Error> {
        if raw > self.max_id() {
            Err(Error::IdOutOfLayout {
                id: raw,
                max_id: self.max_id(),
            })
        } else {
            Ok(Id(raw))
        }
    }

    #[inline]
    pub(crate) const fn id_unchecked(raw: u64) -> Id {
        Id(raw)
    }
}

impl Default for Layout {
    fn default() -> Self {
        Layout::LEAF
    }
}

impl TryFrom<LayoutSpec> for Layout {
    type Error = Error;
    fn try_from(spec: LayoutSpec) -> Result<Self, Error> {
        Layout::new(spec)
    }
}

impl From<Layout> for LayoutSpec {
    fn from(layout: Layout) -> Self {
        layout.spec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_layouts() {
        assert_eq!(Layout::new(Layout::LEAF.spec()), Ok(Layout::LEAF));
        assert_eq!(Layout::new(Layout::JS_SAFE.spec()), Ok(Layout::JS_SAFE));
    }

    #[test]
    fn leaf_layout_matches_leaf() {
        let l = Layout::LEAF;
        assert_eq!(l.max_worker_id(), 1023);
        assert_eq!(l.max_sequence(), 4095);
        assert_eq!(l.max_id(), i64::MAX as u64);
        // 2^41 ms after the Twitter epoch: 2080-07-10T17:30:30.208Z, minus 1 ms.
        assert_eq!(l.expires_at(), 1_288_834_974_657 + (1u64 << 41) - 1);
        assert_eq!(l.expires_at(), 3_487_858_230_208);
        assert_eq!(l.ceiling_per_second(), 4_096_000);
    }

    #[test]
    fn js_safe_layout_stays_below_2_pow_53_for_decades() {
        let l = Layout::JS_SAFE;
        assert_eq!(l.max_id(), (1u64 << 53) - 1);
        // 2111-02-... : more than 80 years after 2024.
        let years = (l.expires_at() - l.epoch_ms()) / (365 * 24 * 3600 * 1000);
        assert!(years >= 80, "{years}");
    }

    #[test]
    fn rejects_bad_layouts() {
        let mut s = Layout::LEAF.spec();
        s.sequence_bits = 13;
        assert_eq!(Layout::new(s), Err(Error::LayoutTooWide { total_bits: 64 }));
        let mut s = Layout::LEAF.spec();
        s.unit_ms = 0;
        assert!(matches!(
            Layout::new(s),
            Err(Error::OutOfRange {
                what: "unit_ms",
                ..
            })
        ));
        let mut s = Layout::LEAF.spec();
        s.sequence_bits = 0;
        assert!(matches!(
            Layout::new(s),
            Err(Error::OutOfRange {
                what: "sequence_bits",
                ..
            })
        ));
        // An epoch so late the last instant overflows u64 ms.
        let mut s = Layout::LEAF.spec();
        s.epoch_ms = u64::MAX - 10;
        assert!(matches!(
            Layout::new(s),
            Err(Error::OutOfRange {
                what: "epoch_ms",
                ..
            })
        ));
    }

    #[test]
    fn end_of_epoch_is_an_error_not_a_negative_id() {
        let l = Layout::LEAF;
        let last = l.expires_at();
        let id = l
            .compose(Parts {
                timestamp_ms: last,
                worker_id: 1023,
                sequence: 4095,
            })
            .unwrap();
        assert_eq!(id.get(), i64::MAX as u64);
        assert_eq!(
            l.tick(last + 1),
            Err(Error::LayoutExpired {
                expires_at_ms: last,
                now_ms: last + 1
            })
        );
    }

    #[test]
    fn decompose_counts_from_the_custom_epoch() {
        let l = Layout::LEAF;
        let parts = Parts {
            timestamp_ms: 1_700_000_000_123,
            worker_id: 7,
            sequence: 42,
        };
        let id = l.compose(parts).unwrap();
        assert_eq!(l.decompose(id.get()), Ok(parts));
        // Leaf's decoder added the Twitter epoch to its own custom epoch's IDs.
        assert_eq!(
            (id.get() >> 22) + 1_288_834_974_657,
            parts.timestamp_ms,
            "timestamp field is ms since the custom epoch"
        );
    }

    #[test]
    fn coarse_units_round_down_to_the_unit() {
        let l = Layout::JS_SAFE;
        let id = l
            .compose(Parts {
                timestamp_ms: l.epoch_ms() + 12_345,
                worker_id: 1,
                sequence: 2,
            })
            .unwrap();
        assert_eq!(
            l.decompose(id.get()).unwrap().timestamp_ms,
            l.epoch_ms() + 12_340
        );
        assert!(l.decompose(1 << 53).is_err());
    }
}
