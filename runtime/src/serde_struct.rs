//! A payload struct's `Serialize` and `Deserialize`, with what serde's derives write into every
//! struct written once here.
//!
//! serde's `Deserialize` derive writes ~19 KB of code for a struct of six fields: an enum of its
//! fields with a visitor of strings, bytes and indices, and a visitor of the struct as a map and
//! as a sequence. Every line of it is type-checked and borrow-checked in the user's crate: on a
//! contract of a thousand payloads, 1.0 GB of the 1.6 GB the compiler took to check the
//! types, and 21 of their 28 s of CPU. Its `Serialize` derive is smaller, a call and a `?` per
//! field, and still cost that contract 230 MB and 10 s of CPU to check. The generator writes
//! [`serde_struct!`](crate::__warren_serde_struct) instead, for a struct whose serde attributes
//! it knows.
//!
//! Reading, the field names are found by [`Fields`], compiled once, so what the macro expands
//! to is the struct's own: a slot per field, filled in a loop, and the struct built from them.
//! It reads what the derive reads, with its errors and its handling of a missing field
//! ([`given_or_missing`]), with one difference: a struct is read from a map only, not also from
//! a sequence of its fields in order (which no JSON Schema object is).
//!
//! Writing, the struct's fields are handed to [`serialize`] as a list of [`Entry`]s, each a
//! field behind a reference to [`Field`] (one call through a vtable per field, next to the
//! text it writes), and [`serialize`], compiled once per serializer, writes what the derive
//! writes: the same `serialize_struct` with the count of fields written, each field or its
//! `skip_field`, then `end`.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeStruct, Serializer};

/// The field names of a struct, in order, and whether a key that names none of them is an
/// error (`deny_unknown_fields`) or skipped: finds which field a map's key is.
#[derive(Clone, Copy)]
pub struct Fields {
    /// The names as the serialized form spells them (serde's `rename`d ones renamed).
    pub names: &'static [&'static str],
    /// Whether a key naming no field is an error.
    pub deny_unknown: bool,
}

impl Fields {
    /// The index in [`Fields::names`] of the field `map`'s next key names, `Some(None)` for a key
    /// naming none (whose value is then skipped), `None` after the last key.
    pub fn next<'de, A: MapAccess<'de>>(
        self,
        map: &mut A,
    ) -> Result<Option<Option<usize>>, A::Error> {
        let key = map.next_key_seed(self)?;
        if let Some(None) = key {
            map.next_value::<IgnoredAny>()?;
        }
        Ok(key)
    }

    fn unknown<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        match self.deny_unknown {
            true => Err(E::unknown_field(key, self.names)),
            false => Ok(None),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Fields {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for Fields {
    type Value = Option<usize>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("field identifier")
    }

    // Formats that name fields by their index (as the derive reads them).
    fn visit_u64<E: de::Error>(self, index: u64) -> Result<Self::Value, E> {
        match usize::try_from(index) {
            Ok(index) if index < self.names.len() => Ok(Some(index)),
            _ if self.deny_unknown => Err(E::invalid_value(
                de::Unexpected::Unsigned(index),
                &IndexBelow(self.names.len()),
            )),
            _ => Ok(None),
        }
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
        match self.names.iter().position(|name| *name == key) {
            Some(index) => Ok(Some(index)),
            None => self.unknown(key),
        }
    }

    fn visit_bytes<E: de::Error>(self, key: &[u8]) -> Result<Self::Value, E> {
        match self.names.iter().position(|name| name.as_bytes() == key) {
            Some(index) => Ok(Some(index)),
            None => self.unknown(&String::from_utf8_lossy(key)),
        }
    }
}

/// What an index naming no field was expected to be.
struct IndexBelow(usize);

impl de::Expected for IndexBelow {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "field index 0 <= i < {}", self.0)
    }
}

/// `map`'s next value into `slot`, the field named `name`: an error if it was given already.
pub fn next_value<'de, T: de::Deserialize<'de>, A: MapAccess<'de>>(
    slot: &mut Option<T>,
    map: &mut A,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(<A::Error as de::Error>::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// The value of field `name`, given (`slot`) or missing: as serde's derive has it, a missing
/// field is `None` when its type reads an absent value as one (an `Option`), and an error
/// otherwise.
pub fn given_or_missing<'de, T: de::Deserialize<'de>, E: de::Error>(
    slot: Option<T>,
    name: &'static str,
) -> Result<T, E> {
    match slot {
        Some(value) => Ok(value),
        None => T::deserialize(Missing(name, PhantomData)),
    }
}

/// A missing field, read as serde's derive reads one: `None` to a type asking for an option,
/// `missing field` to any other.
struct Missing<E>(&'static str, PhantomData<E>);

impl<'de, E: de::Error> Deserializer<'de> for Missing<E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, E> {
        Err(E::missing_field(self.0))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_none()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

/// One field of a struct [`serialize`] writes: its serialized name, its value, and whether it
/// is skipped (serde's `skip_serializing_if` said so).
pub struct Entry<'a, S: Serializer> {
    name: &'static str,
    value: &'a dyn Field<S::SerializeStruct>,
    skipped: bool,
}

impl<'a, S: Serializer> Entry<'a, S> {
    /// Field `name` of value `value`, written unless `skipped`.
    pub fn new(
        name: &'static str,
        value: &'a dyn Field<S::SerializeStruct>,
        skipped: bool,
    ) -> Self {
        Self {
            name,
            value,
            skipped,
        }
    }
}

/// A field's value, written into a struct being serialized (`St`): any `Serialize` value, behind
/// a reference that does not name its type, so that [`serialize`] is compiled once per
/// serializer rather than once per struct.
pub trait Field<St: SerializeStruct> {
    /// Writes the value as field `name` of `state`.
    fn write(&self, state: &mut St, name: &'static str) -> Result<(), St::Error>;
}

impl<St: SerializeStruct, T: Serialize + ?Sized> Field<St> for T {
    fn write(&self, state: &mut St, name: &'static str) -> Result<(), St::Error> {
        state.serialize_field(name, self)
    }
}

/// Writes struct `name` of fields `entries` into `serializer`, as serde's derive writes it:
/// `serialize_struct` told how many fields are written (a serializer may rely on it: JSON
/// closes an object announced empty at once), each field or its `skip_field`, then `end`.
pub fn serialize<S: Serializer>(
    serializer: S,
    name: &'static str,
    entries: &[Entry<'_, S>],
) -> Result<S::Ok, S::Error> {
    let written = entries.iter().filter(|entry| !entry.skipped).count();
    let mut state = serializer.serialize_struct(name, written)?;
    for entry in entries {
        match entry.skipped {
            true => state.skip_field(entry.name)?,
            false => entry.value.write(&mut state, entry.name)?,
        }
    }
    state.end()
}

/// `Serialize` and `Deserialize` for struct `$name` of named fields, as serde's derives write
/// them for the same attributes, compiled into a few lines: `deny_unknown_fields` before the
/// braces when the struct has it, then each field as `field`, with `: default` when a missing
/// field takes its type's default (serde's `default`), `= "name"` when its serialized name
/// differs (serde's `rename`) and `if path` when it is not written where `path(&field)` holds
/// (serde's `skip_serializing_if`). Two shorthands stand for what typify writes on most
/// optional fields: `: skip_none` is `: default if Option::is_none`, `: skip_empty` is
/// `: default if Vec::is_empty`.
///
/// After the braces, `new(field: Type, …) unset(field, …)` adds the struct's constructor: the
/// fields given as its arguments (the required properties, in field order), every field of
/// `unset` at its type's default.
///
/// Only for generated code (`warren_runtime::codegen`): paths resolve where it is invoked.
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_serde_struct {
    ($name:ident $($deny:ident)? {
        $( $field:ident $(: $flag:ident)? $(= $json:literal)? $(if $skip:path)? ),* $(,)?
    } $(
        new( $($argument:ident : $ty:ty),* $(,)? ) $(unset( $($unset:ident),* $(,)? ))?
    )?) => {
        $(
            $crate::__warren_serde_struct!(
                @new $name [$( $argument: $ty ),*] [$($( $unset ),*)?]
            );
        )?
        impl $crate::codegen::serde::Serialize for $name {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: $crate::codegen::serde::Serializer,
            {
                use $crate::codegen::struct_fields as fields;
                fields::serialize(serializer, ::core::stringify!($name), &[$(
                    fields::Entry::<S>::new(
                        $crate::__warren_serde_struct!(@name $field $($json)?),
                        &self.$field,
                        false
                            $(|| $crate::__warren_serde_struct!(@skip $flag, &self.$field))?
                            $(|| $skip(&self.$field))?,
                    ),
                )*])
            }
        }
        impl<'de> $crate::codegen::serde::Deserialize<'de> for $name {
            fn deserialize<D>(deserializer: D) -> ::core::result::Result<Self, D::Error>
            where
                D: $crate::codegen::serde::Deserializer<'de>,
            {
                // The items below are named as no generated type is (`__`), so that a struct
                // named `Field` or `Struct` is still itself inside.
                use $crate::codegen::struct_fields as fields;
                #[allow(non_camel_case_types)]
                #[derive(Clone, Copy)]
                enum __Field { $( $field, )* }
                const __ORDER: &[__Field] = &[$( __Field::$field, )*];
                const __FIELDS: fields::Fields = fields::Fields {
                    names: &[$( $crate::__warren_serde_struct!(@name $field $($json)?), )*],
                    deny_unknown: $crate::__warren_serde_struct!(@deny $($deny)?),
                };
                struct __Struct;
                impl<'de> $crate::codegen::serde::de::Visitor<'de> for __Struct {
                    type Value = $name;
                    fn expecting(
                        &self,
                        formatter: &mut ::core::fmt::Formatter<'_>,
                    ) -> ::core::fmt::Result {
                        formatter.write_str(::core::concat!("struct ", ::core::stringify!($name)))
                    }
                    fn visit_map<A>(self, mut map: A) -> ::core::result::Result<$name, A::Error>
                    where
                        A: $crate::codegen::serde::de::MapAccess<'de>,
                    {
                        $( let mut $field = ::core::option::Option::None; )*
                        while let ::core::option::Option::Some(index) = __FIELDS.next(&mut map)? {
                            let ::core::option::Option::Some(index) = index else { continue };
                            match __ORDER[index] {
                                $( __Field::$field => fields::next_value(
                                    &mut $field,
                                    &mut map,
                                    $crate::__warren_serde_struct!(@name $field $($json)?),
                                )?, )*
                            }
                        }
                        ::core::result::Result::Ok($name {
                            $( $field: $crate::__warren_serde_struct!(
                                @value $field $($json)? $(: $flag)?
                            ), )*
                        })
                    }
                }
                deserializer.deserialize_struct(::core::stringify!($name), __FIELDS.names, __Struct)
            }
        }
    };
    // The constructor, its doc naming its arguments (the first apart, to put commas between).
    (@new $name:ident [] [$( $unset:ident ),*]) => {
        $crate::__warren_serde_struct!(@new_fn $name "none", [] [$( $unset ),*]);
    };
    (@new $name:ident [$first:ident : $first_ty:ty $(, $argument:ident : $ty:ty)*]
        [$( $unset:ident ),*]) => {
        $crate::__warren_serde_struct!(
            @new_fn $name
            ::core::concat!(
                "`", ::core::stringify!($first), "`"
                $(, ", `", ::core::stringify!($argument), "`")*
            ),
            [$first: $first_ty $(, $argument: $ty)*] [$( $unset ),*]
        );
    };
    (@new_fn $name:ident $required:expr, [$( $argument:ident : $ty:ty ),*]
        [$( $unset:ident ),*]) => {
        impl $name {
            #[doc = ::core::concat!(
                "A [`", ::core::stringify!($name), "`] of its required properties (", $required,
                "), the others unset."
            )]
            pub fn new($( $argument: $ty ),*) -> Self {
                Self {
                    $( $argument, )*
                    $( $unset: ::core::default::Default::default(), )*
                }
            }
        }
    };
    (@deny deny_unknown_fields) => { true };
    (@deny) => { false };
    (@name $field:ident $json:literal) => { $json };
    (@name $field:ident) => { ::core::stringify!($field) };
    (@skip default, $value:expr) => { false };
    (@skip skip_none, $value:expr) => { ::core::option::Option::is_none($value) };
    (@skip skip_empty, $value:expr) => { ::std::vec::Vec::is_empty($value) };
    // Each flag reads a missing field as its type's default.
    (@value $field:ident $($json:literal)? : $flag:ident) => {
        $field.unwrap_or_default()
    };
    (@value $field:ident $($json:literal)?) => {
        fields::given_or_missing(
            $field,
            $crate::__warren_serde_struct!(@name $field $($json)?),
        )?
    };
}

#[cfg(test)]
mod tests {
    //! The macro's `Deserialize` and `Serialize` against serde's derives on the same struct: the
    //! same values and the same errors, from text and from a JSON value, for every way a
    //! document can fit or break it; the same text and the same value written.

    // The fields are read through `Debug` only.
    #[allow(dead_code)]
    mod derived {
        #[derive(Debug, serde::Deserialize, serde::Serialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct Strict {
            pub(super) id: String,
            #[serde(
                rename = "the-count",
                skip_serializing_if = "::std::option::Option::is_none"
            )]
            pub(super) count: Option<u32>,
            #[serde(default, skip_serializing_if = "::std::vec::Vec::is_empty")]
            pub(super) tags: Vec<String>,
            pub(super) note: Option<String>,
            pub(super) value: serde_json::Value,
        }

        #[derive(Debug, serde::Deserialize, serde::Serialize)]
        pub(super) struct Loose {
            pub(super) id: u64,
            #[serde(rename = "type")]
            pub(super) r#type: Option<String>,
        }

        #[derive(Debug, serde::Deserialize, serde::Serialize)]
        pub(super) struct Sparse {
            #[serde(skip_serializing_if = "::std::option::Option::is_none")]
            pub(super) only: Option<u8>,
        }
    }

    // The fields are read through `Debug` only; the constructors are `pub`, as in the
    // generated `types` module.
    #[allow(dead_code, unreachable_pub)]
    mod lean {
        #[derive(Debug)]
        pub(super) struct Strict {
            pub(super) id: String,
            pub(super) count: Option<u32>,
            pub(super) tags: Vec<String>,
            pub(super) note: Option<String>,
            pub(super) value: serde_json::Value,
        }
        crate::__warren_serde_struct! {
            Strict deny_unknown_fields {
                id,
                count: skip_none = "the-count",
                tags: skip_empty,
                note,
                value,
            }
        }

        /// Named as the macro's own items would be without their `__`.
        #[derive(Debug, PartialEq)]
        pub(super) struct Field {
            pub(super) r#struct: u8,
        }
        crate::__warren_serde_struct! { Field { r#struct = "struct" } new(r#struct: u8) }

        /// With fields named as the macro's own variables and module.
        #[derive(Debug, PartialEq)]
        pub(super) struct Struct {
            pub(super) field: Field,
            pub(super) map: Option<u8>,
            pub(super) fields: Vec<u8>,
        }
        crate::__warren_serde_struct! {
            Struct deny_unknown_fields { field, map: default, fields: default }
            new(field: Field) unset(map, fields)
        }

        #[derive(Debug)]
        pub(super) struct Loose {
            pub(super) id: u64,
            pub(super) r#type: Option<String>,
        }
        crate::__warren_serde_struct! { Loose { id, r#type = "type" } }

        #[derive(Debug)]
        pub(super) struct Sparse {
            pub(super) only: Option<u8>,
        }
        crate::__warren_serde_struct! { Sparse { only: default if ::std::option::Option::is_none } }
    }

    /// Both structs read from `text`, and from it parsed into a JSON value first (the worker's
    /// way), as their `Debug` text or their error's.
    fn both<D, L>(text: &str) -> [(String, String); 2]
    where
        D: serde::de::DeserializeOwned + std::fmt::Debug,
        L: serde::de::DeserializeOwned + std::fmt::Debug,
    {
        fn shown<T: std::fmt::Debug>(result: Result<T, serde_json::Error>) -> String {
            match result {
                Ok(value) => format!("{value:?}"),
                Err(error) => format!("error: {error}"),
            }
        }
        let value: serde_json::Value = serde_json::from_str(text).expect("JSON");
        [
            (
                shown(serde_json::from_str::<D>(text)),
                shown(serde_json::from_str::<L>(text)),
            ),
            (
                shown(serde_json::from_value::<D>(value.clone())),
                shown(serde_json::from_value::<L>(value)),
            ),
        ]
    }

    #[test]
    fn reads_what_the_derive_reads_with_its_errors() {
        for text in [
            r#"{"id":"a","the-count":3,"tags":["x"],"note":"n","value":[1]}"#,
            r#"{"value":null,"id":"a"}"#,
            r#"{"id":"a","value":1,"the-count":null,"note":null}"#,
            r#"{"value":1}"#,
            r#"{"id":"a"}"#,
            r#"{"id":"a","value":1,"other":2}"#,
            r#"{"id":"a","value":1,"count":2}"#,
            r#"{"id":"a","id":"b","value":1}"#,
            r#"{"id":7,"value":1}"#,
            r#"{"id":"a","value":1,"the-count":-1}"#,
            r#"{"id":"a","value":1,"tags":null}"#,
            r#""text""#,
            "null",
            "{}",
        ] {
            for (derived, lean) in both::<derived::Strict, lean::Strict>(text) {
                assert_eq!(derived, lean, "{text}");
            }
        }
        for text in [
            r#"{"id":1,"type":"t","more":{"a":[1,2]}}"#,
            r#"{"id":1}"#,
            r#"{"type":"t"}"#,
            r#"{"id":1,"type":"t","type":"u"}"#,
        ] {
            for (derived, lean) in both::<derived::Loose, lean::Loose>(text) {
                assert_eq!(derived, lean, "{text}");
            }
        }
    }

    /// `text` read by both structs, then written by each: as text, and as a JSON value.
    fn written<D, L>(text: &str) -> [(String, String); 2]
    where
        D: serde::de::DeserializeOwned + serde::Serialize,
        L: serde::de::DeserializeOwned + serde::Serialize,
    {
        let derived: D = serde_json::from_str(text).expect("read by the derive");
        let lean: L = serde_json::from_str(text).expect("read by the macro");
        let value = |written: Result<serde_json::Value, serde_json::Error>| {
            written.expect("written").to_string()
        };
        [
            (
                serde_json::to_string(&derived).expect("written"),
                serde_json::to_string(&lean).expect("written"),
            ),
            (
                value(serde_json::to_value(&derived)),
                value(serde_json::to_value(&lean)),
            ),
        ]
    }

    #[test]
    fn writes_what_the_derive_writes() {
        for text in [
            r#"{"id":"a","the-count":3,"tags":["x","y"],"note":"n","value":[1,{"b":null}]}"#,
            r#"{"value":null,"id":"a"}"#,
            r#"{"id":"a","value":1,"the-count":null,"note":null,"tags":[]}"#,
            r#"{"id":"\u00e9\n","value":"\"","the-count":0}"#,
        ] {
            for (derived, lean) in written::<derived::Strict, lean::Strict>(text) {
                assert_eq!(derived, lean, "{text}");
            }
        }
        for text in [r#"{"id":1,"type":"t"}"#, r#"{"id":1}"#] {
            for (derived, lean) in written::<derived::Loose, lean::Loose>(text) {
                assert_eq!(derived, lean, "{text}");
            }
        }
        // Every field skipped: an object announced empty, closed at once.
        for text in [r#"{}"#, r#"{"only":4}"#] {
            for (derived, lean) in written::<derived::Sparse, lean::Sparse>(text) {
                assert_eq!(derived, lean, "{text}");
            }
        }
        assert_eq!(
            serde_json::to_string(&lean::Sparse { only: None }).expect("written"),
            "{}"
        );
    }

    #[test]
    fn a_struct_may_bear_the_name_of_what_the_macro_writes() {
        let text = r#"{"field":{"struct":7},"map":1,"fields":[2]}"#;
        let read: lean::Struct = serde_json::from_str(text).expect("read");
        let field = lean::Field { r#struct: 7 };
        let expected = lean::Struct {
            field,
            map: Some(1),
            fields: vec![2],
        };
        assert_eq!(read, expected);
        assert_eq!(serde_json::to_string(&read).expect("written"), text);
    }

    /// `new(…) unset(…)`: its arguments given, the others at their defaults; named as the
    /// macro's own items (`field`, `fields`) and raw (`r#struct`) alike.
    #[test]
    fn the_constructor_takes_the_required_fields_and_unsets_the_others() {
        let field = lean::Field::new(7);
        assert_eq!(field, lean::Field { r#struct: 7 });
        let made = lean::Struct::new(field);
        let expected = lean::Struct {
            field: lean::Field { r#struct: 7 },
            map: None,
            fields: vec![],
        };
        assert_eq!(made, expected);
    }

    #[test]
    fn a_struct_is_a_map_never_a_sequence() {
        let text = r#"[1, "t"]"#;
        assert!(serde_json::from_str::<derived::Loose>(text).is_ok());
        let refused = serde_json::from_str::<lean::Loose>(text).expect_err("a sequence");
        assert_eq!(
            refused.to_string(),
            "invalid type: sequence, expected struct Loose at line 1 column 1"
        );
    }
}
