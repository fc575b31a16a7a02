//! A JSON body parsed once, in place: what a worker validates a payload against its schema
//! with and types it from, without building a `serde_json::Value` for either.
//!
//! A [`Document`] keeps its strings borrowed from the body where they hold no escape, and
//! its arrays' items and its objects' members each in one arena. It is read by a scanner of its
//! own ([`scan`]) where that reads the body exactly as serde_json would, which is every common
//! body, and by serde_json otherwise ([`parse`]): the same grammar, numbers, nesting limit and
//! errors as `serde_json::from_slice`. An object's members are kept in the order of their
//! names, one per name, the last one given when a name repeats, as `serde_json::Value`'s map
//! keeps them: what the validator reads of a body and what the payload is typed from are one
//! and the same, and they are what they were when both read a `Value`. The validator reads it
//! as a JSON representation of its own ([`Tree`]) and serde deserializes a payload from any of
//! its nodes ([`de`]), with `serde_json::from_value`'s errors.

use std::borrow::Cow;

use serde_json::{Number, Value};

mod de;
mod parse;
mod scan;
mod schema;

pub(crate) use schema::Tree;

/// A JSON document read from a body of lifetime `'a`.
pub(crate) struct Document<'a> {
    root: Entry<'a>,
    arenas: Arenas<'a>,
}

/// Every array's items and every object's members of a document, each container's in one
/// run (its children's own children come before it: a container is stored when it closes).
struct Arenas<'a> {
    items: Vec<Entry<'a>>,
    members: Vec<Member<'a>>,
}

/// The arenas of no document: what a node made of a lone string points to.
static NO_ARENAS: Arenas<'static> = Arenas {
    items: Vec::new(),
    members: Vec::new(),
};

/// One JSON value: a scalar, or where a container's children are in their arena.
#[derive(Debug, Clone)]
enum Entry<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    /// `items[start..start + len]`.
    Array {
        start: usize,
        len: usize,
    },
    /// `members[start..start + len]`, in the order of their names, each name once.
    Object {
        start: usize,
        len: usize,
    },
}

/// An object's member.
#[derive(Debug, Clone)]
struct Member<'a> {
    name: Cow<'a, str>,
    value: Entry<'a>,
}

/// One value of a document, with the arenas its children are in. What the validator walks
/// and what a payload is deserialized from; as cheap to copy as two references.
#[derive(Clone, Copy)]
pub(crate) struct Node<'d> {
    arenas: &'d Arenas<'d>,
    entry: &'d Entry<'d>,
}

impl<'a> Document<'a> {
    /// The document's root value.
    pub(crate) fn root(&self) -> Node<'_> {
        Node {
            arenas: &self.arenas,
            entry: &self.root,
        }
    }

    /// How many JSON values the document holds, its root and every object member included.
    pub(crate) fn values(&self) -> usize {
        1 + self.arenas.items.len() + self.arenas.members.len()
    }
}

impl<'d> Node<'d> {
    /// A node of the same document.
    fn at(self, entry: &'d Entry<'d>) -> Self {
        Node {
            arenas: self.arenas,
            entry,
        }
    }

    /// An array's items, or `None` for any other value.
    fn items(self) -> Option<&'d [Entry<'d>]> {
        match *self.entry {
            Entry::Array { start, len } => Some(&self.arenas.items[start..start + len]),
            _ => None,
        }
    }

    /// An object's members (in the order of their names), or `None` for any other value.
    fn members(self) -> Option<&'d [Member<'d>]> {
        match *self.entry {
            Entry::Object { start, len } => Some(&self.arenas.members[start..start + len]),
            _ => None,
        }
    }

    /// The value as a `serde_json::Value`: for a validation error's instance, never on the way
    /// of a valid message.
    fn to_value(self) -> Value {
        match self.entry {
            Entry::Null => Value::Null,
            Entry::Bool(boolean) => Value::Bool(*boolean),
            Entry::Number(number) => Value::Number(number.clone()),
            Entry::String(string) => Value::String(string.clone().into_owned()),
            Entry::Array { .. } => Value::Array(
                (self.items().unwrap_or_default().iter())
                    .map(|item| self.at(item).to_value())
                    .collect(),
            ),
            Entry::Object { .. } => Value::Object(
                (self.members().unwrap_or_default().iter())
                    .map(|member| (member.name.to_string(), self.at(&member.value).to_value()))
                    .collect(),
            ),
        }
    }
}

/// The member named `name` of `members` (sorted by name, each once).
fn member<'d>(members: &'d [Member<'d>], name: &str) -> Option<&'d Entry<'d>> {
    members
        .binary_search_by(|member| member.name.as_ref().cmp(name))
        .ok()
        .map(|found| &members[found].value)
}

#[cfg(test)]
mod tests;
