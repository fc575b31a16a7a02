//! Limits AMQP 0-9-1 and RabbitMQ set, which the generator checks a contract against and the
//! runtime relies on.

/// The most bytes an AMQP short string holds: every exchange, queue and routing-key name, and
/// every header name.
pub const MAX_SHORT_STRING: usize = 255;

/// The priority levels a classic queue may declare (`x-max-priority`).
pub const PRIORITY_LEVELS: std::ops::RangeInclusive<u8> = 1..=u8::MAX;

/// The longest per-message expiration RabbitMQ accepts, in milliseconds (`2^32 - 1`, the
/// longest Erlang timer): a longer one is refused with `PRECONDITION_FAILED`, which closes the
/// channel it was published on.
pub const MAX_EXPIRATION_MILLIS: u64 = 4_294_967_295;
