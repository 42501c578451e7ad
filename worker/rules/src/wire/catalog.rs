//! The catalog of tags (`Catalog`): its requests and its answer.

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

/// What the catalog is asked.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum CatalogRequest {
    /// Every tag, by name: answers [`TagList`].
    List,
    /// Adds a tag (if new): answers `{}`.
    Add {
        /// The tag.
        biz_tag: String,
    },
    /// Removes a tag: answers `{}`.
    Remove {
        /// The tag.
        biz_tag: String,
    },
}

impl super::StoreRequest for CatalogRequest {
    fn repeatable(&self) -> bool {
        // A set: adding or removing a name twice is once.
        true
    }
}

/// The catalog's tags, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagList {
    /// The tags' names.
    pub tags: Vec<String>,
}

/// The catalog's answer to a change: `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {}
