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
        /// Warren itself failed handling the delivery: a panic, or a topology whose retry
        /// tiers do not match its policy.
        InternalError => "internal-error",
    }
}
