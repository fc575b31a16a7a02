//! A document against `serde_json::Value`, which the worker read before: the same texts
//! parse (to the same values) and the same are refused, the same types deserialize with the
//! same errors, and the validator says the same of both.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Document, Tree};

/// `text` parsed both ways: the document as a value, or both errors.
fn both(text: &[u8]) -> (Result<Value, String>, Result<Value, String>) {
    let document = Document::parse(text).map(|d| d.root().to_value());
    let value = serde_json::from_slice::<Value>(text);
    (
        document.map_err(|e| e.to_string()),
        value.map_err(|e| e.to_string()),
    )
}

#[test]
fn texts_parse_to_what_serde_json_reads_and_are_refused_alike() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let texts: Vec<String> = [
        r#"{"b":1,"a":[true,false,null],"c":{"d":"e"}}"#,
        r#""plain""#,
        r#""esc\"aped\\ \n \u00e9 \ud83d\ude00""#,
        r#"{"\u0061":1,"a\n":2}"#,
        "-0",
        "1.0",
        "1e2",
        "-9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "1e400",
        "0.1e-400",
        "[1,]",
        "{\"a\":1,}",
        "[1] x",
        "  [1]  ",
        "",
        "nul",
        r#""\ud800""#,
        r#"{"a":1,"a":"two","b":3,"a":[4]}"#,
        r#"{"z":1,"y":{"x":2,"x":3},"w":[{"v":4,"u":5}]}"#,
        r#"{"":0}"#,
    ]
    .iter()
    .map(|text| text.to_string())
    .chain([
        deep(128),
        deep(129),
        format!("[{}]", "1,".repeat(1000) + "1"),
    ])
    .collect();
    for text in &texts {
        let (document, value) = both(text.as_bytes());
        assert_eq!(document, value, "{text}");
    }
    // Bytes that are not UTF-8, in a string and outside one.
    for text in [&b"\"\xff\""[..], b"[\xc3]", b"{\"\xe2\x82\":1}"] {
        let (document, value) = both(text);
        assert_eq!(document, value, "{text:?}");
    }
}

#[test]
fn a_repeated_name_is_read_once_with_its_last_value() {
    let text = br#"{"a":1,"b":2,"a":3,"a":4}"#;
    let document = Document::parse(text).expect("parses");
    assert_eq!(document.root().to_value(), json!({"a": 4, "b": 2}));
    assert_eq!(document.values(), 3);
}

/// Any JSON value: strings with escapes and any character, every kind of number.
pub(super) fn any_value() -> impl Strategy<Value = Value> {
    let number = prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number,
        any::<String>().prop_map(Value::String),
        "[a-c\"\\\\]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-d\"]{0,2}", inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_value_reads_back_as_itself(value in any_value()) {
        let text = serde_json::to_vec(&value).expect("JSON");
        let document = Document::parse(&text).expect("parses");
        prop_assert_eq!(document.root().to_value(), value);
    }

    #[test]
    fn any_text_parses_or_fails_as_serde_json_does(text in "[\\[\\]{}\":,0-9a-e\\\\ .+-]{0,24}") {
        let (document, value) = both(text.as_bytes());
        prop_assert_eq!(document, value);
    }
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Order {
    id: String,
    #[serde(rename = "total-cents")]
    total: u32,
    note: Option<String>,
    #[serde(default)]
    lines: Vec<Line>,
    tags: Option<BTreeMap<String, i64>>,
}

#[derive(Debug, PartialEq, Deserialize)]
struct Line(String, u8);

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Shape {
    Unit,
    Newtype(f64),
    Tuple(i8, i8),
    Struct { side: u16 },
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(tag = "kind")]
enum Tagged {
    Card { last4: String },
    Cash,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(tag = "t", content = "c")]
enum Adjacent {
    A(u8),
    B { b: bool },
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum Loose {
    Number(i32),
    Text(String),
    Pair { left: u8, right: u8 },
    List(Vec<Loose>),
}

#[derive(Debug, PartialEq, Deserialize)]
struct Keys {
    numbers: BTreeMap<u32, bool>,
    signed: BTreeMap<i64, ()>,
    floats: Option<BTreeMap<String, f32>>,
    flags: BTreeMap<bool, char>,
    shapes: BTreeMap<Shape, u8>,
}

// `Shape` keys a map above: ordered by its variant's name, as any key of a `BTreeMap`.
impl Eq for Shape {}
impl PartialOrd for Shape {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Shape {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        format!("{self:?}").cmp(&format!("{other:?}"))
    }
}

#[derive(Debug, PartialEq, Deserialize)]
struct Wide {
    big: i128,
    huge: u128,
    unit: (),
    bytes: serde_bytes_like::Bytes,
    any: Value,
    newtype: Newtype,
}

#[derive(Debug, PartialEq, Deserialize)]
struct Newtype(Vec<u16>);

/// A type read through `deserialize_bytes`, as `serde_bytes` reads one.
mod serde_bytes_like {
    use serde::de::{Deserializer, SeqAccess, Visitor};

    #[derive(Debug, PartialEq)]
    pub(super) struct Bytes(pub(super) Vec<u8>);

    impl<'de> serde::Deserialize<'de> for Bytes {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Read;
            impl<'de> Visitor<'de> for Read {
                type Value = Bytes;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("bytes")
                }
                fn visit_str<E>(self, v: &str) -> Result<Bytes, E> {
                    Ok(Bytes(v.as_bytes().to_vec()))
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
                    let mut bytes = Vec::new();
                    while let Some(byte) = seq.next_element()? {
                        bytes.push(byte);
                    }
                    Ok(Bytes(bytes))
                }
            }
            deserializer.deserialize_bytes(Read)
        }
    }
}

/// `text` as a `serde_json::Value`, its objects' members in the order of their names, as a
/// document holds them (and a value does unless serde_json's `preserve_order` is on, as it
/// is in this workspace's tests): the order errors are found and instances quoted in.
fn sorted(text: &str) -> Value {
    let mut value: Value = serde_json::from_str(text).expect("parses");
    value.sort_all_objects();
    value
}

/// `text` typed as `T` from a document and from a `serde_json::Value`: both the same value or
/// both the same error.
fn typed_alike<T: DeserializeOwned + PartialEq + std::fmt::Debug>(text: &str) {
    let document = Document::parse(text.as_bytes()).expect("parses");
    let from_document = T::deserialize(document.root()).map_err(|e| e.to_string());
    let value = sorted(text);
    let from_value = serde_json::from_value::<T>(value).map_err(|e| e.to_string());
    assert_eq!(from_document, from_value, "{text}");
}

#[test]
fn payloads_are_typed_as_from_a_json_value_with_the_same_errors() {
    for text in [
        r#"{"id":"o-1","total-cents":1250,"note":null,"lines":[["a",1],["b",2]],"tags":{"x":-1}}"#,
        r#"{"id":"o-1","total-cents":1250}"#,
        r#"{"id":"o-1","total-cents":-5}"#,
        r#"{"id":"o-1","total-cents":1.5}"#,
        r#"{"id":"o-1","total-cents":4294967296}"#,
        r#"{"id":7,"total-cents":1}"#,
        r#"{"total-cents":1}"#,
        r#"{"id":"o","total-cents":1,"extra":true}"#,
        r#"{"id":"o","total-cents":1,"lines":[["a",1,2]]}"#,
        r#"{"id":"o","total-cents":1,"lines":[["a"]]}"#,
        r#"{"id":"o","total-cents":1,"lines":{"a":1}}"#,
        r#"{"id":"o","total-cents":1,"id":"again"}"#,
        r#"["o",1,null,[],null]"#,
        r#"["o",1,null,[],null,"more"]"#,
        r#""not an order""#,
        "null",
    ] {
        typed_alike::<Order>(text);
    }
    for text in [
        r#""unit""#,
        r#"{"newtype":2.5}"#,
        r#"{"tuple":[1,-2]}"#,
        r#"{"tuple":[]}"#,
        r#"{"struct":{"side":3}}"#,
        r#"{"struct":[3]}"#,
        r#"{"unit":null}"#,
        r#"{"unit":1}"#,
        r#""newtype""#,
        r#"{"newtype":1,"unit":null}"#,
        r#"{}"#,
        r#"{"other":1}"#,
        "3",
    ] {
        typed_alike::<Shape>(text);
    }
    for text in [
        r#"{"kind":"Card","last4":"4242"}"#,
        r#"{"kind":"Cash"}"#,
        r#"{"kind":"Cheque"}"#,
        r#"{"last4":"4242"}"#,
    ] {
        typed_alike::<Tagged>(text);
    }
    for text in [
        r#"{"t":"A","c":1}"#,
        r#"{"t":"B","c":{"b":true}}"#,
        r#"{"t":"A"}"#,
    ] {
        typed_alike::<Adjacent>(text);
    }
    for text in [
        "-3",
        r#""x""#,
        r#"{"left":1,"right":2}"#,
        r#"[1,"a",[{"left":3,"right":4}]]"#,
        "true",
        "5000000000",
    ] {
        typed_alike::<Loose>(text);
    }
    for text in [
        r#"{"numbers":{"1":true,"20":false},"signed":{"-3":null},"floats":{"a":1.5},"flags":{"true":"x"},"shapes":{"unit":1}}"#,
        r#"{"numbers":{"x":true},"signed":{},"flags":{},"shapes":{}}"#,
        r#"{"numbers":{"1 ":true},"signed":{},"flags":{},"shapes":{}}"#,
        r#"{"numbers":{"1x":true},"signed":{},"flags":{},"shapes":{}}"#,
        r#"{"numbers":{" 1":true},"signed":{},"flags":{},"shapes":{}}"#,
        r#"{"numbers":{"-1":true},"signed":{},"flags":{},"shapes":{}}"#,
        r#"{"numbers":{},"signed":{"1.5":null},"flags":{},"shapes":{}}"#,
        r#"{"numbers":{},"signed":{},"flags":{"yes":"x"},"shapes":{}}"#,
        r#"{"numbers":{},"signed":{},"flags":{"true":"xy"},"shapes":{}}"#,
        r#"{"numbers":{},"signed":{},"flags":{},"shapes":{"newtype":1}}"#,
        r#"{"numbers":{},"signed":{},"flags":{},"shapes":{"square":1}}"#,
    ] {
        typed_alike::<Keys>(text);
    }
    for text in [
        r#"{"big":-170141183460469231731687303715884105728,"huge":1,"unit":null,"bytes":"ab","any":{"k":[1,"v"]},"newtype":[1,2]}"#,
        r#"{"big":-1,"huge":18446744073709551615,"unit":null,"bytes":[1,2,3],"any":null,"newtype":[]}"#,
        r#"{"big":1,"huge":-1,"unit":null,"bytes":[],"any":1,"newtype":[]}"#,
        r#"{"big":1,"huge":1,"unit":0,"bytes":[],"any":1,"newtype":[]}"#,
        r#"{"big":1,"huge":1,"unit":null,"bytes":[256],"any":1,"newtype":[]}"#,
        r#"{"big":1,"huge":1,"unit":null,"bytes":1,"any":1,"newtype":{}}"#,
    ] {
        typed_alike::<Wide>(text);
    }
}

/// The validator on a document and on a `serde_json::Value` of the same text.
fn validated_alike(schema: &Value, text: &str) {
    let on_document = jsonschema::options_for::<Tree>()
        .should_validate_formats(true)
        .build(schema)
        .expect("compiles");
    let on_value = jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("compiles");
    let document = Document::parse(text.as_bytes()).expect("parses");
    let value = sorted(text);
    let errors = |errors: Vec<jsonschema::ValidationError<'_>>| -> Vec<String> {
        (errors.iter())
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect()
    };
    assert_eq!(
        on_document.is_valid(document.root()),
        on_value.is_valid(&value),
        "{schema} on {text}"
    );
    assert_eq!(
        errors(on_document.iter_errors(document.root()).collect()),
        errors(on_value.iter_errors(&value).collect()),
        "{schema} on {text}"
    );
}

#[test]
fn the_validator_says_of_a_document_what_it_says_of_its_value() {
    let schemas = [
        json!({
            "type": "object",
            "required": ["id", "kind"],
            "additionalProperties": false,
            "properties": {
                "id": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^o-"},
                "kind": {"enum": ["card", "cash", 3, null, [1], {"a": 1}]},
                "total": {"type": "integer", "minimum": 0, "multipleOf": 5},
                "at": {"type": "string", "format": "date-time"},
                "lines": {"type": "array", "minItems": 1, "uniqueItems": true,
                          "items": {"type": "object", "properties": {"q": {"const": 1.0}}}},
                "meta": {"type": "object", "maxProperties": 2,
                         "propertyNames": {"pattern": "^[a-z]+$"},
                         "patternProperties": {"^x": {"type": "boolean"}}},
            },
        }),
        json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}}]}),
        json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}], "not": {"required": ["c"]}}),
    ];
    let texts = [
        r#"{"id":"o-1","kind":"card","total":10,"at":"2026-12-05T02:00:00Z","lines":[{"q":1}],"meta":{"xa":true}}"#,
        r#"{"id":"o","kind":"cheque","total":-3.5,"at":"yesterday","lines":[],"meta":{"A":1,"c":3,"xb":2}}"#,
        r#"{"id":"o-1234","kind":3,"lines":[{"q":1},{"q":1.0}],"extra":1}"#,
        r#"{"id":"é-é","kind":[1],"lines":[{"q":2}]}"#,
        r#"{"id":"o-1","kind":{"a":1.0},"id":"o-22"}"#,
        r#"{"kind":null}"#,
        r#"["a",["b",[1]]]"#,
        r#"{"a":1,"b":2}"#,
        r#"{"a":1,"c":2}"#,
        "17",
    ];
    for schema in &schemas {
        for text in texts {
            validated_alike(schema, text);
        }
    }
}
