//! `Publishers`: one async method per publisher of the contract.

use proc_macro2::{Ident, TokenStream};
use quote::quote;

use super::docs::compose;
use super::{GenerateError, code, ident};
use crate::contract::{Contract, Message, Publisher};
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
        /// Nothing is sent when a payload or its headers break their schema. Through a
        /// `Publisher` (`Publishers::new`) each message is published at once; through an
        /// outbox writer (`publishers.through(outbox.writer(&mut tx))`) it is written into the
        /// caller's transaction, for a relay to publish once it commits, and a publish
        /// succeeds once the message is written.
        #[derive(Debug, Clone)]
        pub struct Publishers<S = ::warren_runtime::Publisher> {
            sink: S,
            options: ::warren_runtime::PublishOptions,
        }

        // `new`, `with` and `through`, the same for every contract.
        ::warren_runtime::codegen::publishers!(Publishers);

        /// The publishers' methods, in a module of their own to name what they use briefly
        /// (an `impl` holds no `use`): rustdoc shows them on `Publishers`.
        mod __publishers {
            use super::{messages, types};
            use ::warren_runtime::codegen::publisher;
            // Placeholders name parameters, and a contract may well call one `foo`.
            #[allow(clippy::disallowed_names)]
            impl<S: ::warren_runtime::Sink> super::Publishers<S> {
                #( #methods )*
            }
        }
    })
}

/// The method's doc: where the message goes, and what each parameter is.
fn method_doc(publisher: &Publisher, marker: &Ident, headers: bool) -> TokenStream {
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
        "Publisher {}: publishes message {} ([`messages::{marker}`]) to {exchange} with {key}",
        code(&publisher.name),
        code(&publisher.message),
    );
    if let Some(compression) = publisher.publication.compression {
        head.push_str(&format!(", compressed with {}", compression.as_str()));
    }
    head.push('.');
    // The parameters the signature does not explain: the payload's type says what it is.
    let mut lines = Vec::new();
    for placeholder in publisher.routing_key.placeholders() {
        let parameter = ident(placeholder, Role::Placeholder);
        lines.push(format!(
            "- `{parameter}`: {} in the routing key, not empty",
            code(&format!("{{{placeholder}}}"))
        ));
    }
    if headers {
        lines.push("- `headers`: the message's application headers".to_owned());
    }
    compose(&head, None, &lines.join("\n"))
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
    let headers = message.headers.as_ref().map(|headers| {
        let headers = super::type_ident(&headers.type_name);
        quote! { , types::#headers }
    });
    let publication = &publisher.publication;
    let docs = method_doc(publisher, &marker, message.headers.is_some());
    Ok(quote! {
        publisher! {
            #docs
            #name(#( #placeholders ),*): messages::#marker, types::#payload #headers
                = #publication
        }
    })
}

/// The headers parameter of a method sending `message` (none when it has no headers schema),
/// a reference of `lifetime` (elided when empty), and the argument it passes on: the
/// parameter, or `NoHeaders`.
pub(super) fn headers_parameter(
    message: &Message,
    lifetime: TokenStream,
) -> (TokenStream, TokenStream) {
    match &message.headers {
        Some(headers) => {
            let headers = super::type_ident(&headers.type_name);
            (
                quote! { headers: &#lifetime types::#headers, },
                quote! { headers },
            )
        }
        None => (quote! {}, quote! { &::warren_runtime::NoHeaders {} }),
    }
}
