//! A payload deserialized from a [`Node`], as `serde_json::from_value` deserializes one from
//! a `serde_json::Value`: the same visits, so the same types read, with the same errors.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, Expected, IntoDeserializer, MapAccess,
    SeqAccess, Unexpected, VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::Error;

use super::{Entry, Member, Node};

impl<'d> Node<'d> {
    /// What serde says a value of the wrong type was.
    #[cold]
    fn unexpected(self) -> Unexpected<'d> {
        match self.entry {
            Entry::Null => Unexpected::Unit,
            Entry::Bool(boolean) => Unexpected::Bool(*boolean),
            Entry::Number(number) => {
                if let Some(unsigned) = number.as_u64() {
                    Unexpected::Unsigned(unsigned)
                } else if let Some(signed) = number.as_i64() {
                    Unexpected::Signed(signed)
                } else {
                    Unexpected::Float(number.as_f64().unwrap_or_default())
                }
            }
            Entry::String(string) => Unexpected::Str(string),
            Entry::Array { .. } => Unexpected::Seq,
            Entry::Object { .. } => Unexpected::Map,
        }
    }

    #[cold]
    fn invalid_type(self, expected: &dyn Expected) -> Error {
        de::Error::invalid_type(self.unexpected(), expected)
    }

    /// A number read by `visitor`, or the error of any other value.
    fn number<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::Number(number) => number.clone().deserialize_any(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    /// An array's items visited as a sequence, all of them or an error.
    fn visit_items<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        let items = self.items().unwrap_or_default();
        let mut access = Items {
            node: self,
            items: items.iter(),
        };
        let value = visitor.visit_seq(&mut access)?;
        match access.items.len() {
            0 => Ok(value),
            _ => Err(de::Error::invalid_length(
                items.len(),
                &"fewer elements in array",
            )),
        }
    }

    /// An object's members visited as a map, all of them or an error.
    fn visit_members<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        let members = self.members().unwrap_or_default();
        let mut access = Members {
            node: self,
            members: members.iter(),
            value: None,
        };
        let value = visitor.visit_map(&mut access)?;
        match access.members.len() {
            0 => Ok(value),
            _ => Err(de::Error::invalid_length(
                members.len(),
                &"fewer elements in map",
            )),
        }
    }
}

/// A deserializer's methods for numbers: a number whichever the visitor asks for, as
/// serde_json's value reads one (the visitor converts it, or refuses it).
macro_rules! numbers {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
            self.number(visitor)
        }
    )*};
}

impl<'d> Deserializer<'d> for Node<'d> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::Null => visitor.visit_unit(),
            Entry::Bool(boolean) => visitor.visit_bool(*boolean),
            Entry::Number(_) => self.number(visitor),
            Entry::String(string) => visitor.visit_borrowed_str(string),
            Entry::Array { .. } => self.visit_items(visitor),
            Entry::Object { .. } => self.visit_members(visitor),
        }
    }

    numbers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }

    fn deserialize_option<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'d>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.entry {
            Entry::String(variant) => visitor.visit_enum(Variant {
                name: variant,
                value: None,
            }),
            // An enum in JSON is a map of a single member: the variant and its value.
            Entry::Object { .. } => match self.members().unwrap_or_default() {
                [only] => visitor.visit_enum(Variant {
                    name: &only.name,
                    value: Some(self.at(&only.value)),
                }),
                _ => Err(de::Error::invalid_value(
                    Unexpected::Map,
                    &"map with a single key",
                )),
            },
            _ => Err(de::Error::invalid_type(self.unexpected(), &"string or map")),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'d>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bool<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::Bool(boolean) => visitor.visit_bool(*boolean),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_char<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::String(string) => visitor.visit_borrowed_str(string),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::String(string) => visitor.visit_borrowed_str(string),
            Entry::Array { .. } => self.visit_items(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_unit<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::Null => visitor.visit_unit(),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'d>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_seq<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::Array { .. } => self.visit_items(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'d>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'d>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.entry {
            Entry::Object { .. } => self.visit_members(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'d>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.entry {
            Entry::Array { .. } => self.visit_items(visitor),
            Entry::Object { .. } => self.visit_members(visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_identifier<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'d>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

impl<'d> IntoDeserializer<'d, Error> for Node<'d> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// An array's items, for a sequence's visitor.
struct Items<'d> {
    node: Node<'d>,
    items: std::slice::Iter<'d, Entry<'d>>,
}

impl<'d> SeqAccess<'d> for Items<'d> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'d>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.items.next() {
            Some(item) => seed.deserialize(self.node.at(item)).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// An object's members, for a map's visitor.
struct Members<'d> {
    node: Node<'d>,
    members: std::slice::Iter<'d, Member<'d>>,
    value: Option<&'d Entry<'d>>,
}

impl<'d> MapAccess<'d> for Members<'d> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'d>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.members.next() {
            Some(member) => {
                self.value = Some(&member.value);
                seed.deserialize(Name(&member.name)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'d>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(self.node.at(value)),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.members.len())
    }
}

/// A member's name as a map's key, read as serde_json reads one: a string, or a number or a
/// boolean written as one (`{"1": …}` for a map keyed by integers).
struct Name<'d>(&'d str);

impl<'d> Name<'d> {
    /// The name read as a number by `read`, refused unless it is exactly one JSON number.
    fn number<V>(
        self,
        read: impl FnOnce(
            &mut serde_json::Deserializer<serde_json::de::StrRead<'d>>,
        ) -> Result<V, Error>,
    ) -> Result<V, Error> {
        let Name(name) = self;
        // serde_json's own words for a name that is not one number.
        let not_numeric =
            || de::Error::custom("invalid value: expected key to be a number in quotes");
        let numeric = matches!(name.as_bytes().first(), Some(b'0'..=b'9' | b'-'))
            && !name.ends_with(|c: char| c.is_ascii_whitespace());
        if !numeric {
            return Err(not_numeric());
        }
        let mut deserializer = serde_json::Deserializer::from_str(name);
        let value = read(&mut deserializer)?;
        deserializer.end().map_err(|_| not_numeric())?;
        Ok(value)
    }
}

macro_rules! numeric_name {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.number(|deserializer| deserializer.$method(visitor))
        }
    )*};
}

impl<'de> Deserializer<'de> for Name<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.0)
    }

    numeric_name! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            other => Err(de::Error::invalid_type(Unexpected::Str(other), &visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // A member's name is never null.
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        BorrowedStrDeserializer::<Error>::new(self.0).deserialize_enum(name, variants, visitor)
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct
        map struct identifier ignored_any
    }
}

/// An enum's variant: its name, and its value unless it was written as a string.
struct Variant<'d> {
    name: &'d str,
    value: Option<Node<'d>>,
}

impl<'d> EnumAccess<'d> for Variant<'d> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'d>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let variant = seed.deserialize(BorrowedStrDeserializer::<Error>::new(self.name))?;
        Ok((variant, self))
    }
}

impl<'d> VariantAccess<'d> for Variant<'d> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            Some(value) => serde::Deserialize::deserialize(value),
            None => Ok(()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'d>>(self, seed: T) -> Result<T::Value, Error> {
        match self.value {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'d>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Some(
                value @ Node {
                    entry: Entry::Array { len, .. },
                    ..
                },
            ) => match len {
                0 => visitor.visit_unit(),
                _ => value.visit_items(visitor),
            },
            Some(other) => Err(de::Error::invalid_type(
                other.unexpected(),
                &"tuple variant",
            )),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'d>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Some(
                value @ Node {
                    entry: Entry::Object { .. },
                    ..
                },
            ) => value.visit_members(visitor),
            Some(other) => Err(de::Error::invalid_type(
                other.unexpected(),
                &"struct variant",
            )),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}
