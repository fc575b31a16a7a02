//! One test per rule (each pinning its effect), then realistic pairs built from the orders
//! example, then hostile input.

use serde_json::{Value, json};

use super::{ContentModel, Direction, Effect, SchemaChange, SchemaChangeKind, compare};

/// A bundled standalone schema, as `SchemaBundle::standalone` makes it, whose one
/// definition `M` is `root` (plus `defs`).
fn bundled(root: Value, defs: Value) -> Value {
    let mut all = defs.as_object().cloned().unwrap_or_default();
    all.insert("M".to_owned(), root);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": "#/$defs/M",
        "$defs": all,
    })
}

fn diff(old: Value, new: Value) -> Vec<SchemaChange> {
    compare(&bundled(old, json!({})), &bundled(new, json!({})))
}

/// The only change between `old` and `new`.
fn one(old: Value, new: Value) -> SchemaChange {
    let changes = diff(old, new);
    assert_eq!(changes.len(), 1, "{changes:#?}");
    changes.into_iter().next().unwrap()
}

fn effect(old_readers: bool, new_readers: bool, rust_api: bool) -> Effect {
    Effect {
        old_readers,
        new_readers,
        rust_api,
        untyped_writers_only: false,
    }
}

/// `effect`, its readers broken only by writers outside the generated types.
fn untyped_only(effect: Effect) -> Effect {
    Effect {
        untyped_writers_only: true,
        ..effect
    }
}

fn object(model: Value, properties: Value, required: &[&str]) -> Value {
    let mut schema = json!({ "type": "object", "properties": properties, "required": required });
    if !model.is_null() {
        schema["additionalProperties"] = model;
    }
    schema
}

#[test]
fn equal_schemas_have_no_changes() {
    let schema = object(json!(false), json!({ "a": { "type": "string" } }), &["a"]);
    assert!(diff(schema.clone(), schema).is_empty());
}

#[test]
fn optional_property_added_to_an_open_object_breaks_new_readers() {
    // Old writers were free to send `b` with any value: those outside the generated types,
    // which send the declared properties alone.
    let change = one(
        object(Value::Null, json!({}), &[]),
        object(Value::Null, json!({ "b": { "type": "string" } }), &[]),
    );
    assert_eq!(change.pointer, "/$defs/M/properties/b");
    assert_eq!(change.location, "b");
    assert_eq!(change.effect, untyped_only(effect(false, true, false)));
    assert!(matches!(
        change.kind,
        SchemaChangeKind::PropertyAdded {
            required: false,
            model: ContentModel::Open,
            ..
        }
    ));
    assert_eq!(
        change.describe(),
        "b: optional property `b` added to an open object"
    );
}

#[test]
fn optional_property_added_to_a_closed_object_breaks_old_readers() {
    let change = one(
        object(json!(false), json!({}), &[]),
        object(json!(false), json!({ "b": { "type": "string" } }), &[]),
    );
    assert_eq!(change.effect, effect(true, false, false));
}

#[test]
fn optional_property_that_accepts_anything_added_to_an_open_object_is_safe() {
    let change = one(
        object(json!(true), json!({}), &[]),
        object(
            json!(true),
            json!({ "b": { "description": "anything" } }),
            &[],
        ),
    );
    assert_eq!(change.effect, effect(false, false, false));
}

#[test]
fn required_property_added_breaks_new_readers_even_with_a_default() {
    let open = one(
        object(Value::Null, json!({}), &[]),
        object(
            Value::Null,
            json!({ "b": { "type": "integer", "default": 0 } }),
            &["b"],
        ),
    );
    assert_eq!(open.effect, effect(false, true, true));
    assert!(open.describe().contains("default does not satisfy"));
    let closed = one(
        object(json!(false), json!({}), &[]),
        object(json!(false), json!({ "b": { "type": "integer" } }), &["b"]),
    );
    assert_eq!(closed.effect, effect(true, true, true));
}

#[test]
fn property_added_against_an_additional_properties_schema() {
    // The same schema as the old extras: old readers accept it, old writers sent only that.
    let same = one(
        object(json!({ "type": "string" }), json!({}), &[]),
        object(
            json!({ "type": "string" }),
            json!({ "b": { "type": "string" } }),
            &[],
        ),
    );
    assert_eq!(same.effect, effect(false, false, false));
    let other = one(
        object(json!({ "type": "string" }), json!({}), &[]),
        object(
            json!({ "type": "string" }),
            json!({ "b": { "type": "integer" } }),
            &[],
        ),
    );
    assert_eq!(other.effect, effect(true, true, false));
}

#[test]
fn property_removed_from_open_and_closed_objects() {
    let open = one(
        object(Value::Null, json!({ "a": { "type": "string" } }), &[]),
        object(Value::Null, json!({}), &[]),
    );
    // New writers may send `a` with any value (outside the generated types); old messages
    // with `a` are still accepted.
    assert_eq!(open.effect, untyped_only(effect(true, false, true)));
    assert_eq!(open.pointer, "/$defs/M/properties/a");
    let closed = one(
        object(json!(false), json!({ "a": { "type": "string" } }), &[]),
        object(json!(false), json!({}), &[]),
    );
    assert_eq!(closed.effect, effect(false, true, true));
    let required = one(
        object(json!(false), json!({ "a": { "type": "string" } }), &["a"]),
        object(json!(false), json!({}), &[]),
    );
    assert_eq!(required.effect, effect(true, true, true));
}

#[test]
fn a_property_removed_and_one_added_with_the_same_schema_is_a_rename() {
    let change = one(
        object(
            json!(false),
            json!({ "sku": { "type": "string" } }),
            &["sku"],
        ),
        object(
            json!(false),
            json!({ "article": { "type": "string" } }),
            &["article"],
        ),
    );
    assert_eq!(
        change.kind,
        SchemaChangeKind::PropertyRenamed {
            from: "sku".into(),
            to: "article".into()
        }
    );
    assert_eq!(change.effect, effect(true, true, true));
    assert_eq!(
        change.describe(),
        "article: property `sku` renamed to `article`"
    );
}

#[test]
fn required_and_optional_toggles() {
    let props = json!({ "a": { "type": "string" } });
    let required = one(
        object(json!(false), props.clone(), &[]),
        object(json!(false), props.clone(), &["a"]),
    );
    assert_eq!(
        required.kind,
        SchemaChangeKind::BecameRequired { name: "a".into() }
    );
    assert_eq!(required.effect, effect(false, true, true));
    let optional = one(
        object(json!(false), props.clone(), &["a"]),
        object(json!(false), props, &[]),
    );
    assert_eq!(optional.effect, effect(true, false, true));
}

#[test]
fn types_widened_narrowed_and_changed() {
    let widened = one(json!({ "type": "integer" }), json!({ "type": "number" }));
    assert_eq!(widened.effect, effect(true, false, true));
    assert_eq!(widened.pointer, "/$defs/M/type");
    let nullable = one(
        json!({ "type": "string" }),
        json!({ "type": ["string", "null"] }),
    );
    assert_eq!(nullable.effect, effect(true, false, true));
    let narrowed = one(
        json!({ "type": ["string", "null"] }),
        json!({ "type": "string" }),
    );
    assert_eq!(narrowed.effect, effect(false, true, true));
    let changed = one(json!({ "type": "string" }), json!({ "type": "integer" }));
    assert_eq!(changed.effect, effect(true, true, true));
    let added = one(json!({}), json!({ "type": "string" }));
    assert_eq!(added.effect, effect(false, true, true));
    let respelled = one(
        json!({ "type": ["integer", "number"] }),
        json!({ "type": "number" }),
    );
    assert!(matches!(
        respelled.kind,
        SchemaChangeKind::TypeChanged {
            direction: Direction::Equivalent,
            ..
        }
    ));
    assert_eq!(respelled.effect, effect(false, false, true));
}

#[test]
fn enums_grown_narrowed_added_and_const() {
    let grown = one(
        json!({ "enum": ["a", "b"] }),
        json!({ "enum": ["a", "b", "c"] }),
    );
    // Old readers reject `c`, and old Rust readers' exhaustive enums cannot hold it.
    assert_eq!(grown.effect, effect(true, false, true));
    assert_eq!(
        grown.describe(),
        r#"(root): `enum` values added: `"c"`; removed: none"#
    );
    let narrowed = one(json!({ "enum": ["a", "b"] }), json!({ "enum": ["a"] }));
    assert_eq!(narrowed.effect, effect(false, true, true));
    let replaced = one(json!({ "enum": ["a"] }), json!({ "enum": ["b"] }));
    assert_eq!(replaced.effect, effect(true, true, true));
    let constrained = one(
        json!({ "type": "string" }),
        json!({ "type": "string", "enum": ["a"] }),
    );
    assert_eq!(constrained.effect, effect(false, true, true));
    // `const` is an enum of one: the same value spelled as a list is no change.
    assert!(diff(json!({ "const": "a" }), json!({ "enum": ["a"] })).is_empty());
    let widened = one(json!({ "const": "a" }), json!({ "enum": ["a", "b"] }));
    assert_eq!(widened.effect, effect(true, false, true));
}

#[test]
fn bounds_tightened_and_loosened() {
    let cases = [
        ("minimum", json!(1), json!(2), effect(false, true, true)),
        ("minimum", json!(2), json!(1), effect(true, false, true)),
        ("maximum", json!(10), json!(5), effect(false, true, true)),
        (
            "exclusiveMaximum",
            json!(5),
            json!(10),
            effect(true, false, true),
        ),
        (
            "exclusiveMinimum",
            json!(0),
            json!(1),
            effect(false, true, true),
        ),
    ];
    for (keyword, old, new, expected) in cases {
        let change = one(
            json!({ "type": "integer", keyword: old }),
            json!({ "type": "integer", keyword: new }),
        );
        assert_eq!(change.effect, expected, "{keyword}");
        assert_eq!(change.pointer, format!("/$defs/M/{keyword}"));
    }
    // On a number the Rust type stays `f64`.
    let float = one(
        json!({ "type": "number", "maximum": 1.5 }),
        json!({ "type": "number", "maximum": 2.5 }),
    );
    assert_eq!(float.effect, effect(true, false, false));
    let sized = [
        ("minLength", 1, 2, effect(false, true, false)),
        ("maxLength", 10, 20, effect(true, false, false)),
        ("minItems", 1, 0, effect(true, false, false)),
        ("maxItems", 3, 2, effect(false, true, false)),
        ("minProperties", 0, 1, effect(false, true, false)),
        ("maxProperties", 2, 3, effect(true, false, false)),
    ];
    for (keyword, old, new, expected) in sized {
        let change = one(json!({ keyword: old }), json!({ keyword: new }));
        assert_eq!(change.effect, expected, "{keyword}");
    }
    // A length bound that appears wraps the string in a newtype.
    let appeared = one(
        json!({ "type": "string" }),
        json!({ "type": "string", "maxLength": 3 }),
    );
    assert_eq!(appeared.effect, effect(false, true, true));
    let removed = one(json!({ "minItems": 1 }), json!({}));
    assert_eq!(removed.effect, effect(true, false, false));
    assert_eq!(removed.pointer, "/$defs/M/minItems");
}

#[test]
fn multiple_of_and_unique_items() {
    let tighter = one(json!({ "multipleOf": 2 }), json!({ "multipleOf": 4 }));
    assert_eq!(tighter.effect, effect(false, true, false));
    let looser = one(json!({ "multipleOf": 0.5 }), json!({ "multipleOf": 0.25 }));
    assert_eq!(looser.effect, effect(true, false, false));
    let unrelated = one(json!({ "multipleOf": 2 }), json!({ "multipleOf": 3 }));
    assert_eq!(unrelated.effect, effect(true, true, false));
    let unique = one(
        json!({ "type": "array" }),
        json!({ "type": "array", "uniqueItems": true }),
    );
    assert_eq!(unique.effect, effect(false, true, false));
    let not_unique = one(
        json!({ "uniqueItems": true }),
        json!({ "uniqueItems": false }),
    );
    assert_eq!(not_unique.effect, effect(true, false, false));
}

#[test]
fn patterns_and_formats() {
    let added = one(
        json!({ "type": "string" }),
        json!({ "type": "string", "pattern": "^a" }),
    );
    assert_eq!(added.effect, effect(false, true, true));
    let removed = one(json!({ "pattern": "^a" }), json!({}));
    assert_eq!(removed.effect, effect(true, false, true));
    let changed = one(json!({ "pattern": "^a" }), json!({ "pattern": "^b" }));
    assert_eq!(changed.effect, effect(true, true, false));
    let format = one(
        json!({ "type": "string" }),
        json!({ "type": "string", "format": "uuid" }),
    );
    assert_eq!(format.effect, effect(false, true, true));
    let reformatted = one(
        json!({ "format": "date" }),
        json!({ "format": "date-time" }),
    );
    assert_eq!(reformatted.effect, effect(true, true, true));
    let unformatted = one(json!({ "format": "date" }), json!({}));
    assert_eq!(unformatted.effect, effect(true, false, true));
}

#[test]
fn ref_targets_are_followed_and_a_new_target_renames_the_type() {
    let money = json!({ "type": "object", "properties": { "amount": { "type": "integer" } } });
    let amount = json!({ "type": "object", "properties": { "amount": { "type": "number" } } });
    let old = bundled(
        json!({ "properties": { "total": { "$ref": "#/$defs/Money" } } }),
        json!({ "Money": money }),
    );
    let new = bundled(
        json!({ "properties": { "total": { "$ref": "#/$defs/Amount" } } }),
        json!({ "Amount": amount }),
    );
    let changes = compare(&old, &new);
    let summary: Vec<(String, String, Effect)> = changes
        .iter()
        .map(|c| (c.pointer.clone(), c.describe(), c.effect))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "/$defs/Amount/properties/amount/type".to_owned(),
                "total.amount: type widened from `integer` to `number`".to_owned(),
                effect(true, false, true)
            ),
            (
                "/$defs/M/properties/total".to_owned(),
                "total: refers to definition `Amount` instead of `Money`".to_owned(),
                effect(false, false, true)
            ),
        ]
    );
}

#[test]
fn inline_schema_extracted_into_a_definition_only_renames_the_type() {
    let old = bundled(
        json!({ "properties": { "total": { "type": "integer" } } }),
        json!({}),
    );
    let new = bundled(
        json!({ "properties": { "total": { "$ref": "#/$defs/Total" } } }),
        json!({ "Total": { "type": "integer" } }),
    );
    let changes = compare(&old, &new);
    assert_eq!(changes.len(), 1, "{changes:#?}");
    assert_eq!(
        changes[0].kind,
        SchemaChangeKind::RefExtracted {
            new: "Total".into()
        }
    );
    assert_eq!(changes[0].effect, effect(false, false, true));
}

#[test]
fn items_prefix_items_and_combinators() {
    let items = one(
        json!({ "type": "array", "items": { "type": "string" } }),
        json!({ "type": "array", "items": { "type": "string", "maxLength": 5 } }),
    );
    assert_eq!(items.location, "[]");
    assert_eq!(items.pointer, "/$defs/M/items/maxLength");
    let tuple = one(
        json!({ "prefixItems": [{ "type": "string" }, { "type": "integer" }] }),
        json!({ "prefixItems": [{ "type": "string" }, { "type": "number" }] }),
    );
    assert_eq!(tuple.location, "[1]");
    assert_eq!(tuple.effect, effect(true, false, true));
    let branch = one(
        json!({ "anyOf": [{ "type": "string" }, { "enum": [1, 2] }] }),
        json!({ "anyOf": [{ "type": "string" }, { "enum": [1, 2, 3] }] }),
    );
    assert_eq!(branch.location, "(anyOf 1)");
    assert_eq!(branch.pointer, "/$defs/M/anyOf/1/enum");
    let grown = one(
        json!({ "oneOf": [{ "type": "string" }] }),
        json!({ "oneOf": [{ "type": "string" }, { "type": "null" }] }),
    );
    assert_eq!(
        grown.kind,
        SchemaChangeKind::ListChanged {
            keyword: "oneOf".into(),
            old: 1,
            new: 2
        }
    );
    assert_eq!(grown.effect, effect(true, true, true));
}

#[test]
fn additional_properties_opened_closed_and_compared() {
    let opened = one(json!({ "additionalProperties": false }), json!({}));
    assert_eq!(opened.effect, effect(true, false, false));
    let closed = one(
        json!({ "additionalProperties": true }),
        json!({ "additionalProperties": false }),
    );
    assert_eq!(closed.effect, effect(false, true, false));
    let map = one(
        json!({}),
        json!({ "additionalProperties": { "type": "string" } }),
    );
    assert_eq!(map.effect, effect(false, true, true));
    let values = one(
        json!({ "additionalProperties": { "type": "string" } }),
        json!({ "additionalProperties": { "type": ["string", "null"] } }),
    );
    assert_eq!(values.location, ".*");
    assert_eq!(values.effect, effect(true, false, true));
}

#[test]
fn unknown_keywords_break_everyone_and_annotations_nobody() {
    let unknown = one(
        json!({ "not": { "type": "string" } }),
        json!({ "not": { "type": "integer" } }),
    );
    assert_eq!(
        unknown.kind,
        SchemaChangeKind::KeywordChanged {
            keyword: "not".into()
        }
    );
    assert_eq!(unknown.effect, effect(true, true, true));
    assert!(
        diff(
            json!({ "description": "old" }),
            json!({ "description": "new" })
        )
        .is_empty()
    );
    let default = one(json!({ "default": 1 }), json!({ "default": 2 }));
    assert_eq!(default.effect, effect(false, false, false));
    let defaulted = one(json!({}), json!({ "default": 2 }));
    assert_eq!(defaulted.effect, effect(false, false, true));
    let malformed = one(json!({ "type": "string" }), json!({ "type": 3 }));
    assert_eq!(malformed.effect, effect(true, true, true));
}

#[test]
fn inline_titles_name_rust_types() {
    let inline = one(
        json!({ "properties": { "a": { "title": "Old", "type": "object" } } }),
        json!({ "properties": { "a": { "title": "New", "type": "object" } } }),
    );
    assert_eq!(inline.effect, effect(false, false, true));
    // A definition is named by its `$defs` key, not its title.
    let definition = one(json!({ "title": "Old" }), json!({ "title": "New" }));
    assert_eq!(definition.effect, effect(false, false, false));
}

#[test]
fn names_are_escaped_when_described() {
    let change = one(
        object(json!(false), json!({}), &[]),
        object(
            json!(false),
            json!({ "a\u{1b}[2J": { "type": "string" } }),
            &[],
        ),
    );
    assert_eq!(change.location, "a\u{1b}[2J");
    assert!(
        !change.describe().contains('\u{1b}'),
        "{}",
        change.describe()
    );
}

#[test]
fn output_is_sorted_by_pointer_and_deterministic() {
    let old = object(
        json!(false),
        json!({ "z": { "type": "string" }, "a": { "type": "integer" } }),
        &[],
    );
    let new = object(
        json!(false),
        json!({ "z": { "type": "number" }, "a": { "type": "number" }, "m": { "type": "string" } }),
        &[],
    );
    let first = diff(old.clone(), new.clone());
    let pointers: Vec<&str> = first.iter().map(|c| c.pointer.as_str()).collect();
    assert_eq!(
        pointers,
        [
            "/$defs/M/properties/a/type",
            "/$defs/M/properties/m",
            "/$defs/M/properties/z/type"
        ]
    );
    assert_eq!(first, diff(old, new));
}

/// The orders example's `order_placed` payload, bundled as warren bundles it.
fn order_placed() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": "#/$defs/OrderPlaced",
        "$defs": {
            "OrderPlaced": {
                "title": "OrderPlaced",
                "description": "A customer placed an order.",
                "type": "object",
                "additionalProperties": false,
                "required": ["order_id", "customer_id", "items", "total", "shipping_address", "placed_at"],
                "properties": {
                    "order_id": { "type": "string", "format": "uuid" },
                    "customer_id": { "type": "string" },
                    "items": { "type": "array", "minItems": 1, "items": { "$ref": "#/$defs/LineItem" } },
                    "total": { "$ref": "#/$defs/Money" },
                    "shipping_address": { "$ref": "#/$defs/Address" },
                    "placed_at": { "type": "string", "format": "date-time" }
                }
            },
            "LineItem": {
                "type": "object",
                "additionalProperties": false,
                "required": ["sku", "quantity", "unit_price"],
                "properties": {
                    "sku": { "type": "string" },
                    "quantity": { "type": "integer", "minimum": 1 },
                    "unit_price": { "$ref": "#/$defs/Money" }
                }
            },
            "Money": {
                "type": "object",
                "additionalProperties": false,
                "required": ["amount_minor", "currency"],
                "properties": {
                    "amount_minor": { "type": "integer" },
                    "currency": { "type": "string", "enum": ["EUR", "USD"] }
                }
            },
            "Address": {
                "type": "object",
                "required": ["line1", "city", "country"],
                "properties": {
                    "line1": { "type": "string" },
                    "city": { "type": "string" },
                    "country": { "type": "string", "pattern": "^[A-Z]{2}$" }
                }
            }
        }
    })
}

/// `(location, describe, effect)` for every change, for readable assertions.
fn summary(changes: &[SchemaChange]) -> Vec<(String, String, Effect)> {
    changes
        .iter()
        .map(|c| (c.location.clone(), c.describe(), c.effect))
        .collect()
}

#[test]
fn orders_a_currency_added_reaches_every_money_once() {
    let old = order_placed();
    let mut new = old.clone();
    new["$defs"]["Money"]["properties"]["currency"]["enum"] = json!(["EUR", "USD", "GBP"]);
    let changes = compare(&old, &new);
    // Money is reached from `items[].unit_price` and `total`; it is compared once, and
    // shown where it was first reached.
    assert_eq!(
        summary(&changes),
        vec![(
            "items[].unit_price.currency".to_owned(),
            r#"items[].unit_price.currency: `enum` values added: `"GBP"`; removed: none"#
                .to_owned(),
            effect(true, false, true)
        )]
    );
    assert_eq!(changes[0].pointer, "/$defs/Money/properties/currency/enum");
    assert!(changes[0].effect.breaks_anyone());
    assert!(!effect(false, false, false).breaks_anyone());
}

#[test]
fn orders_a_typical_release() {
    let old = order_placed();
    let mut new = old.clone();
    let placed = &mut new["$defs"]["OrderPlaced"];
    // An optional coupon in the closed model, quantities up to 100, a looser address.
    placed["properties"]["coupon"] = json!({ "type": "string", "maxLength": 32 });
    new["$defs"]["LineItem"]["properties"]["quantity"]["maximum"] = json!(100);
    new["$defs"]["Address"]["properties"]["country"]
        .as_object_mut()
        .unwrap()
        .remove("pattern");
    new["$defs"]["Address"]["required"] = json!(["line1", "country"]);
    assert_eq!(
        summary(&compare(&old, &new)),
        vec![
            (
                "shipping_address.country".to_owned(),
                "shipping_address.country: `pattern` changed (`^[A-Z]{2}$` → (none))".to_owned(),
                effect(true, false, true)
            ),
            (
                "shipping_address.city".to_owned(),
                "shipping_address.city: property `city` is now optional".to_owned(),
                effect(true, false, true)
            ),
            (
                "items[].quantity".to_owned(),
                "items[].quantity: `maximum` tightened ((none) → `100`)".to_owned(),
                effect(false, true, true)
            ),
            (
                "coupon".to_owned(),
                "coupon: optional property `coupon` added to a closed object".to_owned(),
                effect(true, false, false)
            ),
        ]
    );
}

#[test]
fn orders_a_renamed_definition_and_field() {
    let old = order_placed();
    let mut new = old.clone();
    let defs = new["$defs"].as_object_mut().unwrap();
    let money = defs.remove("Money").unwrap();
    defs.insert("Amount".to_owned(), money);
    new["$defs"]["LineItem"]["properties"]["unit_price"] = json!({ "$ref": "#/$defs/Amount" });
    new["$defs"]["OrderPlaced"]["properties"]["total"] = json!({ "$ref": "#/$defs/Amount" });
    let props = new["$defs"]["OrderPlaced"]["properties"]
        .as_object_mut()
        .unwrap();
    let placed_at = props.remove("placed_at").unwrap();
    props.insert("created_at".to_owned(), placed_at);
    new["$defs"]["OrderPlaced"]["required"] = json!([
        "order_id",
        "customer_id",
        "items",
        "total",
        "shipping_address",
        "created_at"
    ]);
    assert_eq!(
        summary(&compare(&old, &new)),
        vec![
            (
                "items[].unit_price".to_owned(),
                "items[].unit_price: refers to definition `Amount` instead of `Money`".to_owned(),
                effect(false, false, true)
            ),
            (
                "created_at".to_owned(),
                "created_at: property `placed_at` renamed to `created_at`".to_owned(),
                effect(true, true, true)
            ),
            (
                "total".to_owned(),
                "total: refers to definition `Amount` instead of `Money`".to_owned(),
                effect(false, false, true)
            ),
        ]
    );
}

#[test]
fn cyclic_schemas_end() {
    let tree = |leaf: &str| {
        json!({
            "$ref": "#/$defs/Node",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "value": { "type": leaf },
                        "children": { "type": "array", "items": { "$ref": "#/$defs/Node" } },
                        "next": { "anyOf": [{ "$ref": "#/$defs/Node" }, { "type": "null" }] }
                    }
                }
            }
        })
    };
    let changes = compare(&tree("integer"), &tree("number"));
    assert_eq!(changes.len(), 1, "{changes:#?}");
    assert_eq!(changes[0].pointer, "/$defs/Node/properties/value/type");
    // A `$ref` to itself and a `$ref` loop between two names end too.
    let selfish = json!({ "$ref": "#/$defs/A", "$defs": { "A": { "$ref": "#/$defs/A" } } });
    let looped = json!({ "$ref": "#/$defs/A", "$defs": { "A": { "$ref": "#/$defs/B" }, "B": { "$ref": "#/$defs/A" } } });
    let _ = compare(&selfish, &looped);
    let _ = compare(&looped, &selfish);
}

#[test]
fn deep_schemas_stop_at_the_depth_limit() {
    let deep = |leaf: &str| {
        let mut schema = json!({ "type": leaf });
        for _ in 0..100 {
            schema = json!({ "type": "object", "properties": { "a": schema } });
        }
        schema
    };
    let changes = diff(deep("string"), deep("integer"));
    assert_eq!(changes.len(), 1, "{changes:#?}");
    assert!(matches!(
        changes[0].kind,
        SchemaChangeKind::NotAnalysed { .. }
    ));
    assert_eq!(changes[0].effect, effect(true, true, true));
    assert!(diff(deep("string"), deep("string")).is_empty());
}

#[test]
fn wide_fan_out_through_refs_is_bounded() {
    // Every definition refers to every other through `anyOf`: without the visited pairs the
    // walk would be exponential.
    let graph = |leaf: &str| {
        let names: Vec<String> = (0..40).map(|i| format!("D{i}")).collect();
        let mut defs = serde_json::Map::new();
        for name in &names {
            let refs: Vec<Value> = names
                .iter()
                .map(|n| json!({ "$ref": format!("#/$defs/{n}") }))
                .collect();
            defs.insert(
                name.clone(),
                json!({ "type": "object", "properties": { "v": { "type": leaf }, "n": { "anyOf": refs } } }),
            );
        }
        json!({ "$ref": "#/$defs/D0", "$defs": defs })
    };
    let changes = compare(&graph("integer"), &graph("string"));
    assert!(changes.len() <= 40 * 40 + 1, "{}", changes.len());
    assert!(!changes.is_empty());
}

#[test]
fn anything_where_a_schema_belongs_is_reported_not_panicked_on() {
    let change = one(json!({ "items": 3 }), json!({ "items": "x" }));
    assert_eq!(change.effect, effect(true, true, true));
    let _ = compare(&json!(null), &json!([1, 2]));
    let _ = compare(
        &json!({ "$ref": "#/nowhere" }),
        &json!({ "$ref": "elsewhere.json" }),
    );
    let _ = compare(
        &json!({ "required": [1], "properties": 2 }),
        &json!({ "enum": 1 }),
    );
}

/// The orders example as the generator bundles it: the shape `compare` is given.
#[test]
fn the_orders_example_as_bundled() {
    let checked = warren_codegen::check_contract("../examples/orders/warren.yaml").unwrap();
    let payload = &checked.contract.messages["order_placed"].payload.schema;
    assert!(compare(payload, payload).is_empty());
    let mut new = payload.clone();
    let defs = new["$defs"].as_object_mut().unwrap();
    let name = defs
        .iter()
        .find(|(_, body)| body["properties"].get("sku").is_some())
        .map(|(name, _)| name.clone())
        .unwrap();
    defs[&name]["properties"]["quantity"]["minimum"] = json!(0);
    let changes = compare(payload, &new);
    assert_eq!(
        summary(&changes),
        vec![(
            "items[].quantity".to_owned(),
            "items[].quantity: `minimum` loosened (`1` → `0`)".to_owned(),
            effect(true, false, true)
        )]
    );
    assert_eq!(
        changes[0].pointer,
        format!("/$defs/{name}/properties/quantity/minimum")
    );
}
