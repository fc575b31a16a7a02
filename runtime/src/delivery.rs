//! What a handler receives.

/// A decoded, validated message handed to a handler: its payload and headers, typed, plus
/// what the broker said about the delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery<P, H = crate::NoHeaders> {
    payload: P,
    headers: H,
    exchange: String,
    routing_key: String,
    redelivered: bool,
    retry_count: u32,
    message_id: Option<String>,
    first_failure: Option<std::time::SystemTime>,
}

impl<P, H> Delivery<P, H> {
    /// A delivery of `payload` with `headers`, as a handler test would build one.
    pub fn new(payload: P, headers: H) -> Self {
        Self {
            payload,
            headers,
            exchange: String::new(),
            routing_key: String::new(),
            redelivered: false,
            retry_count: 0,
            message_id: None,
            first_failure: None,
        }
    }

    /// Sets the exchange and routing key the message was published with.
    pub fn with_route(
        mut self,
        exchange: impl Into<String>,
        routing_key: impl Into<String>,
    ) -> Self {
        self.exchange = exchange.into();
        self.routing_key = routing_key.into();
        self
    }

    /// Sets how many times the message was retried before this delivery, and whether the
    /// broker flagged it as redelivered.
    pub fn with_attempt(mut self, retry_count: u32, redelivered: bool) -> Self {
        self.retry_count = retry_count;
        self.redelivered = redelivered;
        self
    }

    /// Sets the message id.
    pub fn with_message_id(mut self, message_id: impl Into<String>) -> Self {
        self.message_id = Some(message_id.into());
        self
    }

    /// Sets when the message first failed.
    pub fn with_first_failure(mut self, at: std::time::SystemTime) -> Self {
        self.first_failure = Some(at);
        self
    }

    /// The payload.
    pub fn payload(&self) -> &P {
        &self.payload
    }

    /// The headers.
    pub fn headers(&self) -> &H {
        &self.headers
    }

    /// Takes the payload and headers.
    pub fn into_parts(self) -> (P, H) {
        (self.payload, self.headers)
    }

    /// Takes the payload.
    pub fn into_payload(self) -> P {
        self.payload
    }

    /// The exchange the message was published to.
    pub fn exchange(&self) -> &str {
        &self.exchange
    }

    /// The routing key the message was published with.
    pub fn routing_key(&self) -> &str {
        &self.routing_key
    }

    /// Whether the broker delivered this message before (a worker crashed or a connection
    /// dropped before it was settled): the handler may see it twice.
    pub fn redelivered(&self) -> bool {
        self.redelivered
    }

    /// How many retries came before this delivery (0 on the first attempt).
    pub fn retry_count(&self) -> u32 {
        self.retry_count
    }

    /// The message id set by the publisher, if any: the key to deduplicate on, since
    /// delivery is at-least-once.
    pub fn message_id(&self) -> Option<&str> {
        self.message_id.as_deref()
    }

    /// When a handler first failed on this message, for a retried message.
    pub fn first_failure(&self) -> Option<std::time::SystemTime> {
        self.first_failure
    }
}
