//! What typify would write out in every generated file, written once here: the builders of
//! the payload types, the conversions of their string enums, and the error of those
//! conversions.
//!
//! typify writes a builder of ~25 lines plus ~12 per field for every struct (a field setter
//! is the same seven lines each time), four impls of ~35 lines for every string enum and six
//! of ~55 for every constrained string; the generator hands what it read from typify's items
//! (names, types, defaults, JSON values, checks) to [`builder!`](crate::__warren_builder),
//! [`string_enum!`](crate::__warren_string_enum) and
//! [`string_newtype!`](crate::__warren_string_newtype) instead, which expand to the same
//! items: the same API, a fraction of the generated file.
//! Its `error` module is a `pub use` of [`ConversionError`].

use std::borrow::Cow;

/// Why a generated type's `TryFrom` or `FromStr` refused a value (a string outside its enum,
/// or breaking its length or pattern), or why a builder could not build: the field unset or
/// its value not converted. A generated file's `types::error::ConversionError` is this type.
pub struct ConversionError(Cow<'static, str>);

impl std::error::Error for ConversionError {}

impl std::fmt::Display for ConversionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::fmt::Debug for ConversionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl From<&'static str> for ConversionError {
    fn from(value: &'static str) -> Self {
        Self(value.into())
    }
}

impl From<String> for ConversionError {
    fn from(value: String) -> Self {
        Self(value.into())
    }
}

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
        $crate::__warren_parsed_from_text!($name);
    };
}

/// The impls of a generated string newtype `$name` (`pub struct $name(String)`, a string with
/// a length or a pattern): `Deref` and `From` to its `String`, `FromStr` and the `TryFrom`s
/// running `$checks` on `$value` (each returns the error of the check it fails), and a
/// `Deserialize` that runs them too: what typify writes out for every such type. As
/// [`__warren_builder`], for generated code alone.
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_string_newtype {
    ($name:ident |$value:ident| $checks:block) => {
        impl ::core::ops::Deref for $name {
            type Target = ::std::string::String;
            fn deref(&self) -> &::std::string::String {
                &self.0
            }
        }
        impl ::core::convert::From<$name> for ::std::string::String {
            fn from(value: $name) -> Self {
                value.0
            }
        }
        impl $name {
            /// The error of the first check the text fails, if any.
            fn __check($value: &str) -> ::core::result::Result<(), self::error::ConversionError> {
                $checks::core::result::Result::Ok(())
            }
        }
        impl ::core::str::FromStr for $name {
            type Err = self::error::ConversionError;
            fn from_str(value: &str) -> ::core::result::Result<Self, self::error::ConversionError> {
                Self::__check(value)?;
                ::core::result::Result::Ok(Self(value.to_string()))
            }
        }
        $crate::__warren_parsed_from_text!($name);
        impl<'de> $crate::codegen::serde::Deserialize<'de> for $name {
            fn deserialize<D>(deserializer: D) -> ::core::result::Result<Self, D::Error>
            where
                D: $crate::codegen::serde::Deserializer<'de>,
            {
                // The string read is the one kept: checked in place, not copied by `parse`.
                let text =
                    <::std::string::String as $crate::codegen::serde::Deserialize>::deserialize(
                        deserializer,
                    )?;
                match Self::__check(&text) {
                    ::core::result::Result::Ok(()) => ::core::result::Result::Ok(Self(text)),
                    ::core::result::Result::Err(e) => ::core::result::Result::Err(
                        <D::Error as $crate::codegen::serde::de::Error>::custom(e.to_string()),
                    ),
                }
            }
        }
    };
}

/// `TryFrom<&str>` and `TryFrom<String>` of `$name` through its `FromStr`: the string enums'
/// and constrained strings' alike.
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_parsed_from_text {
    ($name:ident) => {
        impl ::core::convert::TryFrom<&str> for $name {
            type Error = self::error::ConversionError;
            fn try_from(value: &str) -> ::core::result::Result<Self, self::error::ConversionError> {
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
