//! Routing, offline: which queues a routing key reaches from an exchange.
//!
//! RabbitMQ confirms a publish that routes to no queue and then drops it, so the generator
//! follows the contract's bindings the way the broker would: topic patterns (`*` is exactly
//! one word, `#` zero or more), direct equality, fanout to everything, headers bindings as
//! "may match" (header values are only known at publish time), exchange-to-exchange bindings
//! and alternate exchanges.
//!
//! A publisher's key may hold `{placeholders}`; a placeholder stands for one or more words
//! (its value may contain dots). A templated key reaches a queue when *some* value of the
//! placeholders would: the question is answered as the intersection of two word patterns.

use std::collections::{BTreeMap, BTreeSet};

use crate::format::ExchangeKind;

/// One element of a word pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    /// Exactly this word.
    Word(&'a str),
    /// Exactly one word, any.
    One,
    /// Zero or more words, any.
    Many,
}

/// A routing key as a publisher writes it: words and `{placeholders}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    words: Vec<KeyWord>,
}

/// A word of a [`KeyTemplate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyWord {
    /// A literal word.
    Literal(String),
    /// `{name}`: filled in at publish time with one or more words.
    Placeholder(String),
}

impl KeyTemplate {
    /// Parses `order.{region}.created`. A placeholder must be a whole word.
    pub fn parse(key: &str) -> Result<Self, String> {
        let words = split_words(key)
            .into_iter()
            .map(|word| {
                if let Some(name) = word.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
                    if name.is_empty() || name.contains(['{', '}']) {
                        return Err(format!("`{word}` is not a placeholder; write `{{name}}`"));
                    }
                    Ok(KeyWord::Placeholder(name.to_owned()))
                } else if word.contains(['{', '}']) {
                    Err(format!(
                        "`{word}` mixes a placeholder with other text; a placeholder must be a \
                         whole dot-separated word, such as `order.{{region}}.created`"
                    ))
                } else {
                    Ok(KeyWord::Literal(word.to_owned()))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { words })
    }

    /// A key with no words (`""`).
    pub fn empty() -> Self {
        Self { words: Vec::new() }
    }

    /// The words of the key.
    pub fn words(&self) -> &[KeyWord] {
        &self.words
    }

    /// The placeholder names, in order.
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.words.iter().filter_map(|w| match w {
            KeyWord::Placeholder(name) => Some(name.as_str()),
            KeyWord::Literal(_) => None,
        })
    }

    fn tokens(&self) -> Vec<Token<'_>> {
        self.words
            .iter()
            .flat_map(|word| match word {
                KeyWord::Literal(w) => vec![Token::Word(w)],
                // One or more words: one, then any number.
                KeyWord::Placeholder(_) => vec![Token::One, Token::Many],
            })
            .collect()
    }
}

/// `""` has no words (RabbitMQ splits the empty key into none).
fn split_words(key: &str) -> Vec<&str> {
    if key.is_empty() {
        Vec::new()
    } else {
        key.split('.').collect()
    }
}

/// Whether some routing key fits both the topic binding `pattern` and `key`.
pub fn topic_matches(pattern: &str, key: &KeyTemplate) -> bool {
    let pattern: Vec<Token<'_>> = split_words(pattern)
        .into_iter()
        .map(|w| match w {
            "*" => Token::One,
            "#" => Token::Many,
            word => Token::Word(word),
        })
        .collect();
    intersects(&pattern, &key.tokens())
}

/// Whether some routing key equals the direct binding key `binding` and fits `key`.
pub fn direct_matches(binding: &str, key: &KeyTemplate) -> bool {
    let literal: Vec<Token<'_>> = split_words(binding).into_iter().map(Token::Word).collect();
    intersects(&literal, &key.tokens())
}

/// Whether the languages of two word patterns intersect, by dynamic programming over
/// (position in `a`, position in `b`).
fn intersects(a: &[Token<'_>], b: &[Token<'_>]) -> bool {
    let mut memo = vec![vec![None; b.len() + 1]; a.len() + 1];
    step(a, b, 0, 0, &mut memo)
}

fn step(
    a: &[Token<'_>],
    b: &[Token<'_>],
    i: usize,
    j: usize,
    memo: &mut Vec<Vec<Option<bool>>>,
) -> bool {
    if let Some(known) = memo[i][j] {
        return known;
    }
    let result = match (a.get(i), b.get(j)) {
        (None, None) => true,
        // A `Many` may end here, or swallow one word the other side produces.
        (Some(Token::Many), other) => {
            step(a, b, i + 1, j, memo) || (other.is_some() && step(a, b, i, j + 1, memo))
        }
        (other, Some(Token::Many)) => {
            step(a, b, i, j + 1, memo) || (other.is_some() && step(a, b, i + 1, j, memo))
        }
        (Some(x), Some(y)) => {
            let compatible = match (x, y) {
                (Token::Word(p), Token::Word(q)) => p == q,
                _ => true,
            };
            compatible && step(a, b, i + 1, j + 1, memo)
        }
        _ => false,
    };
    memo[i][j] = Some(result);
    result
}

/// Where a binding delivers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Destination {
    /// A queue.
    Queue(String),
    /// Another exchange, which routes the message on with the same key.
    Exchange(String),
}

/// A binding, as far as routing cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// Binding key (topic pattern or direct key); `None` for fanout and headers bindings.
    pub key: Option<String>,
    /// Where it delivers.
    pub to: Destination,
}

/// The exchange graph of a contract.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Declared exchanges: kind and alternate exchange.
    pub exchanges: BTreeMap<String, (ExchangeKind, Option<String>)>,
    /// Declared queues (for the default exchange, which routes by queue name).
    pub queues: BTreeSet<String>,
    /// Bindings by source exchange.
    pub edges: BTreeMap<String, Vec<Edge>>,
}

/// What a routing key reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Queues that receive the message for some value of the key's placeholders.
    pub queues: BTreeSet<String>,
    /// Queues reached only through headers bindings, which may or may not match depending
    /// on the headers sent.
    pub maybe: BTreeSet<String>,
    /// True when the message reaches an exchange this contract does not declare (an
    /// alternate exchange owned elsewhere), so where it ends is unknown.
    pub leaves_contract: bool,
    /// Every exchange visited, in order, with the binding keys declared on it (for messages).
    pub visited: Vec<(String, Vec<String>)>,
}

impl Reach {
    fn deliver(&mut self, queue: &str, certain: bool) {
        let set = if certain {
            &mut self.queues
        } else {
            &mut self.maybe
        };
        set.insert(queue.to_owned());
    }

    /// True when the message may end in some queue.
    pub fn is_routable(&self) -> bool {
        !self.queues.is_empty() || !self.maybe.is_empty() || self.leaves_contract
    }
}

impl Graph {
    /// Follows `key` from `exchange` (`""` is the default exchange).
    pub fn route(&self, exchange: &str, key: &KeyTemplate) -> Reach {
        let mut reach = Reach::default();
        let mut seen = BTreeSet::new();
        self.visit(exchange, key, true, &mut reach, &mut seen);
        reach
    }

    /// Follows `key` from `exchange`; `certain` is false once the path went through a
    /// headers binding.
    fn visit(
        &self,
        exchange: &str,
        key: &KeyTemplate,
        certain: bool,
        reach: &mut Reach,
        seen: &mut BTreeSet<String>,
    ) {
        if !seen.insert(exchange.to_owned()) {
            return;
        }
        if exchange.is_empty() {
            // The default exchange delivers to the queue named by the key.
            for queue in &self.queues {
                if direct_matches(queue, key) {
                    reach.deliver(queue, certain);
                }
            }
            return;
        }
        let Some((kind, alternate)) = self.exchanges.get(exchange) else {
            reach.leaves_contract = true;
            return;
        };
        let edges = self
            .edges
            .get(exchange)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut keys: Vec<String> = edges.iter().filter_map(|e| e.key.clone()).collect();
        keys.sort();
        keys.dedup();
        reach.visited.push((exchange.to_owned(), keys));
        let mut routed = false;
        for edge in edges {
            let matches = match kind {
                ExchangeKind::Fanout | ExchangeKind::Headers => true,
                ExchangeKind::Topic => edge.key.as_deref().is_some_and(|p| topic_matches(p, key)),
                ExchangeKind::Direct => edge.key.as_deref().is_some_and(|k| direct_matches(k, key)),
            };
            if !matches {
                continue;
            }
            routed = true;
            let certain = certain && *kind != ExchangeKind::Headers;
            match &edge.to {
                Destination::Queue(queue) => reach.deliver(queue, certain),
                Destination::Exchange(next) => self.visit(next, key, certain, reach, seen),
            }
        }
        // An alternate exchange receives what this exchange cannot route. Matching is
        // "some key may", so take it whenever a key may miss every binding too.
        if let Some(alternate) = alternate
            && (!routed || key.placeholders().next().is_some() || *kind == ExchangeKind::Headers)
        {
            self.visit(alternate, key, certain, reach, seen);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{KeyTemplate, direct_matches, topic_matches};

    fn key(text: &str) -> KeyTemplate {
        KeyTemplate::parse(text).unwrap()
    }

    #[test]
    fn topic_patterns_against_plain_keys() {
        let table = [
            // (pattern, key, matches)
            ("a.b.c", "a.b.c", true),
            ("a.b.c", "a.b", false),
            ("a.*.c", "a.b.c", true),
            ("a.*.c", "a.c", false),
            ("a.*.c", "a.b.b.c", false),
            ("*", "a", true),
            ("*", "", false),
            ("*", "a.b", false),
            ("#", "", true),
            ("#", "a.b.c", true),
            ("a.#", "a", true),
            ("a.#", "a.b.c", true),
            ("a.#", "b.a", false),
            ("#.c", "a.b.c", true),
            ("#.c", "c", true),
            ("a.#.c", "a.c", true),
            ("a.#.c", "a.x.y.c", true),
            ("a.#.c", "a.x.y.d", false),
            ("*.#", "", false),
            ("*.#", "a", true),
            ("#.*", "a.b", true),
            ("#.#", "", true),
            ("a.*.#.d", "a.b.d", true),
            ("a.*.#.d", "a.d", false),
            ("", "", true),
            ("", "a", false),
            // Wildcards only act as whole words.
            ("a*", "ab", false),
            ("a*", "a*", true),
        ];
        for (pattern, routing_key, expected) in table {
            assert_eq!(
                topic_matches(pattern, &key(routing_key)),
                expected,
                "pattern `{pattern}` vs key `{routing_key}`"
            );
        }
    }

    #[test]
    fn placeholders_stand_for_one_or_more_words() {
        let table = [
            ("order.eu.created", "order.{region}.created", true),
            ("order.*.created", "order.{region}.created", true),
            ("order.eu.west.created", "order.{region}.created", true),
            ("order.created", "order.{region}.created", false),
            ("order.eu.deleted", "order.{region}.created", false),
            ("#", "{anything}", true),
            ("a", "{anything}", true),
            ("", "{anything}", false),
            ("*.*", "{x}.{y}", true),
            ("*", "{x}.{y}", false),
        ];
        for (pattern, routing_key, expected) in table {
            assert_eq!(
                topic_matches(pattern, &key(routing_key)),
                expected,
                "pattern `{pattern}` vs key `{routing_key}`"
            );
        }
    }

    #[test]
    fn direct_keys_match_exactly_and_wildcards_are_literal() {
        assert!(direct_matches("orders", &key("orders")));
        assert!(!direct_matches("orders", &key("order")));
        assert!(direct_matches("orders.eu", &key("orders.{region}")));
        assert!(!direct_matches("#", &key("orders")));
        assert!(direct_matches("#", &key("#")));
    }

    #[test]
    fn placeholders_must_be_whole_words() {
        assert!(KeyTemplate::parse("order-{id}").is_err());
        assert!(KeyTemplate::parse("order.{}").is_err());
        assert_eq!(
            key("a.{b}.{c}").placeholders().collect::<Vec<_>>(),
            ["b", "c"]
        );
    }
}
