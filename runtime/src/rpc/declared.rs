//! What a generated declared-errors enum implements, written once here: the generator names
//! each variant's message and code, and [`declared_errors!`](crate::__warren_declared_errors)
//! expands to the impls typed by them.

/// [`DeclaredErrors`](super::DeclaredErrors), `Display` (the code alone, never the payload,
/// which may hold what a log must not), `Error`, and the conversion into a server handler's
/// `RpcHandlerError`, for the generated enum `$name` whose each `$variant` holds the payload
/// of message `$message`, sent with code `$code`.
///
/// For generated code alone (`warren_runtime::codegen::declared_errors`).
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_declared_errors {
    ($name:ident { $( $variant:ident : $message:ty = $code:literal ),+ $(,)? }) => {
        impl $crate::codegen::DeclaredErrors for $name {
            fn code(&self) -> &'static str {
                match self {
                    $( Self::$variant(_) => $code, )+
                }
            }
            fn encode(
                &self,
            ) -> ::core::result::Result<::std::vec::Vec<u8>, $crate::PublishError> {
                match self {
                    $( Self::$variant(payload) => $crate::codegen::encode_payload::<$message>(payload), )+
                }
            }
            fn message_name(&self) -> ::core::option::Option<&'static str> {
                ::core::option::Option::Some(match self {
                    $( Self::$variant(_) => <$message as $crate::Message>::NAME, )+
                })
            }
            fn content_type(&self) -> ::core::option::Option<&'static str> {
                ::core::option::Option::Some(match self {
                    $( Self::$variant(_) => <$message as $crate::Message>::CONTENT_TYPE, )+
                })
            }
            fn decode(
                code: &str,
                body: &[u8],
            ) -> ::core::option::Option<::core::result::Result<Self, ::std::string::String>> {
                match code {
                    $(
                        $code => ::core::option::Option::Some(
                            $crate::codegen::decode_payload::<$message>(body).map(Self::$variant),
                        ),
                    )+
                    _ => ::core::option::Option::None,
                }
            }
        }
        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(match self {
                    $( Self::$variant(_) => ::core::concat!("`", $code, "`"), )+
                })
            }
        }
        impl ::std::error::Error for $name {}
        impl ::core::convert::From<$name> for $crate::RpcHandlerError<$name> {
            fn from(error: $name) -> Self {
                Self::Declared(error)
            }
        }
    };
}
