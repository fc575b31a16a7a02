//! `Publishers`: one async method per publisher of the contract.

use proc_macro2::{Ident, TokenStream};
use quote::quote;

use super::docs::compose;
use super::{GenerateError, code, ident};
use crate::contract::{Contract, KeyTemplate, KeyWord, Publisher};
use crate::naming::Role;
use crate::settings::Selection;

/// `pub struct Publishers` and a method for each publisher `selection` chooses; nothing when
/// it chooses none (a `Publishers` without methods would hold fields nothing reads).
pub(super) fn emit(
    contract: &Contract,
    selection: &Selection,
) -> Result<TokenStream, GenerateError> {
    let methods = contract
        .publishers
        .values()
        .filter(|publisher| selection.publisher(&publisher.name))
        .map(|publisher| method(contract, publisher))
        .collect::<Result<Vec<_>, _>>()?;
    if methods.is_empty() {
        return Ok(TokenStream::new());
    }
    let docs = if selection.chooses_publishers() {
        compose(
            &format!(
                "The publishers this code was generated for, {} of the contract's {} (chosen \
                 by the generator settings): one method per publisher, with the exchange, \
                 routing key and compression of the contract baked in. Each publish waits for \
                 the broker's confirm and fails when the message reaches no queue.",
                methods.len(),
                contract.publishers.len()
            ),
            None,
            "",
        )
    } else {
        quote! {
            /// The contract's publishers: one method per publisher, with the exchange, routing
            /// key and compression of the contract baked in. Each publish waits for the broker's
            /// confirm and fails when the message reaches no queue.
        }
    };
    Ok(quote! {
        #docs
        ///
        /// Through a `Publisher` (`Publishers::new`) each message is published at once;
        /// through an outbox writer (`publishers.through(outbox.writer(&mut tx))`) it is
        /// written into the caller's transaction, for a relay to publish once it commits.
        #[derive(Debug, Clone)]
        pub struct Publishers<S = ::warren_runtime::Publisher> {
            sink: S,
            options: ::warren_runtime::PublishOptions,
        }

        impl Publishers {
            /// Publishes through `publisher`, with a fresh message id and the current time on
            /// every message.
            pub fn new(publisher: ::warren_runtime::Publisher) -> Self {
                Self {
                    sink: publisher,
                    options: ::warren_runtime::PublishOptions::default(),
                }
            }
        }

        impl<S: ::warren_runtime::Sink + Clone> Publishers<S> {
            /// The same publishers, setting `options` (a message id to deduplicate on, a
            /// timestamp, a priority…) on what they publish, added to those they had.
            pub fn with(&self, options: ::warren_runtime::PublishOptions) -> Self {
                Self {
                    sink: self.sink.clone(),
                    options: self.options.clone().overridden_by(options),
                }
            }
        }

        // Placeholders name parameters, and a contract may well call one `foo`.
        #[allow(clippy::disallowed_names)]
        impl<S: ::warren_runtime::Sink> Publishers<S> {
            /// The same publishers, with their options, sending through `sink` instead: an
            /// outbox writer on the caller's transaction.
            pub fn through<T: ::warren_runtime::Sink>(&self, sink: T) -> Publishers<T> {
                Publishers {
                    sink,
                    options: self.options.clone(),
                }
            }

            #( #methods )*
        }
    })
}

/// The method's doc: where the message goes, and what each parameter is.
fn method_doc(
    publisher: &Publisher,
    marker: &Ident,
    payload: &Ident,
    headers: bool,
) -> TokenStream {
    let exchange = if publisher.publication.exchange.is_empty() {
        "the default exchange".to_owned()
    } else {
        format!("exchange {}", code(&publisher.publication.exchange))
    };
    let key = if publisher.publication.routing_key.is_empty() {
        "an empty routing key".to_owned()
    } else {
        format!("routing key {}", code(&publisher.publication.routing_key))
    };
    let mut head = format!(
        "Publisher {}: publishes message {} to {exchange} with {key}",
        code(&publisher.name),
        code(&publisher.message),
    );
    if let Some(compression) = publisher.publication.compression {
        head.push_str(&format!(", compressed with {}", compression.as_str()));
    }
    head.push('.');
    let mut text = format!("- message: [`messages::{marker}`]");
    for placeholder in publisher.routing_key.placeholders() {
        let parameter = ident(placeholder, Role::Placeholder);
        text.push_str(&format!(
            "\n- `{parameter}`: the value of {} in the routing key; not empty",
            code(&format!("{{{placeholder}}}"))
        ));
    }
    text.push_str(&format!("\n- `payload`: the body, [`types::{payload}`]"));
    if headers {
        text.push_str("\n- `headers`: the message's application headers");
    }
    text.push_str(
        "\n\nNothing is sent when the payload or headers break their schema. Through a \
         `Publisher`, waits for the broker's confirm, and fails when the message reaches no \
         queue; through an outbox writer, succeeds once the message is written.",
    );
    compose(&head, None, &text)
}

fn method(contract: &Contract, publisher: &Publisher) -> Result<TokenStream, GenerateError> {
    // The checks refuse a publisher of an unknown message: one here is a bug, not a method
    // to leave out without a word.
    let Some(message) = contract.messages.get(&publisher.message) else {
        return Err(GenerateError::Internal(format!(
            "publisher {} sends message {}, which the model does not hold",
            code(&publisher.name),
            code(&publisher.message)
        )));
    };
    let name = ident(&publisher.name, Role::Publisher);
    let marker = ident(&message.name, Role::Message);
    let payload = super::type_ident(&message.payload.type_name);
    let placeholders: Vec<_> = publisher
        .routing_key
        .placeholders()
        .map(|p| ident(p, Role::Placeholder))
        .collect();
    let (headers_param, headers_arg) = match &message.headers {
        Some(headers) => {
            let headers = super::type_ident(&headers.type_name);
            (quote! { headers: &types::#headers, }, quote! { headers })
        }
        None => (quote! {}, quote! { &::warren_runtime::NoHeaders {} }),
    };
    let publication = &publisher.publication;
    let (build_key, publication) = filled_in(
        &publisher.routing_key,
        Role::Placeholder,
        quote! { Publication },
        quote! { #publication },
    );
    let docs = method_doc(publisher, &marker, &payload, message.headers.is_some());
    Ok(quote! {
        #docs
        pub async fn #name(
            &self,
            #( #placeholders: &str, )*
            payload: &types::#payload,
            #headers_param
        ) -> ::core::result::Result<(), ::warren_runtime::PublishError> {
            // The model's tokens name its items unqualified.
            use ::warren_runtime::model::*;
            #build_key
            ::warren_runtime::codegen::publish::<messages::#marker, _>(
                    &self.sink,
                    #publication,
                    payload,
                    #headers_arg,
                    &self.options,
                )
                .await
        }
    })
}

/// A spec (`spec_type`, a `Publication` or an `RpcTarget`: the model's tokens) whose routing
/// key is `key`: as the contract writes it when it has no placeholders, else built from the
/// method's parameters (named in `role`) by the statement returned first.
pub(super) fn filled_in(
    key: &KeyTemplate,
    role: Role,
    spec_type: TokenStream,
    spec: TokenStream,
) -> (TokenStream, TokenStream) {
    if key.placeholders().next().is_none() {
        return (quote! {}, spec);
    }
    let parts = key_parts(key, role);
    (
        quote! {
            let routing_key = ::warren_runtime::codegen::RoutingKey::build(&[ #( #parts ),* ])?;
        },
        quote! { #spec_type { routing_key: routing_key.as_str(), ..#spec } },
    )
}

/// The routing key as literal text and placeholder values (parameters named in `role`),
/// separators folded into the text.
fn key_parts(key: &KeyTemplate, role: Role) -> Vec<TokenStream> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    for (i, word) in key.words().iter().enumerate() {
        if i > 0 {
            literal.push('.');
        }
        match word {
            KeyWord::Literal(text) => literal.push_str(text),
            KeyWord::Placeholder(name) => {
                if !literal.is_empty() {
                    parts.push(quote! { ::warren_runtime::codegen::KeyPart::Literal(#literal) });
                    literal.clear();
                }
                let value = ident(name, role);
                parts.push(
                    quote! { ::warren_runtime::codegen::KeyPart::Value { name: #name, value: #value } },
                );
            }
        }
    }
    if !literal.is_empty() {
        parts.push(quote! { ::warren_runtime::codegen::KeyPart::Literal(#literal) });
    }
    parts
}
