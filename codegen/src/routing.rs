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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::imports::Imports;
use crate::syntax::{ArgumentValue, ContractFile, ExchangeKind};

/// One element of a word pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
                if let Some(name) = warren_model::key_placeholder(word) {
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

    /// `key` as it is, every word literal (`{` and `}` included): a queue's name as the key
    /// of the default exchange, which has no placeholders.
    pub fn literal(key: &str) -> Self {
        Self {
            words: split_words(key)
                .into_iter()
                .map(|word| KeyWord::Literal(word.to_owned()))
                .collect(),
        }
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

// The pairwise matchers below are the tests' oracle for the trie that `Graph` routes with.

/// Whether some routing key fits both the topic binding `pattern` and `key`.
#[cfg(test)]
pub(crate) fn topic_matches(binding: &str, key: &KeyTemplate) -> bool {
    intersects(&pattern(binding, ExchangeKind::Topic), &key.tokens())
}

/// Whether some routing key equals the direct binding key `binding` and fits `key`.
#[cfg(test)]
pub(crate) fn direct_matches(binding: &str, key: &KeyTemplate) -> bool {
    intersects(&pattern(binding, ExchangeKind::Direct), &key.tokens())
}

/// Whether the languages of two word patterns intersect, by dynamic programming over
/// (position in `a`, position in `b`).
#[cfg(test)]
fn intersects(a: &[Token<'_>], b: &[Token<'_>]) -> bool {
    let mut memo = vec![vec![None; b.len() + 1]; a.len() + 1];
    step(a, b, 0, 0, &mut memo)
}

#[cfg(test)]
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

/// Where a binding delivers: the model's, a queue or another exchange (which routes the
/// message on with the same key).
pub(crate) use warren_model::Destination;

/// A binding, as far as routing cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edge {
    /// Binding key (topic pattern or direct key); `None` for fanout and headers bindings.
    pub key: Option<String>,
    /// Where it delivers.
    pub to: Destination,
}

/// Binding keys indexed by their words, the way the broker's topic trie is: a routing key is
/// matched against the bindings it can meet, not against every binding of the exchange. With
/// thousands of bindings on one exchange, matching every publisher against every binding was
/// the front end's quadratic cost.
#[derive(Debug, Clone, Default)]
struct Trie {
    nodes: Vec<TrieNode>,
}

#[derive(Debug, Clone, Default)]
struct TrieNode {
    /// Children by literal word.
    words: HashMap<String, usize>,
    /// The child through `*`.
    one: Option<usize>,
    /// The child through `#`.
    many: Option<usize>,
    /// The bindings whose key ends here, by index.
    ends: Vec<usize>,
}

/// A state of the walk of [`Trie::matches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Walk {
    /// The words to a node are matched, with the key's tokens before this index.
    At(usize, usize),
    /// The `#` into a node is being matched; it has taken the key's tokens before this index.
    Inside(usize, usize),
}

impl Trie {
    fn new() -> Self {
        Self {
            nodes: vec![TrieNode::default()],
        }
    }

    /// Adds binding `edge` with `pattern`.
    fn insert(&mut self, pattern: &[Token<'_>], edge: usize) {
        let mut at = 0;
        for token in pattern {
            let next = self.nodes.len();
            let node = &mut self.nodes[at];
            let child = match token {
                Token::Word(word) => *node.words.entry((*word).to_owned()).or_insert(next),
                Token::One => *node.one.get_or_insert(next),
                Token::Many => *node.many.get_or_insert(next),
            };
            if child == next {
                self.nodes.push(TrieNode::default());
            }
            at = child;
        }
        self.nodes[at].ends.push(edge);
    }

    /// The bindings whose pattern's language meets `key`'s, as `intersects` (the tests'
    /// oracle) decides for one pattern, in increasing order. The walk is that dynamic programme run over the
    /// trie, all patterns at once: a state is (trie node, position in the key), and `Inside`
    /// stands for a pattern position at a `#` (the trie node past it, since only a `#` leads
    /// there).
    fn matches(&self, key: &[Token<'_>]) -> Vec<usize> {
        // Patterns that end at a node match when the rest of the key may be empty.
        let mut rest_may_be_empty = vec![true; key.len() + 1];
        for j in (0..key.len()).rev() {
            rest_may_be_empty[j] = rest_may_be_empty[j + 1] && key[j] == Token::Many;
        }
        let mut found = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![Walk::At(0, 0)];
        while let Some(state) = stack.pop() {
            if !seen.insert(state) {
                continue;
            }
            match state {
                Walk::Inside(node, j) => {
                    // The `#` ends here, or takes one more token of the key.
                    stack.push(Walk::At(node, j));
                    if j < key.len() {
                        stack.push(Walk::Inside(node, j + 1));
                    }
                }
                Walk::At(at, j) => {
                    let node = &self.nodes[at];
                    if rest_may_be_empty[j] {
                        found.extend_from_slice(&node.ends);
                    }
                    if let Some(child) = node.many {
                        stack.push(Walk::Inside(child, j));
                    }
                    let single = node.words.values().chain(&node.one);
                    match key.get(j) {
                        None => {}
                        // The key's `#` takes one word of the patterns, or ends.
                        Some(Token::Many) => {
                            stack.push(Walk::At(at, j + 1));
                            stack.extend(single.map(|child| Walk::At(*child, j)));
                        }
                        Some(Token::One) => {
                            stack.extend(single.map(|child| Walk::At(*child, j + 1)));
                        }
                        Some(Token::Word(word)) => {
                            let exact = node.words.get(*word).into_iter().chain(&node.one);
                            stack.extend(exact.map(|child| Walk::At(*child, j + 1)));
                        }
                    }
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }
}

/// An exchange of the graph with its bindings.
#[derive(Debug, Clone)]
struct Node {
    kind: ExchangeKind,
    alternate: Option<String>,
    edges: Vec<Edge>,
    /// The bindings' keys, indexed (topic and direct exchanges).
    index: Trie,
    /// The distinct binding keys, sorted, for messages.
    keys: Vec<String>,
}

impl Node {
    /// The positions of the bindings a message whose key has `tokens` may take, in contract
    /// order: those whose key matches (topic, direct), or every one (fanout, and headers,
    /// which match on headers a key does not say).
    fn matched(&self, tokens: &[Token<'_>]) -> Vec<usize> {
        match self.kind {
            ExchangeKind::Fanout | ExchangeKind::Headers => (0..self.edges.len()).collect(),
            ExchangeKind::Topic | ExchangeKind::Direct => self.index.matches(tokens),
        }
    }
}

/// The exchange graph of a contract.
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    /// Declared exchanges.
    exchanges: BTreeMap<String, Node>,
    /// Declared queues (for the default exchange, which routes by queue name).
    queues: Vec<String>,
    /// The queue names as literal keys.
    queue_index: Trie,
}

/// What a routing key reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reach {
    /// Queues that receive the message for some value of the key's placeholders.
    pub queues: BTreeSet<String>,
    /// Queues reached only through headers bindings, which may or may not match depending
    /// on the headers sent.
    pub maybe: BTreeSet<String>,
    /// True when the message reaches an exchange this contract does not declare (an
    /// alternate exchange owned elsewhere), so where it ends is unknown.
    pub leaves_contract: bool,
    /// Every declared exchange visited, in order (see [`Graph::binding_keys`]).
    pub visited: Vec<String>,
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
    pub(crate) fn is_routable(&self) -> bool {
        !self.queues.is_empty() || !self.maybe.is_empty() || self.leaves_contract
    }
}

/// The words of a binding key as a pattern: wildcards on a topic exchange, literal words on
/// a direct one.
fn pattern(key: &str, kind: ExchangeKind) -> Vec<Token<'_>> {
    split_words(key)
        .into_iter()
        .map(|word| match (kind, word) {
            (ExchangeKind::Topic, "*") => Token::One,
            (ExchangeKind::Topic, "#") => Token::Many,
            _ => Token::Word(word),
        })
        .collect()
}

impl Graph {
    /// The graph of `exchanges` (name, kind, alternate exchange), `queues`, and `bindings`
    /// (source exchange and edge, in contract order). Bindings from an exchange that is not
    /// declared are left out: routing never follows them.
    pub(crate) fn new(
        exchanges: impl IntoIterator<Item = (String, ExchangeKind, Option<String>)>,
        queues: impl IntoIterator<Item = String>,
        bindings: impl IntoIterator<Item = (String, Edge)>,
    ) -> Self {
        let mut graph = Self {
            exchanges: exchanges
                .into_iter()
                .map(|(name, kind, alternate)| {
                    let node = Node {
                        kind,
                        alternate,
                        edges: Vec::new(),
                        index: Trie::new(),
                        keys: Vec::new(),
                    };
                    (name, node)
                })
                .collect(),
            queues: queues.into_iter().collect(),
            queue_index: Trie::new(),
        };
        for (i, queue) in graph.queues.iter().enumerate() {
            graph
                .queue_index
                .insert(&pattern(queue, ExchangeKind::Direct), i);
        }
        for (exchange, edge) in bindings {
            if let Some(node) = graph.exchanges.get_mut(&exchange) {
                node.edges.push(edge);
            }
        }
        for node in graph.exchanges.values_mut() {
            for (i, edge) in node.edges.iter().enumerate() {
                if let Some(key) = &edge.key {
                    if matches!(node.kind, ExchangeKind::Topic | ExchangeKind::Direct) {
                        node.index.insert(&pattern(key, node.kind), i);
                    }
                    node.keys.push(key.clone());
                }
            }
            node.keys.sort();
            node.keys.dedup();
        }
        graph
    }

    /// Whether the declared `exchange` has a binding.
    pub(crate) fn has_bindings(&self, exchange: &str) -> bool {
        self.exchanges
            .get(exchange)
            .is_some_and(|node| !node.edges.is_empty())
    }

    /// The distinct binding keys declared on `exchange`, sorted.
    pub(crate) fn binding_keys(&self, exchange: &str) -> &[String] {
        self.exchanges
            .get(exchange)
            .map(|node| node.keys.as_slice())
            .unwrap_or_default()
    }

    /// The binding keys of every exchange `reach` visited, for a message saying why it
    /// reaches no queue: `` `a.*` on `orders`; none on `audit` ``.
    pub(crate) fn bindings_seen(&self, reach: &Reach) -> String {
        let parts: Vec<String> = reach
            .visited
            .iter()
            .map(|exchange| {
                let keys = self.binding_keys(exchange);
                if keys.is_empty() {
                    format!("none on `{exchange}`")
                } else {
                    let keys = crate::check::list(keys.iter().map(String::as_str));
                    format!("{keys} on `{exchange}`")
                }
            })
            .collect();
        parts.join("; ")
    }

    /// The positions, among the bindings from the declared `exchange` in contract order, of
    /// those a message with `key` may take; `None` for an exchange the graph does not hold.
    pub(crate) fn taken(&self, exchange: &str, key: &KeyTemplate) -> Option<Vec<usize>> {
        let mut taken = self.exchanges.get(exchange)?.matched(&key.tokens());
        taken.sort_unstable();
        taken.dedup();
        Some(taken)
    }

    /// Follows `key` from `exchange` (`""` is the default exchange).
    pub(crate) fn route(&self, exchange: &str, key: &KeyTemplate) -> Reach {
        let mut reach = Reach::default();
        let mut seen = BTreeSet::new();
        let tokens = key.tokens();
        self.visit(exchange, key, &tokens, true, &mut reach, &mut seen);
        reach
    }

    /// Follows `key` from `exchange`; `certain` is false once the path went through a
    /// headers binding.
    fn visit(
        &self,
        exchange: &str,
        key: &KeyTemplate,
        tokens: &[Token<'_>],
        certain: bool,
        reach: &mut Reach,
        seen: &mut BTreeSet<String>,
    ) {
        if !seen.insert(exchange.to_owned()) {
            return;
        }
        if exchange.is_empty() {
            // The default exchange delivers to the queue named by the key.
            for queue in self.queue_index.matches(tokens) {
                reach.deliver(&self.queues[queue], certain);
            }
            return;
        }
        let Some(node) = self.exchanges.get(exchange) else {
            reach.leaves_contract = true;
            return;
        };
        reach.visited.push(exchange.to_owned());
        let kind = node.kind;
        let matched = node.matched(tokens);
        let routed = !matched.is_empty();
        // In contract order: which path reaches an exchange first decides whether it is
        // certain (a later, headers path finds it seen).
        for edge in matched.into_iter().map(|i| &node.edges[i]) {
            let certain = certain && kind != ExchangeKind::Headers;
            match &edge.to {
                Destination::Queue(queue) => reach.deliver(queue, certain),
                Destination::Exchange(next) => self.visit(next, key, tokens, certain, reach, seen),
            }
        }
        // An alternate exchange receives what this exchange cannot route. Matching is
        // "some key may", so take it whenever a key may miss every binding too.
        if let Some(alternate) = &node.alternate
            && (!routed || key.placeholders().next().is_some() || kind == ExchangeKind::Headers)
        {
            self.visit(alternate, key, tokens, certain, reach, seen);
        }
    }
}

/// The exchange graph of the contract's declared exchanges and bindings, with those of the
/// contracts it imports: a publisher to an imported exchange reaches the owner's queues too.
/// The checks and the model both route on this one graph.
pub(crate) fn contract_graph(file: &ContractFile, imports: &Imports) -> Graph {
    let files: Vec<&ContractFile> = std::iter::once(file)
        .chain(imports.contracts.values().map(|i| &i.loaded.file))
        .collect();
    let exchanges = files.iter().flat_map(|f| &f.exchanges).map(|(name, e)| {
        let alternate =
            e.alternate_exchange
                .clone()
                .or_else(|| match e.arguments.get("alternate-exchange") {
                    Some(ArgumentValue::String(name)) => Some(name.clone()),
                    _ => None,
                });
        (name.clone(), e.kind.unwrap_or_default(), alternate)
    });
    let bindings = files
        .iter()
        .flat_map(|f| &f.bindings)
        .filter_map(|binding| {
            let to = match (&binding.queue, &binding.to_exchange) {
                (Some(queue), _) => Destination::Queue(queue.clone()),
                (None, Some(exchange)) => Destination::Exchange(exchange.clone()),
                (None, None) => return None,
            };
            let edge = Edge {
                key: binding.routing_key.clone(),
                to,
            };
            Some((binding.exchange.clone(), edge))
        });
    let queues = files.iter().flat_map(|f| f.queues.keys()).cloned();
    Graph::new(exchanges, queues, bindings)
}

/// The highest `max_priority` among the queues `reach` may deliver to (headers routes
/// included), declared by the contract or a contract it imports; `None` when none declares
/// one. A publication's or a call's priority is checked against it: one place decides it
/// for publishers and rpcs alike.
pub(crate) fn max_priority(reach: &Reach, file: &ContractFile, imports: &Imports) -> Option<u8> {
    let queue = |name: &str| {
        file.queues.get(name).or_else(|| {
            imports
                .contracts
                .values()
                .find_map(|i| i.loaded.file.queues.get(name))
        })
    };
    reach
        .queues
        .iter()
        .chain(&reach.maybe)
        .filter_map(|name| queue(name)?.max_priority())
        .max()
}

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::select;

    use super::{
        Destination, Edge, ExchangeKind, Graph, KeyTemplate, Trie, direct_matches, intersects,
        pattern, topic_matches,
    };

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
        assert_topic_table(&table);
    }

    /// Each (binding pattern, routing key, whether it matches) of `table`.
    fn assert_topic_table(table: &[(&str, &str, bool)]) {
        for &(pattern, routing_key, expected) in table {
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
        assert_topic_table(&table);
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

    /// Words from a small alphabet, so patterns and keys often meet.
    fn words(choices: &'static [&'static str]) -> impl Strategy<Value = String> {
        vec(select(choices), 0..5).prop_map(|words| words.join("."))
    }

    /// A fixed seed, so CI runs the same cases every time; `PROPTEST_RNG_SEED=<n>` explores
    /// others (as in `tests/fuzz_smoke.rs`).
    fn config() -> ProptestConfig {
        let defaults = ProptestConfig::default();
        let rng_seed = if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
            defaults.rng_seed
        } else {
            proptest::test_runner::RngSeed::Fixed(0x7e1e_0fa1)
        };
        ProptestConfig {
            cases: 2_000,
            failure_persistence: None,
            rng_seed,
            ..defaults
        }
    }

    proptest! {
        #![proptest_config(config())]

        /// The trie finds exactly the bindings whose key meets the routing key, as the
        /// pairwise dynamic programme decides one binding at a time (which the tables above
        /// pin).
        #[test]
        fn the_index_matches_exactly_what_pairwise_matching_does(
            bindings in vec(words(&["a", "b", "*", "#", ""]), 0..12),
            routing_key in words(&["a", "b", "c", "*", "#", "{p}"]),
            topic in any::<bool>(),
        ) {
            let kind = if topic { ExchangeKind::Topic } else { ExchangeKind::Direct };
            let key = KeyTemplate::parse(&routing_key).unwrap();
            let tokens = key.tokens();
            let mut trie = Trie::new();
            for (i, binding) in bindings.iter().enumerate() {
                trie.insert(&pattern(binding, kind), i);
            }
            let pairwise: Vec<usize> = (0..bindings.len())
                .filter(|i| intersects(&pattern(&bindings[*i], kind), &tokens))
                .collect();
            prop_assert_eq!(trie.matches(&tokens), pairwise);
        }
    }

    /// Routing through the index: contract order decides which path reaches an exchange
    /// first, bindings without a key match nothing on a topic exchange, and the default
    /// exchange routes by queue name.
    #[test]
    fn routes_follow_bindings_exchanges_and_queue_names() {
        let queue = |name: &str| Destination::Queue(name.to_owned());
        let edge = |key: Option<&str>, to: Destination| Edge {
            key: key.map(str::to_owned),
            to,
        };
        let graph = Graph::new(
            [
                (
                    "events".to_owned(),
                    ExchangeKind::Topic,
                    Some("ae".to_owned()),
                ),
                ("ae".to_owned(), ExchangeKind::Fanout, None),
                ("h".to_owned(), ExchangeKind::Headers, None),
            ],
            [
                "orders.eu".to_owned(),
                "unrouted".to_owned(),
                "audit".to_owned(),
            ],
            [
                (
                    "events".to_owned(),
                    edge(Some("order.*"), queue("orders.eu")),
                ),
                ("events".to_owned(), edge(None, queue("never"))),
                (
                    "events".to_owned(),
                    edge(Some("#"), Destination::Exchange("h".to_owned())),
                ),
                ("h".to_owned(), edge(None, queue("audit"))),
                ("ae".to_owned(), edge(None, queue("unrouted"))),
                ("undeclared".to_owned(), edge(Some("#"), queue("lost"))),
            ],
        );
        let reach = graph.route("events", &key("order.{region}"));
        assert_eq!(
            reach.queues.iter().collect::<Vec<_>>(),
            ["orders.eu", "unrouted"]
        );
        assert_eq!(reach.maybe.iter().collect::<Vec<_>>(), ["audit"]);
        assert_eq!(reach.visited, ["events", "h", "ae"]);
        assert_eq!(graph.binding_keys("events"), ["#", "order.*"]);
        let direct = graph.route("", &key("orders.{x}"));
        assert_eq!(direct.queues.iter().collect::<Vec<_>>(), ["orders.eu"]);
        assert!(!graph.has_bindings("undeclared"));
        assert!(graph.route("nowhere", &key("a")).leaves_contract);
    }
}
