//! Compatibility of two versions of one bundled JSON Schema: every difference, and whom it
//! breaks.
//!
//! Let L(S) be the documents schema S accepts. A change breaks **old readers** when
//! L(new) ⊄ L(old) (consumers still on the old schema get messages they reject), **new
//! readers** when L(old) ⊄ L(new) (consumers on the new schema reject what queues and
//! dead-letter queues still hold from old writers), and the **Rust API** when the generated
//! types change for code written against them. Rules follow Confluent's JSON Schema diff
//! (content models from `additionalProperties`), with warren's own Rust side on top:
//! typify names types from `$ref` targets and titles, makes a field `Option` unless it is
//! required or has a default, picks integer types from bounds, wraps constrained strings in
//! newtypes, and generates exhaustive enums.
//!
//! The walk follows `$ref`s on both sides, visits each (old node, new node) pair once (so
//! cycles and `anyOf` × `$ref` fan-out cost at most one visit per pair), stops at
//! [`MAX_DEPTH`] and after [`MAX_PAIRS`] pairs, and says so: what it did not analyse is
//! reported as breaking both ways, never silently called safe.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use warren_codegen::diagnostics::escape;
use warren_codegen::json_pointer::{escape_segment, unescape_segment};
use warren_codegen::schema_keywords::{DEFINITIONS, DOCUMENT, SUBSCHEMA_LISTS};

/// How deep the walk goes (schema nesting plus `$ref` hops) before it gives up on a branch.
const MAX_DEPTH: usize = 64;
/// How many (old node, new node) pairs one comparison visits before it gives up.
const MAX_PAIRS: usize = 10_000;
/// How many `$ref`s in a row are followed from one node (`A` → `B` → `C`…).
const MAX_REF_HOPS: usize = 32;
/// How many (removed, added) property pairs are compared when looking for renames.
const MAX_RENAME_CANDIDATES: usize = 256;

/// Keywords that describe and never constrain: a change to them breaks nobody.
const ANNOTATIONS: &[&str] = &[
    "description",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
];
/// Bounds that tighten as they grow.
const LOWER_BOUNDS: &[&str] = &[
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
    "minContains",
];
/// Bounds that loosen as they grow.
const UPPER_BOUNDS: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
    "maxContains",
];
/// Keywords this module compares itself; any other keyword that differs is reported as
/// [`SchemaChangeKind::KeywordChanged`].
const HANDLED: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "multipleOf",
    "uniqueItems",
    "pattern",
    "format",
    "title",
    "default",
];

/// The schema that accepts everything: what an absent `items` or `additionalProperties` is.
static ANYTHING: Value = Value::Bool(true);

/// One difference between two versions of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaChange {
    /// JSON pointer into the new schema (the old one for what was removed), e.g.
    /// `/$defs/OrderPlaced/properties/total/minimum`.
    pub(crate) pointer: String,
    /// Where in the document it is, for people: `total.currency`, `items[]`, `(root)`.
    /// Property names are contract text, unescaped: escape before printing to a terminal
    /// ([`SchemaChange::describe`] does).
    pub(crate) location: String,
    /// What changed.
    pub(crate) kind: SchemaChangeKind,
    /// Who it breaks.
    pub(crate) effect: Effect,
}

/// Who a change breaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Effect {
    /// Readers still on the old schema reject (or misread) what writers on the new one send:
    /// L(new) ⊄ L(old).
    pub(crate) old_readers: bool,
    /// Readers on the new schema reject messages written under the old one, which queues and
    /// dead-letter queues still hold: L(old) ⊄ L(new).
    pub(crate) new_readers: bool,
    /// The generated Rust changes incompatibly for code written against it (a type or field
    /// renamed or retyped, a variant removed), even when the wire is fine.
    pub(crate) rust_api: bool,
    /// The readers it breaks break only on what a writer that does not use the generated
    /// types may send: under an open schema, a property it does not declare, under a name
    /// the other version gives a type. The generated types of an open schema hold its
    /// declared properties alone, so warren's own publishers never send one.
    pub(crate) untyped_writers_only: bool,
}

impl Effect {
    /// Whether the change breaks anyone at all.
    #[cfg(test)]
    pub(crate) fn breaks_anyone(self) -> bool {
        self.old_readers || self.new_readers || self.rust_api
    }
    /// Breaks nobody.
    const NONE: Self = Self {
        old_readers: false,
        new_readers: false,
        rust_api: false,
        untyped_writers_only: false,
    };
    /// Breaks everyone: what is not analysed, or is a change in no direction.
    const ALL: Self = Self {
        old_readers: true,
        new_readers: true,
        rust_api: true,
        untyped_writers_only: false,
    };
    /// Only the generated Rust.
    const RUST: Self = Self {
        old_readers: false,
        new_readers: false,
        rust_api: true,
        untyped_writers_only: false,
    };

    /// The same wire effect, and the Rust API broken when `rust_api`.
    fn with_rust(self, rust_api: bool) -> Self {
        Self {
            rust_api: self.rust_api || rust_api,
            ..self
        }
    }
}

/// Which way a set of accepted values moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Direction {
    /// The new schema accepts more: old readers may get what they reject.
    Widened,
    /// The new schema accepts less: new readers may reject what old writers sent.
    Narrowed,
    /// Neither contains the other (or it cannot be told): both break.
    Changed,
    /// Spelled differently, the same values (`[integer, number]` → `number`).
    Equivalent,
}

impl Direction {
    /// The wire effect of values moving this way.
    fn effect(self) -> Effect {
        match self {
            Self::Widened => Effect {
                old_readers: true,
                ..Effect::NONE
            },
            Self::Narrowed => Effect {
                new_readers: true,
                ..Effect::NONE
            },
            Self::Changed => Effect {
                old_readers: true,
                new_readers: true,
                ..Effect::NONE
            },
            Self::Equivalent => Effect::NONE,
        }
    }

    /// `widened`, `narrowed`… as the sentence says it.
    fn word(self) -> &'static str {
        match self {
            Self::Widened => "widened",
            Self::Narrowed => "narrowed",
            Self::Changed => "changed",
            Self::Equivalent => "respelled",
        }
    }

    /// The direction of a bound (or any constraint) going from `old` to `new`, where
    /// `tighter(old, new)` says the new one accepts less.
    fn of_constraint<T: PartialEq>(
        old: Option<T>,
        new: Option<T>,
        tighter: impl Fn(&T, &T) -> Option<bool>,
    ) -> Option<Self> {
        match (old, new) {
            (None, None) => None,
            (None, Some(_)) => Some(Self::Narrowed),
            (Some(_), None) => Some(Self::Widened),
            (Some(old), Some(new)) if old == new => None,
            (Some(old), Some(new)) => Some(match tighter(&old, &new) {
                Some(true) => Self::Narrowed,
                Some(false) => Self::Widened,
                None => Self::Changed,
            }),
        }
    }
}

/// What an object does with properties it does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ContentModel {
    /// `additionalProperties` absent or `true`: anything goes (serde ignores unknown fields).
    Open,
    /// `additionalProperties: false`: nothing else (`deny_unknown_fields`).
    Closed,
    /// `additionalProperties` is a schema the others must match.
    Schema,
    /// `patternProperties` decide by name: not analysed, so treated as breaking.
    Patterns,
}

impl ContentModel {
    /// With its article: `an open`, `a closed`…
    fn with_article(self) -> &'static str {
        match self {
            Self::Open => "an open",
            Self::Closed => "a closed",
            Self::Schema => "a schema-constrained",
            Self::Patterns => "a pattern-constrained",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::Schema => "schema-constrained",
            Self::Patterns => "pattern-constrained",
        }
    }
}

/// Why part of a schema was not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Unanalysed {
    /// Nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// The comparison visited [`MAX_PAIRS`] pairs of nodes and stopped.
    TooLarge,
    /// A value where a schema belongs that is neither an object nor a boolean.
    NotASchema,
}

/// What changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SchemaChangeKind {
    /// A property the old schema did not declare.
    PropertyAdded {
        /// Its name.
        name: String,
        /// Whether the new schema requires it.
        required: bool,
        /// The old object's content model: whether old readers let it through, and whether
        /// old writers may already have sent something under that name.
        model: ContentModel,
        /// Whether it has a `default` (which `required` ignores: warren validates before
        /// decoding).
        default: bool,
    },
    /// A property the new schema no longer declares.
    PropertyRemoved {
        /// Its name.
        name: String,
        /// Whether the old schema required it.
        required: bool,
        /// The new object's content model: whether new readers still accept it.
        model: ContentModel,
    },
    /// A property removed and another added with the same schema in the same object.
    PropertyRenamed {
        /// The old name.
        from: String,
        /// The new name.
        to: String,
    },
    /// An optional property became required.
    BecameRequired {
        /// Its name.
        name: String,
    },
    /// A required property became optional.
    BecameOptional {
        /// Its name.
        name: String,
    },
    /// The `type` set changed (a missing `type` is every type).
    TypeChanged {
        /// The old types; empty for any.
        old: Vec<String>,
        /// The new types; empty for any.
        new: Vec<String>,
        /// Which way.
        direction: Direction,
    },
    /// The allowed values (`enum`, `const`) changed; `None` is any value.
    ValuesChanged {
        /// `enum` or `const`.
        keyword: String,
        /// Values now allowed that were not (all values, when `None` replaces a list).
        added: Option<Vec<String>>,
        /// Values no longer allowed (`None` when a list replaced any value).
        removed: Option<Vec<String>>,
    },
    /// A numeric bound (`minimum`, `maxLength`, `multipleOf`, `uniqueItems`…) changed.
    BoundChanged {
        /// The keyword.
        keyword: String,
        /// Its old value.
        old: Option<String>,
        /// Its new value.
        new: Option<String>,
        /// Which way.
        direction: Direction,
    },
    /// `pattern` added, removed or changed (a changed regex is not compared: both break).
    PatternChanged {
        /// The old regex.
        old: Option<String>,
        /// The new regex.
        new: Option<String>,
    },
    /// `format` added, removed or changed.
    FormatChanged {
        /// The old format.
        old: Option<String>,
        /// The new format.
        new: Option<String>,
    },
    /// A `$ref` names another definition (the Rust type is renamed).
    RefTargetChanged {
        /// The old definition.
        old: String,
        /// The new definition.
        new: String,
    },
    /// A `$ref` to a definition became an inline schema.
    RefInlined {
        /// The old definition.
        old: String,
    },
    /// An inline schema became a `$ref` to a definition.
    RefExtracted {
        /// The new definition.
        new: String,
    },
    /// `additionalProperties` opened, closed or changed between `true`, `false` and a schema.
    AdditionalPropertiesChanged {
        /// The old model.
        old: ContentModel,
        /// The new model.
        new: ContentModel,
        /// Which way.
        direction: Direction,
    },
    /// A boolean schema (`true`, `false`) replaced, or replaced by, another schema.
    SchemaReplaced {
        /// Which way.
        direction: Direction,
    },
    /// `prefixItems`, `anyOf`, `oneOf` or `allOf` changed in length (or appeared or went), so
    /// its members were not paired up and compared.
    ListChanged {
        /// The keyword.
        keyword: String,
        /// Its old length (0 when absent).
        old: usize,
        /// Its new length.
        new: usize,
    },
    /// Another keyword changed; it is not analysed, so it counts as breaking.
    KeywordChanged {
        /// The keyword.
        keyword: String,
    },
    /// `title` changed: an inline schema's Rust type is named from it.
    TitleChanged {
        /// The old title.
        old: Option<String>,
        /// The new title.
        new: Option<String>,
    },
    /// `default` added, removed or changed.
    DefaultChanged {
        /// The old default, as JSON.
        old: Option<String>,
        /// The new default, as JSON.
        new: Option<String>,
    },
    /// Part of the schemas was not compared.
    NotAnalysed {
        /// Why.
        reason: Unanalysed,
    },
}

impl SchemaChange {
    /// One line for people: where, and what changed. Contract text in it is escaped.
    pub(crate) fn describe(&self) -> String {
        format!("{}: {}", escape(&self.location), self.kind.describe())
    }
}

/// `name` as shown: backquoted and escaped.
fn quoted(text: &str) -> String {
    format!("`{}`", escape(text))
}

/// `a`, `b` or `nothing`/`anything`.
fn listed(values: &[String], empty: &str) -> String {
    if values.is_empty() {
        empty.to_owned()
    } else {
        values
            .iter()
            .map(|v| quoted(v))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `x` or `(none)`.
fn maybe(value: Option<&String>) -> String {
    value.map_or_else(|| "(none)".to_owned(), |v| quoted(v))
}

impl SchemaChangeKind {
    fn describe(&self) -> String {
        match self {
            Self::PropertyAdded {
                name,
                required,
                model,
                default,
            } => format!(
                "{} property {} added to {} object{}",
                requiredness(*required),
                quoted(name),
                model.with_article(),
                if *default && *required {
                    " (its default does not satisfy `required`)"
                } else {
                    ""
                }
            ),
            Self::PropertyRemoved {
                name,
                required,
                model,
            } => format!(
                "{} property {} removed, leaving {} object",
                requiredness(*required),
                quoted(name),
                model.with_article()
            ),
            Self::PropertyRenamed { from, to } => {
                format!("property {} renamed to {}", quoted(from), quoted(to))
            }
            Self::BecameRequired { name } => format!("property {} is now required", quoted(name)),
            Self::BecameOptional { name } => format!("property {} is now optional", quoted(name)),
            Self::TypeChanged {
                old,
                new,
                direction,
            } => format!(
                "type {} from {} to {}",
                direction.word(),
                listed(old, "any"),
                listed(new, "any")
            ),
            Self::ValuesChanged {
                keyword,
                added,
                removed,
            } => values_changed(keyword, added.as_deref(), removed.as_deref()),
            Self::BoundChanged {
                keyword,
                old,
                new,
                direction,
            } => {
                let verb = match direction {
                    Direction::Widened => "loosened",
                    Direction::Narrowed => "tightened",
                    other => other.word(),
                };
                format!("`{keyword}` {verb} {}", from_to(old, new))
            }
            Self::PatternChanged { old, new } => format!("`pattern` changed {}", from_to(old, new)),
            Self::FormatChanged { old, new } => format!("`format` changed {}", from_to(old, new)),
            Self::TitleChanged { old, new } => format!("`title` changed {}", from_to(old, new)),
            Self::DefaultChanged { old, new } => format!("`default` changed {}", from_to(old, new)),
            Self::RefTargetChanged { old, new } => format!(
                "refers to definition {} instead of {}",
                quoted(new),
                quoted(old)
            ),
            Self::RefInlined { old } => {
                format!("definition {} replaced by an inline schema", quoted(old))
            }
            Self::RefExtracted { new } => {
                format!("inline schema replaced by definition {}", quoted(new))
            }
            Self::AdditionalPropertiesChanged {
                old,
                new,
                direction,
            } => format!(
                "content model {} from {} to {}",
                direction.word(),
                old.word(),
                new.word()
            ),
            Self::SchemaReplaced { direction } => {
                format!("schema {} (a boolean schema on one side)", direction.word())
            }
            Self::ListChanged { keyword, old, new } => format!(
                "`{keyword}` changed from {old} to {new} members (not compared member by member)"
            ),
            Self::KeywordChanged { keyword } => {
                format!("{} changed (not analysed)", quoted(keyword))
            }
            Self::NotAnalysed { reason } => reason.describe(),
        }
    }
}

/// `required` or `optional`.
fn requiredness(required: bool) -> &'static str {
    if required { "required" } else { "optional" }
}

/// `(old → new)`, each side's value or that it had none.
fn from_to(old: &Option<String>, new: &Option<String>) -> String {
    format!("({} → {})", maybe(old.as_ref()), maybe(new.as_ref()))
}

/// An `enum` or `const` that changed: its values (`None`: the keyword is absent).
fn values_changed(keyword: &str, added: Option<&[String]>, removed: Option<&[String]>) -> String {
    match (added, removed) {
        (None, _) => format!("`{keyword}` removed: any value is allowed"),
        (_, None) => format!("`{keyword}` added: only listed values are allowed"),
        (Some(added), Some(removed)) => format!(
            "`{keyword}` values added: {}; removed: {}",
            listed(added, "none"),
            listed(removed, "none")
        ),
    }
}

impl Unanalysed {
    fn describe(self) -> String {
        match self {
            Self::TooDeep => format!("nested deeper than {MAX_DEPTH} levels: not compared"),
            Self::TooLarge => {
                format!("more than {MAX_PAIRS} schema nodes compared: the rest is not")
            }
            Self::NotASchema => "a value that is not a schema changed".to_owned(),
        }
    }
}

/// Every difference between two bundled schemas (as [`SchemaBundle::standalone`] makes them),
/// sorted by pointer then kind.
///
/// [`SchemaBundle::standalone`]: warren_codegen::SchemaBundle::standalone
pub(crate) fn compare(old: &Value, new: &Value) -> Vec<SchemaChange> {
    let mut walker = Walker {
        old_doc: old,
        new_doc: new,
        visited: BTreeSet::new(),
        pairs: 0,
        exhausted: false,
        changes: Vec::new(),
    };
    walker.walk(
        old,
        new,
        &At {
            old: String::new(),
            new: String::new(),
            location: String::new(),
            depth: 0,
        },
    );
    let mut changes = walker.changes;
    changes.sort_by(|a, b| {
        (&a.pointer, &a.kind, &a.location, a.effect).cmp(&(
            &b.pointer,
            &b.kind,
            &b.location,
            b.effect,
        ))
    });
    changes.dedup();
    changes
}

/// Where the walk is: the node's pointer in each document and its place for people.
#[derive(Debug, Clone)]
struct At {
    old: String,
    new: String,
    /// Empty at the root.
    location: String,
    depth: usize,
}

impl At {
    /// One step down through `segments` (the same on both sides), at `location`.
    fn down(&self, segments: &[&str], location: String) -> Self {
        let join = |base: &str| {
            let mut pointer = base.to_owned();
            for segment in segments {
                pointer.push('/');
                pointer.push_str(&escape_segment(segment));
            }
            pointer
        };
        Self {
            old: join(&self.old),
            new: join(&self.new),
            location,
            depth: self.depth + 1,
        }
    }

    /// The location of property `name` of this node.
    fn property(&self, name: &str) -> String {
        if self.location.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{name}", self.location)
        }
    }

    /// The location with `suffix` appended (`[]`, `[0]`, `(anyOf 1)`).
    fn suffixed(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.location)
    }

    fn shown(&self) -> String {
        if self.location.is_empty() {
            "(root)".to_owned()
        } else {
            self.location.clone()
        }
    }
}

struct Walker<'a> {
    old_doc: &'a Value,
    new_doc: &'a Value,
    /// (old pointer, new pointer) of every pair of schema bodies compared: each is compared
    /// once, which ends cycles and bounds fan-out through `$ref`s.
    visited: BTreeSet<(String, String)>,
    pairs: usize,
    exhausted: bool,
    changes: Vec<SchemaChange>,
}

impl Walker<'_> {
    /// Records a change at the new pointer, or at the old one when `removed`.
    fn push(&mut self, at: &At, removed: bool, kind: SchemaChangeKind, effect: Effect) {
        self.changes.push(SchemaChange {
            pointer: if removed { &at.old } else { &at.new }.clone(),
            location: at.shown(),
            kind,
            effect,
        });
    }

    /// Compares two schemas found at `at`.
    fn walk(&mut self, old: &Value, new: &Value, at: &At) {
        if self.exhausted {
            return;
        }
        if at.depth > MAX_DEPTH {
            let kind = SchemaChangeKind::NotAnalysed {
                reason: Unanalysed::TooDeep,
            };
            // Only when something differs below: equal subtrees are fine however deep.
            if old != new {
                self.push(at, false, kind, Effect::ALL);
            }
            return;
        }
        self.pairs += 1;
        if self.pairs > MAX_PAIRS {
            self.exhausted = true;
            let kind = SchemaChangeKind::NotAnalysed {
                reason: Unanalysed::TooLarge,
            };
            self.push(at, false, kind, Effect::ALL);
            return;
        }
        let (old_name, old, old_pointer) = deref(self.old_doc, old, &at.old);
        let (new_name, new, new_pointer) = deref(self.new_doc, new, &at.new);
        // The Rust type of a `$ref` is its definition's name: another name is another type,
        // whatever the wire says (the structure beneath is compared next).
        match (old_name, new_name) {
            (Some(old), Some(new)) if old != new => {
                self.push(
                    at,
                    false,
                    SchemaChangeKind::RefTargetChanged { old, new },
                    Effect::RUST,
                );
            }
            (Some(old), None) => {
                self.push(
                    at,
                    false,
                    SchemaChangeKind::RefInlined { old },
                    Effect::RUST,
                );
            }
            (None, Some(new)) => {
                self.push(
                    at,
                    false,
                    SchemaChangeKind::RefExtracted { new },
                    Effect::RUST,
                );
            }
            _ => {}
        }
        if !self
            .visited
            .insert((old_pointer.clone(), new_pointer.clone()))
        {
            return;
        }
        let at = At {
            old: old_pointer,
            new: new_pointer,
            location: at.location.clone(),
            depth: at.depth,
        };
        self.body(old, new, &at);
    }

    /// Compares two schema bodies (no `$ref` left to follow at the top).
    fn body(&mut self, old: &Value, new: &Value, at: &At) {
        let empty = Map::new();
        match (old, new) {
            (Value::Object(old), Value::Object(new)) => self.object(old, new, at),
            (Value::Bool(true), Value::Object(new)) => self.object(&empty, new, at),
            (Value::Object(old), Value::Bool(true)) => self.object(old, &empty, at),
            (Value::Bool(a), Value::Bool(b)) if a == b => {}
            // `false` accepts nothing, so anything else accepts more (and `true` more still);
            // the generated type changes with it.
            (Value::Bool(false), _) => {
                let direction = Direction::Widened;
                let effect = direction.effect().with_rust(true);
                self.push(
                    at,
                    false,
                    SchemaChangeKind::SchemaReplaced { direction },
                    effect,
                );
            }
            (_, Value::Bool(false)) => {
                let direction = Direction::Narrowed;
                let effect = direction.effect().with_rust(true);
                self.push(
                    at,
                    false,
                    SchemaChangeKind::SchemaReplaced { direction },
                    effect,
                );
            }
            (old, new) if old == new => {}
            _ => {
                let kind = SchemaChangeKind::NotAnalysed {
                    reason: Unanalysed::NotASchema,
                };
                self.push(at, false, kind, Effect::ALL);
            }
        }
    }

    fn object(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        self.types(old, new, at);
        self.values(old, new, at);
        self.properties(old, new, at);
        self.additional_properties(old, new, at);
        self.items(old, new, at);
        for keyword in SUBSCHEMA_LISTS {
            self.list(keyword, old.get(*keyword), new.get(*keyword), at);
        }
        self.bounds(old, new, at);
        self.strings(old, new, at);
        self.annotations(old, new, at);
        self.sibling_ref(old, new, at);
        // Everything else: compared as values, and a difference counts against everyone.
        let keywords: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
        for keyword in keywords {
            // Definitions and the document's own keywords are compared only where a `$ref`
            // reaches them.
            let known = [
                HANDLED,
                ANNOTATIONS,
                DEFINITIONS,
                DOCUMENT,
                LOWER_BOUNDS,
                UPPER_BOUNDS,
                SUBSCHEMA_LISTS,
            ]
            .iter()
            .any(|list| list.contains(&keyword.as_str()));
            if !known && old.get(keyword) != new.get(keyword) {
                let kind = SchemaChangeKind::KeywordChanged {
                    keyword: keyword.clone(),
                };
                let removed = !new.contains_key(keyword);
                self.push(
                    &at.down(&[keyword], at.location.clone()),
                    removed,
                    kind,
                    Effect::ALL,
                );
            }
        }
    }

    /// A keyword this module understands holding a value it does not (`"type": 3`):
    /// conservatively breaking, like any unknown keyword.
    fn malformed(&mut self, keyword: &str, at: &At) {
        let kind = SchemaChangeKind::KeywordChanged {
            keyword: keyword.to_owned(),
        };
        self.push(
            &at.down(&[keyword], at.location.clone()),
            false,
            kind,
            Effect::ALL,
        );
    }

    /// `type`: a wider set lets new writers send what old readers reject, a narrower one
    /// rejects what old writers sent. The Rust type follows `type` (`i64` → `f64`, `T` →
    /// `Option<T>` for `null`), so any change breaks the API.
    fn types(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        if old.get("type") == new.get("type") {
            return;
        }
        let (Ok(old_types), Ok(new_types)) = (type_set(old), type_set(new)) else {
            return self.malformed("type", at);
        };
        let direction = match (&old_types, &new_types) {
            (None, None) => return,
            (None, Some(_)) => Direction::Narrowed,
            (Some(_), None) => Direction::Widened,
            (Some(old), Some(new)) => match (types_within(old, new), types_within(new, old)) {
                (true, true) => Direction::Equivalent,
                (true, false) => Direction::Widened,
                (false, true) => Direction::Narrowed,
                (false, false) => Direction::Changed,
            },
        };
        let list = |types: Option<BTreeSet<String>>| types.into_iter().flatten().collect();
        let kind = SchemaChangeKind::TypeChanged {
            old: list(old_types),
            new: list(new_types),
            direction,
        };
        self.push(
            &at.down(&["type"], at.location.clone()),
            false,
            kind,
            direction.effect().with_rust(true),
        );
    }

    /// `enum` and `const`, as one set of allowed values. A value added reaches old readers
    /// that reject it (and old Rust readers, whose generated enums are exhaustive); a value
    /// removed is one new readers reject in old messages. Either way the generated enum's
    /// variants change.
    fn values(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        if old.get("enum") == new.get("enum") && old.get("const") == new.get("const") {
            return;
        }
        let keyword = if old.contains_key("enum") || new.contains_key("enum") {
            "enum"
        } else {
            "const"
        };
        let (Ok(old_values), Ok(new_values)) = (allowed_values(old), allowed_values(new)) else {
            return self.malformed(keyword, at);
        };
        let (added, removed) = match (&old_values, &new_values) {
            (None, None) => return,
            (None, Some(_)) => (Some(Vec::new()), None),
            (Some(_), None) => (None, Some(Vec::new())),
            (Some(old), Some(new)) => {
                let added: Vec<String> = new.difference(old).cloned().collect();
                let removed: Vec<String> = old.difference(new).cloned().collect();
                if added.is_empty() && removed.is_empty() {
                    return;
                }
                (Some(added), Some(removed))
            }
        };
        let effect = Effect {
            // Any value allowed now (None), or some listed ones added.
            old_readers: added.as_ref().is_none_or(|a| !a.is_empty()),
            new_readers: removed.as_ref().is_none_or(|r| !r.is_empty()),
            rust_api: true,
            untyped_writers_only: false,
        };
        let kind = SchemaChangeKind::ValuesChanged {
            keyword: keyword.to_owned(),
            added,
            removed,
        };
        self.push(
            &at.down(&[keyword], at.location.clone()),
            false,
            kind,
            effect,
        );
    }

    /// `properties` and `required`: added, removed, renamed, required or not, and each
    /// property kept compared in turn.
    fn properties(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        let (Some(old_props), Some(new_props)) = (properties(old), properties(new)) else {
            return self.malformed("properties", at);
        };
        let (Some(old_required), Some(new_required)) = (required(old), required(new)) else {
            return self.malformed("required", at);
        };
        let old = Side::new(old, old_props, old_required);
        let new = Side::new(new, new_props, new_required);
        let members = Members::of(&old, &new);
        for (from, to) in members.renamed {
            let kind = SchemaChangeKind::PropertyRenamed {
                from: from.to_owned(),
                to: to.to_owned(),
            };
            let here = at.down(&["properties", to], at.property(to));
            self.push(&here, false, kind, Effect::ALL);
        }
        for name in members.added {
            self.property_added(name, &old, &new, at);
        }
        for name in members.removed {
            self.property_removed(name, &old, &new, at);
        }
        self.requiredness(&old, &new, at);
        for (name, old_schema) in &old.properties {
            if let Some(new_schema) = new.properties.get(name) {
                let here = at.down(&["properties", name], at.property(name));
                self.walk(old_schema, new_schema, &here);
            }
        }
    }

    /// Property `name`, which only `new` declares.
    fn property_added(&mut self, name: &str, old: &Side<'_>, new: &Side<'_>, at: &At) {
        let schema = new.schema(name);
        let is_required = new.required.contains(name);
        let carried = may_carry(old.map, old.model, schema);
        let effect = Effect {
            // New writers may send it; old readers let it through only if their content
            // model admits it.
            old_readers: !admits(old.map, old.model, schema),
            // Old messages lack it (fatal when required: warren validates before decoding,
            // and `required` ignores `default`), and under an open old model old writers
            // may have sent that name with any value (Confluent's
            // PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL).
            new_readers: is_required || carried,
            // Under an open model only writers outside the generated types could have.
            untyped_writers_only: !is_required
                && carried
                && old.model == ContentModel::Open
                && admits(old.map, old.model, schema),
            // A required property is a new argument of the type's `new`; an optional one
            // a field `new` fills, so only struct literals (which name every field) break
            // (tests/tests/rust_code.rs compiles code written against the old version).
            rust_api: is_required,
        };
        let kind = SchemaChangeKind::PropertyAdded {
            name: name.to_owned(),
            required: is_required,
            model: old.model,
            default: schema.get("default").is_some(),
        };
        let here = at.down(&["properties", name], at.property(name));
        self.push(&here, false, kind, effect);
    }

    /// Property `name`, which only `old` declares.
    fn property_removed(&mut self, name: &str, old: &Side<'_>, new: &Side<'_>, at: &At) {
        let schema = old.schema(name);
        let was_required = old.required.contains(name);
        let carried = may_carry(new.map, new.model, schema);
        let rejected = !admits(new.map, new.model, schema);
        let effect = Effect {
            // Old readers need it when it was required, and under an open new model new
            // writers may send that name with a value the old schema rejects.
            old_readers: was_required || carried,
            // Old messages still carry it: a closed new model rejects them
            // (PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL).
            new_readers: rejected,
            // The Rust field is gone.
            rust_api: true,
            // Under an open new model only writers outside the generated types could send it.
            untyped_writers_only: !was_required
                && carried
                && !rejected
                && new.model == ContentModel::Open,
        };
        let kind = SchemaChangeKind::PropertyRemoved {
            name: name.to_owned(),
            required: was_required,
            model: new.model,
        };
        let here = at.down(&["properties", name], at.property(name));
        self.push(&here, true, kind, effect);
    }

    /// Required or not, for every name either side requires and both declare (or neither).
    fn requiredness(&mut self, old: &Side<'_>, new: &Side<'_>, at: &At) {
        let names: BTreeSet<&str> = old
            .required
            .iter()
            .chain(&new.required)
            .copied()
            .filter(|name| old.properties.contains_key(name) == new.properties.contains_key(name))
            .collect();
        for name in names {
            let (kind, direction) = match (old.required.contains(name), new.required.contains(name))
            {
                // Old messages may lack it; the field loses its `Option`.
                (false, true) => (
                    SchemaChangeKind::BecameRequired {
                        name: name.to_owned(),
                    },
                    Direction::Narrowed,
                ),
                // New messages may lack it; the field gains an `Option`.
                (true, false) => (
                    SchemaChangeKind::BecameOptional {
                        name: name.to_owned(),
                    },
                    Direction::Widened,
                ),
                _ => continue,
            };
            let here = at.down(&["required"], at.property(name));
            self.push(&here, false, kind, direction.effect().with_rust(true));
        }
    }

    /// `additionalProperties`: opening lets new writers send what closed old readers
    /// reject; closing rejects what old writers may have sent. A schema there is a map field
    /// in Rust, so it appearing or going changes the type; `true` ↔ `false` is only
    /// `deny_unknown_fields`.
    fn additional_properties(
        &mut self,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        at: &At,
    ) {
        let (old_value, new_value) = (
            old.get("additionalProperties"),
            new.get("additionalProperties"),
        );
        if old_value == new_value {
            return;
        }
        let here = at.down(&["additionalProperties"], at.suffixed(".*"));
        let (old_model, new_model) = (additional_model(old_value), additional_model(new_value));
        if old_model == ContentModel::Schema && new_model == ContentModel::Schema {
            return self.walk(
                old_value.unwrap_or(&ANYTHING),
                new_value.unwrap_or(&ANYTHING),
                &here,
            );
        }
        use ContentModel::{Closed, Open, Schema};
        let direction = match (old_model, new_model) {
            (Closed, Open | Schema) | (Schema, Open) => Direction::Widened,
            (Open | Schema, Closed) | (Open, Schema) => Direction::Narrowed,
            // `true` ↔ absent: the same.
            _ => return,
        };
        let rust = old_model == Schema || new_model == Schema;
        let kind = SchemaChangeKind::AdditionalPropertiesChanged {
            old: old_model,
            new: new_model,
            direction,
        };
        self.push(&here, false, kind, direction.effect().with_rust(rust));
    }

    /// `items`: one schema for every item (absent is any), or a draft-07 tuple compared by
    /// position.
    fn items(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        let (old_items, new_items) = (old.get("items"), new.get("items"));
        if old_items.is_none() && new_items.is_none() {
            return;
        }
        match (old_items, new_items) {
            (Some(Value::Array(_)), _) | (_, Some(Value::Array(_))) => {
                self.list("items", old_items, new_items, at);
            }
            _ => {
                let here = at.down(&["items"], at.suffixed("[]"));
                self.walk(
                    old_items.unwrap_or(&ANYTHING),
                    new_items.unwrap_or(&ANYTHING),
                    &here,
                );
            }
        }
    }

    /// A list of subschemas compared by position when both have as many; otherwise the
    /// members cannot be paired reliably, so one change breaking everyone.
    fn list(&mut self, keyword: &str, old: Option<&Value>, new: Option<&Value>, at: &At) {
        if old == new {
            return;
        }
        let (Some(old_members), Some(new_members)) = (members(old), members(new)) else {
            return self.malformed(keyword, at);
        };
        if old_members.len() != new_members.len() {
            let kind = SchemaChangeKind::ListChanged {
                keyword: keyword.to_owned(),
                old: old_members.len(),
                new: new_members.len(),
            };
            return self.push(
                &at.down(&[keyword], at.location.clone()),
                false,
                kind,
                Effect::ALL,
            );
        }
        for (index, (old, new)) in old_members.iter().zip(new_members).enumerate() {
            let location = if matches!(keyword, "prefixItems" | "items") {
                at.suffixed(&format!("[{index}]"))
            } else {
                at.suffixed(&format!("({keyword} {index})"))
            };
            let index = index.to_string();
            self.walk(old, new, &at.down(&[keyword, &index], location));
        }
    }

    /// Numeric bounds, `multipleOf` and `uniqueItems`. The wire effect follows the
    /// direction. typify derives an integer's Rust type from its bounds (`u64` from
    /// `minimum: 0`, `NonZeroU64` from 1) and wraps a length-constrained string in a newtype,
    /// so a bound on an integer, or a string length bound that appears or goes, changes the
    /// API too.
    fn bounds(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        let integer = [old, new].iter().any(|side| {
            type_set(side)
                .ok()
                .flatten()
                .is_some_and(|types| types.contains("integer"))
        });
        for (keyword, lower) in LOWER_BOUNDS
            .iter()
            .map(|k| (*k, true))
            .chain(UPPER_BOUNDS.iter().map(|k| (*k, false)))
        {
            let (old_value, new_value) = (old.get(keyword), new.get(keyword));
            if old_value == new_value {
                continue;
            }
            let number = |value: Option<&Value>| match value {
                None => Ok(None),
                Some(value) => value.as_f64().map(Some).ok_or(()),
            };
            let (Ok(old_number), Ok(new_number)) = (number(old_value), number(new_value)) else {
                self.malformed(keyword, at);
                continue;
            };
            let Some(direction) = Direction::of_constraint(old_number, new_number, |old, new| {
                Some(if lower { new > old } else { new < old })
            }) else {
                continue;
            };
            let numeric = matches!(
                keyword,
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum"
            );
            let length = matches!(keyword, "minLength" | "maxLength");
            let rust =
                (numeric && integer) || (length && old_value.is_none() != new_value.is_none());
            self.bound(keyword, old_value, new_value, direction, rust, at);
        }

        if old.get("multipleOf") != new.get("multipleOf") {
            let number = |value: Option<&Value>| value.and_then(Value::as_f64);
            // A multiple of the old step is still one (tighter); a divisor of it looser.
            let divides = |step: f64, of: f64| {
                let ratio = of / step;
                step > 0.0 && ratio.is_finite() && (ratio - ratio.round()).abs() < 1e-9
            };
            let direction = Direction::of_constraint(
                number(old.get("multipleOf")),
                number(new.get("multipleOf")),
                |old, new| {
                    if divides(*old, *new) {
                        Some(true)
                    } else if divides(*new, *old) {
                        Some(false)
                    } else {
                        None
                    }
                },
            );
            match direction {
                Some(direction) => self.bound(
                    "multipleOf",
                    old.get("multipleOf"),
                    new.get("multipleOf"),
                    direction,
                    false,
                    at,
                ),
                None => self.malformed("multipleOf", at),
            }
        }

        if old.get("uniqueItems") != new.get("uniqueItems") {
            let flag = |value: Option<&Value>| match value {
                None => Ok(false),
                Some(Value::Bool(flag)) => Ok(*flag),
                Some(_) => Err(()),
            };
            match (flag(old.get("uniqueItems")), flag(new.get("uniqueItems"))) {
                (Ok(old_flag), Ok(new_flag)) if old_flag != new_flag => {
                    let direction = if new_flag {
                        Direction::Narrowed
                    } else {
                        Direction::Widened
                    };
                    self.bound(
                        "uniqueItems",
                        old.get("uniqueItems"),
                        new.get("uniqueItems"),
                        direction,
                        false,
                        at,
                    );
                }
                (Ok(_), Ok(_)) => {}
                _ => self.malformed("uniqueItems", at),
            }
        }
    }

    fn bound(
        &mut self,
        keyword: &str,
        old: Option<&Value>,
        new: Option<&Value>,
        direction: Direction,
        rust: bool,
        at: &At,
    ) {
        let kind = SchemaChangeKind::BoundChanged {
            keyword: keyword.to_owned(),
            old: old.map(Value::to_string),
            new: new.map(Value::to_string),
            direction,
        };
        let here = at.down(&[keyword], at.location.clone());
        self.push(
            &here,
            new.is_none(),
            kind,
            direction.effect().with_rust(rust),
        );
    }

    /// `pattern` and `format`: added narrows, removed widens, changed is not compared (two
    /// regexes' languages cannot be ordered cheaply) so it breaks both. A pattern that
    /// appears or goes wraps or unwraps a string newtype; a format picks the Rust type
    /// (`Uuid`, `DateTime`…), so any format change breaks the API.
    fn strings(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        for keyword in ["pattern", "format"] {
            let (old_value, new_value) = (old.get(keyword), new.get(keyword));
            if old_value == new_value {
                continue;
            }
            let text = |value: Option<&Value>| match value {
                None => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(()),
            };
            let (Ok(old_text), Ok(new_text)) = (text(old_value), text(new_value)) else {
                self.malformed(keyword, at);
                continue;
            };
            let Some(direction) =
                Direction::of_constraint(old_text.as_ref(), new_text.as_ref(), |_, _| None)
            else {
                continue;
            };
            let rust = keyword == "format" || old_text.is_none() != new_text.is_none();
            let removed = new_text.is_none();
            let kind = if keyword == "pattern" {
                SchemaChangeKind::PatternChanged {
                    old: old_text,
                    new: new_text,
                }
            } else {
                SchemaChangeKind::FormatChanged {
                    old: old_text,
                    new: new_text,
                }
            };
            let here = at.down(&[keyword], at.location.clone());
            self.push(&here, removed, kind, direction.effect().with_rust(rust));
        }
    }

    /// `title` and `default`. Neither constrains the wire. typify names an inline schema's
    /// type from its title (a definition's name is its `$defs` key, whose change is a
    /// [`SchemaChangeKind::RefTargetChanged`]), and a default makes an optional field a
    /// plain `T` with `#[serde(default)]`, so a default that appears or goes changes it.
    fn annotations(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        if old.get("title") != new.get("title") {
            let text = |map: &Map<String, Value>| map.get("title").map(value_text);
            let inline = !at.new.starts_with("/$defs/") || at.new.matches('/').count() > 2;
            let kind = SchemaChangeKind::TitleChanged {
                old: text(old),
                new: text(new),
            };
            let effect = if inline { Effect::RUST } else { Effect::NONE };
            self.push(
                &at.down(&["title"], at.location.clone()),
                false,
                kind,
                effect,
            );
        }
        if old.get("default") != new.get("default") {
            let json = |map: &Map<String, Value>| map.get("default").map(Value::to_string);
            let (old_default, new_default) = (json(old), json(new));
            let effect = if old_default.is_none() != new_default.is_none() {
                Effect::RUST
            } else {
                Effect::NONE
            };
            let kind = SchemaChangeKind::DefaultChanged {
                old: old_default,
                new: new_default,
            };
            self.push(
                &at.down(&["default"], at.location.clone()),
                false,
                kind,
                effect,
            );
        }
    }

    /// A `$ref` beside other keywords (2020-12 allows it): the other keywords are compared
    /// above; the targets are compared here.
    fn sibling_ref(&mut self, old: &Map<String, Value>, new: &Map<String, Value>, at: &At) {
        let (old_ref, new_ref) = (old.get("$ref"), new.get("$ref"));
        if old_ref.is_none() && new_ref.is_none() {
            return;
        }
        match (
            ref_target(self.old_doc, old_ref),
            ref_target(self.new_doc, new_ref),
        ) {
            (Some((old_target, old_pointer)), Some((new_target, new_pointer))) => {
                if old_pointer != new_pointer {
                    let kind = SchemaChangeKind::RefTargetChanged {
                        old: definition_name(&old_pointer),
                        new: definition_name(&new_pointer),
                    };
                    self.push(at, false, kind, Effect::RUST);
                }
                let here = At {
                    old: old_pointer,
                    new: new_pointer,
                    location: at.location.clone(),
                    depth: at.depth + 1,
                };
                if self.visited.insert((here.old.clone(), here.new.clone())) {
                    self.body(old_target, new_target, &here);
                }
            }
            _ if old_ref != new_ref => self.malformed("$ref", at),
            _ => {}
        }
    }
}

/// One side's object keywords, as the comparison of properties reads them.
struct Side<'v> {
    map: &'v Map<String, Value>,
    properties: BTreeMap<&'v str, &'v Value>,
    required: BTreeSet<&'v str>,
    model: ContentModel,
}

impl<'v> Side<'v> {
    fn new(
        map: &'v Map<String, Value>,
        properties: BTreeMap<&'v str, &'v Value>,
        required: BTreeSet<&'v str>,
    ) -> Self {
        let model = content_model(map);
        Self {
            map,
            properties,
            required,
            model,
        }
    }

    /// Property `name`'s schema (any value, when it declares none).
    fn schema(&self, name: &str) -> &'v Value {
        self.properties.get(name).copied().unwrap_or(&ANYTHING)
    }
}

/// The property names only one side declares.
struct Members<'v> {
    added: Vec<&'v str>,
    removed: Vec<&'v str>,
    /// (old name, new name).
    renamed: Vec<(&'v str, &'v str)>,
}

impl<'v> Members<'v> {
    fn of(old: &Side<'v>, new: &Side<'v>) -> Self {
        let only = |one: &Side<'v>, other: &Side<'v>| -> Vec<&'v str> {
            one.properties
                .keys()
                .filter(|name| !other.properties.contains_key(*name))
                .copied()
                .collect()
        };
        let (mut removed, mut added) = (only(old, new), only(new, old));
        // A rename: one property gone and one come with the very same schema. Old readers
        // miss the old name (or reject the new one), new readers the reverse, and the Rust
        // field is renamed, so it breaks everyone; reported as one change, not two.
        let mut renamed = Vec::new();
        if removed.len().saturating_mul(added.len()) <= MAX_RENAME_CANDIDATES {
            for from in &removed {
                let twin = added
                    .iter()
                    .position(|to| old.properties.get(from) == new.properties.get(to));
                if let Some(index) = twin {
                    renamed.push((*from, added.remove(index)));
                }
            }
        }
        removed.retain(|name| !renamed.iter().any(|(from, _)| from == name));
        Self {
            added,
            removed,
            renamed,
        }
    }
}

/// Follows `node`'s `$ref`s while it is nothing but a reference (annotations aside):
/// the last definition's name, the body reached and its pointer. A reference that does not
/// resolve is left in place (and compared as a keyword).
fn deref<'a>(
    doc: &'a Value,
    node: &'a Value,
    pointer: &str,
) -> (Option<String>, &'a Value, String) {
    let mut name = None;
    let mut node = node;
    let mut pointer = pointer.to_owned();
    for _ in 0..MAX_REF_HOPS {
        let Some(map) = node.as_object() else { break };
        let Some(reference) = map.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let only_reference = map.keys().all(|k| {
            let k = k.as_str();
            k == "$ref"
                || [ANNOTATIONS, DEFINITIONS, DOCUMENT]
                    .iter()
                    .any(|l| l.contains(&k))
        });
        if !only_reference {
            break;
        }
        let Some(target_pointer) = reference.strip_prefix('#') else {
            break;
        };
        let Some(target) = doc.pointer(target_pointer) else {
            break;
        };
        name = Some(definition_name(target_pointer));
        node = target;
        pointer = target_pointer.to_owned();
    }
    (name, node, pointer)
}

/// A list keyword's members (none when absent); `None` when it is not a list.
fn members(value: Option<&Value>) -> Option<&[Value]> {
    match value {
        None => Some(&[]),
        Some(Value::Array(members)) => Some(members.as_slice()),
        Some(_) => None,
    }
}

/// The node a same-document `$ref` names, and its pointer.
fn ref_target<'a>(doc: &'a Value, reference: Option<&Value>) -> Option<(&'a Value, String)> {
    let pointer = reference?.as_str()?.strip_prefix('#')?;
    Some((doc.pointer(pointer)?, pointer.to_owned()))
}

/// `Money` for `/$defs/Money`; the whole pointer for anything else.
fn definition_name(pointer: &str) -> String {
    ["/$defs/", "/definitions/"]
        .iter()
        .find_map(|prefix| pointer.strip_prefix(prefix))
        .filter(|rest| !rest.contains('/'))
        .map_or_else(|| pointer.to_owned(), unescape_segment)
}

/// A JSON value as text: a string without quotes, anything else as JSON.
fn value_text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

/// The `type` set; `None` when absent (any type), `Err` when it is not a type or list.
fn type_set(map: &Map<String, Value>) -> Result<Option<BTreeSet<String>>, ()> {
    match map.get("type") {
        None => Ok(None),
        Some(Value::String(one)) => Ok(Some(BTreeSet::from([one.clone()]))),
        Some(Value::Array(many)) => many
            .iter()
            .map(|t| t.as_str().map(str::to_owned).ok_or(()))
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(()),
    }
}

/// Whether every type of `inner` is accepted by `outer` (`integer` is within `number`).
fn types_within(inner: &BTreeSet<String>, outer: &BTreeSet<String>) -> bool {
    inner
        .iter()
        .all(|t| outer.contains(t) || (t == "integer" && outer.contains("number")))
}

/// The values `enum` and `const` allow together (as JSON text); `None` for any.
fn allowed_values(map: &Map<String, Value>) -> Result<Option<BTreeSet<String>>, ()> {
    let listed = match map.get("enum") {
        None => None,
        Some(Value::Array(values)) => Some(values.iter().map(Value::to_string).collect()),
        Some(_) => return Err(()),
    };
    Ok(match (listed, map.get("const")) {
        (listed, None) => listed,
        (None, Some(one)) => Some(BTreeSet::from([one.to_string()])),
        (Some(listed), Some(one)) => {
            let one = one.to_string();
            Some(listed.into_iter().filter(|v| *v == one).collect())
        }
    })
}

/// `properties` by name (empty when absent); `None` when it is not an object.
fn properties(map: &Map<String, Value>) -> Option<BTreeMap<&str, &Value>> {
    match map.get("properties") {
        None => Some(BTreeMap::new()),
        Some(Value::Object(props)) => Some(props.iter().map(|(k, v)| (k.as_str(), v)).collect()),
        Some(_) => None,
    }
}

/// `required` names (empty when absent); `None` when it is not a list of names.
fn required(map: &Map<String, Value>) -> Option<BTreeSet<&str>> {
    match map.get("required") {
        None => Some(BTreeSet::new()),
        Some(Value::Array(names)) => names.iter().map(Value::as_str).collect(),
        Some(_) => None,
    }
}

/// What `additionalProperties` alone makes of undeclared properties.
fn additional_model(value: Option<&Value>) -> ContentModel {
    match value {
        None | Some(Value::Bool(true)) => ContentModel::Open,
        Some(Value::Bool(false)) => ContentModel::Closed,
        Some(_) => ContentModel::Schema,
    }
}

/// The object's content model for a property it does not declare; `patternProperties` (or
/// `unevaluatedProperties`) may claim the name, which is not analysed.
fn content_model(map: &Map<String, Value>) -> ContentModel {
    let patterns = map
        .get("patternProperties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if patterns || map.contains_key("unevaluatedProperties") {
        ContentModel::Patterns
    } else {
        additional_model(map.get("additionalProperties"))
    }
}

/// Whether an object with this content model accepts every value of `schema` under a name it
/// does not declare.
fn admits(map: &Map<String, Value>, model: ContentModel, schema: &Value) -> bool {
    match model {
        ContentModel::Open => true,
        ContentModel::Closed | ContentModel::Patterns => false,
        ContentModel::Schema => {
            let extra = map.get("additionalProperties").unwrap_or(&ANYTHING);
            accepts_anything(extra) || extra == schema
        }
    }
}

/// Whether writers under this content model may send, under an undeclared name, a value
/// `schema` rejects.
fn may_carry(map: &Map<String, Value>, model: ContentModel, schema: &Value) -> bool {
    match model {
        ContentModel::Closed => false,
        ContentModel::Open => !accepts_anything(schema),
        ContentModel::Schema => {
            let extra = map.get("additionalProperties").unwrap_or(&ANYTHING);
            !accepts_anything(schema) && extra != schema
        }
        ContentModel::Patterns => true,
    }
}

/// `true`, `{}`, or a schema of annotations only.
fn accepts_anything(schema: &Value) -> bool {
    match schema {
        Value::Bool(flag) => *flag,
        Value::Object(map) => map
            .keys()
            .all(|k| ANNOTATIONS.contains(&k.as_str()) || k == "title" || k == "default"),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
