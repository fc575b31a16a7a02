//! The builders of generated payload types, written once here instead of out in full in
//! every generated file.
//!
//! typify writes a builder of ~25 lines plus ~12 per field for every struct (a field setter
//! is the same seven lines each time); the generator hands the names, types and defaults it
//! read from typify's builder to [`builder!`](crate::__warren_builder) instead, which expands
//! to the same items: the same API, a fraction of the generated file.

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
