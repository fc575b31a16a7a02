//! A one-at-a-time consumer whose message type is known to one small piece alone, so that
//! its code is compiled once, in the runtime, rather than once per message and again per
//! handler.
//!
//! The consume loop, each delivery's work (the handler run with its panic caught, timed and
//! told to the breaker, then the delivery settled by the queue's retry policy) and a trial
//! are the same for every message. What depends on the message is decoding the payload and
//! headers into its types and calling the handler with them: a [`Dispatch`], implemented
//! for [`Erased`]. The generated register function wraps the handler in an [`Erased`] (in the
//! binary: the handler's type is known there alone) and passes it to a non-generic function
//! of the generated file, which makes it a `Dispatch` of its message (in the contract's
//! crate: the message's decoding, compiled once). A 300-consumer contract used to compile
//! 300 copies of the loop and the settling into its lib.
//!
//! The cost per delivery: one allocation for the handler's boxed future, beside the
//! delivery's own, and two dynamic calls.

use std::sync::Arc;

use super::{Handler, Settings};
use crate::adapters::DeliveryOf;
use crate::codec::Poison;
use crate::model::Queue;
use crate::rooted::Rooted;
use crate::schema::Validators;
use crate::{HandlerError, Message, WorkerError};

/// A handler of message `M` whatever its type: what the generated register functions of
/// one-at-a-time consumers hand the worker (`warren_runtime::codegen::Erased`); not a stable
/// API.
pub struct Erased<M: Message>(Box<dyn Handles<M>>);

impl<M: Message> Erased<M> {
    /// `handler`, behind a pointer.
    pub fn new(handler: impl Handler<M>) -> Self {
        Self(Box::new(handler))
    }
}

/// [`Handler`], callable through a pointer: its future boxed.
trait Handles<M: Message>: Send + Sync + 'static {
    fn handle(&self, delivery: DeliveryOf<M>) -> Rooted<'_, Result<(), HandlerError>>;
}

impl<M: Message, H: Handler<M>> Handles<M> for H {
    fn handle(&self, delivery: DeliveryOf<M>) -> Rooted<'_, Result<(), HandlerError>> {
        Box::pin(Handler::handle(self, delivery))
    }
}

/// What a one-at-a-time consumer does that depends on its message type.
pub(super) trait Dispatch: Send + Sync + 'static {
    /// The message's compiled schemas, `None` when validation is off.
    fn validators(&self, settings: &Settings) -> Result<Option<Arc<Validators>>, WorkerError>;

    /// `raw` decoded as the message (see [`super::decode::decode`]) and the handler's future
    /// on it, with the retries that came before it; [`Poison`] when it does not decode.
    fn dispatch(
        &self,
        raw: &lapin::message::Delivery,
        queue: &Queue,
        validators: Option<&Validators>,
        max_body_bytes: usize,
    ) -> Result<Dispatched<'_>, Poison>;
}

/// A decoded delivery on its way to the handler ([`Dispatch::dispatch`]).
pub(super) struct Dispatched<'a> {
    /// The retries that came before the delivery, as the worker believes them.
    pub retries: u32,
    /// The handler's future, not polled yet.
    pub handling: Rooted<'a, Result<(), HandlerError>>,
}

impl<M: Message> Dispatch for Erased<M> {
    fn validators(&self, settings: &Settings) -> Result<Option<Arc<Validators>>, WorkerError> {
        settings.validators::<M>()
    }

    fn dispatch(
        &self,
        raw: &lapin::message::Delivery,
        queue: &Queue,
        validators: Option<&Validators>,
        max_body_bytes: usize,
    ) -> Result<Dispatched<'_>, Poison> {
        let delivery = super::decode::decode::<M>(raw, queue, validators, max_body_bytes)?;
        Ok(Dispatched {
            retries: delivery.retry_count(),
            handling: self.0.handle(delivery),
        })
    }
}
