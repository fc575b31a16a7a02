//! Why a message was dead-lettered or dropped: the value of `x-failure-reason`.

use crate::spelled::spelled;

spelled! {
    /// Why a message was dead-lettered or dropped, as carried in
    /// [`x-failure-reason`](crate::headers::FAILURE_REASON).
    ///
    /// ```
    /// use warren_model::FailureReason;
    ///
    /// assert_eq!("exhausted".parse(), Ok(FailureReason::Exhausted));
    /// assert_eq!(FailureReason::NonRetryable.as_str(), "non-retryable");
    /// assert!("gone".parse::<FailureReason>().is_err());
    /// ```
    ///
    /// Non-exhaustive: a later warren may dead-letter for a reason of its own, so a
    /// dead-letter consumer matching on it keeps a catch-all arm.
    #[non_exhaustive]
    pub enum FailureReason {
        /// The body could not be decompressed, parsed or deserialized.
        Decode => "decode",
        /// The payload or headers break their JSON Schema.
        Validation => "validation",
        /// The content type is not the message's.
        ContentType => "content-type",
        /// The body is over the size cap (as sent or inflated), holds too many JSON values,
        /// or its headers did not fit a frame.
        TooLarge => "too-large",
        /// Headers or properties that could not be parsed safely were cut by the connection
        /// guard.
        MalformedHeaders => "malformed-headers",
        /// The handler said the message can never succeed.
        NonRetryable => "non-retryable",
        /// The retries allowed are spent.
        Exhausted => "exhausted",
        /// Warren itself failed handling the delivery: a panic while decoding or settling
        /// it (or, should one ever be reached, a retry with no wait tier for its delay,
        /// which `Worker::run` refuses at start).
        InternalError => "internal-error",
        /// The broker dead-lettered it: rejected without requeue by a client that is not
        /// warren (read from the broker's `x-death`).
        Rejected => "rejected",
        /// The broker dead-lettered it: its TTL expired in a queue that is not a wait queue.
        Expired => "expired",
        /// The broker dead-lettered it: a queue over its length limit dropped it.
        MaxLength => "max-length",
        /// The broker dead-lettered it: a quorum queue's delivery limit was reached without
        /// warren settling it (a worker that crashed on it each time, say).
        DeliveryLimit => "delivery-limit",
        /// An inbox consumer's message carried no key to record it by (no message id, and
        /// nothing at the payload pointer its inbox reads instead), so its effects could not
        /// be made to happen once; never retried.
        Unidentified => "unidentified",
        /// A consumer of several messages could not tell which one the delivery is: its
        /// `type` names none of them, or (without a `type`) neither its routing key nor its
        /// headers select one.
        UnknownMessage => "unknown-message",
    }
}

impl FailureReason {
    /// The reason for a dead-lettering the broker did, as RabbitMQ spells it in `x-death`
    /// (`rejected`, `expired`, `maxlen`, `delivery_limit`); `None` for any other word.
    ///
    /// ```
    /// use warren_model::FailureReason;
    /// assert_eq!(FailureReason::from_broker("maxlen"), Some(FailureReason::MaxLength));
    /// assert_eq!(FailureReason::from_broker("gone"), None);
    /// ```
    pub fn from_broker(reason: &str) -> Option<Self> {
        Some(match reason {
            "rejected" => Self::Rejected,
            "expired" => Self::Expired,
            "maxlen" => Self::MaxLength,
            "delivery_limit" => Self::DeliveryLimit,
            _ => return None,
        })
    }
}
