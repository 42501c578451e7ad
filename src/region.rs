//! Where a request runs and where its objects live: Cloudflare's nine
//! Durable Object regions (the `locationHint`s), and the region nearest to
//! each colo a Worker runs in, from the latencies measured by
//! where.durableobjects.live (`tests/sim/data/`, its source named there).
//!
//! One table, used by the Worker (`request.cf.colo` → the region whose
//! allocator and minters an isolate asks first) and by the simulation. The
//! table is generated once from the data by `scripts/colo-table.mjs` and
//! checked against it by `tests/region_table.rs`.

use core::fmt;

use crate::error::Error;

/// A Durable Object region, as a `locationHint` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Region {
    /// Western North America.
    Wnam,
    /// Eastern North America.
    Enam,
    /// South America (objects land in [`Region::Enam`]).
    Sam,
    /// Western Europe.
    Weur,
    /// Eastern Europe.
    Eeur,
    /// Asia-Pacific.
    Apac,
    /// Oceania.
    Oc,
    /// Africa (objects land in [`Region::Weur`]).
    Afr,
    /// Middle East (objects land beside [`Region::Eeur`]'s).
    Me,
}

impl Region {
    /// Every region, in the order the hints are documented.
    pub const ALL: [Region; 9] = [
        Region::Wnam,
        Region::Enam,
        Region::Sam,
        Region::Weur,
        Region::Eeur,
        Region::Apac,
        Region::Oc,
        Region::Afr,
        Region::Me,
    ];

    /// The regions where objects really live: every region's
    /// [`Region::hosting`].
    pub const HOSTING: [Region; 6] = [
        Region::Wnam,
        Region::Enam,
        Region::Weur,
        Region::Eeur,
        Region::Apac,
        Region::Oc,
    ];

    /// The hint's name (`"wnam"`, ...), as the Workers API and object names
    /// spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Region::Wnam => "wnam",
            Region::Enam => "enam",
            Region::Sam => "sam",
            Region::Weur => "weur",
            Region::Eeur => "eeur",
            Region::Apac => "apac",
            Region::Oc => "oc",
            Region::Afr => "afr",
            Region::Me => "me",
        }
    }

    /// The region named `text` (lower case, as [`Region::as_str`] writes it).
    ///
    /// # Errors
    /// [`Error::InvalidRegion`] for any other text.
    pub fn parse(text: &str) -> Result<Region, Error> {
        Region::ALL
            .into_iter()
            .find(|r| r.as_str() == text)
            .ok_or(Error::InvalidRegion { len: text.len() })
    }

    /// The region whose data centres an object created with this hint lands
    /// in. Hints `sam`, `afr` and `me` host no objects today
    /// (`tests/sim/data/README.md`): their objects land in `enam`, `weur`
    /// and, by the measured latencies (a `me` object is within a median
    /// 12 ms of an `eeur` one from every colo, 56 ms of a `weur` one),
    /// `eeur`. Two hints with the same hosting region put their objects
    /// side by side, so a tag needs an allocator per hosting region only.
    pub const fn hosting(self) -> Region {
        match self {
            Region::Sam => Region::Enam,
            Region::Afr => Region::Weur,
            Region::Me => Region::Eeur,
            other => other,
        }
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::str::FromStr for Region {
    type Err = Error;

    fn from_str(text: &str) -> Result<Region, Error> {
        Region::parse(text)
    }
}

include!("colos.rs");

/// The region nearest to a Cloudflare colo (its IATA code, as
/// `request.cf.colo` gives it; any case): the measured `nearestRegion`.
/// `None` for a colo the data does not know (a new one: ask the tag's root).
pub fn colo_region(colo: &str) -> Option<Region> {
    let code: [u8; 3] = colo.as_bytes().try_into().ok()?;
    let code = code.map(|b| b.to_ascii_uppercase());
    COLO_REGIONS
        .binary_search_by(|(c, _)| c.cmp(&code))
        .ok()
        .map(|i| COLO_REGIONS[i].1)
}

/// Every colo the table knows, with its region (for the simulation and the
/// dashboard), sorted by IATA code.
pub fn colos() -> impl Iterator<Item = (&'static str, Region)> {
    COLO_REGIONS.iter().map(|(code, region)| {
        // The table holds ASCII capitals only (scripts/colo-table.mjs).
        (core::str::from_utf8(code).unwrap_or(""), *region)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_refused() {
        for r in Region::ALL {
            assert_eq!(Region::parse(r.as_str()), Ok(r));
            assert!(Region::HOSTING.contains(&r.hosting()));
            assert_eq!(r.hosting().hosting(), r.hosting());
        }
        for bad in ["", "WNAM", "eu", "wnam ", "fedramp"] {
            assert_eq!(
                Region::parse(bad),
                Err(Error::InvalidRegion { len: bad.len() })
            );
        }
    }

    #[test]
    fn colos_are_found_in_any_case_and_the_table_is_sorted() {
        assert!(COLO_REGIONS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(colo_region("LHR"), Some(Region::Weur));
        assert_eq!(colo_region("sjc"), Some(Region::Wnam));
        assert_eq!(colo_region("SYD"), Some(Region::Oc));
        assert_eq!(colo_region("XXX"), None);
        assert_eq!(colo_region("LHRX"), None);
        assert_eq!(colo_region(""), None);
        assert_eq!(colos().count(), COLO_REGIONS.len());
    }
}
