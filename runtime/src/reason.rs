//! The failure reasons a dead letter carries in `x-failure-reason`, each named once.

/// The body could not be decompressed, parsed or deserialized.
pub(crate) const DECODE: &str = "decode";
/// The payload or headers break their JSON Schema.
pub(crate) const VALIDATION: &str = "validation";
/// The content type is not the message's.
pub(crate) const CONTENT_TYPE: &str = "content-type";
/// The body is over the size cap (as sent or inflated), holds too many JSON values, or its
/// headers did not fit a frame.
pub(crate) const TOO_LARGE: &str = "too-large";
/// Headers or properties that lapin could not parse safely were cut by the connection guard.
pub(crate) const MALFORMED_HEADERS: &str = "malformed-headers";
/// The handler said the message can never succeed.
pub(crate) const NON_RETRYABLE: &str = "non-retryable";
/// The retries allowed are spent.
pub(crate) const EXHAUSTED: &str = "exhausted";
/// Warren itself panicked handling the delivery.
pub(crate) const INTERNAL_ERROR: &str = "internal-error";
