//! The application of `examples/https_server`, shared with its tokio twin
//! (`bench/src/tokio_https.rs`): an axum `Router` that knows nothing of the
//! runtime, the sockets or TLS under it.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::routing::{get, post};
use serde::Serialize;

/// The body of `GET /`.
pub const HELLO: &str = "hello from axum on the pool\n";
/// The largest body `POST /echo` takes (413 past it).
pub const BODY_LIMIT: usize = 1 << 20;

/// What the handlers share: `GET /hits` counts itself.
#[derive(Clone, Default)]
pub struct AppState {
    hits: Arc<AtomicU64>,
}

/// `GET /users/{id}`.
#[derive(Serialize)]
pub struct User {
    pub id: u64,
    pub name: String,
}

/// `GET /`: [`HELLO`]; `GET /users/{id}`: a [`User`] as JSON (400 for an
/// id that is not a number); `GET /hits`: `hits=N`, the calls of it so far;
/// `POST /echo`: the request's body, at most [`BODY_LIMIT`] bytes (413
/// past it). Anything else 404, another method 405.
pub fn router() -> Router {
    Router::new()
        .route("/", get(|| async { HELLO }))
        .route("/users/{id}", get(user))
        .route("/hits", get(hits))
        .route("/echo", post(|body: Bytes| async { body }))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(AppState::default())
}

async fn user(Path(id): Path<u64>) -> Json<User> {
    Json(User { id, name: format!("user {id}") })
}

async fn hits(State(state): State<AppState>) -> String {
    format!("hits={}\n", state.hits.fetch_add(1, Ordering::Relaxed) + 1)
}
