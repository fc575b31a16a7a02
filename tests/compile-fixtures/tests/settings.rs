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
