//! The builders of generated payload types and the conversions of their string enums, written
//! once here instead of out in full in every generated file.
//!
//! typify writes a builder of ~25 lines plus ~12 per field for every struct (a field setter
//! is the same seven lines each time), and four impls of ~35 lines for every string enum; the
//! generator hands what it read from typify's items (names, types, defaults, JSON values) to
//! [`builder!`](crate::__warren_builder) and [`string_enum!`](crate::__warren_string_enum)
//! instead, which expand to the same items: the same API, a fraction of the generated file.

/// A builder of `super::$name` in a generated `types::builder` module: each field a
/// `Result` of its value or why it has none, a setter per field taking anything that converts
/// to its type, and `try_into()` to the built type (the first unset or unconverted field is
/// its error). A field with `= default` starts at that value; one without must be set.
///
/// `super::` names the generated `types` module: paths in a `macro_rules!` expansion resolve
/// where it is invoked, so this is only for generated code (`warren_runtime::codegen`).
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_builder {
    ($name:ident { $( $field:ident : $ty:ty $( = $default:expr )? ),* $(,)? }) => {
        #[doc = ::core::concat!(
            "Builder of [`super::", ::core::stringify!($name),
            "`]: start from `default()`, set the fields, then convert it with `try_into()`."
        )]
        #[derive(Clone, Debug)]
        pub struct $name {
            $( $field: ::core::result::Result<$ty, ::std::string::String>, )*
        }
        impl ::core::default::Default for $name {
            fn default() -> Self {
                Self { $( $field: $crate::__warren_builder!(@unset $field $( = $default )?), )* }
            }
        }
        impl $name {
            $(
                #[doc = ::core::concat!(
                    "Sets field `", ::core::stringify!($field), "` of [`super::",
                    ::core::stringify!($name), "`]."
                )]
                pub fn $field<T>(mut self, value: T) -> Self
                where
                    T: ::core::convert::TryInto<$ty>,
                    T::Error: ::core::fmt::Display,
                {
                    self.$field = value.try_into().map_err(|e| {
                        ::std::format!(
                            ::core::concat!(
                                "error converting supplied value for ",
                                ::core::stringify!($field),
                                ": {}"
                            ),
                            e
                        )
                    });
                    self
                }
            )*
        }
        impl ::core::convert::TryFrom<$name> for super::$name {
            type Error = super::error::ConversionError;
            fn try_from(
                value: $name,
            ) -> ::core::result::Result<Self, super::error::ConversionError> {
                ::core::result::Result::Ok(Self { $( $field: value.$field?, )* })
            }
        }
        impl ::core::convert::From<super::$name> for $name {
            fn from(value: super::$name) -> Self {
                Self { $( $field: ::core::result::Result::Ok(value.$field), )* }
            }
        }
    };
    (@unset $field:ident) => {
        ::core::result::Result::Err(::std::string::String::from(::core::concat!(
            "no value supplied for ",
            ::core::stringify!($field)
        )))
    };
    (@unset $field:ident = $default:expr) => {
        ::core::result::Result::Ok($default)
    };
}

/// `Display`, `FromStr` and the `TryFrom`s of a generated string enum, `$name` with each
/// `$variant` written `$value` in JSON: what typify writes out for every such enum, with its
/// error (`"invalid value"`) for a string that is none of them. As [`__warren_builder`], for
/// generated code alone (`self::error` is the generated `types` module's).
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_string_enum {
    ($name:ident { $( $variant:ident = $value:literal ),* $(,)? }) => {
        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match *self {
                    $( Self::$variant => f.write_str($value), )*
                }
            }
        }
        impl ::core::str::FromStr for $name {
            type Err = self::error::ConversionError;
            fn from_str(
                value: &str,
            ) -> ::core::result::Result<Self, self::error::ConversionError> {
                match value {
                    $( $value => ::core::result::Result::Ok(Self::$variant), )*
                    _ => ::core::result::Result::Err("invalid value".into()),
                }
            }
        }
        impl ::core::convert::TryFrom<&str> for $name {
            type Error = self::error::ConversionError;
            fn try_from(
                value: &str,
            ) -> ::core::result::Result<Self, self::error::ConversionError> {
                value.parse()
            }
        }
        impl ::core::convert::TryFrom<::std::string::String> for $name {
            type Error = self::error::ConversionError;
            fn try_from(
                value: ::std::string::String,
            ) -> ::core::result::Result<Self, self::error::ConversionError> {
                value.parse()
            }
        }
    };
}
