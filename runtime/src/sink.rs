//! Where the generated publishers send a message: to the broker ([`Publisher`]) or, with the
//! `postgres` or `sqlite` feature, into an outbox in the caller's transaction
//! (`outbox::OutboxWriter`). The typed API is the same for both.

use std::future::Future;

use crate::model::Publication;
use crate::routing_key;
use crate::{Message, PublishError, PublishOptions, Publisher};

/// Where the generated `Publishers` send: a [`Publisher`] (the default) publishes with
/// confirms; an `outbox::OutboxWriter` writes the message into the caller's transaction, for
/// a relay to publish once it commits. Both validate the message the same way first. Sealed:
/// warren provides both.
pub trait Sink: sealed::Sealed + Sync {
    /// Sends `payload` and `headers` as message `M` with `publication`: what the generated
    /// methods call.
    #[doc(hidden)]
    fn send<M: Message>(
        &self,
        publication: Publication<&str>,
        payload: &M::Payload,
        headers: &M::Headers,
        options: &PublishOptions,
    ) -> impl Future<Output = Result<(), PublishError>> + Send;
}

pub(crate) mod sealed {
    /// Only warren's sinks are sinks.
    pub trait Sealed {}
}

impl sealed::Sealed for Publisher {}

impl Sink for Publisher {
    async fn send<M: Message>(
        &self,
        publication: Publication<&str>,
        payload: &M::Payload,
        headers: &M::Headers,
        options: &PublishOptions,
    ) -> Result<(), PublishError> {
        let result = self
            .publish_with::<M>(publication, payload, headers, options)
            .await;
        self.record(publication.exchange, &result);
        result
    }
}

/// Sends `payload` and `headers` as message `M` (its marker, `_message`) through `sink`, to
/// `publication` with the routing key's placeholders filled in by `values`: what generated
/// publish methods call (`warren_runtime::codegen::publish`); not a stable API. Validated
/// against the message's JSON Schemas (nothing is sent or stored when they are invalid),
/// persistent, `mandatory`, with its content type and optional compression. Through a
/// [`Publisher`] it succeeds only when the broker confirmed the message and did not return
/// it as unroutable.
///
/// The generated methods return this future rather than being `async fn`s themselves, so a
/// contract's thousand publishers are a thousand calls, not a thousand state machines to
/// check and encode; the placeholders' values are therefore taken by value.
pub async fn publish<M: Message, S: Sink, const PLACEHOLDERS: usize>(
    sink: &S,
    _message: M,
    publication: Publication,
    values: [&str; PLACEHOLDERS],
    payload: &M::Payload,
    headers: &M::Headers,
    options: &PublishOptions,
) -> Result<(), PublishError> {
    let key = routing_key::filled(publication.routing_key, &values)?;
    let publication = Publication {
        routing_key: key.as_ref(),
        ..publication
    };
    sink.send::<M>(publication, payload, headers, options).await
}
