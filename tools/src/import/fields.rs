//! Reading a document so that nothing in it is dropped silently: each object is read
//! through [`Fields`], which remembers the keys the import used, and every key left over
//! becomes a [`Note`] naming it.

use std::collections::BTreeSet;

use serde_json::{Map, Value};
pub(super) use warren_codegen::json_pointer::child;
use warren_codegen::json_pointer::unescape_segment;
use warren_codegen::syntax::Duration;

use super::{Note, NoteKind};

/// The notes of one import, in the order they were found.
#[derive(Debug, Default)]
pub(super) struct Notes(pub(super) Vec<Note>);

impl Notes {
    /// `pointer` is not in the import, because `message`.
    pub(super) fn not_mapped(&mut self, pointer: &str, message: impl Into<String>) {
        self.push(pointer, NoteKind::NotMapped, message.into());
    }

    /// `pointer` was read with the guess `message` says.
    pub(super) fn assumed(&mut self, pointer: &str, message: impl Into<String>) {
        self.push(pointer, NoteKind::Assumed, message.into());
    }

    fn push(&mut self, pointer: &str, kind: NoteKind, message: String) {
        self.0.push(Note {
            pointer: pointer.to_owned(),
            kind,
            message,
        });
    }
}

/// An object of the document at a JSON pointer, and the keys of it read so far.
pub(super) struct Fields<'a> {
    map: Option<&'a Map<String, Value>>,
    pub(super) pointer: String,
    read: BTreeSet<&'a str>,
}

impl<'a> Fields<'a> {
    /// The object `value` at `pointer`; anything but an object reads as an empty one.
    pub(super) fn of(value: Option<&'a Value>, pointer: impl Into<String>) -> Self {
        Self {
            map: value.and_then(Value::as_object),
            pointer: pointer.into(),
            read: BTreeSet::new(),
        }
    }

    /// Every entry of the object, for an object whose keys are names (channels,
    /// messages): none of them is marked read.
    pub(super) fn entries(&self) -> impl Iterator<Item = (&'a String, &'a Value)> + use<'a> {
        self.map.into_iter().flatten()
    }

    /// The value of `key`, which is now read.
    pub(super) fn get(&mut self, key: &str) -> Option<&'a Value> {
        let (key, value) = self.map?.get_key_value(key)?;
        self.read.insert(key.as_str());
        Some(value)
    }

    /// The string value of `key`.
    pub(super) fn str(&mut self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }

    /// The boolean value of `key`.
    pub(super) fn bool(&mut self, key: &str) -> Option<bool> {
        self.get(key).and_then(Value::as_bool)
    }

    /// The whole number under `key`, when it fits a `T`.
    pub(super) fn number<T: TryFrom<u64>>(&mut self, key: &str) -> Option<T> {
        self.get(key)
            .and_then(Value::as_u64)
            .and_then(|n| T::try_from(n).ok())
    }

    /// The duration under `key`, written as a contract writes one (`500ms`, `30s`).
    pub(super) fn duration(&mut self, key: &str) -> Option<Duration> {
        self.str(key).and_then(|d| Duration::parse(d).ok())
    }

    /// The object under `key`, to read on.
    pub(super) fn object(&mut self, key: &str) -> Fields<'a> {
        let pointer = self.at(key);
        Fields::of(self.get(key), pointer)
    }

    /// The pointer of `key` in this object.
    pub(super) fn at(&self, key: &str) -> String {
        child(&self.pointer, key)
    }

    /// Marks `keys` as read without using them: what the import knows it can pass over.
    pub(super) fn skip(&mut self, keys: &[&str]) {
        for key in keys {
            self.get(key);
        }
    }

    /// Each key of the object not read, as a note saying `why` it has no place in a
    /// contract.
    pub(super) fn finish(self, notes: &mut Notes, why: &str) {
        let Some(map) = self.map else { return };
        for key in map.keys() {
            if !self.read.contains(key.as_str()) {
                notes.not_mapped(&child(&self.pointer, key), why);
            }
        }
    }
}

/// The key `value`'s `$ref` names directly under `prefix` (`#/channels/`): one pointer
/// segment, unescaped. `None` for anything else.
pub(super) fn local_ref(value: &Value, prefix: &str) -> Option<String> {
    let key = value.get("$ref")?.as_str()?.strip_prefix(prefix)?;
    (!key.contains('/')).then(|| unescape_segment(key))
}
