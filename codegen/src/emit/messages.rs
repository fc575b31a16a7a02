//! One marker type per message, implementing `warren_runtime::Message`.

use std::collections::BTreeMap;

use proc_macro2::TokenStream;
use quote::quote;

use super::docs::{allow_contract_markdown, compose};
use super::schemas::SharedDefinitions;
use super::{code, ident, type_ident};
use crate::contract::{Contract, Message, SchemaType};
use crate::naming::Role;

/// `pub mod messages { … }`.
pub(super) fn emit(contract: &Contract) -> TokenStream {
    // Who publishes and consumes each message, gathered once: asking per message would cost
    // the square of the contract.
    let mut users: BTreeMap<&str, Users> = BTreeMap::new();
    for publisher in contract.publishers.values() {
        let entry = users.entry(publisher.message.as_str()).or_default();
        entry.publishers.push(code(&publisher.name));
    }
    for consumer in contract.consumers.values() {
        for consumed in &consumer.messages {
            let entry = users.entry(consumed.message.as_str()).or_default();
            entry.consumers.push(format!(
                "{} (queue {})",
                code(&consumer.spec.name),
                code(&consumer.spec.queue)
            ));
        }
    }
    for rpc in contract.rpcs.values() {
        let name = code(&rpc.name);
        let mut uses = vec![
            (rpc.request.as_str(), format!("the request of rpc {name}")),
            (rpc.response.as_str(), format!("the response of rpc {name}")),
        ];
        uses.extend(rpc.errors.iter().map(|(error, message)| {
            (
                message.as_str(),
                format!("error {} of rpc {name}", code(error)),
            )
        }));
        for (message, text) in uses {
            users.entry(message).or_default().rpcs.push(text);
        }
    }
    let none = Users::default();
    let shared = SharedDefinitions::of(contract);
    let markers = contract.messages.values().map(|message| {
        let users = users.get(message.name.as_str()).unwrap_or(&none);
        marker(contract, message, users, &shared)
    });
    let shared_definitions = shared.macros();
    // The payloads' and headers' types, and the runtime's macro of a marker's impls, where
    // markers use them: no marker is named so (theirs are `UpperCamelCase`).
    let uses = (!contract.messages.is_empty()).then(|| {
        quote! {
            use super::types;
            use ::warren_runtime::codegen::message;
        }
    });
    let allow = allow_contract_markdown();
    quote! {
        /// One marker type per message of the contract, naming its payload and headers types,
        /// content type and JSON Schemas.
        #allow
        pub mod messages {
            #uses
            #shared_definitions
            #( #markers )*
        }
    }
}

/// The publishers, consumers and rpcs of one message, as doc text.
#[derive(Default)]
struct Users {
    publishers: Vec<String>,
    consumers: Vec<String>,
    /// What the message is to each rpc that uses it: `the request of rpc `quote_price``.
    rpcs: Vec<String>,
}

fn marker(
    contract: &Contract,
    message: &Message,
    users: &Users,
    shared: &SharedDefinitions<'_>,
) -> TokenStream {
    let name = ident(&message.name, Role::Message);
    let docs = marker_doc(contract, message, users);
    let payload = type_ident(&message.payload.type_name);
    let message_name = &message.name;
    // The trait's default (`application/json`) is left to it.
    let content_type = (message.content_type != crate::contract::DEFAULT_CONTENT_TYPE).then(|| {
        let content_type = &message.content_type;
        quote! { as #content_type }
    });
    let payload_schema = shared.pieces_for_message(&message.payload.schema);
    let headers = message.headers.as_ref().map(|headers| {
        let name = type_ident(&headers.type_name);
        let schema = shared.pieces_for_message(&headers.schema);
        quote! { , types::#name [#schema] }
    });
    quote! {
        #docs
        pub struct #name;
        message! {
            #name = #message_name #content_type: types::#payload [#payload_schema] #headers
        }
    }
}

/// The marker's doc: the message's description, its types and where they were read, and who
/// publishes and consumes it.
fn marker_doc(contract: &Contract, message: &Message, users: &Users) -> TokenStream {
    let head = match &message.owner {
        None => format!("Message {} of the contract.", code(&message.name)),
        Some(owner) => format!(
            "Message {} of the imported contract {}.",
            code(&message.name),
            code(owner)
        ),
    };
    let mut text = String::new();
    let sources = &contract.schemas.sources;
    let typed = |what: &str, schema: &SchemaType| {
        let name = &schema.type_name;
        let mut line = format!("\n- {what}: [`types::{name}`]");
        if let Some(source) = sources.get(name) {
            line.push_str(&format!(", from {}", code(source)));
        }
        line
    };
    text.push_str(&typed("payload", &message.payload));
    if let Some(headers) = &message.headers {
        text.push_str(&typed("headers", headers));
    }
    // JSON goes without saying: the content type is told when it is another.
    if message.content_type != crate::contract::DEFAULT_CONTENT_TYPE {
        text.push_str(&format!(
            "\n- content type: {}",
            code(&message.content_type)
        ));
    }
    if !users.publishers.is_empty() {
        text.push_str(&format!("\n- published by {}", users.publishers.join(", ")));
    }
    if !users.consumers.is_empty() {
        text.push_str(&format!("\n- consumed by {}", users.consumers.join(", ")));
    }
    if !users.rpcs.is_empty() {
        text.push_str(&format!("\n- {}", users.rpcs.join(", ")));
    }
    compose(&head, message.description.as_deref(), &text)
}
