//! Topic exchange matching, as RabbitMQ does it: a binding pattern's words against a routing
//! key's, `*` standing for exactly one word and `#` for zero or more.

/// Whether the routing `key` matches the topic `pattern`.
///
/// ```
/// use warren_model::topic_matches;
///
/// assert!(topic_matches("order.*.placed", "order.eu.placed"));
/// assert!(topic_matches("order.#", "order"));
/// assert!(!topic_matches("order.*", "order.eu.placed"));
/// ```
pub fn topic_matches(pattern: &str, key: &str) -> bool {
    let pattern = words(pattern);
    let key = words(key);
    // matched[j]: the pattern's words so far match the key's first `j` words. A key and a
    // pattern are at most 255 bytes each (AMQP short strings), so this is at most 128 × 128.
    let mut matched = vec![false; key.len() + 1];
    matched[0] = true;
    for word in pattern {
        let mut next = vec![false; key.len() + 1];
        for j in 0..=key.len() {
            next[j] = match word {
                // Zero words (as before), or one more than `#` took already.
                "#" => matched[j] || (j > 0 && next[j - 1]),
                "*" => j > 0 && matched[j - 1],
                literal => j > 0 && matched[j - 1] && key[j - 1] == literal,
            };
        }
        matched = next;
    }
    matched[key.len()]
}

/// The words of a key or pattern; the empty key has none (so `*` does not match it).
fn words(text: &str) -> Vec<&str> {
    match text {
        "" => Vec::new(),
        text => text.split('.').collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::topic_matches;

    #[test]
    fn words_stars_and_hashes() {
        for (pattern, key, expected) in [
            ("a", "a", true),
            ("a", "b", false),
            ("*", "a", true),
            ("*", "a.b", false),
            ("*", "", false),
            ("", "", true),
            ("#", "", true),
            ("#", "a.b.c", true),
            ("a.#", "a", true),
            ("a.#.c", "a.c", true),
            ("a.#.c", "a.b.b.c", true),
            ("a.#.c", "a.b.b", false),
            ("#.#", "a", true),
            ("*.*", "a", false),
            ("a.*.#", "a", false),
            ("a.*.#", "a.b.c.d", true),
        ] {
            assert_eq!(topic_matches(pattern, key), expected, "{pattern} ~ {key}");
        }
    }
}
