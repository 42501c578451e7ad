//! A key's own object's answers: made, looked up, revoked; its use reported
//! to the index.

use edgeleaf_rules::access::KEY_USE_REPORT_MS;
use edgeleaf_rules::wire::catalog::Done;
use edgeleaf_rules::wire::keys::{KeyEntry, KeyRequest, Lookup};

use crate::api::{ApiError, ApiResult};
use crate::clock::now_ms;
use crate::objects::call::{call, Store};

use super::schema::Held;
use super::ApiKey;

impl ApiKey {
    pub(super) async fn create(&self, entry: KeyEntry) -> ApiResult<Lookup> {
        let key = match self.held().await? {
            None => {
                let key = entry.stored();
                self.keep(&Held::Live {
                    entry,
                    reported_ms: 0,
                })
                .await?;
                Some(key)
            }
            // The same key again (a copy retried): no change.
            Some(Held::Live { entry: held, .. })
                if held.id == entry.id && held.hash == entry.hash =>
            {
                Some(held.stored())
            }
            Some(Held::Live { .. }) => {
                return Err(ApiError::store_error(format!(
                    "key {}: its object holds another key",
                    entry.id
                )));
            }
            Some(Held::Revoked { .. }) => None,
        };
        Ok(Lookup { key })
    }

    pub(super) async fn lookup(&self, id: &str) -> ApiResult<Lookup> {
        let Some(Held::Live {
            mut entry,
            reported_ms,
        }) = self.held().await?
        else {
            return Ok(Lookup { key: None });
        };
        if entry.id != id {
            return Ok(Lookup { key: None });
        }
        let now = now_ms();
        entry.last_used_ms = Some(now);
        let key = entry.stored();
        self.keep(&Held::Live { entry, reported_ms }).await?;
        // The index hears of the use later (the alarm), at most every
        // KEY_USE_REPORT_MS.
        let storage = self.state.storage();
        if storage.get_alarm().await?.is_none() {
            let wait = (reported_ms + KEY_USE_REPORT_MS).saturating_sub(now);
            storage.set_alarm(i64::try_from(wait).unwrap_or(0)).await?;
            // Billed as a row written.
            crate::scope::count_rows(0, 1);
        }
        Ok(Lookup { key: Some(key) })
    }

    pub(super) async fn revoke(&self, id: &str) -> ApiResult<Lookup> {
        let before = match self.held().await? {
            Some(Held::Live { entry, .. }) if entry.id == id => Some(entry.stored()),
            _ => None,
        };
        self.keep(&Held::Revoked {
            id: id.to_owned(),
            at_ms: now_ms(),
        })
        .await?;
        Ok(Lookup { key: before })
    }

    /// Tells the index when the key was last used.
    pub(super) async fn report_use(&self) -> ApiResult<()> {
        let Some(Held::Live { entry, reported_ms }) = self.held().await? else {
            return Ok(());
        };
        let Some(at_ms) = entry.last_used_ms.filter(|&at| at > reported_ms) else {
            return Ok(());
        };
        let request = KeyRequest::Used {
            id: entry.id.clone(),
            at_ms,
        };
        let _: Done = call(&self.env, Store::Keys, &request).await?;
        // Read again: a lookup may have run meanwhile.
        if let Some(Held::Live { entry, .. }) = self.held().await? {
            self.keep(&Held::Live {
                entry,
                reported_ms: at_ms,
            })
            .await?;
        }
        Ok(())
    }
}
