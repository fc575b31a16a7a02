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

/// `Debug`, `Clone`, `Copy` and [`Message`] of a generated message marker `pub struct $name;`:
/// `Name = "name"`, then `as "content/type"` when it is not JSON, `: Payload [schema]`, and
/// `, Headers [schema]` when the message has a headers schema. A schema is the pieces of its
/// text for `concat!` (literals and the generated file's shared definitions' macros), after
/// `bundled` when its text starts with the head every bundled schema has (the dialect, and
/// the `$ref` into its `$defs`), which the macro writes once for every message.
///
/// For generated code alone (`warren_runtime::codegen::message`): paths resolve where it is
/// invoked.
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_message {
    (
        $name:ident = $message:literal $(as $content_type:literal)?
            : $payload:ty [ $($payload_schema:tt)* ]
            $(, $headers:ty [ $($headers_schema:tt)* ])?
    ) => {
        // A marker is named, passed and copied, never compared or hashed: each impl more is
        // one per message to compile.
        impl ::core::fmt::Debug for $name {
            fn fmt(&self, formatter: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                formatter.write_str(::core::stringify!($name))
            }
        }
        impl ::core::clone::Clone for $name {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl ::core::marker::Copy for $name {}
        impl $crate::Message for $name {
            type Payload = $payload;
            type Headers = $crate::__warren_message!(@headers $($headers)?);
            const NAME: &'static str = $message;
            $( const CONTENT_TYPE: &'static str = $content_type; )?
            const PAYLOAD_SCHEMA: &'static str =
                $crate::__warren_message!(@schema $($payload_schema)*);
            $(
                const HEADERS_SCHEMA: ::core::option::Option<&'static str> =
                    ::core::option::Option::Some(
                        $crate::__warren_message!(@schema $($headers_schema)*),
                    );
            )?
        }
    };
    (@headers $headers:ty) => { $headers };
    (@headers) => { $crate::NoHeaders };
    // The head of a schema `warren_codegen` bundles: its dialect, and its `$ref` into its
    // `$defs`, up to the definition's name (the tests of the generated API compare each
    // schema with the bundler's text).
    (@schema bundled $($piece:tt)*) => {
        ::core::concat!(
            r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","$ref":"#/$defs/"##,
            $($piece)*
        )
    };
    (@schema $($piece:tt)*) => { ::core::concat!($($piece)*) };
}
