//! Where each node of a YAML document is written, by path.
//!
//! serde gives typed values but forgets positions; the checks need the line and column of
//! `queues.orders.retry.max_delay` to point at it. This walks the parser's event stream once
//! and records the span of every key and value under the same typed [`YamlPath`] the checks
//! build, so a key with a dot in it is one segment, never two.

use std::collections::{BTreeSet, HashMap, HashSet};

use saphyr_parser::{Event, Parser};

use super::lines::{Cursor, LineIndex};
use crate::diagnostics::{Segment, Span, YamlPath};

/// Spans of a YAML document's nodes, by path (`queues.orders.retry`, `bindings[0].queue`).
///
/// Only nodes that have a path are indexed: what sits inside a mapping key that is itself a
/// collection or an alias (`? [a, b] : value`) is skipped, value included.
#[derive(Debug, Clone, Default)]
pub(crate) struct YamlSpans {
    // Hashed, not ordered: only looked up, never listed, and a lookup in order compared
    // long paths sharing their first segments (a quarter of loading a large contract).
    values: HashMap<YamlPath, Span>,
    keys: HashMap<YamlPath, Span>,
    /// Values written over several lines, where the key is the better place to point at.
    multiline: HashSet<YamlPath>,
    /// Keys written twice in one mapping.
    duplicates: Vec<Duplicate>,
    /// Where nesting first went deeper than [`MAX_DEPTH`], if it did.
    too_deep: Option<Span>,
}

/// The deepest nesting a contract may have. Real contracts nest a handful of levels; a
/// document nested thousands deep is an attack on the parser, refused before it is deserialized.
pub(crate) const MAX_DEPTH: usize = 64;

/// A key written twice in one mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Duplicate {
    /// The path of the mapping (`queues`).
    pub parent: YamlPath,
    /// The repeated key.
    pub key: String,
    /// Where the second one is written.
    pub span: Span,
}

impl Duplicate {
    /// The path of the repeated entry.
    pub(crate) fn path(&self) -> YamlPath {
        self.parent.key(self.key.as_str())
    }
}

impl YamlSpans {
    /// Indexes `text`. A document the parser rejects yields an empty index: the typed parse
    /// reports that error with its own position.
    pub(crate) fn index(text: &str) -> Self {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let lines = LineIndex::new(text);
        // Flow collections are nested by brackets, cheaply counted before any parser sees
        // them (parsers take quadratic time on thousands of levels).
        if let Some(offset) = flow_too_deep(text, MAX_DEPTH) {
            return Self {
                too_deep: Some(lines.at(offset)),
                ..Self::default()
            };
        }
        let mut walker = Walker {
            spans: Self::default(),
            stack: Vec::new(),
        };
        // Starts and ends each move forward through the text.
        let (mut starts, mut ends) = (Cursor::default(), Cursor::default());
        for event in Parser::new_from_str(text) {
            let Ok((event, span)) = event else { break };
            let start = lines.point_after(&mut starts, span.start.line(), span.start.col());
            if walker.stack.len() >= MAX_DEPTH
                && matches!(event, Event::MappingStart(..) | Event::SequenceStart(..))
            {
                walker.spans.too_deep = Some(start);
                break;
            }
            let end = lines
                .point_after(&mut ends, span.end.line(), span.end.col())
                .offset;
            walker.on_event(event, start, end, span.end.line());
        }
        walker.spans
    }

    /// The span of the value at `path` (of its key when the value spans several lines), else
    /// of the nearest ancestor that is written in the file.
    pub(crate) fn find(&self, path: &YamlPath) -> Option<Span> {
        let mut path: &[Segment] = path.segments();
        loop {
            let key = self.keys.get(path);
            let value = self.values.get(path);
            let span = match (key, value) {
                (Some(key), Some(_)) if self.multiline.contains(path) => Some(key),
                (key, value) => value.or(key),
            };
            if let Some(span) = span {
                return Some(*span);
            }
            // The parent: `a.b[2].c` → `a.b[2]` → `a.b` → `a` → the root.
            path = path.split_last()?.1;
        }
    }

    /// Where the document nests deeper than a contract may (`MAX_DEPTH` levels), if it does.
    pub(crate) fn too_deep(&self) -> Option<Span> {
        self.too_deep
    }

    /// Keys written twice in one mapping. YAML parsers keep the last entry silently; a
    /// contract must not.
    pub(crate) fn duplicates(&self) -> &[Duplicate] {
        &self.duplicates
    }

    /// The span of the key that introduces `path` (`max_delay` in `retry: {max_delay: 1s}`),
    /// falling back to [`YamlSpans::find`].
    #[cfg(test)]
    pub(crate) fn find_key(&self, path: &YamlPath) -> Option<Span> {
        self.keys.get(path).copied().or_else(|| self.find(path))
    }
}

/// The byte offset where `[`/`{` nesting first passes `max`, skipping quoted strings and
/// comments. Linear, so it can run before a parser that would take quadratic time.
pub(crate) fn flow_too_deep(text: &str, max: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut previous = '\n';
    let mut chars = text.char_indices().peekable();
    while let Some((offset, c)) = chars.next() {
        match (quote, c) {
            (Some('"'), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') if !previous.is_alphanumeric() => quote = Some(c),
            (None, '#') if previous.is_whitespace() => {
                while chars.peek().is_some_and(|(_, c)| *c != '\n') {
                    chars.next();
                }
            }
            (None, '[' | '{') => {
                depth += 1;
                if depth > max {
                    return Some(offset);
                }
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        previous = c;
    }
    None
}

/// A collection being walked.
struct Frame {
    /// The collection's path; `None` inside a mapping key that is itself a collection (or
    /// an alias), which has no path: nothing under it is indexed.
    path: Option<YamlPath>,
    kind: FrameKind,
    /// True when the collection is a mapping's key rather than a value.
    is_key: bool,
    /// Where it starts.
    start: Span,
}

enum FrameKind {
    Mapping {
        /// The key whose value comes next, once it has been read.
        key: Pending,
        /// The plain keys read so far, to find duplicates.
        seen: BTreeSet<String>,
    },
    Sequence {
        /// The index of the next item.
        index: usize,
    },
}

/// A mapping's state between a key and its value.
enum Pending {
    /// The next node is a key.
    Key,
    /// The next node is the value of this scalar key.
    Value(String),
    /// The next node is the value of a key that is a collection or an alias: it has no path.
    Unnamed,
}

/// Where the node that starts now sits.
enum Slot {
    /// It is a mapping's key.
    Key,
    /// It is a value at this path (`None`: a value without a path).
    Value(Option<YamlPath>),
}

struct Walker {
    spans: YamlSpans,
    stack: Vec<Frame>,
}

impl Walker {
    /// Where the node that starts now sits, advancing its parent past it.
    fn next_slot(&mut self) -> Slot {
        let Some(frame) = self.stack.last_mut() else {
            return Slot::Value(Some(YamlPath::root()));
        };
        match &mut frame.kind {
            FrameKind::Mapping { key, .. } => match std::mem::replace(key, Pending::Key) {
                Pending::Key => Slot::Key,
                Pending::Value(key) => Slot::Value(frame.path.as_ref().map(|p| p.key(key))),
                Pending::Unnamed => Slot::Value(None),
            },
            FrameKind::Sequence { index } => {
                let child = frame.path.as_ref().map(|p| p.index(*index));
                *index += 1;
                Slot::Value(child)
            }
        }
    }

    /// Marks the next node of the innermost mapping as the value of a key without a name.
    fn unnamed_key(&mut self) {
        if let Some(Frame {
            kind: FrameKind::Mapping { key, .. },
            ..
        }) = self.stack.last_mut()
        {
            *key = Pending::Unnamed;
        }
    }

    fn on_event(&mut self, event: Event<'_>, start: Span, end: usize, end_line: usize) {
        match event {
            Event::Scalar(value, ..) => match self.next_slot() {
                Slot::Value(Some(path)) => {
                    self.spans
                        .values
                        .entry(path)
                        .or_insert(with_end(start, end));
                }
                Slot::Value(None) => {}
                Slot::Key => self.on_key(value.into_owned(), with_end(start, end)),
            },
            Event::Alias(_) => match self.next_slot() {
                Slot::Value(Some(path)) => {
                    self.spans.values.insert(path, with_end(start, end));
                }
                Slot::Value(None) => {}
                // An alias as a key names whatever it points to: no path of its own.
                Slot::Key => self.unnamed_key(),
            },
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let (path, is_key) = match self.next_slot() {
                    Slot::Key => (None, true),
                    Slot::Value(path) => (path, false),
                };
                let kind = if matches!(event, Event::MappingStart(..)) {
                    FrameKind::Mapping {
                        key: Pending::Key,
                        seen: BTreeSet::new(),
                    }
                } else {
                    FrameKind::Sequence { index: 0 }
                };
                self.stack.push(Frame {
                    path,
                    kind,
                    is_key,
                    start,
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let Some(frame) = self.stack.pop() else {
                    return;
                };
                if frame.is_key {
                    // The collection was a key: the node after it is its value.
                    self.unnamed_key();
                }
                if let Some(path) = frame.path {
                    if end_line > frame.start.line {
                        self.spans.multiline.insert(path.clone());
                    }
                    self.spans
                        .values
                        .entry(path)
                        .or_insert(with_end(frame.start, end));
                }
            }
            _ => {}
        }
    }

    /// A scalar key of the innermost mapping.
    fn on_key(&mut self, key: String, span: Span) {
        let Some(Frame {
            path,
            kind: FrameKind::Mapping { key: pending, seen },
            ..
        }) = self.stack.last_mut()
        else {
            return;
        };
        if let Some(parent) = path {
            if !seen.insert(key.clone()) {
                self.spans.duplicates.push(Duplicate {
                    parent: parent.clone(),
                    key: key.clone(),
                    span,
                });
            }
            self.spans
                .keys
                .entry(parent.key(key.clone()))
                .or_insert(span);
        }
        *pending = Pending::Value(key);
    }
}

fn with_end(start: Span, end: usize) -> Span {
    Span {
        len: end.saturating_sub(start.offset),
        ..start
    }
}

#[cfg(test)]
mod tests {
    use super::YamlSpans;
    use crate::diagnostics::YamlPath;

    const DOC: &str = "\
queues:
  orders:
    retry: { mode: ttl-backoff, max_delay: 1s }
  \"naïve\": {}
bindings:
  - exchange: orders
    queue: orders
";

    /// The path of plain keys `keys` from the root.
    fn path(keys: &[&str]) -> YamlPath {
        keys.iter()
            .fold(YamlPath::root(), |path, key| path.key(*key))
    }

    fn binding(field: &str) -> YamlPath {
        path(&["bindings"]).index(0).key(field)
    }

    fn at(spans: &YamlSpans, path: &YamlPath) -> (usize, usize, String) {
        let span = spans.find(path).unwrap();
        let text = DOC[span.offset..span.offset + span.len].to_owned();
        (span.line, span.column, text)
    }

    #[test]
    fn finds_values_keys_and_items_by_path() {
        let spans = YamlSpans::index(DOC);
        assert_eq!(
            at(&spans, &path(&["queues", "orders", "retry", "max_delay"])),
            (3, 44, "1s".into())
        );
        assert_eq!(at(&spans, &binding("queue")), (7, 12, "orders".into()));
        assert_eq!(
            at(&spans, &path(&["queues", "naïve"])),
            (4, 12, "{}".into())
        );
        let key = spans
            .find_key(&path(&["queues", "orders", "retry"]))
            .unwrap();
        assert_eq!((key.line, key.column), (3, 5));
    }

    #[test]
    fn a_dotted_key_is_one_segment() {
        let doc = "queues:\n  orders: { retry: {} }\n  orders.retry: { retry: 1 }\n";
        let spans = YamlSpans::index(doc);
        let line = |keys: &[&str]| spans.find(&path(keys)).unwrap().line;
        assert_eq!(line(&["queues", "orders", "retry"]), 2);
        assert_eq!(line(&["queues", "orders.retry"]), 3);
        assert_eq!(line(&["queues", "orders.retry", "retry"]), 3);
    }

    #[test]
    fn multi_line_values_point_at_their_key_and_duplicates_are_kept() {
        let spans = YamlSpans::index("queues:\n  a:\n    x: 1\n  a: {}\n");
        let span = spans.find(&path(&["queues", "a"])).unwrap();
        assert_eq!((span.line, span.column, span.len), (2, 3, 1));
        let [dup] = spans.duplicates() else {
            panic!("one duplicate expected")
        };
        assert_eq!((dup.path(), dup.span.line), (path(&["queues", "a"]), 4));
    }

    #[test]
    fn keys_without_a_name_index_nothing_under_them() {
        // A collection or an alias as a key: neither it nor its value gets a path, and the
        // value is not mistaken for the next key.
        let doc = "a: &x 1\n? [b, c]\n: d\n? { e: f }\n: g\n*x : h\nlast: i\n";
        let spans = YamlSpans::index(doc);
        for key in ["b", "c", "d", "e", "f", "g", "h"] {
            let mut paths = spans.keys.keys().chain(spans.values.keys());
            assert!(paths.all(|p| !p.to_string().contains(key)), "{key}");
        }
        assert_eq!(spans.find(&path(&["last"])).unwrap().line, 7);
        assert_eq!(spans.find(&path(&["a"])).unwrap().line, 1);
        assert!(spans.duplicates().is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 1_000,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x59a_2b5),
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Hostile YAML (complex keys, anchors and aliases as keys and values, duplicates,
        /// flow and block nesting mixed) never panics the index, and every indexed path is
        /// found, within the text.
        #[test]
        fn any_yaml_indexes_without_panicking(
            parts in proptest::collection::vec(proptest::sample::select(&[
                "a", "b.c", "\"d e\"", "''", ":", ": ", "? ", "- ", "&x ", "*x", "*x ", "[", "]",
                "{", "}", ", ", "\n", "\n  ", "\n    ", "!!map ", "<<: ", "# c",
            ][..]), 0..40)
        ) {
            let text = parts.concat();
            let spans = YamlSpans::index(&text);
            for path in spans.keys.keys().chain(spans.values.keys()) {
                let span = spans.find(path);
                let inside = span.is_some_and(|s| s.offset.saturating_add(s.len) <= text.len());
                proptest::prop_assert!(inside, "{path}: {span:?}");
            }
            for duplicate in spans.duplicates() {
                proptest::prop_assert!(spans.find_key(&duplicate.path()).is_some());
            }
        }
    }

    #[test]
    fn deep_flow_nesting_is_found_before_parsing() {
        let deep = format!("queues: {}{}", "[".repeat(20_000), "]".repeat(20_000));
        let span = YamlSpans::index(&deep).too_deep().unwrap();
        assert_eq!((span.line, span.column), (1, 73));
        let quoted = format!("a: \"{}\" # {}\n", "[".repeat(100), "{".repeat(100));
        assert!(YamlSpans::index(&quoted).too_deep().is_none());
    }

    #[test]
    fn falls_back_to_the_nearest_written_ancestor() {
        let spans = YamlSpans::index(DOC);
        assert_eq!(
            at(&spans, &path(&["queues", "orders", "retry", "jitter"])).0,
            3
        );
        assert_eq!(at(&spans, &binding("routing_key")).0, 6);
    }
}
