//! A body parsed into a [`Document`]: by the scanner wherever it reads the body as serde_json
//! would ([`super::scan`]), else by serde_json's own parser, through a visitor that stores each
//! value in the document's arenas instead of building a `serde_json::Value`. Both fill the
//! arenas through one [`Builder`].

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use super::{Arenas, Document, Entry, Member};

impl<'a> Document<'a> {
    /// `body` parsed as one JSON value, with `serde_json::from_slice`'s grammar, nesting limit
    /// and errors: by the scanner when it reads the body ([`super::scan`]), else by serde_json.
    pub(crate) fn parse(body: &'a [u8]) -> Result<Self, serde_json::Error> {
        match super::scan::scan(body) {
            Some(document) => Ok(document),
            None => Self::parse_with_serde(body),
        }
    }

    /// `body` parsed by serde_json's own parser, through a visitor filling the arenas.
    pub(super) fn parse_with_serde(body: &'a [u8]) -> Result<Self, serde_json::Error> {
        let mut builder = Builder::for_body(body.len());
        let mut deserializer = serde_json::Deserializer::from_slice(body);
        let root = Value(&mut builder).deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(Document {
            root,
            arenas: builder.arenas,
        })
    }
}

/// The arenas being filled, and the children of the containers still open, innermost last:
/// a container's children are moved into their arena together when it closes, so that they
/// lie in one run.
pub(super) struct Builder<'a> {
    pub(super) arenas: Arenas<'a>,
    pub(super) open_items: Vec<Entry<'a>>,
    pub(super) open_members: Vec<Member<'a>>,
}

/// A body holds about one value per this many bytes, sizing the arenas up front: growing
/// them from nothing cost three reallocations on a typical message.
const BYTES_PER_VALUE: usize = 16;

/// The arenas are sized up front for at most this many values each (a large body grows them).
const MAX_SIZED: usize = 4096;

impl<'a> Builder<'a> {
    /// A builder for a body of `len` bytes.
    pub(super) fn for_body(len: usize) -> Self {
        let values = (len / BYTES_PER_VALUE).clamp(4, MAX_SIZED);
        Builder {
            arenas: Arenas {
                items: Vec::with_capacity(values),
                members: Vec::with_capacity(values),
            },
            open_items: Vec::with_capacity(16),
            open_members: Vec::with_capacity(16),
        }
    }

    /// Closes the array whose items are `open_items[first..]`.
    pub(super) fn close_array(&mut self, first: usize) -> Entry<'a> {
        let start = self.arenas.items.len();
        self.arenas.items.extend(self.open_items.drain(first..));
        Entry::Array {
            start,
            len: self.arenas.items.len() - start,
        }
    }

    /// Closes the object whose members are `open_members[first..]`: sorted by name (stably, so
    /// a repeated name's members stay in their order) and stored once per name, the last one
    /// given, as `serde_json::Value` keeps an object.
    pub(super) fn close_object(&mut self, first: usize) -> Entry<'a> {
        let start = self.arenas.members.len();
        let open = &mut self.open_members[first..];
        // Most bodies come from serializing a struct whose fields are in the order of their
        // names (typify's are): checking that costs a comparison per member, sorting more.
        if open.windows(2).all(|pair| pair[0].name < pair[1].name) {
            self.arenas.members.extend(self.open_members.drain(first..));
        } else {
            open.sort_by(|a, b| a.name.cmp(&b.name));
            for member in self.open_members.drain(first..) {
                match self.arenas.members[start..].last_mut() {
                    Some(last) if last.name == member.name => *last = member,
                    _ => self.arenas.members.push(member),
                }
            }
        }
        Entry::Object {
            start,
            len: self.arenas.members.len() - start,
        }
    }
}

/// Reads one value into the builder.
struct Value<'b, 'a>(&'b mut Builder<'a>);

impl<'a> DeserializeSeed<'a> for Value<'_, 'a> {
    type Value = Entry<'a>;

    fn deserialize<D: Deserializer<'a>>(self, deserializer: D) -> Result<Entry<'a>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'a> Visitor<'a> for Value<'_, 'a> {
    type Value = Entry<'a>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Entry<'a>, E> {
        Ok(Entry::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Entry<'a>, E> {
        Ok(Entry::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Entry<'a>, E> {
        Ok(Entry::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Entry<'a>, E> {
        // As `serde_json::Value` reads one: a number JSON cannot hold is null.
        Ok(Number::from_f64(value).map_or(Entry::Null, Entry::Number))
    }

    fn visit_borrowed_str<E>(self, value: &'a str) -> Result<Entry<'a>, E> {
        Ok(Entry::String(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Entry<'a>, E> {
        Ok(Entry::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Entry<'a>, E> {
        Ok(Entry::String(Cow::Owned(value)))
    }

    fn visit_unit<E>(self) -> Result<Entry<'a>, E> {
        Ok(Entry::Null)
    }

    fn visit_none<E>(self) -> Result<Entry<'a>, E> {
        Ok(Entry::Null)
    }

    fn visit_some<D: Deserializer<'a>>(self, deserializer: D) -> Result<Entry<'a>, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'a>>(self, mut items: A) -> Result<Entry<'a>, A::Error> {
        let builder = self.0;
        let first = builder.open_items.len();
        while let Some(item) = items.next_element_seed(Value(&mut *builder))? {
            builder.open_items.push(item);
        }
        Ok(builder.close_array(first))
    }

    fn visit_map<A: MapAccess<'a>>(self, mut members: A) -> Result<Entry<'a>, A::Error> {
        let builder = self.0;
        let first = builder.open_members.len();
        while let Some(name) = members.next_key_seed(Name)? {
            let value = members.next_value_seed(Value(&mut *builder))?;
            builder.open_members.push(Member { name, value });
        }
        Ok(builder.close_object(first))
    }
}

/// Reads a member's name, borrowed from the body unless it holds an escape.
struct Name;

impl<'a> DeserializeSeed<'a> for Name {
    type Value = Cow<'a, str>;

    fn deserialize<D: Deserializer<'a>>(self, deserializer: D) -> Result<Cow<'a, str>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'a> Visitor<'a> for Name {
    type Value = Cow<'a, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a member name")
    }

    fn visit_borrowed_str<E>(self, value: &'a str) -> Result<Cow<'a, str>, E> {
        Ok(Cow::Borrowed(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Cow<'a, str>, E> {
        Ok(Cow::Owned(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Cow<'a, str>, E> {
        Ok(Cow::Owned(value))
    }
}
