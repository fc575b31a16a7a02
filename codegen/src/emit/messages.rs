//! One marker type per message, implementing `warren_runtime::Message`.

use proc_macro2::TokenStream;
use quote::quote;

use super::{code, doc, ident, type_ident};
use crate::model::{Contract, Message, SchemaType};
use crate::naming::Role;

/// `pub mod messages { … }`.
pub(super) fn emit(contract: &Contract) -> TokenStream {
    let markers = contract.messages.values().map(marker);
    quote! {
        /// One marker type per message of the contract, naming its payload and headers types,
        /// content type and JSON Schemas.
        pub mod messages {
            #( #markers )*
        }
    }
}

fn marker(message: &Message) -> TokenStream {
    let name = ident(&message.name, Role::Message);
    let mut text = format!("Message {}.", code(&message.name));
    if let Some(description) = &message.description {
        text = format!("{text}\n\n{description}");
    }
    let docs = doc(&text);
    let payload = type_ident(&message.payload.type_name);
    let headers = match &message.headers {
        Some(headers) => {
            let headers = type_ident(&headers.type_name);
            quote! { super::types::#headers }
        }
        None => quote! { ::warren_runtime::NoHeaders },
    };
    let message_name = &message.name;
    let content_type = &message.content_type;
    let payload_schema = schema_text(&message.payload);
    let headers_schema = match &message.headers {
        Some(headers) => {
            let text = schema_text(headers);
            quote! { ::core::option::Option::Some(#text) }
        }
        None => quote! { ::core::option::Option::None },
    };
    quote! {
        #docs
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct #name;

        impl ::warren_runtime::Message for #name {
            type Payload = super::types::#payload;
            type Headers = #headers;
            const NAME: &'static str = #message_name;
            const CONTENT_TYPE: &'static str = #content_type;
            const PAYLOAD_SCHEMA: &'static str = #payload_schema;
            const HEADERS_SCHEMA: ::core::option::Option<&'static str> = #headers_schema;
        }
    }
}

/// The standalone schema as compact JSON.
fn schema_text(schema: &SchemaType) -> String {
    schema.schema.to_string()
}
