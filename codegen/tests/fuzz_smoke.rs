//! The `contract` and `schema` fuzz targets' smoke run for CI, where cargo-fuzz cannot run:
//! random contracts built from the format's own vocabulary, mutated fixture contracts, random
//! schema documents and mutated example schemas, all through the generator the CLI uses.
//! Errors are expected; a panic fails (proptest catches it and shrinks the input).

use std::path::{Path, PathBuf};

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::{Config, RngSeed, TestRunner};
use serde_json::{Map, Value, json};
use warren_codegen::__fuzz::Scratch;

/// A scratch folder, with typify's known panics (caught by warren) kept off the output.
fn scratch() -> Scratch {
    warren_codegen::__fuzz::tolerate_guarded_typify_panics();
    Scratch::new().expect("a scratch folder")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Cases per property: enough to touch every generator branch a few times while the whole
/// file stays within seconds of a debug build. Long runs are the fuzzer's job.
/// A runner with a fixed seed, so CI runs the same cases every time (a new failure shows
/// up in the fuzzers, not as a flaky build); `PROPTEST_RNG_SEED=<n>` explores other cases.
fn runner(cases: u32) -> TestRunner {
    let defaults = Config::default();
    let rng_seed = if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
        defaults.rng_seed
    } else {
        RngSeed::Fixed(0x5eed_0f3a_22e7)
    };
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        rng_seed,
        ..defaults
    })
}

/// Field names and enumerated values of the contract format, read from its JSON Schema so
/// the vocabulary follows the format as it grows.
fn format_vocabulary() -> (Vec<String>, Vec<String>) {
    fn walk(value: &Value, keys: &mut Vec<String>, words: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    match (key.as_str(), child) {
                        ("properties", Value::Object(fields)) => {
                            keys.extend(fields.keys().cloned())
                        }
                        ("enum", Value::Array(values)) => {
                            words.extend(values.iter().filter_map(Value::as_str).map(str::to_owned))
                        }
                        _ => {}
                    }
                    walk(child, keys, words);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, keys, words)),
            _ => {}
        }
    }
    let schema: Value =
        serde_json::from_str(&warren_codegen::json_schema()).expect("the format schema is JSON");
    let (mut keys, mut words) = (Vec::new(), Vec::new());
    walk(&schema, &mut keys, &mut words);
    keys.sort();
    keys.dedup();
    words.sort();
    words.dedup();
    (keys, words)
}

/// Scalars that mean something somewhere in a contract: names used across sections, schema
/// paths (existing, missing, escaping), durations, routing keys, edge numbers.
const SCALARS: &[&str] = &[
    "work",
    "jobs",
    "events",
    "job",
    "orders",
    "",
    "#",
    "*",
    "a.*.b",
    "a.#",
    "order.{region}.placed",
    "{x}",
    "{",
    "}",
    "event.json",
    "schemas/event.json",
    "schemas/common.json",
    "missing.json",
    "../../etc/passwd",
    "/",
    ".",
    "500ms",
    "30s",
    "1h",
    "0s",
    "10",
    "-1",
    "0",
    "1",
    "65535",
    "65536",
    "4294967296",
    "1.5",
    "true",
    "null",
    "~",
    "x-dead-letter-exchange",
    "x-queue-type",
    "amq.topic",
    "amq.gen-x",
    "héllo",
    "a b",
    "\u{0}",
    "self",
    "type",
];

fn yaml_value(keys: Vec<String>, words: Vec<String>) -> impl Strategy<Value = Value> {
    let words = words
        .into_iter()
        .chain(SCALARS.iter().map(|s| (*s).to_owned()))
        .collect::<Vec<_>>();
    let leaf = prop_oneof![
        4 => select(words).prop_map(Value::String),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<bool>().prop_map(Value::from),
        1 => Just(Value::Null),
        1 => "[a-z._{}#*-]{0,12}".prop_map(Value::String),
    ];
    let key = prop_oneof![
        3 => select(keys),
        1 => select(SCALARS).prop_map(str::to_owned),
        1 => "[a-z._-]{0,8}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            3 => btree_map(key.clone(), inner.clone(), 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
            1 => vec(inner, 0..4).prop_map(Value::Array),
        ]
    })
}

/// A random contract: a document of the format's sections holding random values, written as
/// block YAML or as JSON (which is YAML too).
fn random_contract() -> impl Strategy<Value = String> {
    let (keys, words) = format_vocabulary();
    let sections = [
        "exchanges",
        "queues",
        "bindings",
        "messages",
        "publishers",
        "consumers",
        "schema_roots",
    ];
    (
        btree_map(select(sections.to_vec()), yaml_value(keys, words), 0..7),
        any::<bool>(),
    )
        .prop_map(|(sections, as_json)| {
            let document: Map<String, Value> = sections
                .into_iter()
                .map(|(section, value)| (section.to_owned(), value))
                .collect();
            if as_json {
                Value::Object(document).to_string()
            } else {
                yaml_serde::to_string(&document).unwrap_or_default()
            }
        })
}

/// One text edit at positions chosen by the input: what a person's typo or a truncated file
/// does to a contract or schema.
#[derive(Debug, Clone)]
enum Edit {
    Delete(Index, Index),
    Insert(Index, String),
    DuplicateLine(Index),
    SwapLines(Index, Index),
    Replace(Index, char),
    Truncate(Index),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let snippet = prop_oneof![
        select(SCALARS).prop_map(str::to_owned),
        Just(": ".to_owned()),
        Just("\n  ".to_owned()),
        Just("- ".to_owned()),
        Just("{".to_owned()),
        Just("[".to_owned()),
        Just("&a ".to_owned()),
        Just("*a".to_owned()),
        Just("\"$ref\": \"#\", ".to_owned()),
        Just("\"$ref\": \"common.json#/$defs/Money\", ".to_owned()),
        ".{0,6}",
    ];
    let edit = prop_oneof![
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Delete(a, b)),
        (any::<Index>(), snippet).prop_map(|(a, s)| Edit::Insert(a, s)),
        any::<Index>().prop_map(Edit::DuplicateLine),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        (any::<Index>(), any::<char>()).prop_map(|(a, c)| Edit::Replace(a, c)),
        any::<Index>().prop_map(Edit::Truncate),
    ];
    vec(edit, 1..5)
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for edit in edits {
        let at = |index: &Index, len: usize| index.index(len + 1);
        match edit {
            Edit::Delete(a, b) => {
                let start = at(a, chars.len());
                let end = (start + at(b, 16)).min(chars.len());
                chars.drain(start..end);
            }
            Edit::Insert(a, snippet) => {
                let start = at(a, chars.len());
                chars.splice(start..start, snippet.chars());
            }
            Edit::Replace(a, c) if !chars.is_empty() => {
                let i = a.index(chars.len());
                chars[i] = *c;
            }
            Edit::Truncate(a) => chars.truncate(at(a, chars.len())),
            Edit::DuplicateLine(a) | Edit::SwapLines(a, _) => {
                let joined: String = chars.iter().collect();
                let mut lines: Vec<&str> = joined.split('\n').collect();
                let i = a.index(lines.len());
                match edit {
                    Edit::SwapLines(_, b) => {
                        let j = b.index(lines.len());
                        lines.swap(i, j);
                    }
                    _ => lines.insert(i, lines[i]),
                }
                chars = lines.join("\n").chars().collect();
            }
            Edit::Replace(..) => {}
        }
    }
    chars.into_iter().collect()
}

/// Files under `folder` whose names end with one of `suffixes`, sorted.
fn files(folder: &Path, suffixes: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![folder.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a fixture folder") {
            let path = entry.expect("a fixture entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if suffixes.iter().any(|s| path.to_string_lossy().ends_with(s)) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn random_contracts_never_panic() {
    let scratch = scratch();
    runner(256)
        .run(&random_contract(), |text| {
            // The outcome does not matter; returning at all does.
            let _ = scratch.contract("warren.yaml", text.as_bytes());
            Ok(())
        })
        .expect("no panic");
}

#[test]
fn mutated_fixture_contracts_never_panic() {
    // Each contract is mutated inside a copy of its folder, so the schema files it names
    // are there and a mutant that still passes the checks goes on to code generation.
    warren_codegen::__fuzz::tolerate_guarded_typify_panics();
    let fixtures = Scratch::copy_of(&repo().join("tests/fixtures")).expect("a copy");
    let examples = Scratch::copy_of(&repo().join("examples")).expect("a copy");
    let mut contracts = Vec::new();
    for (scratch, folder) in [(&fixtures, "tests/fixtures"), (&examples, "examples")] {
        let root = repo().join(folder);
        for path in files(&root, &[".yaml"]) {
            let Ok(relative) = path.strip_prefix(&root) else {
                continue;
            };
            let text = std::fs::read_to_string(&path).expect("a fixture");
            // Schema files are YAML too; only contracts name queues or messages.
            if !(text.contains("queues") || text.contains("messages")) {
                continue;
            }
            // Written beside the original, so the contract's relative paths hold.
            let target = relative.with_file_name("__fuzz.yaml");
            contracts.push((scratch, target.to_string_lossy().into_owned(), text));
        }
    }
    assert!(
        contracts.len() > 20,
        "fixture contracts: {}",
        contracts.len()
    );
    let strategy = (any::<Index>(), edits());
    runner(512)
        .run(&strategy, |(pick, edits)| {
            let (scratch, target, text) = &contracts[pick.index(contracts.len())];
            let _ = scratch.contract(target, apply(text, &edits).as_bytes());
            Ok(())
        })
        .expect("no panic");
}

/// A random schema: JSON Schema keywords warren and typify handle (and some they refuse),
/// nested, with `$ref`s inside the document, to the fixed `common.json`, and out of bounds.
fn random_schema() -> impl Strategy<Value = Value> {
    let refs = select(
        &[
            "#",
            "#/$defs/A",
            "#/$defs/B",
            "#/properties/a",
            "#/$defs/Missing",
            "common.json",
            "common.json#/$defs/Money",
            "common.json#/$defs/Currency",
            "payload.json",
            "payload.yaml#/$defs/A",
            "../event.json",
            "headers.json",
            "../../outside.json",
            "https://example.com/x.json",
            "urn:x",
            "#anchor",
            "%23/x",
            "#/$defs/a~1b",
        ][..],
    );
    let types = select(
        &[
            "string", "integer", "number", "boolean", "object", "array", "null", "bogus",
        ][..],
    );
    let formats = select(
        &[
            "uuid",
            "date-time",
            "date",
            "email",
            "uri",
            "ipv4",
            "int64",
            "uint8",
            "nonsense",
        ][..],
    );
    let names = prop_oneof![
        select(
            &[
                "a", "b", "id", "type", "self", "A", "B", "a b", "1x", "", "ü", "r#x"
            ][..]
        )
        .prop_map(str::to_owned),
        "[a-zA-Z_ -]{1,8}",
    ];
    let leaf = prop_oneof![
        types.clone().prop_map(|t| json!({ "type": t })),
        refs.prop_map(|r| json!({ "$ref": r })),
        formats.prop_map(|f| json!({ "type": "string", "format": f })),
        "[a-z^$\\[\\](){}*+?.|\\\\]{0,8}".prop_map(|p| json!({ "type": "string", "pattern": p })),
        vec(
            prop_oneof![
                any::<i32>().prop_map(Value::from),
                "[a-z]{0,4}".prop_map(Value::from),
                Just(Value::Null)
            ],
            0..4
        )
        .prop_map(|values| json!({ "enum": values })),
        any::<i64>().prop_map(|n| json!({ "const": n })),
        (any::<f64>(), any::<i64>())
            .prop_map(|(lo, hi)| json!({ "type": "number", "minimum": lo, "maximum": hi })),
        any::<bool>().prop_map(Value::Bool),
        Just(json!({})),
        (types.clone(), types).prop_map(|(a, b)| json!({ "type": [a, b] })),
    ];
    leaf.prop_recursive(4, 40, 5, move |inner| {
        prop_oneof![
            (
                btree_map(names.clone(), inner.clone(), 0..5),
                vec(names.clone(), 0..3),
                proptest::option::of(inner.clone()),
            )
                .prop_map(|(properties, required, additional)| {
                    let mut schema =
                        json!({ "type": "object", "properties": properties, "required": required });
                    if let Some(additional) = additional {
                        schema["additionalProperties"] = additional;
                    }
                    schema
                }),
            inner
                .clone()
                .prop_map(|items| json!({ "type": "array", "items": items })),
            (
                select(&["oneOf", "anyOf", "allOf"][..]),
                vec(inner.clone(), 0..4)
            )
                .prop_map(|(keyword, list)| json!({ keyword: list })),
            btree_map(select(&["A", "B", "a/b", "Money"][..]), inner.clone(), 1..3)
                .prop_map(|defs| json!({ "$defs": defs, "$ref": "#/$defs/A" })),
            inner.clone().prop_map(|not| json!({ "not": not })),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({ "if": a, "then": b })),
            (inner, "[A-Za-z ]{0,10}").prop_map(|(mut schema, title)| {
                if let Value::Object(map) = &mut schema {
                    map.insert("title".to_owned(), Value::String(title));
                }
                schema
            }),
        ]
    })
}

#[test]
fn random_schemas_never_panic() {
    let scratch = scratch();
    runner(128)
        .run(&random_schema(), |schema| {
            let _ = scratch.schema(schema.to_string().as_bytes());
            Ok(())
        })
        .expect("no panic");
}

#[test]
fn mutated_example_schemas_never_panic() {
    let mut schemas = Vec::new();
    for folder in ["examples", "tests/fixtures"] {
        for path in files(&repo().join(folder), &[".json", ".schema.yaml"]) {
            schemas.push(std::fs::read_to_string(&path).expect("a schema file"));
        }
    }
    for path in files(&repo().join("examples"), &[".yaml"]) {
        if path.parent().is_some_and(|p| p.ends_with("schemas")) {
            schemas.push(std::fs::read_to_string(&path).expect("a schema file"));
        }
    }
    assert!(schemas.len() > 10, "schema files: {}", schemas.len());
    let scratch = scratch();
    runner(128)
        .run(&(any::<Index>(), edits()), |(pick, edits)| {
            let text = &schemas[pick.index(schemas.len())];
            let _ = scratch.schema(apply(text, &edits).as_bytes());
            Ok(())
        })
        .expect("no panic");
}

/// The scratch folder really reaches code generation: a smoke test that passes only because
/// every input is refused early would prove little.
#[test]
fn valid_inputs_generate() {
    let scratch = scratch();
    let contract = "queues:\n  work: { on_poison: drop }\nmessages:\n  ping: { payload: event.json }\n\
                    publishers:\n  ping: { exchange: \"\", routing_key: work, message: ping }\n\
                    consumers:\n  pong: { queue: work, message: ping }\n";
    assert_eq!(scratch.contract("warren.yaml", contract.as_bytes()), Ok(()));
    let schema = r##"{ "type": "object", "properties": { "price": { "$ref": "common.json#/$defs/Money" } } }"##;
    assert_eq!(scratch.schema(schema.as_bytes()), [Ok(()), Ok(())]);
}
