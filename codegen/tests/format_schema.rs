//! `schemas/warren.schema.json` is generated from the format's serde types; this fails when
//! the checked-in copy is stale. Regenerate it with
//! `cargo run -- schema > schemas/warren.schema.json`.

use std::path::Path;

#[test]
fn checked_in_format_schema_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/warren.schema.json");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    let current = warren_codegen::json_schema();
    assert!(
        checked_in == current,
        "schemas/warren.schema.json is stale: run `cargo run -- schema > schemas/warren.schema.json`"
    );
}

#[test]
fn format_schema_describes_every_section_and_refuses_unknown_ones() {
    let schema: serde_json::Value =
        serde_json::from_str(&warren_codegen::json_schema()).expect("valid JSON");
    let sections: Vec<&str> = schema["properties"]
        .as_object()
        .expect("an object schema")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        sections,
        [
            "bindings",
            "consumers",
            "exchanges",
            "imports",
            "info",
            "messages",
            "publishers",
            "queues",
            "rpcs",
            "schema_roots"
        ]
    );
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
}
