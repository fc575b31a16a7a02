//! [`YamlPath`]: where a node sits in a YAML document, as a sequence of keys and indices.
//!
//! A path is typed rather than a dotted string because names are the user's: a queue may
//! be called `orders.retry`, and the string `queues.orders.retry` would then name both the
//! `retry` key of queue `orders` and the queue `orders.retry` itself. Two different typed
//! paths never display the same (see [`YamlPath`]'s `Display`).

use std::borrow::Borrow;
use std::fmt::{self, Write as _};

use super::{escape, is_hidden};

/// One step of a [`YamlPath`]: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Segment {
    /// The value under this key of a mapping.
    Key(String),
    /// The item at this 0-based position of a sequence.
    Index(usize),
}

/// The path of a node in a YAML document, from the document's root: `queues` → `orders` →
/// `retry`, or `bindings` → `0` → `queue`.
///
/// Built segment by segment, each builder returning a new path so a parent can be reused:
///
/// ```
/// use warren_codegen::diagnostics::YamlPath;
///
/// let queue = YamlPath::root().key("queues").key("orders");
/// assert_eq!(queue.key("retry").to_string(), "queues.orders.retry");
/// assert_eq!(YamlPath::root().key("bindings").index(0).key("queue").to_string(), "bindings[0].queue");
/// // A key that could be misread is written quoted, in brackets:
/// let dotted = YamlPath::root().key("queues").key("orders.retry");
/// assert_eq!(dotted.key("retry").to_string(), r#"queues["orders.retry"].retry"#);
/// ```
///
/// # Display
///
/// Keys are joined with `.` and indices written `[n]`, as they have always been shown, as
/// long as a key is *plain*: not empty, and without `.`, `[`, `]`, quotes (`"`, `'`, `` ` ``),
/// `\`, whitespace or [hidden](is_hidden) characters. Any other key is written as a quoted
/// string in brackets, `["orders.retry"]`, in which `"` and `\` are escaped with a `\` and
/// hidden characters are [escaped](escape) (`\n`, `\u{1b}`): the text can be read back into
/// exactly one path, and no control sequence of a hostile name reaches a terminal.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct YamlPath {
    segments: Vec<Segment>,
}

impl YamlPath {
    /// The document's root: the empty path.
    pub fn root() -> Self {
        Self::default()
    }

    /// This path followed by the mapping key `key`.
    #[must_use]
    pub fn key(&self, key: impl Into<String>) -> Self {
        self.with(Segment::Key(key.into()))
    }

    /// This path followed by the sequence index `index`.
    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        self.with(Segment::Index(index))
    }

    /// This path followed by the segments of `relative`.
    #[must_use]
    pub fn join(&self, relative: &YamlPath) -> Self {
        let mut segments = Vec::with_capacity(self.segments.len() + relative.segments.len());
        segments.extend_from_slice(&self.segments);
        segments.extend_from_slice(&relative.segments);
        Self { segments }
    }

    /// The segments, from the root.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// True for the root.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    fn with(&self, segment: Segment) -> Self {
        let mut segments = Vec::with_capacity(self.segments.len() + 1);
        segments.extend_from_slice(&self.segments);
        segments.push(segment);
        Self { segments }
    }
}

/// Lets a map keyed by paths be searched by a prefix of a path's segments, without building
/// a path per ancestor. Sound because a path's order is its segments' order.
impl Borrow<[Segment]> for YamlPath {
    fn borrow(&self) -> &[Segment] {
        &self.segments
    }
}

/// Whether `key` can be written without quotes and still be read back as one key.
fn is_plain(key: &str) -> bool {
    !key.is_empty()
        && !key.chars().any(|c| {
            matches!(c, '.' | '[' | ']' | '"' | '\'' | '`' | '\\')
                || c.is_whitespace()
                || is_hidden(c)
        })
}

impl fmt::Display for YamlPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.segments.iter().enumerate() {
            match segment {
                Segment::Index(index) => write!(f, "[{index}]")?,
                Segment::Key(key) if is_plain(key) => {
                    if i > 0 {
                        f.write_char('.')?;
                    }
                    f.write_str(key)?;
                }
                Segment::Key(key) => {
                    // `\` and `"` escaped here, so the escapes `escape` adds stay
                    // distinguishable from a backslash that was in the name; whitespace other
                    // than a space (a no-break space, an em space) is escaped too, so it cannot
                    // pass for one.
                    f.write_str("[\"")?;
                    for c in key.chars() {
                        match c {
                            '\\' | '"' => write!(f, "\\{c}")?,
                            c if c.is_whitespace() && c != ' ' && !is_hidden(c) => {
                                write!(f, "{}", c.escape_unicode())?;
                            }
                            c => write!(f, "{}", escape(c.encode_utf8(&mut [0; 4])))?,
                        }
                    }
                    f.write_str("\"]")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::select;

    use super::{Segment, YamlPath};

    fn queue(name: &str) -> YamlPath {
        YamlPath::root().key("queues").key(name)
    }

    #[test]
    fn plain_keys_are_dotted_and_indices_bracketed() {
        assert_eq!(
            queue("orders").key("retry").to_string(),
            "queues.orders.retry"
        );
        assert_eq!(
            YamlPath::root()
                .key("bindings")
                .index(3)
                .key("headers")
                .to_string(),
            "bindings[3].headers"
        );
        assert_eq!(queue("café").to_string(), "queues.café");
        assert_eq!(
            queue("*/").key("x-message-ttl").to_string(),
            "queues.*/.x-message-ttl"
        );
        assert_eq!(YamlPath::root().to_string(), "");
    }

    #[test]
    fn keys_that_could_be_misread_are_quoted() {
        let field = queue("orders").key("retry");
        let queue_named_so = queue("orders.retry");
        assert_ne!(field.to_string(), queue_named_so.to_string());
        assert_eq!(queue_named_so.to_string(), r#"queues["orders.retry"]"#);
        assert_eq!(queue("").to_string(), r#"queues[""]"#);
        assert_eq!(queue("a b").to_string(), r#"queues["a b"]"#);
        assert_eq!(queue("[0]").to_string(), r#"queues["[0]"]"#);
        assert_eq!(YamlPath::root().key("a.b").to_string(), r#"["a.b"]"#);
    }

    #[test]
    fn quoted_keys_escape_quotes_backslashes_and_hidden_characters() {
        assert_eq!(queue(r#"say "hi""#).to_string(), r#"queues["say \"hi\""]"#);
        assert_eq!(queue(r"back\slash").to_string(), r#"queues["back\\slash"]"#);
        // A name holding the text `\n` and one holding a line break differ.
        assert_eq!(queue("a\nb").to_string(), r#"queues["a\nb"]"#);
        assert_eq!(queue(r"a\nb").to_string(), r#"queues["a\\nb"]"#);
        let hostile = queue("\u{1b}[31mred\u{202e}").to_string();
        assert_eq!(hostile, r#"queues["\u{1b}[31mred\u{202e}"]"#);
        assert!(!hostile.chars().any(super::is_hidden));
        // Invisible characters and look-alike spaces cannot make two names print the same.
        assert_eq!(
            queue("orders\u{200b}").key("retry").to_string(),
            r#"queues["orders\u{200b}"].retry"#
        );
        assert_eq!(queue("a\u{a0}b").to_string(), r#"queues["a\u{a0}b"]"#);
    }

    /// Reads a displayed path back, as a person would: the display is unambiguous when this
    /// gives back the path it was made from.
    fn read(text: &str) -> Option<YamlPath> {
        let mut path = YamlPath::root();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(inner) = rest.strip_prefix("[\"") {
                let mut key = String::new();
                let mut chars = inner.char_indices();
                let end = loop {
                    match chars.next()? {
                        (i, '"') => break i,
                        (_, '\\') => match chars.next()?.1 {
                            'n' => key.push('\n'),
                            'r' => key.push('\r'),
                            't' => key.push('\t'),
                            'u' => {
                                let hex: String = chars
                                    .by_ref()
                                    .map(|(_, c)| c)
                                    .skip(1)
                                    .take_while(|c| *c != '}')
                                    .collect();
                                key.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                            }
                            other => key.push(other),
                        },
                        (_, c) => key.push(c),
                    }
                };
                rest = inner[end + 1..].strip_prefix(']')?;
                path = path.key(key);
            } else if let Some(inner) = rest.strip_prefix('[') {
                let end = inner.find(']')?;
                path = path.index(inner[..end].parse().ok()?);
                rest = &inner[end + 1..];
            } else {
                if !path.is_root() {
                    rest = rest.strip_prefix('.')?;
                }
                let end = rest.find(['.', '[']).unwrap_or(rest.len());
                path = path.key(&rest[..end]);
                rest = &rest[end..];
            }
        }
        Some(path)
    }

    fn segment() -> impl Strategy<Value = Segment> {
        const ALPHABET: &[&str] = &[
            "a", "b", "é", "0", "-", "_", "*", ".", "[", "]", "\"", "'", "`", "\\", " ", "\n",
            "\u{1b}", "\u{202e}", "\u{85}", "\u{a0}", "\u{200b}", "\u{feff}", "\u{2003}", "u", "{",
            "}",
        ];
        prop_oneof![
            vec(select(ALPHABET), 0..6).prop_map(|parts| Segment::Key(parts.concat())),
            any::<usize>().prop_map(Segment::Index),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2_000,
            failure_persistence: None,
            // The same cases on every run, as the other property tests do.
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x9a7_4b1d),
            ..ProptestConfig::default()
        })]

        /// Two different paths never display alike, and no display holds a hidden character.
        #[test]
        fn a_displayed_path_reads_back_as_itself(segments in vec(segment(), 0..5)) {
            let path = segments.into_iter().fold(YamlPath::root(), |path, segment| match segment {
                Segment::Key(key) => path.key(key),
                Segment::Index(index) => path.index(index),
            });
            let text = path.to_string();
            prop_assert!(!text.chars().any(super::is_hidden), "{}", text);
            prop_assert_eq!(read(&text), Some(path), "{}", text);
        }
    }

    #[test]
    fn paths_order_by_segments() {
        let mut paths = [queue("b"), queue("a").key("x"), queue("a")];
        paths.sort();
        assert_eq!(paths, [queue("a"), queue("a").key("x"), queue("b")]);
    }
}
