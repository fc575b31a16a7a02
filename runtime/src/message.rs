//! The message trait generated code implements once per message of a contract.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A message type of a contract. The generator emits one marker type per message
/// (`messages::OrderPlaced`) implementing this trait; code generic over messages reads it:
///
/// ```
/// use warren_runtime::Message;
/// fn describe<M: Message>() -> String {
///     format!("{} ({})", M::NAME, M::CONTENT_TYPE)
/// }
/// ```
pub trait Message: Send + Sync + 'static {
    /// The payload type, generated from the message's payload schema.
    type Payload: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The headers type, generated from the headers schema, or [`NoHeaders`].
    type Headers: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The message's name in the contract.
    const NAME: &'static str;
    /// The content type of bodies: `application/json` unless the contract names another.
    const CONTENT_TYPE: &'static str = crate::model::DEFAULT_CONTENT_TYPE;
    /// The payload's JSON Schema, bundled into one self-contained document.
    const PAYLOAD_SCHEMA: &'static str;
    /// The headers' JSON Schema, when the message declares one.
    const HEADERS_SCHEMA: Option<&'static str> = None;
}

/// The headers type of a message without a headers schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct NoHeaders {}
