//! A [`Document`](super::Document) as a JSON representation the validator reads in place
//! (jsonschema's `Json`), instead of a `serde_json::Value` built for it.

use std::borrow::Cow;

use jsonschema::json::{self, NodeIdentity};
use jsonschema::types::JsonType;
use serde_json::{Number, Value};

use super::{Entry, Member, NO_ARENAS, Node, member};

/// The validator's name for documents: `jsonschema::Validator<Tree>` validates a [`Node`].
pub(crate) struct Tree;

impl json::Json for Tree {
    type Node<'a> = Node<'a>;
    type PreparedKey = String;
    type StringBuffer = ();

    // An object is looked up by binary search over its sorted names, as serde_json's
    // `BTreeMap` is (whose representation says 2).
    const KEYS_PER_LOOKUP: usize = 2;
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> String {
        key.to_owned()
    }

    fn with_string_node<T>((): &mut (), string: &str, f: impl FnOnce(Node<'_>) -> T) -> T {
        let entry = Entry::String(Cow::Borrowed(string));
        f(Node {
            arenas: &NO_ARENAS,
            entry: &entry,
        })
    }
}

impl<'a> json::Node<'a, Tree> for Node<'a> {
    type Object = Members<'a>;
    type Array = Items<'a>;
    type Number = &'a Number;

    fn as_object(&self) -> Option<Members<'a>> {
        self.members().map(|members| Members {
            node: *self,
            members,
        })
    }

    fn as_array(&self) -> Option<Items<'a>> {
        self.items().map(|items| Items { node: *self, items })
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self.entry {
            Entry::String(string) => Some(Cow::Borrowed(string)),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match self.entry {
            Entry::Number(number) => Some(number),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.entry {
            Entry::Bool(boolean) => Some(*boolean),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.entry, Entry::Null)
    }

    fn json_type(&self) -> JsonType {
        match self.entry {
            Entry::Null => JsonType::Null,
            Entry::Bool(_) => JsonType::Boolean,
            Entry::Number(_) => JsonType::Number,
            Entry::String(_) => JsonType::String,
            Entry::Array { .. } => JsonType::Array,
            Entry::Object { .. } => JsonType::Object,
        }
    }

    fn string_length_within(&self, min: u64, max: u64) -> Option<bool> {
        let Entry::String(string) = self.entry else {
            return None;
        };
        // A code point takes one to four bytes: the bytes decide most lengths without
        // counting.
        let bytes = string.len() as u64;
        if bytes < min || bytes.div_ceil(4) > max {
            return Some(false);
        }
        if min <= bytes.div_ceil(4) && bytes <= max {
            return Some(true);
        }
        Some((min..=max).contains(&(string.chars().count() as u64)))
    }

    /// Compared without building a value for a scalar: `enum` and `const` of strings are on
    /// the way of most messages.
    fn equals_value(&self, expected: &Value) -> bool {
        match (self.entry, expected) {
            (Entry::Null, Value::Null) => true,
            (Entry::Bool(boolean), Value::Bool(other)) => boolean == other,
            (Entry::String(string), Value::String(other)) => string == other,
            (Entry::Number(number), Value::Number(_)) => {
                json::cmp::equal(&Value::Number(number.clone()), expected)
            }
            (Entry::Array { .. } | Entry::Object { .. }, Value::Array(_) | Value::Object(_)) => {
                json::cmp::equal(&self.to_value(), expected)
            }
            _ => false,
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(Node::to_value(*self))
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::new(
            std::ptr::from_ref::<Entry<'_>>(self.entry) as usize,
        ))
    }
}

/// An object's members, for the validator.
pub(crate) struct Members<'a> {
    node: Node<'a>,
    members: &'a [Member<'a>],
}

impl<'a> json::Object<'a, Tree> for Members<'a> {
    type Node = Node<'a>;
    type MemberName = &'a str;
    type MembersIter = MembersIter<'a>;

    fn len(&self) -> usize {
        self.members.len()
    }

    fn get(&self, key: &String) -> Option<Node<'a>> {
        member(self.members, key).map(|entry| self.node.at(entry))
    }

    fn members(&self) -> MembersIter<'a> {
        MembersIter {
            node: self.node,
            members: self.members.iter(),
        }
    }
}

/// An object's members in the order of their names.
pub(crate) struct MembersIter<'a> {
    node: Node<'a>,
    members: std::slice::Iter<'a, Member<'a>>,
}

impl<'a> Iterator for MembersIter<'a> {
    type Item = (&'a str, Node<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let member = self.members.next()?;
        Some((&member.name, self.node.at(&member.value)))
    }
}

/// An array's items, for the validator.
pub(crate) struct Items<'a> {
    node: Node<'a>,
    items: &'a [Entry<'a>],
}

impl<'a> json::Array<'a, Tree> for Items<'a> {
    type Node = Node<'a>;
    type ElementsIter = ItemsIter<'a>;

    fn len(&self) -> usize {
        self.items.len()
    }

    fn elements(&self) -> ItemsIter<'a> {
        ItemsIter {
            node: self.node,
            items: self.items.iter(),
        }
    }
}

/// An array's items in order.
pub(crate) struct ItemsIter<'a> {
    node: Node<'a>,
    items: std::slice::Iter<'a, Entry<'a>>,
}

impl<'a> Iterator for ItemsIter<'a> {
    type Item = Node<'a>;

    fn next(&mut self) -> Option<Node<'a>> {
        self.items.next().map(|item| self.node.at(item))
    }
}
