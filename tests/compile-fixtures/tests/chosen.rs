//! Code generated for a choice of the contract's consumers and publishers keeps what every
//! service of the contract shares: the whole topology and every message. (What it leaves
//! out, and the handlers it still requires, are compile errors: the doctests on
//! `warren_compile_fixtures::chosen`.)

use warren_compile_fixtures::{chosen, orders_example, settings, types_only};
use warren_runtime::Message;

/// Every service declares the same topology, whichever consumers it runs: the one declaring
/// first creates what the others need, and none redeclares a queue differently.
#[test]
fn a_choice_keeps_the_whole_topology() {
    assert_eq!(chosen::topology(), orders_example::topology());
    assert_eq!(types_only::topology(), settings::topology());
}

/// The message a left-out consumer handles is still there, with the same schema: a service
/// may publish or read it by other means.
#[test]
fn a_choice_keeps_every_message() {
    type Cancelled = chosen::messages::OrderCancelled;
    type Everyone = orders_example::messages::OrderCancelled;
    assert_eq!(Cancelled::NAME, Everyone::NAME);
    assert_eq!(Cancelled::PAYLOAD_SCHEMA, Everyone::PAYLOAD_SCHEMA);
    let _: <types_only::messages::InvoiceIssued as Message>::Payload =
        serde_json::from_value(serde_json::json!({
            "number": "INV-1",
            "total": { "amount_minor": 1, "currency": "EUR" }
        }))
        .expect("the payload type is generated");
}
