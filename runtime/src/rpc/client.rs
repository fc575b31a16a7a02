//! The caller's side: one channel per client, in confirm mode, consuming RabbitMQ's direct
//! reply-to; requests are published on it (the broker takes a direct reply-to only from the
//! channel that consumes it), and a task hands each reply to the call waiting for its
//! correlation id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_lite::StreamExt;
use lapin::options::BasicConsumeOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel};
use tokio::sync::oneshot;
use tracing::Instrument as _;

use super::reply::{self, Received};
use super::{CallResult, DeclaredErrors, Operation, RpcError, decode_within};
use crate::confirms::ConfirmChannel;
use crate::connection::backoff;
use crate::error::{Chain, ShortField};
use crate::metrics::CallMetrics;
use crate::model::RpcTarget;
use crate::model::rpc::DIRECT_REPLY_TO;
use crate::model::{Namespace, headers};
use crate::publisher::{self, Outgoing, Routing, short};
use crate::sync::lock;
use crate::{CallOptions, Connection, Message, PublishError, PublishOptions};

/// The first pause before opening a session again on a link that died under the attempt,
/// and the longest.
const REOPEN_MIN: Duration = Duration::from_millis(50);
const REOPEN_MAX: Duration = Duration::from_secs(1);

/// A reply as it came, handed to the call that waits for it.
struct Reply {
    body: Vec<u8>,
    properties: BasicProperties,
}

/// What the clones of one client share.
pub(super) struct Shared {
    connection: Connection,
    namespace: Namespace,
    session: Mutex<Option<Arc<Session>>>,
    /// Held while a session is opened, so that calls finding the channel gone open one.
    reopening: tokio::sync::Mutex<()>,
    observed: Arc<Observed>,
}

/// The client's metrics, and its count of late replies.
struct Observed {
    metrics: CallMetrics,
    late: AtomicU64,
}

impl Observed {
    fn late(&self, correlation_id: Option<&str>) {
        self.late.fetch_add(1, Ordering::Relaxed);
        self.metrics.late();
        // Debug, not warn: every call that timed out may leave one behind, and its caller
        // was told already (`RpcError::Timeout`).
        tracing::debug!(
            correlation_id = correlation_id.unwrap_or_default(),
            "an RPC reply no call waits for (late, or not for this client); dropped"
        );
    }
}

/// One channel consuming direct reply-to, and the calls waiting on it.
struct Session {
    channel: ConfirmChannel,
    pending: Arc<Pending>,
    /// Dropped with the session (the client dropped, or the session replaced): its reader
    /// closes the channel and ends.
    _stop: oneshot::Sender<()>,
}

/// The calls waiting on one channel, by correlation id; `None` once the channel is gone:
/// their replies can no longer arrive, and dropping their senders tells them so.
#[derive(Default)]
struct Pending(Mutex<Option<HashMap<String, oneshot::Sender<Reply>>>>);

impl Pending {
    fn open() -> Self {
        Self(Mutex::new(Some(HashMap::new())))
    }

    fn is_open(&self) -> bool {
        lock(&self.0).is_some()
    }

    /// Registers the call waiting for `id`; `false` when the channel is gone.
    fn insert(&self, id: &str, sender: oneshot::Sender<Reply>) -> bool {
        match lock(&self.0).as_mut() {
            Some(calls) => {
                calls.insert(id.to_owned(), sender);
                true
            }
            None => false,
        }
    }

    fn take(&self, id: &str) -> Option<oneshot::Sender<Reply>> {
        lock(&self.0).as_mut()?.remove(id)
    }

    /// The channel is gone: every call waiting on it fails.
    fn close(&self) {
        let calls = lock(&self.0).take();
        drop(calls);
    }
}

/// A call's place among the pending ones, given up when the call ends however it ends
/// (answered, timed out, or its future dropped).
struct Waiting {
    pending: Arc<Pending>,
    id: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.pending.take(&self.id);
    }
}

impl Session {
    /// Opens a channel on `connection` (in confirm mode), consumes direct reply-to on it and
    /// starts the task reading the replies.
    async fn open(
        connection: &lapin::Connection,
        observed: Arc<Observed>,
    ) -> Result<Self, lapin::Error> {
        let channel = ConfirmChannel::open(connection).await?;
        let tag = ShortString::from(format!("warren-rpc-{}", uuid::Uuid::now_v7()));
        let consumer = channel
            .channel()
            .basic_consume(
                ShortString::from(DIRECT_REPLY_TO),
                tag,
                // Direct reply-to takes no acks: a reply is delivered once, or not at all.
                BasicConsumeOptions {
                    no_ack: true,
                    ..BasicConsumeOptions::default()
                },
                FieldTable::default(),
            )
            .await?;
        let pending = Arc::new(Pending::open());
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(read_replies(
            channel.channel().clone(),
            consumer,
            pending.clone(),
            stopped,
            observed,
        ));
        Ok(Self {
            channel,
            pending,
            _stop: stop,
        })
    }

    fn usable(&self) -> bool {
        self.channel.channel().status().connected() && self.pending.is_open()
    }
}

/// Hands each reply on `channel` to the call waiting for its correlation id, until the
/// channel is gone or the session dropped; then every call still waiting fails.
async fn read_replies(
    channel: Channel,
    mut consumer: lapin::Consumer,
    pending: Arc<Pending>,
    mut stop: oneshot::Receiver<()>,
    observed: Arc<Observed>,
) {
    loop {
        let next = tokio::select! {
            _ = &mut stop => {
                let _ = channel.close(200, ShortString::from("RPC client dropped")).await;
                break;
            }
            next = consumer.next() => next,
        };
        match next {
            Some(Ok(delivery)) => {
                let id = delivery.properties.correlation_id().as_ref();
                let id = id.map(ShortString::as_str);
                let reply = Reply {
                    body: delivery.data,
                    properties: delivery.properties.clone(),
                };
                // Never handed to another call: only the one that sent this id waits for it.
                match id.and_then(|id| pending.take(id)) {
                    Some(call) => {
                        if call.send(reply).is_err() {
                            // Its call gave up between the lookup and now.
                            observed.late(id);
                        }
                    }
                    None => observed.late(id),
                }
            }
            Some(Err(error)) => {
                tracing::warn!(error = %Chain(&error), "the RPC client's channel failed; the calls waiting on it fail");
                break;
            }
            None => break,
        }
    }
    pending.close();
}

impl Shared {
    pub(super) fn new(connection: &Connection, namespace: Namespace) -> Self {
        Self {
            connection: connection.clone(),
            namespace,
            session: Mutex::new(None),
            reopening: tokio::sync::Mutex::new(()),
            observed: Arc::new(Observed {
                metrics: CallMetrics::new(),
                late: AtomicU64::new(0),
            }),
        }
    }

    pub(super) fn late_replies(&self) -> u64 {
        self.observed.late.load(Ordering::Relaxed)
    }

    /// Opens the session now, waiting up to `timeout` for the connection.
    pub(super) async fn open(&self, timeout: Duration) -> Result<(), PublishError> {
        let deadline = crate::connection::deadline_after(timeout);
        self.session(deadline, timeout).await.map(drop)
    }

    /// A usable session: the current one, or a new one on the current link (waiting up to
    /// `deadline` for one while the connection recovers).
    async fn session(
        &self,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Result<Arc<Session>, PublishError> {
        if let Some(session) = self.usable_session() {
            return Ok(session);
        }
        let _reopening = self.reopening.lock().await;
        // Another call may have opened one while this one waited.
        if let Some(session) = self.usable_session() {
            return Ok(session);
        }
        let mut attempt: u32 = 0;
        let session = loop {
            let wait = deadline.saturating_duration_since(tokio::time::Instant::now());
            let connection = self
                .connection
                .current(wait)
                .await
                .map_err(|_| PublishError::NotConnected(timeout))?;
            match Session::open(&connection, self.observed.clone()).await {
                Ok(session) => break Arc::new(session),
                // The link died under this attempt (the connection's supervisor has not
                // noticed yet): wait for the next one, within the call's deadline. Nothing
                // was sent.
                Err(_) if !connection.status().connected() && !self.connection.is_closed() => {
                    let pause = backoff(attempt, REOPEN_MIN, REOPEN_MAX);
                    attempt = attempt.saturating_add(1);
                    if tokio::time::Instant::now() + pause >= deadline {
                        return Err(PublishError::NotConnected(timeout));
                    }
                    tokio::time::sleep(pause).await;
                }
                Err(error) => return Err(error.into()),
            }
        };
        // The session replaced (if any) is dropped here, unless a call still holds it: its
        // reader closes its channel, and the calls waiting on it fail.
        *lock(&self.session) = Some(session.clone());
        Ok(session)
    }

    fn usable_session(&self) -> Option<Arc<Session>> {
        lock(&self.session)
            .as_ref()
            .filter(|session| session.usable())
            .cloned()
    }
}

/// What a call's outcome is labelled: one of [`crate::metrics::RPC_OUTCOMES`].
fn outcome<T, E>(result: &Result<T, RpcError<E>>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(RpcError::Declared(_)) => "error",
        Err(RpcError::Failed { .. }) => "failed",
        Err(RpcError::Timeout(_)) => "timeout",
        Err(RpcError::InvalidReply(_)) => "invalid-reply",
        Err(RpcError::Publish(_)) => "publish-error",
        Err(RpcError::ConnectionLost) => "connection-lost",
    }
}

/// Calls `O` on `shared`'s channel: timed, counted and traced.
pub(super) async fn call<O: Operation>(
    shared: &Shared,
    max_body_bytes: usize,
    target: RpcTarget<&str>,
    request: &<O::Request as Message>::Payload,
    headers: &<O::Request as Message>::Headers,
    options: &CallOptions,
) -> Result<<O::Response as Message>::Payload, RpcError<O::Error>> {
    let span = crate::trace::call(O::NAME);
    let started = std::time::Instant::now();
    let result = exchange::<O>(
        shared,
        max_body_bytes,
        target,
        request,
        headers,
        options,
        &span,
    )
    .instrument(span.clone())
    .await;
    let outcome = outcome(&result);
    shared
        .observed
        .metrics
        .call(O::NAME, outcome, started.elapsed());
    crate::trace::called(&span, outcome);
    result
}

/// Sends the request and waits for its reply, all within the call's timeout.
async fn exchange<O: Operation>(
    shared: &Shared,
    max_body_bytes: usize,
    target: RpcTarget<&str>,
    request: &<O::Request as Message>::Payload,
    headers: &<O::Request as Message>::Headers,
    options: &CallOptions,
    span: &tracing::Span,
) -> Result<<O::Response as Message>::Payload, RpcError<O::Error>> {
    // The rule a publish follows, against the queues the requests reach.
    publisher::check_priority(options.priority, target.max_priority)?;
    let timeout = options.timeout.unwrap_or(target.timeout);
    let deadline = crate::connection::deadline_after(timeout);
    let correlation_id = uuid::Uuid::now_v7().to_string();
    let Outgoing { body, properties } =
        outgoing::<O>(request, headers, options, timeout, &correlation_id)?;
    let (exchange, routing_key) = shared
        .namespace
        .publish_target(target.exchange, target.routing_key);
    short(ShortField::ExchangeName, &exchange)?;
    short(ShortField::RoutingKey, &routing_key)?;
    crate::trace::call_sent(span, &exchange, &routing_key, &properties);
    let properties = crate::trace::inject(span, properties);

    let registered = async {
        loop {
            let session = shared.session(deadline, timeout).await?;
            let (sender, receiver) = oneshot::channel();
            if session.pending.insert(&correlation_id, sender) {
                let waiting = Waiting {
                    pending: session.pending.clone(),
                    id: correlation_id.clone(),
                };
                return Ok::<_, PublishError>((session, waiting, receiver));
            }
            // The channel went between the look-up and now: nothing was sent, so the
            // request goes on the next one.
        }
    };
    let (session, _waiting, receiver) = tokio::time::timeout_at(deadline, registered)
        .await
        .map_err(|_| PublishError::NotConnected(timeout))??;
    let address = publisher::Address {
        exchange: &exchange,
        routing_key: &routing_key,
        routing: Routing::Mandatory,
    };
    let confirmed = publisher::confirmed(
        &session.channel,
        address,
        &body,
        properties,
        deadline,
        || {},
    )
    .await;
    drop(body);
    publisher::confirmation(confirmed, address, &shared.connection, timeout).map_err(|error| {
        match error {
            PublishError::Timeout(_) => RpcError::Timeout(timeout),
            other => RpcError::Publish(other),
        }
    })?;
    let reply = match tokio::time::timeout_at(deadline, receiver).await {
        Err(_) => return Err(RpcError::Timeout(timeout)),
        Ok(Err(_)) => return Err(RpcError::ConnectionLost),
        Ok(Ok(reply)) => reply,
    };
    read_answer::<O>(&reply.body, &reply.properties, max_body_bytes)
}

/// The request of operation `O` as a caller sends it, validated: `reply-to` direct reply-to,
/// this `correlation_id`, `expiration` the call's `timeout` and its deadline in
/// [`headers::DEADLINE`].
pub(crate) fn outgoing<O: Operation>(
    request: &<O::Request as Message>::Payload,
    headers: &<O::Request as Message>::Headers,
    options: &CallOptions,
    timeout: Duration,
    correlation_id: &str,
) -> Result<Outgoing, PublishError> {
    let publish = PublishOptions {
        message_id: options.message_id.clone(),
        timestamp: None,
        correlation_id: Some(correlation_id.to_owned()),
        reply_to: None,
        // The broker expires a request nobody took before its caller gave up.
        expiration: Some(timeout),
        priority: options.priority,
    };
    let give_up_at = deadline_millis(timeout);
    let Outgoing { body, properties } =
        publisher::outgoing::<O::Request>(request, headers, &publish, None, |table| {
            table.insert(
                ShortString::from(headers::DEADLINE),
                AMQPValue::LongLongInt(give_up_at),
            );
        })?;
    // Transient: a request is worth something only while its caller waits, which does not
    // outlive a broker restart (the caller's channel, where the reply goes, does not
    // either); persisting it would cost a disk write for nothing.
    let properties = publish
        .apply(properties)?
        .with_delivery_mode(1)
        .with_reply_to(ShortString::from(DIRECT_REPLY_TO));
    Ok(Outgoing { body, properties })
}

/// What a reply with `body` and `properties` says to a caller of `O` reading replies under
/// `max_body_bytes`: the response, or why there is none.
pub(crate) fn read_answer<O: Operation>(
    body: &[u8],
    properties: &BasicProperties,
    max_body_bytes: usize,
) -> CallResult<O> {
    match reply::read(body, properties, max_body_bytes).map_err(RpcError::InvalidReply)? {
        Received::Ok(body) => decode_within::<O::Response>(&body, max_body_bytes)
            .map_err(|why| RpcError::InvalidReply(format!("the response: {why}"))),
        Received::Error { code, body } => match O::Error::decode(&code, &body) {
            Some(Ok(error)) => Err(RpcError::Declared(error)),
            Some(Err(why)) => Err(RpcError::InvalidReply(format!(
                "declared error `{code}`: {why}"
            ))),
            None => Err(RpcError::InvalidReply(format!(
                "error code `{code}` is not one operation `{}` declares",
                O::NAME
            ))),
        },
        Received::Failed { reason, detail } => Err(RpcError::Failed { reason, detail }),
    }
}

/// `timeout` from now, in milliseconds since the Unix epoch: the request's
/// [`headers::DEADLINE`].
fn deadline_millis(timeout: Duration) -> i64 {
    let at = SystemTime::now()
        .checked_add(timeout)
        .unwrap_or_else(SystemTime::now);
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
