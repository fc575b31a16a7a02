//! Where each node of a YAML document is written, by path.
//!
//! serde gives typed values but forgets positions; the checks need the line and column of
//! `queues.orders.retry.max_delay` to point at it. This walks the parser's event stream once
//! and records the span of every key and value under the same dotted path the checks use.

use std::collections::{BTreeMap, BTreeSet};

use saphyr_parser::{Event, Parser};

use super::lines::{Cursor, LineIndex};
use crate::diagnostics::Span;

/// Spans of a YAML document's nodes, by path (`queues.orders.retry`, `bindings[0].queue`).
#[derive(Debug, Clone, Default)]
pub struct YamlSpans {
    values: BTreeMap<String, Span>,
    keys: BTreeMap<String, Span>,
    /// Values written over several lines, where the key is the better place to point at.
    multiline: BTreeSet<String>,
    /// Keys written twice in one mapping.
    duplicates: Vec<Duplicate>,
    /// Where nesting first went deeper than [`MAX_DEPTH`], if it did.
    too_deep: Option<Span>,
}

/// The deepest nesting a contract may have. Real contracts nest a handful of levels; a
/// document nested thousands deep is an attack on the parser, refused before it is deserialized.
pub const MAX_DEPTH: usize = 64;

/// A key written twice in one mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Duplicate {
    /// The path of the mapping (`queues`).
    pub parent: String,
    /// The repeated key.
    pub key: String,
    /// Where the second one is written.
    pub span: Span,
}

impl Duplicate {
    /// The path of the repeated entry.
    pub fn path(&self) -> String {
        join(&self.parent, &self.key)
    }
}

impl YamlSpans {
    /// Indexes `text`. A document the parser rejects yields an empty index: the typed parse
    /// reports that error with its own position.
    pub fn index(text: &str) -> Self {
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
    pub fn find(&self, path: &str) -> Option<Span> {
        let mut path = path;
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
            path = parent(path)?;
        }
    }

    /// Where the document nests deeper than a contract may (`MAX_DEPTH` levels), if it does.
    pub fn too_deep(&self) -> Option<Span> {
        self.too_deep
    }

    /// Keys written twice in one mapping. YAML parsers keep the last entry silently; a
    /// contract must not.
    pub fn duplicates(&self) -> &[Duplicate] {
        &self.duplicates
    }

    /// The span of the key that introduces `path` (`max_delay` in `retry: {max_delay: 1s}`),
    /// falling back to [`YamlSpans::find`].
    #[cfg(test)]
    pub fn find_key(&self, path: &str) -> Option<Span> {
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

/// The path of the parent node: `a.b[2].c` → `a.b[2]` → `a.b` → `a` → ``.
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(&path[..cut])
}

enum Frame {
    Mapping {
        path: String,
        key: Option<String>,
        seen: BTreeSet<String>,
    },
    Sequence {
        path: String,
        index: usize,
    },
}

struct Walker {
    spans: YamlSpans,
    stack: Vec<(Frame, Span)>,
}

impl Walker {
    /// The path of the node that starts now, or `None` when the node is a mapping key.
    fn next_path(&mut self) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some((Frame::Mapping { path, key, .. }, _)) => key.take().map(|key| join(path, &key)),
            Some((Frame::Sequence { path, index }, _)) => {
                let child = format!("{path}[{index}]");
                *index += 1;
                Some(child)
            }
        }
    }

    fn on_event(&mut self, event: Event<'_>, start: Span, end: usize, end_line: usize) {
        match event {
            Event::Scalar(value, ..) => match self.next_path() {
                Some(path) => {
                    self.spans
                        .values
                        .entry(path)
                        .or_insert(with_end(start, end));
                }
                None => {
                    if let Some((Frame::Mapping { path, key, seen }, _)) = self.stack.last_mut() {
                        let child = join(path, &value);
                        if !seen.insert(value.to_string()) {
                            self.spans.duplicates.push(Duplicate {
                                parent: path.clone(),
                                key: value.to_string(),
                                span: with_end(start, end),
                            });
                        }
                        self.spans.keys.entry(child).or_insert(with_end(start, end));
                        *key = Some(value.into_owned());
                    }
                }
            },
            Event::Alias(_) => {
                if let Some(path) = self.next_path() {
                    self.spans.values.insert(path, with_end(start, end));
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                // A collection used as a mapping key has no path of its own; index it under
                // a placeholder so its children do not land on real paths.
                let path = self.next_path().unwrap_or_else(|| "?".to_owned());
                let frame = if matches!(event, Event::MappingStart(..)) {
                    Frame::Mapping {
                        path,
                        key: None,
                        seen: BTreeSet::new(),
                    }
                } else {
                    Frame::Sequence { path, index: 0 }
                };
                self.stack.push((frame, start));
            }
            Event::MappingEnd | Event::SequenceEnd => {
                if let Some((frame, start)) = self.stack.pop() {
                    let (Frame::Mapping { path, .. } | Frame::Sequence { path, .. }) = frame;
                    if end_line > start.line {
                        self.spans.multiline.insert(path.clone());
                    }
                    self.spans
                        .values
                        .entry(path)
                        .or_insert(with_end(start, end));
                }
            }
            _ => {}
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
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

    const DOC: &str = "\
queues:
  orders:
    retry: { mode: ttl-backoff, max_delay: 1s }
  \"naïve\": {}
bindings:
  - exchange: orders
    queue: orders
";

    fn at(spans: &YamlSpans, path: &str) -> (usize, usize, String) {
        let span = spans.find(path).unwrap();
        let text = DOC[span.offset..span.offset + span.len].to_owned();
        (span.line, span.column, text)
    }

    #[test]
    fn finds_values_keys_and_items_by_path() {
        let spans = YamlSpans::index(DOC);
        assert_eq!(
            at(&spans, "queues.orders.retry.max_delay"),
            (3, 44, "1s".into())
        );
        assert_eq!(at(&spans, "bindings[0].queue"), (7, 12, "orders".into()));
        assert_eq!(at(&spans, "queues.naïve"), (4, 12, "{}".into()));
        let key = spans.find_key("queues.orders.retry").unwrap();
        assert_eq!((key.line, key.column), (3, 5));
    }

    #[test]
    fn multi_line_values_point_at_their_key_and_duplicates_are_kept() {
        let spans = YamlSpans::index("queues:\n  a:\n    x: 1\n  a: {}\n");
        let span = spans.find("queues.a").unwrap();
        assert_eq!((span.line, span.column, span.len), (2, 3, 1));
        let [dup] = spans.duplicates() else {
            panic!("one duplicate expected")
        };
        assert_eq!((dup.path().as_str(), dup.span.line), ("queues.a", 4));
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
        assert_eq!(at(&spans, "queues.orders.retry.jitter").0, 3);
        assert_eq!(at(&spans, "bindings[0].routing_key").0, 6);
    }
}
