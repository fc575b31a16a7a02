//! Request/reply operations: `rpcs` (one marker type per rpc, implementing
//! `warren_runtime::codegen::Operation`, and the enum of its declared errors) and
//! `RpcClients` (one async method per rpc). The server traits are in `consumers`
//! (`consumers.rs`), registered like consumers.

use proc_macro2::{Ident, TokenStream};
use quote::quote;
use warren_model::DurationLabel;

use super::docs::{allow_contract_markdown, compose};
use super::publishers::headers_parameter;
use super::{GenerateError, code, ident, type_ident};
use crate::contract::{Contract, Message, Rpc};
use crate::naming::Role;
use crate::settings::Selection;

/// An rpc with its messages, resolved: the checks refuse an rpc naming an unknown message,
/// so one here is a bug.
pub(super) struct Resolved<'a> {
    /// The rpc.
    pub rpc: &'a Rpc,
    /// Its request message.
    pub request: &'a Message,
    /// Its response message.
    pub response: &'a Message,
    /// Its declared errors: code and message, in code order.
    pub errors: Vec<(&'a str, &'a Message)>,
}

/// `rpc` with its messages.
pub(super) fn resolve<'a>(
    contract: &'a Contract,
    rpc: &'a Rpc,
) -> Result<Resolved<'a>, GenerateError> {
    let message = |name: &str| {
        contract.messages.get(name).ok_or_else(|| {
            GenerateError::Internal(format!(
                "rpc {} uses message {}, which the model does not hold",
                code(&rpc.name),
                code(name)
            ))
        })
    };
    Ok(Resolved {
        rpc,
        request: message(&rpc.request)?,
        response: message(&rpc.response)?,
        errors: rpc
            .errors
            .iter()
            .map(|(code, name)| Ok((code.as_str(), message(name)?)))
            .collect::<Result<_, GenerateError>>()?,
    })
}

/// The identifier of the enum of `rpc`'s declared errors: its name followed by `Error`
/// (the checks hold it apart from every other rpc's marker and enum).
pub(super) fn errors_ident(rpc: &Rpc) -> Ident {
    ident(&format!("{}_error", rpc.name), Role::Rpc)
}

/// The type of `rpc`'s declared errors, from a module that sees `rpcs` as `rpcs_path`.
pub(super) fn errors_type(rpc: &Rpc, rpcs_path: &TokenStream) -> TokenStream {
    if rpc.errors.is_empty() {
        no_errors()
    } else {
        let errors = errors_ident(rpc);
        quote! { #rpcs_path::#errors }
    }
}

/// The error type of an rpc that declares none, by its public path: a user's server of such
/// an rpc writes it in its handler's signature, and `warren_runtime::codegen` is not for users.
fn no_errors() -> TokenStream {
    quote! { ::warren_runtime::NoErrors }
}

/// `pub mod rpcs` with every rpc of the contract (like message markers, whatever the
/// settings choose), and `RpcClients` with a method for each rpc `selection` chooses as a
/// publisher; nothing without rpcs.
pub(super) fn emit(
    contract: &Contract,
    selection: &Selection,
) -> Result<TokenStream, GenerateError> {
    let rpcs = contract
        .rpcs
        .values()
        .map(|rpc| resolve(contract, rpc))
        .collect::<Result<Vec<_>, _>>()?;
    if rpcs.is_empty() {
        return Ok(TokenStream::new());
    }
    let markers = rpcs.iter().map(marker);
    let allow = allow_contract_markdown();
    let clients = clients(contract, selection, &rpcs);
    Ok(quote! {
        /// One marker type per request/reply operation (rpc) of the contract, naming its
        /// request, response and declared errors, and the enum of those errors.
        #allow
        pub mod rpcs {
            #( #markers )*
        }

        #clients
    })
}

/// Where requests of `rpc` go, as doc text.
fn destination(rpc: &Rpc) -> String {
    if rpc.target.exchange.is_empty() {
        format!(
            "through the default exchange to queue {}",
            code(&rpc.server.spec.queue)
        )
    } else {
        format!(
            "to exchange {} with routing key {} (queue {})",
            code(&rpc.target.exchange),
            code(&rpc.target.routing_key),
            code(&rpc.server.spec.queue)
        )
    }
}

/// The marker type of one rpc and the enum of its declared errors.
fn marker(resolved: &Resolved<'_>) -> TokenStream {
    let Resolved {
        rpc,
        request,
        response,
        errors,
    } = resolved;
    let name = ident(&rpc.name, Role::Rpc);
    let request_marker = ident(&request.name, Role::Message);
    let response_marker = ident(&response.name, Role::Message);
    let error_type = if errors.is_empty() {
        no_errors()
    } else {
        let errors = errors_ident(rpc);
        quote! { #errors }
    };
    let rpc_name = &rpc.name;
    let mut text = format!(
        "- request: [`messages::{request_marker}`](super::messages::{request_marker})\n\
         - response: [`messages::{response_marker}`](super::messages::{response_marker})"
    );
    if errors.is_empty() {
        text.push_str("\n- errors: none declared");
    } else {
        let errors_name = errors_ident(rpc);
        text.push_str(&format!("\n- errors: [`{errors_name}`]"));
    }
    text.push_str(&format!(
        "\n- requests go {}; a caller waits {} for the reply",
        destination(rpc),
        DurationLabel(rpc.target.timeout)
    ));
    let docs = compose(
        &format!("Rpc {}.", code(&rpc.name)),
        rpc.description.as_deref(),
        &text,
    );
    let errors = if errors.is_empty() {
        TokenStream::new()
    } else {
        declared_errors(rpc, errors)
    };
    quote! {
        #docs
        // A marker is named, passed and copied, never compared or hashed: each derive more
        // is an impl per message to compile.
        #[derive(Debug, Clone, Copy)]
        pub struct #name;

        impl ::warren_runtime::codegen::Operation for #name {
            type Request = super::messages::#request_marker;
            type Response = super::messages::#response_marker;
            type Error = #error_type;
            const NAME: &'static str = #rpc_name;
        }

        #errors
    }
}

/// The enum of `rpc`'s declared errors, one variant per code holding its message's payload,
/// with what the runtime needs to send and read it.
fn declared_errors(rpc: &Rpc, errors: &[(&str, &Message)]) -> TokenStream {
    let names = ErrorNames::of(rpc, errors);
    let definition = errors_enum(rpc, errors, &names);
    let implementations = errors_impls(&names);
    quote! {
        #definition
        #implementations
    }
}

/// How a declared-errors enum and its variants are named, one entry per error, in order.
struct ErrorNames<'a> {
    /// The enum.
    name: Ident,
    /// Each error's variant.
    variants: Vec<Ident>,
    /// Each error's message marker type.
    markers: Vec<Ident>,
    /// Each error's code.
    codes: Vec<&'a str>,
}

impl<'a> ErrorNames<'a> {
    fn of(rpc: &Rpc, errors: &[(&'a str, &Message)]) -> Self {
        Self {
            name: errors_ident(rpc),
            variants: errors
                .iter()
                .map(|(code, _)| ident(code, Role::ErrorVariant))
                .collect(),
            markers: errors
                .iter()
                .map(|(_, message)| ident(&message.name, Role::Message))
                .collect(),
            codes: errors.iter().map(|(code, _)| *code).collect(),
        }
    }
}

/// The enum itself, documented: a variant per error holding its message's payload.
fn errors_enum(rpc: &Rpc, errors: &[(&str, &Message)], names: &ErrorNames<'_>) -> TokenStream {
    let ErrorNames { name, variants, .. } = names;
    let variant_docs = errors.iter().map(|(error_code, message)| {
        let payload = type_ident(&message.payload.type_name);
        compose(
            &format!(
                "Error {}: message {}, its payload a [`types::{payload}`](super::types::{payload}).",
                code(error_code),
                code(&message.name)
            ),
            message.description.as_deref(),
            "",
        )
    });
    let payloads = errors.iter().map(|(_, message)| {
        let payload = type_ident(&message.payload.type_name);
        quote! { super::types::#payload }
    });
    let docs = compose(
        &format!(
            "The errors rpc {} declares: a server returns one instead of a response, and a \
             caller receives it as `RpcError::Declared`.",
            code(&rpc.name)
        ),
        None,
        "Each is sent with its code and its payload, validated against its message's schema.",
    );
    quote! {
        #docs
        #[derive(Debug)]
        pub enum #name {
            #( #variant_docs #variants(#payloads), )*
        }
    }
}

/// What the runtime needs of the enum (`DeclaredErrors`: code, encode, decode, the message's
/// name and content type), its `Display` (the code alone) and `Error`, and its conversion
/// into a handler's error: the runtime's `declared_errors!`, given each variant's message and
/// code.
fn errors_impls(names: &ErrorNames<'_>) -> TokenStream {
    let ErrorNames {
        name,
        variants,
        markers,
        codes,
    } = names;
    quote! {
        ::warren_runtime::codegen::declared_errors! {
            #name { #( #variants: super::messages::#markers = #codes ),* }
        }
    }
}

/// `pub struct RpcClients` with a method for each rpc `selection` chooses; nothing when it
/// chooses none.
fn clients(contract: &Contract, selection: &Selection, rpcs: &[Resolved<'_>]) -> TokenStream {
    let methods: Vec<TokenStream> = rpcs
        .iter()
        .filter(|r| selection.publisher(&r.rpc.name))
        .map(method)
        .collect();
    if methods.is_empty() {
        return TokenStream::new();
    }
    let which = if selection.chooses_publishers() {
        format!(
            "The rpcs this code calls, {} of the contract's {} (chosen by the generator \
             settings)",
            methods.len(),
            contract.rpcs.len()
        )
    } else {
        "The contract's rpcs".to_owned()
    };
    let docs = compose(
        &format!(
            "{which}: one method per rpc, which publishes the request where the contract \
             says and waits for its reply, with the contract's timeout."
        ),
        None,
        "Nothing is sent when a request or its headers break their schema. A call fails with \
         `RpcError::Timeout` when no reply comes in time (a request nobody took by then \
         expires unhandled), and `RpcError::Failed` when the server could not answer. Calls \
         share the [`RpcClient`](::warren_runtime::RpcClient)'s channel; each waits for the \
         reply with its own correlation id.",
    );
    quote! {
        #docs
        #[derive(Debug, Clone)]
        pub struct RpcClients {
            client: ::warren_runtime::RpcClient,
            options: ::warren_runtime::CallOptions,
        }

        // `new`, `with` and `client`, the same for every contract.
        ::warren_runtime::codegen::rpc_clients!(RpcClients);

        // Placeholders name parameters, and a contract may well call one `foo`.
        #[allow(clippy::disallowed_names)]
        impl RpcClients {
            #( #methods )*
        }
    }
}

/// The client method of one rpc.
fn method(resolved: &Resolved<'_>) -> TokenStream {
    let Resolved {
        rpc,
        request,
        response,
        ..
    } = resolved;
    let name = ident(&rpc.name, Role::RpcMethod);
    let marker = ident(&rpc.name, Role::Rpc);
    let request_type = type_ident(&request.payload.type_name);
    let response_type = type_ident(&response.payload.type_name);
    let error_type = errors_type(rpc, &quote! { rpcs });
    let placeholders: Vec<Ident> = rpc
        .routing_key
        .placeholders()
        .map(|p| ident(p, Role::RpcPlaceholder))
        .collect();
    let (headers_param, headers_arg) = headers_parameter(request, TokenStream::new());
    let target = &rpc.target;
    let docs = method_doc(resolved, &marker, &request_type, &placeholders);
    quote! {
        #docs
        pub async fn #name(
            &self,
            #( #placeholders: &str, )*
            request: &types::#request_type,
            #headers_param
        ) -> ::core::result::Result<types::#response_type, ::warren_runtime::RpcError<#error_type>> {
            // The model's tokens name its items unqualified.
            use ::warren_runtime::model::*;
            ::warren_runtime::codegen::call(
                    &self.client,
                    rpcs::#marker,
                    #target,
                    &[#( #placeholders ),*],
                    request,
                    #headers_arg,
                    &self.options,
                )
                .await
        }
    }
}

/// The client method's doc: where the request goes, what comes back, each parameter.
fn method_doc(
    resolved: &Resolved<'_>,
    marker: &Ident,
    request_type: &Ident,
    placeholders: &[Ident],
) -> TokenStream {
    let Resolved {
        rpc,
        request,
        response,
        errors,
    } = resolved;
    let head = format!(
        "Rpc {}: sends message {} {} and waits up to {} for message {} in reply.",
        code(&rpc.name),
        code(&request.name),
        destination(rpc),
        DurationLabel(rpc.target.timeout),
        code(&response.name),
    );
    let mut text = format!("- rpc: [`rpcs::{marker}`]");
    for (placeholder, parameter) in rpc.routing_key.placeholders().zip(placeholders) {
        text.push_str(&format!(
            "\n- `{parameter}`: {} in the routing key, not empty",
            code(&format!("{{{placeholder}}}"))
        ));
    }
    text.push_str(&format!(
        "\n- `request`: the request, [`types::{request_type}`]"
    ));
    if request.headers.is_some() {
        text.push_str("\n- `headers`: the request's application headers");
    }
    let response_type = type_ident(&response.payload.type_name);
    text.push_str(&format!(
        "\n- returns the response, [`types::{response_type}`]"
    ));
    if !errors.is_empty() {
        let errors_name = errors_ident(rpc);
        let codes: Vec<String> = errors.iter().map(|(c, _)| code(c)).collect();
        text.push_str(&format!(
            ", or `RpcError::Declared` with one of the declared errors ({}: [`rpcs::{errors_name}`])",
            codes.join(", ")
        ));
    }
    compose(&head, rpc.description.as_deref(), &text)
}
