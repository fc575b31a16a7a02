//! A one-at-a-time handler behind a pointer, so that a consumer's code is compiled with its
//! contract, not with each binary's handler type.
//!
//! The worker's code for a consumer of `M` (decoding `M`'s payload, the per-delivery work,
//! the consumer's start) is generic over the message and the handler. Registered with the
//! handler's own type, all of it is compiled where that type is known: in every binary that
//! registers a handler, and again whenever a handler is edited. The generated register
//! function instead wraps the handler in an [`Erased`] and passes it to a non-generic
//! function of the generated file, which instantiates the consumer for `M` alone, once, in
//! the contract's crate. What is left in the binary is the handler and the boxing of its
//! future: one allocation per delivery, beside the delivery's own.

use super::Handler;
use crate::adapters::DeliveryOf;
use crate::rooted::Rooted;
use crate::{HandlerError, Message};

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

impl<M: Message> Handler<M> for Erased<M> {
    fn handle(
        &self,
        delivery: DeliveryOf<M>,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send {
        self.0.handle(delivery)
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
