//! The message headers warren writes, and the broker's own that warren reads.

/// Retries so far, on warren's retry copies.
pub const RETRY_COUNT: &str = "x-retry-count";
/// When the message first failed, in milliseconds since the Unix epoch, on retry copies and
/// dead letters.
pub const FIRST_FAILURE: &str = "x-first-failure-timestamp";
/// The last error, cut to a bounded length, on retry copies and dead letters.
pub const LAST_ERROR: &str = "x-last-error";
/// Why a message was dead-lettered: a [`crate::FailureReason`].
pub const FAILURE_REASON: &str = "x-failure-reason";
/// The exchange a dead letter was first published to.
pub const ORIGINAL_EXCHANGE: &str = "x-original-exchange";
/// The routing key a dead letter was first published with.
pub const ORIGINAL_ROUTING_KEY: &str = "x-original-routing-key";
/// The consumer that dead-lettered a message.
pub const CONSUMER: &str = "x-consumer";
/// The queue a message failed in, on retry copies and dead letters: where a redrive sends it
/// back.
pub const FAILED_QUEUE: &str = "x-failed-queue";
/// When the message last failed, in milliseconds since the Unix epoch, on retry copies and
/// dead letters.
pub const LAST_FAILURE: &str = "x-last-failure-timestamp";
/// How many times a dead letter was redriven back to its queue (`warren dlq redrive`): a
/// redrive resets the retry headers but not this, so a message cannot loop forever.
pub const REDRIVE_COUNT: &str = "x-redrive-count";
/// When a warren publisher published the message, in milliseconds since the Unix epoch (the
/// AMQP `timestamp` property has whole seconds only): what a consumer's end-to-end latency
/// is measured from, on messages whose broker-checked `user_id` the consumer trusts. Kept on
/// retry copies and dead letters when it was believed, so a retried message's latency
/// includes its retries; a value in the future or older than a week is not believed.
pub const PUBLISHED_AT: &str = "x-published-at";
/// Deliveries so far, counted by the broker on quorum queues.
pub const DELIVERY_COUNT: &str = "x-delivery-count";
/// What the connection guard cut from headers it could not pass on whole: a table with the
/// failure `reason` and a `detail`.
pub const HEADERS_CUT: &str = "x-headers-cut";

/// When the caller of an RPC request gives up waiting for its reply, in milliseconds since the
/// Unix epoch: a server does not handle (or retry) a request past it, and dead-letters it as
/// `expired` instead. Kept on retry copies.
pub const DEADLINE: &str = "x-deadline";
/// On an RPC reply: what it holds, a [`crate::rpc::ReplyStatus`] (`ok`, `error` or
/// `failed`).
pub const RPC_STATUS: &str = "x-rpc-status";
/// On an RPC reply of status `error`: the code of the declared error its body holds.
pub const RPC_ERROR: &str = "x-rpc-error";
/// On an RPC reply of status `failed`: why the server could not answer, a
/// [`crate::FailureReason`].
pub const RPC_FAILURE: &str = "x-rpc-failure";

/// W3C Trace Context: the trace and span a message was published in, as
/// `00-{trace id}-{parent id}-{flags}` (<https://www.w3.org/TR/trace-context/>). Written on
/// publish (with the `opentelemetry` feature) and on retry and dead-letter copies; read on
/// consume, and ignored unless it parses strictly.
pub const TRACEPARENT: &str = "traceparent";
/// W3C Trace Context: vendor-specific trace state travelling with [`TRACEPARENT`], never
/// without it.
pub const TRACESTATE: &str = "tracestate";

/// The trace context headers: transport, not part of any message's typed headers.
pub const TRACE: [&str; 2] = [TRACEPARENT, TRACESTATE];

/// The headers warren writes on retried and dead-lettered copies.
pub const WARREN: [&str; 10] = [
    RETRY_COUNT,
    FIRST_FAILURE,
    LAST_FAILURE,
    LAST_ERROR,
    FAILURE_REASON,
    ORIGINAL_EXCHANGE,
    ORIGINAL_ROUTING_KEY,
    FAILED_QUEUE,
    CONSUMER,
    REDRIVE_COUNT,
];

/// RabbitMQ's record of a message's dead-letterings, the most recent first.
pub const DEATH: &str = "x-death";

/// The headers RabbitMQ writes: the delivery count of a quorum queue, and the record of a
/// dead-lettering (`x-death` and its summaries).
pub const BROKER: [&str; 8] = [
    DELIVERY_COUNT,
    DEATH,
    "x-first-death-exchange",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-last-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
];
