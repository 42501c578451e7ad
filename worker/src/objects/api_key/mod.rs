//! `ApiKey`: a key's own Durable Object, named by the key's ID: its name,
//! scopes, tag limit and the SHA-256 hash of its token, the one record an
//! isolate checks a token against (`key_store` tells the order of its
//! writes and the index's).

mod handlers;
mod schema;
pub mod stubs;

use edgeleaf_rules::wire::keys::ApiKeyRequest;
use worker::{durable_object, wasm_bindgen, DurableObject, Env, Request, Response, State};

use crate::api::json;
use crate::objects::serve::serve;

/// A key's own object, named by the key's ID. An object no key was made
/// for answers "none" and writes nothing.
#[durable_object]
pub struct ApiKey {
    state: State,
    env: Env,
}

impl DurableObject for ApiKey {
    fn new(state: State, env: Env) -> Self {
        ApiKey { state, env }
    }

    async fn fetch(&self, req: Request) -> worker::Result<Response> {
        serve(&self.env, None, &req, async |r| {
            let answer = match r {
                ApiKeyRequest::Create(entry) => self.create(entry).await?,
                ApiKeyRequest::Lookup { id } => self.lookup(&id).await?,
                ApiKeyRequest::Revoke { id } => self.revoke(&id).await?,
            };
            json(200, &answer)
        })
        .await
    }

    async fn alarm(&self) -> worker::Result<Response> {
        // An error is retried by the platform.
        crate::scope::for_alarm(&self.env)
            .run(self.report_use())
            .await
            .map_err(|e| worker::Error::RustError(e.message))?;
        Response::empty()
    }
}
