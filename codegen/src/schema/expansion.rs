//! How large a bundled schema is once its `$ref`s are followed: every reference is a copy of
//! its target, in the Rust type typify makes (a `$ref` in an `anyOf` is a flattened field)
//! and in the branches a validator tries. Shared definitions nested in combinators multiply:
//! six levels of `anyOf` with ten `$ref`s each to the level below (2.7 KB) made a payload type
//! of 24,000,000 bytes, whose first use overflowed every worker's stack, and validation
//! exponential in the depth (1.3 s for `{"x":1}` at six levels, over 8 s at seven). So a
//! schema is refused past [`MAX_EXPANDED_NODES`].

use std::collections::BTreeMap;

use serde_json::Value;

/// The most JSON nodes a message's schema may hold with its `$ref`s followed. Real payloads
/// hold hundreds to a few thousand; the schema above held a million.
pub(crate) const MAX_EXPANDED_NODES: u64 = 20_000;

/// How many JSON nodes definition `name` holds with every `#/$defs/<name>` reference in it
/// followed (a reference back into a definition being followed counts once: recursion is
/// boxed, and expands with the data, not the schema), saturating past `MAX_EXPANDED_NODES`.
pub(crate) fn expanded_nodes(definitions: &BTreeMap<String, Value>, name: &str) -> u64 {
    let mut sizes = BTreeMap::new();
    let mut following = Vec::new();
    definition(definitions, name, &mut sizes, &mut following)
}

fn definition<'a>(
    definitions: &'a BTreeMap<String, Value>,
    name: &'a str,
    sizes: &mut BTreeMap<&'a str, u64>,
    following: &mut Vec<&'a str>,
) -> u64 {
    if let Some(size) = sizes.get(name) {
        return *size;
    }
    let Some(body) = definitions.get(name) else {
        return 1;
    };
    if following.contains(&name) {
        return 1;
    }
    following.push(name);
    let size = node(definitions, body, sizes, following);
    following.pop();
    sizes.insert(name, size);
    size
}

fn node<'a>(
    definitions: &'a BTreeMap<String, Value>,
    value: &'a Value,
    sizes: &mut BTreeMap<&'a str, u64>,
    following: &mut Vec<&'a str>,
) -> u64 {
    let children: Box<dyn Iterator<Item = &'a Value>> = match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref")
                && let Some(target) = reference.strip_prefix(super::bundle::DEFINITION_REF)
            {
                let target = definition(definitions, target, sizes, following);
                let rest = map.iter().filter(|(key, _)| *key != "$ref").map(|(_, v)| v);
                let rest: u64 = rest.map(|v| node(definitions, v, sizes, following)).sum();
                return saturate(1 + target + rest);
            }
            Box::new(map.values())
        }
        Value::Array(items) => Box::new(items.iter()),
        _ => return 1,
    };
    let mut size = 1u64;
    for child in children {
        size = saturate(size + node(definitions, child, sizes, following));
        if size > MAX_EXPANDED_NODES {
            break;
        }
    }
    size
}

fn saturate(size: u64) -> u64 {
    size.min(MAX_EXPANDED_NODES + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn references_count_as_copies() {
        let definitions = defs(&[
            ("Money", json!({"type": "integer"})),
            (
                "Order",
                json!({"properties": {"a": {"$ref": "#/$defs/Money"}, "b": {"$ref": "#/$defs/Money"}}}),
            ),
        ]);
        // Order {properties {a {$ref→Money{type}}, b {…}}}: 1 + 1 + 2 × (1 + 2).
        assert_eq!(expanded_nodes(&definitions, "Money"), 2);
        assert_eq!(expanded_nodes(&definitions, "Order"), 8);
    }

    #[test]
    fn recursion_counts_once() {
        let definitions = defs(&[(
            "Tree",
            json!({"properties": {"children": {"items": {"$ref": "#/$defs/Tree"}}}}),
        )]);
        // Tree {properties {children {items {$ref→Tree, once}}}}.
        assert_eq!(expanded_nodes(&definitions, "Tree"), 5);
    }

    /// The attack: six levels of `anyOf`, ten references each to the level below.
    #[test]
    fn nested_fan_out_is_caught_cheaply() {
        let mut pairs = vec![("L0".to_owned(), json!({"type": "object"}))];
        for level in 1..=6 {
            let below = format!("#/$defs/L{}", level - 1);
            let branches: Vec<Value> = (0..10).map(|_| json!({"$ref": below})).collect();
            pairs.push((format!("L{level}"), json!({"anyOf": branches})));
        }
        let definitions: BTreeMap<String, Value> = pairs.into_iter().collect();
        // L0 {type} is 2; each level an object, an array, and ten references to the one below.
        assert_eq!(expanded_nodes(&definitions, "L1"), 2 + 10 * (1 + 2));
        assert_eq!(expanded_nodes(&definitions, "L2"), 2 + 10 * (1 + 32));
        assert!(expanded_nodes(&definitions, "L6") > MAX_EXPANDED_NODES);
    }
}
