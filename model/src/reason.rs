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
    }
}
