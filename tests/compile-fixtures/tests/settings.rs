//! Code generated with every generator setting is usable as its settings promise: payloads
//! built with builders instead of `json!`, the user's own type where the contract's was, and
//! the extra derives.

use std::collections::HashSet;

use warren_compile_fixtures::Money;
use warren_compile_fixtures::settings::{messages, types};
use warren_runtime::Message;

fn total() -> Money {
    Money {
        amount_minor: 1250,
        currency: "EUR".to_owned(),
    }
}

#[test]
fn payloads_are_built_with_builders() {
    let invoice: types::InvoiceIssued = types::InvoiceIssued::builder()
        .number("INV-1")
        .total(total())
        .try_into()
        .expect("every required field is set");
    assert_eq!(invoice.number, "INV-1");
    assert_eq!(invoice.note, None);
    // The replaced type is the user's, under its contract name too.
    let money: &types::Money = &invoice.total;
    assert_eq!(money, &total());
}

#[test]
fn a_builder_missing_a_required_field_fails() {
    let missing: Result<types::InvoiceIssued, _> =
        types::InvoiceIssued::builder().number("INV-2").try_into();
    let error = missing.expect_err("`total` is required");
    assert!(error.to_string().contains("total"), "{error}");
}

#[test]
fn the_replaced_type_round_trips_as_the_schema_says() {
    let json =
        serde_json::json!({ "number": "INV-3", "total": { "amount_minor": 5, "currency": "USD" } });
    let invoice: types::InvoiceIssued = serde_json::from_value(json.clone()).expect("decodes");
    assert_eq!(invoice.total.currency, "USD");
    assert_eq!(serde_json::to_value(&invoice).expect("encodes"), json);
    // The message's payload type is the generated struct holding the user's `Money`.
    let _: <messages::InvoiceIssued as Message>::Payload = invoice;
}

#[test]
fn extra_derives_hold() {
    let invoice: types::InvoiceIssued = types::InvoiceIssued::builder()
        .number("INV-4")
        .total(total())
        .try_into()
        .expect("complete");
    let mut seen = HashSet::new();
    assert!(seen.insert(invoice.clone()));
    assert!(!seen.insert(invoice));
}

/// The builders `builder!` writes keep what typify's did: a schema's defaults as the start
/// of their fields, every required field named when missing, a value that does not convert
/// named by its field, conversions both ways, fields named like keywords, and the checks of
/// a constrained string.
#[test]
fn builders_start_at_the_schemas_defaults_and_name_what_is_missing() {
    use warren_compile_fixtures::names_built::types::Event;
    use warren_compile_fixtures::shapes_built::types::{
        Node, Shapes, ShapesPayment, ShapesStatus, builder,
    };
    let node: Node = Node::builder().label("root").try_into().expect("complete");
    assert!(node.children.is_empty());
    let payment = serde_json::json!({"method": "card", "last4": "4242"});
    let all_but_tags = || {
        Shapes::builder()
            .amount(2.5)
            .id(warren_runtime::codegen::uuid::Uuid::nil())
            .kind(serde_json::json!("k"))
            .payment(serde_json::from_value::<ShapesPayment>(payment.clone()).expect("a payment"))
            .status(ShapesStatus::Active)
    };
    let error = Shapes::try_from(all_but_tags()).expect_err("`tags` is required");
    assert!(
        error.to_string().contains("no value supplied for tags"),
        "{error}"
    );
    let shapes = Shapes::try_from(all_but_tags().tags(Vec::<String>::new())).expect("complete");
    assert_eq!((shapes.channel.as_str(), shapes.attempts), ("email", 3));
    // Back to a builder and on: the value's fields are where it starts.
    let again =
        Shapes::try_from(builder::Shapes::from(shapes.clone()).attempts(5_u64)).expect("complete");
    assert_eq!((again.channel.as_str(), again.attempts), ("email", 5));
    let bad_status = all_but_tags().tags(Vec::<String>::new()).status("gone");
    let error = Shapes::try_from(bad_status).expect_err("a status outside its enum");
    assert!(
        error
            .to_string()
            .contains("error converting supplied value for status"),
        "{error}"
    );
    // A constrained string checks its pattern however it is made, and derefs to its text.
    use warren_compile_fixtures::shapes_built::types::ShapesSku;
    let error = ShapesSku::try_from("nope").expect_err("breaks ^[A-Z]{3}-[0-9]{4}$");
    assert!(
        error.to_string().contains("doesn't match pattern"),
        "{error}"
    );
    assert!(serde_json::from_value::<ShapesSku>(serde_json::json!("nope")).is_err());
    let sku: ShapesSku = serde_json::from_value(serde_json::json!("TEA-0001")).expect("valid");
    assert_eq!((sku.len(), String::from(sku)), (8, "TEA-0001".to_owned()));
    let event = Event::try_from(Event::builder().type_("keyword").self_(1)).expect("complete");
    assert_eq!((event.type_.as_str(), event.self_), ("keyword", 1));
}
