//! Request/reply (RPC) facts shared by the generator and the runtime: the reply address, the
//! default timeout, and what a reply says it holds.

use std::time::Duration;

use crate::spelled::spelled;

/// RabbitMQ's direct reply-to pseudo-queue: a caller consumes it (without acks) and names it
/// as a request's `reply-to`; the broker sends replies straight to that channel, with no
/// queue declared. Usable as a reply-to only on a channel consuming from it.
pub const DIRECT_REPLY_TO: &str = "amq.rabbitmq.reply-to";

/// How long a call waits for its reply when the contract sets no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

spelled! {
    /// What an RPC reply holds, as carried in
    /// [`x-rpc-status`](crate::headers::RPC_STATUS).
    ///
    /// ```
    /// use warren_model::rpc::ReplyStatus;
    /// assert_eq!("error".parse(), Ok(ReplyStatus::Error));
    /// assert_eq!(ReplyStatus::Failed.as_str(), "failed");
    /// ```
    pub enum ReplyStatus {
        /// The body is the response.
        Ok => "ok",
        /// The body is a declared error, whose code is in
        /// [`x-rpc-error`](crate::headers::RPC_ERROR).
        Error => "error",
        /// The server could not answer (the request did not decode or validate, the handler
        /// failed for good, or its answer broke its schema); the reason is in
        /// [`x-rpc-failure`](crate::headers::RPC_FAILURE) and the body is a short text.
        Failed => "failed",
    }
}
