//! Futures boxed where they are made, so that their bodies are compiled in this crate.
//!
//! An `async fn`'s body is compiled where its future is first polled with a concrete type,
//! not where it is written. A service's binary that awaits [`crate::Worker::run`], or a
//! consumer's loop instantiated for its handler's type, would otherwise compile the worker's
//! whole body again, and every lapin and tokio generic under it: measured, most of a handler
//! binary's build (`warren-bench build-cost`). A non-generic function of this crate that boxes
//! the future as a `dyn Future` compiles the body (and its vtable) here, once; the binary
//! only calls through the vtable. It costs one allocation per call: on calls made once per
//! run or per consumer that is nothing, and per delivery (a delivery's work, which
//! `Runner::begin` boxed already to poll it in place or spawn it) the
//! consume benchmark shows no difference beyond its spread (`docs/performance.md`).

use std::future::Future;
use std::pin::Pin;

/// A future boxed by a non-generic function of this crate (see the module docs).
pub(crate) type Rooted<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
