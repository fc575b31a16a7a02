//! One handler trait per consumer, a function registering each consumer's handler alone, and
//! `Handlers`, which needs all of them.

use proc_macro2::{Ident, TokenStream};
use quote::quote;
use warren_model::{DurationLabel, OrderingKey};

use super::docs::{allow_contract_markdown, compose, retry_line};
use super::rpcs::{self, Resolved};
use super::{GenerateError, code, ident, type_ident};
use crate::contract::{Consumer, Contract, Message};
use crate::naming::{self, Role};
use crate::settings::Selection;

/// `pub mod consumers` (with `consumers::register`), `pub struct Handlers` and the adapters to
/// the runtime's handler traits, for the consumers `selection` chooses; nothing when it
/// chooses none.
pub(super) fn emit(
    contract: &Contract,
    selection: &Selection,
) -> Result<TokenStream, GenerateError> {
    // The checks refuse a consumer of an unknown message: one here is a bug, not a consumer
    // to leave out of `Handlers` without a word.
    let consumers = contract
        .consumers
        .values()
        .filter(|c| selection.consumer(&c.spec.name))
        .map(|c| {
            let messages = (c.messages.iter())
                .map(|consumed| {
                    contract.messages.get(&consumed.message).ok_or_else(|| {
                        GenerateError::Internal(format!(
                            "consumer {} handles message {}, which the model does not hold",
                            code(&c.spec.name),
                            code(&consumed.message)
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(match messages.as_slice() {
                [message] => Served::Consumer(c, message),
                _ => Served::Several(c, messages),
            })
        });
    // An rpc's server is registered as a consumer: chosen like one, a field of `Handlers`.
    let servers = contract
        .rpcs
        .values()
        .filter(|r| selection.consumer(&r.name))
        .map(|r| rpcs::resolve(contract, r).map(Served::Server));
    let mut served: Vec<Served<'_>> = consumers.chain(servers).collect::<Result<_, _>>()?;
    // Consumers and rpcs share one namespace (the checks hold their names apart): in name
    // order, whatever their kind.
    served.sort_by(|a, b| a.consumer().spec.name.cmp(&b.consumer().spec.name));
    if served.is_empty() {
        return Ok(TokenStream::new());
    }
    let traits = served
        .iter()
        .map(|s| match s {
            Served::Consumer(c, m) => handler_trait(contract, c, m),
            Served::Several(c, messages) => several_trait(contract, c, messages),
            Served::Server(r) => server_trait(contract, r),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let registrations = served.iter().map(register);
    // The runtime's `register!`, named where the one-at-a-time consumers' functions use it.
    let register_macro = (served.iter().any(|s| s.one_at_a_time().is_some()))
        .then(|| quote! { use ::warren_runtime::codegen::register; });
    let adapters = served.iter().map(adapter);
    // Which consumers the code holds, said once for the module and `Handlers`.
    let which = if selection.chooses_consumers() {
        let what = if contract.rpcs.is_empty() {
            "consumer"
        } else {
            "consumer or rpc server"
        };
        format!(
            "{what} this code was generated for, {} of the contract's {} (chosen by the \
             generator settings)",
            served.len(),
            contract.consumers.len() + contract.rpcs.len()
        )
    } else if contract.rpcs.is_empty() {
        "consumer of the contract".to_owned()
    } else {
        "consumer and rpc server of the contract".to_owned()
    };
    let handlers = handlers(&which, &served);
    let module_docs = compose(
        &format!(
            "One handler trait per {which}. Implement each with an `async fn`; its future must \
             be `Send`.\n\nA consumer's handler returns `Ok(())` to acknowledge, \
             `HandlerError::non_retryable` for a failure that can never succeed (never \
             retried), or any other error to let the queue's retry policy decide; a \
             dead-letter consumer's and an rpc server's traits say what theirs return."
        ),
        None,
        // A module's outer docs resolve links where the module is declared, not inside it.
        "Register every handler at once with [`Handlers`], or each alone with its function in \
         [`consumers::register`].",
    );
    let allow = allow_contract_markdown();
    Ok(quote! {
        #module_docs
        #allow
        pub mod consumers {
            #( #traits )*

            /// One function per consumer, registering its handler alone on a worker: for a
            /// service that runs some of the contract's consumers, or builds its handlers
            /// one at a time.
            ///
            /// Each is handled as [`Handlers`](super::Handlers) would handle it: the
            /// same decoding and validation, prefetch, concurrency and retry policy. A worker
            /// refuses to start with one consumer registered twice.
            pub mod register {
                #register_macro
                #( #registrations )*
            }
        }

        #handlers

        /// Adapters from the generated traits to the runtime's.
        mod __adapters {
            ::warren_runtime::codegen::adapters! { #( #adapters ),* }
        }
    })
}

/// One entry of `consumers`: a consumer and its message, a consumer of several and theirs,
/// or an rpc's server.
enum Served<'a> {
    Consumer(&'a Consumer, &'a Message),
    Several(&'a Consumer, Vec<&'a Message>),
    Server(Resolved<'a>),
}

impl Served<'_> {
    /// The consumer it is to its queue (an rpc's server is one, named as the rpc).
    fn consumer(&self) -> &Consumer {
        match self {
            Self::Consumer(consumer, _) | Self::Several(consumer, _) => consumer,
            Self::Server(resolved) => &resolved.rpc.server,
        }
    }

    /// What it is, for docs: `consumer `x``, or `the server of rpc `x``; its trait's docs
    /// say what it handles from which queue.
    fn named(&self) -> String {
        let what = match self {
            Self::Consumer(..) | Self::Several(..) => "consumer",
            Self::Server(_) => "the server of rpc",
        };
        format!("{what} {}", code(&self.consumer().spec.name))
    }

    /// How the runtime takes its handler.
    fn kind(&self) -> Kind {
        let consumer = self.consumer();
        match (
            self,
            consumer.dead_letters,
            &consumer.inbox,
            &consumer.batch,
        ) {
            (Self::Server(_), ..) => Kind::Server,
            // The checks keep a consumer of several to one delivery at a time.
            (Self::Several(..), true, ..) => Kind::SeveralDeadLetters,
            (Self::Several(..), ..) => Kind::Several,
            (_, true, ..) => Kind::DeadLetters,
            (_, false, Some(_), Some(_)) => Kind::InboxBatch,
            (_, false, Some(_), None) => Kind::Inbox,
            (_, false, None, Some(_)) => Kind::Batch,
            (_, false, None, None) => Kind::OneAtATime,
        }
    }

    /// The message of a consumer that handles one delivery at a time, registered through
    /// the runtime's `register!`; `None` for every other kind.
    fn one_at_a_time(&self) -> Option<&Message> {
        match (self.kind(), self) {
            (Kind::OneAtATime, Self::Consumer(_, message)) => Some(message),
            _ => None,
        }
    }

    /// The type the runtime types it by, under `root` (the generated file's module): the
    /// rpc's marker, its message's, or a consumer of several's enum.
    fn marker(&self, root: &TokenStream) -> TokenStream {
        let name = &self.consumer().spec.name;
        match self {
            Self::Server(_) => {
                let rpc = ident(name, Role::Rpc);
                quote! { #root::rpcs::#rpc }
            }
            Self::Consumer(_, message) => {
                let marker = ident(&message.name, Role::Message);
                quote! { #root::messages::#marker }
            }
            Self::Several(consumer, _) => {
                let one_of = one_of_ident(consumer);
                quote! { #root::consumers::#one_of }
            }
        }
    }
}

/// How the runtime takes a consumer's handler: the runtime trait its adapter implements, and
/// the function that registers it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Server,
    DeadLetters,
    InboxBatch,
    Inbox,
    Batch,
    OneAtATime,
    Several,
    SeveralDeadLetters,
}

impl Kind {
    /// The runtime's handler trait (`warren_runtime::codegen::…`).
    fn runtime_trait(self) -> TokenStream {
        match self {
            Self::Server => quote! { RpcHandler },
            Self::DeadLetters => quote! { DeadLetterHandler },
            Self::InboxBatch => quote! { InboxBatchHandler },
            Self::Inbox => quote! { InboxHandler },
            Self::Batch => quote! { BatchHandler },
            Self::OneAtATime => quote! { Handler },
            Self::Several => quote! { SeveralHandler },
            Self::SeveralDeadLetters => quote! { SeveralDeadLetterHandler },
        }
    }

    /// The runtime's function registering it (`warren_runtime::codegen::…`).
    fn add_function(self) -> TokenStream {
        match self {
            Self::Server => quote! { add_server },
            Self::DeadLetters => quote! { add_dead_letters },
            Self::InboxBatch => quote! { add_inbox_batch },
            Self::Inbox => quote! { add_inbox },
            Self::Batch => quote! { add_batch },
            Self::OneAtATime => quote! { add },
            Self::Several => quote! { add_several },
            Self::SeveralDeadLetters => quote! { add_several_dead_letters },
        }
    }
}

/// The delivery type of a message: `Delivery<Payload, Headers>`.
fn delivery(message: &Message, types: &TokenStream) -> TokenStream {
    typed(quote! { ::warren_runtime::Delivery }, message, types)
}

/// What the handler of `consumer` receives: a `Delivery` of its message, or for a dead-letter
/// consumer a `DeadLetter` of it.
fn received(consumer: &Consumer, message: &Message, types: &TokenStream) -> TokenStream {
    if consumer.dead_letters {
        typed(quote! { ::warren_runtime::DeadLetter }, message, types)
    } else {
        delivery(message, types)
    }
}

/// `wrapper<Payload, Headers>` for `message` (`wrapper<Payload>` without headers).
fn typed(wrapper: TokenStream, message: &Message, types: &TokenStream) -> TokenStream {
    let payload = type_ident(&message.payload.type_name);
    match &message.headers {
        Some(headers) => {
            let headers = type_ident(&headers.type_name);
            quote! { #wrapper<#types::#payload, #types::#headers> }
        }
        None => quote! { #wrapper<#types::#payload> },
    }
}

fn handler_trait(
    contract: &Contract,
    consumer: &Consumer,
    message: &Message,
) -> Result<TokenStream, GenerateError> {
    let name = ident(&consumer.spec.name, Role::ConsumerTrait);
    let delivery = delivery(message, &quote! { super::types });
    let received = received(consumer, message, &quote! { super::types });
    let docs = trait_doc(contract, consumer, message)?;
    let returns = quote! {
        impl ::core::future::Future<
            Output = ::core::result::Result<(), ::warren_runtime::HandlerError>,
        > + ::core::marker::Send
    };
    let transaction = quote! {
        ::warren_runtime::inbox::InboxTransaction<Self::Database>
    };
    let method = if consumer.dead_letters {
        quote! {
            /// Handles one dead letter: typed when it decodes as the message, raw otherwise.
            fn handle(&self, dead_letter: #received) -> #returns;
        }
    } else if consumer.inbox.is_some() {
        let handle = if consumer.batch.is_some() {
            quote! {
                /// Handles the messages of one batch not handled before, writing their
                /// effects through `transaction`, in which the inbox recorded each: they
                /// commit together. An error applies to every message of the batch.
                fn handle_batch(
                    &self,
                    batch: ::std::vec::Vec<#delivery>,
                    transaction: &mut #transaction,
                ) -> #returns;
            }
        } else {
            quote! {
                /// Handles one delivery, writing its effects through `transaction`, in which
                /// the inbox recorded it: they commit together, and a redelivery is
                /// acknowledged without calling this again.
                fn handle(&self, delivery: #delivery, transaction: &mut #transaction) -> #returns;
            }
        };
        quote! {
            /// The database the inbox is in: `sqlx::Postgres` or `sqlx::Sqlite`.
            type Database: ::warren_runtime::database::Backend;

            /// The inbox this consumer's messages are recorded in
            /// (`warren_runtime::inbox::Inbox::new(pool)`); asked once, at registration.
            fn inbox(&self) -> ::warren_runtime::inbox::Inbox<Self::Database>;

            #handle
        }
    } else if consumer.batch.is_some() {
        quote! {
            /// Handles one batch; an error applies to every message of the batch.
            fn handle_batch(&self, batch: ::std::vec::Vec<#delivery>) -> #returns;
        }
    } else {
        quote! {
            /// Handles one delivery.
            fn handle(&self, delivery: #delivery) -> #returns;
        }
    };
    Ok(quote! {
        #docs
        pub trait #name: ::core::marker::Send + ::core::marker::Sync + 'static {
            #method
        }
    })
}

/// The enum of a consumer of several: one variant per message, what the runtime hands the
/// adapter (`NotifyCustomerMessage`).
fn one_of_ident(consumer: &Consumer) -> proc_macro2::Ident {
    ident(
        &format!("{}_message", consumer.spec.name),
        Role::ConsumerTrait,
    )
}

/// The trait of a consumer of several, one method per message, and the enum the runtime hands
/// its adapter.
fn several_trait(
    contract: &Contract,
    consumer: &Consumer,
    messages: &[&Message],
) -> Result<TokenStream, GenerateError> {
    let name = ident(&consumer.spec.name, Role::ConsumerTrait);
    let one_of = one_of_ident(consumer);
    let types = quote! { super::types };
    let returns = quote! {
        impl ::core::future::Future<
            Output = ::core::result::Result<(), ::warren_runtime::HandlerError>,
        > + ::core::marker::Send
    };
    let methods: Vec<TokenStream> = match consumer.dead_letters {
        true => vec![quote! {
            /// Handles one dead letter: why it died (`failure`), and the message, typed as
            /// one of the queue's messages or raw.
            fn handle(
                &self,
                failure: ::warren_runtime::FailureContext,
                message: #one_of,
            ) -> #returns;
        }],
        false => (messages.iter())
            .map(|message| {
                let method = ident(&message.name, Role::ConsumerField);
                let delivery = delivery(message, &types);
                let doc = format!(" Handles one delivery of message {}.", code(&message.name));
                quote! {
                    #[doc = #doc]
                    fn #method(&self, delivery: #delivery) -> #returns;
                }
            })
            .collect(),
    };
    let mut variants: Vec<TokenStream> = (messages.iter())
        .map(|message| {
            let variant = ident(&message.name, Role::Message);
            let delivery = delivery(message, &types);
            let doc = format!(" Message {}.", code(&message.name));
            quote! {
                #[doc = #doc]
                #variant(#delivery)
            }
        })
        .collect();
    if consumer.dead_letters {
        variants.push(quote! {
            /// A dead letter that is none of them, or does not decode or validate as the
            /// one its `type` names: its bytes, properties and why.
            Raw(::warren_runtime::RawMessage)
        });
    }
    let names: Vec<String> = messages.iter().map(|m| code(&m.name)).collect();
    let head = match consumer.dead_letters {
        true => format!(
            "Dead-letter consumer {}: handles the dead letters of queue {}, typed as messages {} \
             when they decode.",
            code(&consumer.spec.name),
            code(&consumer.spec.queue),
            names.join(", ")
        ),
        false => format!(
            "Consumer {}: handles messages {} from queue {}, each with its own method.",
            code(&consumer.spec.name),
            names.join(", "),
            code(&consumer.spec.queue)
        ),
    };
    let mut text = match consumer.dead_letters {
        true => String::from(
            "- a dead letter is typed as the message its `type` names (without one, the first \
             it decodes and validates as); one that is none of them comes raw, never dropped\n\
             - a failed handler returns it to the queue, or lets the broker dead-letter it \
             through the queue's own dead-letter exchange, as the queue's retry policy says",
        ),
        false => String::from(
            "- a delivery is recognised by the `type` warren's publishers set (by the routing key \
             or header the contract selects it by, when it has none); one recognised as none of \
             them is dead-lettered as `unknown-message`, never handled",
        ),
    };
    if !consumer.dead_letters {
        text.push_str(&format!("\n- {}", retry_line(contract, consumer)?));
    }
    text.push_str(&settings_lines(consumer));
    let docs = compose(&head, None, &text);
    let enum_doc = compose(
        &match consumer.dead_letters {
            true => format!(
                "A dead letter of consumer {}: one of its messages, typed, or raw.",
                code(&consumer.spec.name)
            ),
            false => format!(
                "A delivery of consumer {}, one of its messages: what the runtime hands the \
                 adapter of [`{name}`], which calls the method of its message.",
                code(&consumer.spec.name)
            ),
        },
        None,
        "",
    );
    Ok(quote! {
        #docs
        pub trait #name: ::core::marker::Send + ::core::marker::Sync + 'static {
            #( #methods )*
        }

        #enum_doc
        // Its variants are as large as their deliveries (a payload type can be large, `Raw`
        // is small): it is moved once, from the worker to the handler, where boxing each
        // would cost an allocation per delivery and a `*` in every `match`.
        #[allow(clippy::large_enum_variant)]
        pub enum #one_of {
            #( #variants ),*
        }
    })
}

/// The trait's doc: the consumer, its queue and message, and how the queue treats a failure.
fn trait_doc(
    contract: &Contract,
    consumer: &Consumer,
    message: &Message,
) -> Result<TokenStream, GenerateError> {
    let marker = ident(&message.name, Role::Message);
    let head = if consumer.dead_letters {
        format!(
            "Dead-letter consumer {}: handles the dead letters of queue {}, typed as message {} \
             when they decode.",
            code(&consumer.spec.name),
            code(&consumer.spec.queue),
            code(&message.name)
        )
    } else {
        format!(
            "Consumer {}: handles message {} from queue {}.",
            code(&consumer.spec.name),
            code(&message.name),
            code(&consumer.spec.queue)
        )
    };
    let mut text = format!("- message: [`messages::{marker}`](super::messages::{marker})");
    if consumer.dead_letters {
        text.push_str(
            "\n- every dead letter reaches the handler with its failure history; one that does \
             not decode or validate comes raw, never dropped\n- a failed handler returns it to \
             the queue, or lets the broker dead-letter it through the queue's own dead-letter \
             exchange, as the queue's retry policy says",
        );
    } else {
        text.push_str(&format!("\n- {}", retry_line(contract, consumer)?));
    }
    text.push_str(&settings_lines(consumer));
    if let Some(inbox) = &consumer.inbox {
        let key = match &inbox.pointer {
            Some(pointer) => format!(
                "its message id, or else the payload value at {},",
                code(pointer)
            ),
            None => "its message id (one without is dead-lettered as `unidentified`),".to_owned(),
        };
        text.push_str(&format!(
            "\n- inbox: each message is recorded by {key} in the transaction its effects are \
             written through, so they commit once however often it is delivered (needs \
             warren-runtime's `postgres` or `sqlite` feature)"
        ));
    }
    // What a consumer's handler returns, the module's docs say once; a dead-letter
    // consumer's differs.
    if consumer.dead_letters {
        text.push_str(
            "\n\nReturn `Ok(())` to acknowledge; an error leaves the dead letter to the queue's \
             policy, as above.",
        );
    }
    Ok(compose(&head, message.description.as_deref(), &text))
}

/// The server trait of an rpc: one method answering a request.
fn server_trait(
    contract: &Contract,
    resolved: &Resolved<'_>,
) -> Result<TokenStream, GenerateError> {
    let rpc = resolved.rpc;
    let name = ident(&rpc.name, Role::ConsumerTrait);
    let delivery = delivery(resolved.request, &quote! { super::types });
    let answer = answer_type(resolved);
    let marker = ident(&rpc.name, Role::Rpc);
    let head = format!(
        "Server of rpc {}: answers message {} from queue {} with message {}.",
        code(&rpc.name),
        code(&resolved.request.name),
        code(&rpc.server.spec.queue),
        code(&resolved.response.name)
    );
    let request = ident(&resolved.request.name, Role::Message);
    let response_marker = ident(&resolved.response.name, Role::Message);
    let mut text = format!(
        "- rpc: [`rpcs::{marker}`](super::rpcs::{marker})\n\
         - request: [`messages::{request}`](super::messages::{request})\n\
         - response: [`messages::{response_marker}`](super::messages::{response_marker})"
    );
    if resolved.errors.is_empty() {
        text.push_str("\n- errors: none declared");
    } else {
        let codes: Vec<String> = resolved.errors.iter().map(|(c, _)| code(c)).collect();
        let enum_name = rpcs::errors_ident(rpc);
        text.push_str(&format!(
            "\n- errors: {}, the variants of [`rpcs::{enum_name}`](super::rpcs::{enum_name})",
            codes.join(", ")
        ));
    }
    text.push_str(&format!(
        "\n- a caller waits {}; a request past its deadline is dead-lettered unhandled",
        DurationLabel(rpc.target.timeout)
    ));
    text.push_str(&format!("\n- {}", retry_line(contract, &rpc.server)?));
    text.push_str(&settings_lines(&rpc.server));
    // An rpc without declared errors has none to return: its docs say what is left.
    text.push_str(if resolved.errors.is_empty() {
        "\n\nReturn `Ok(response)` to answer, or `RpcHandlerError::Failed` (a `HandlerError`, \
         which `?` converts) for a failure, which the queue's retry policy decides (the caller \
         gets a `failed` reply once the request is dead-lettered). The error type, \
         [`NoErrors`](::warren_runtime::NoErrors), has no value."
    } else {
        "\n\nReturn `Ok(response)` to answer; a declared error (`Err(error.into())`) to answer \
         with it, the request acknowledged and never retried; or \
         `RpcHandlerError::Failed` for a failure, which the queue's retry policy decides \
         (the caller gets a `failed` reply once the request is dead-lettered)."
    });
    let docs = compose(&head, rpc.description.as_deref(), &text);
    Ok(quote! {
        #docs
        pub trait #name: ::core::marker::Send + ::core::marker::Sync + 'static {
            /// Answers one request.
            fn handle(&self, request: #delivery) -> #answer;
        }
    })
}

/// The consumer's prefetch, concurrency or batches, and circuit breaker, as doc lines.
fn settings_lines(consumer: &Consumer) -> String {
    let handling = match (&consumer.batch, consumer.spec.concurrency) {
        (Some(batch), _) => format!(
            "in batches of up to {}, waiting at most {} for one to fill",
            batch.size,
            DurationLabel(batch.timeout)
        ),
        (None, 1) => "one delivery at a time".to_owned(),
        (None, n) => format!("up to {n} deliveries at once"),
    };
    let mut text = format!(
        "\n- prefetch {}, handling {handling}",
        consumer.spec.prefetch
    );
    if let Some(key) = &consumer.spec.ordering_key {
        let key = match key {
            OrderingKey::Payload(pointer) => format!("the payload's `{pointer}`"),
            OrderingKey::Header(name) => format!("header `{name}`"),
        };
        text.push_str(&format!(
            "\n- in order per key ({key}): one at a time for each key, in arrival order"
        ));
    }
    if let Some(breaker) = &consumer.spec.circuit_breaker {
        text.push_str(&format!(
            "\n- circuit breaker: pauses for {} after {} retryable failures in a row",
            DurationLabel(breaker.cool_down),
            breaker.failures
        ));
    }
    text
}

/// The entry of `served` in the adapters' invocation: `Name: RuntimeTrait<Target>`, the
/// runtime's handler trait its adapter implements (the runtime's `adapters!` writes it).
fn adapter(served: &Served<'_>) -> TokenStream {
    let name = ident(&served.consumer().spec.name, Role::ConsumerTrait);
    let runtime_trait = served.kind().runtime_trait();
    let marker = served.marker(&quote! { super });
    let (Served::Several(_, messages), Kind::Several) = (served, served.kind()) else {
        return quote! { #name: #runtime_trait<#marker> };
    };
    // Each variant of the enum, and the trait's method it goes to.
    let arms = messages.iter().map(|message| {
        let variant = ident(&message.name, Role::Message);
        let method = ident(&message.name, Role::ConsumerField);
        quote! { #variant => #method }
    });
    quote! { #name: #runtime_trait<#marker> { #( #arms ),* } }
}

/// What an rpc server's `handle` returns: its response, or a declared error or a failure.
fn answer_type(resolved: &Resolved<'_>) -> TokenStream {
    let response = type_ident(&resolved.response.payload.type_name);
    let errors = rpcs::errors_type(resolved.rpc, &quote! { super::rpcs });
    quote! {
        impl ::core::future::Future<
            Output = ::core::result::Result<
                super::types::#response,
                ::warren_runtime::RpcHandlerError<#errors>,
            >,
        > + ::core::marker::Send
    }
}

fn handlers(which: &str, served: &[Served<'_>]) -> TokenStream {
    let traits: Vec<_> = served
        .iter()
        .map(|s| ident(&s.consumer().spec.name, Role::ConsumerTrait))
        .collect();
    let params: Vec<_> = served
        .iter()
        .map(|s| {
            let name = &s.consumer().spec.name;
            let handler_trait = naming::role_ident(name, Role::ConsumerTrait);
            super::to_ident(name, handler_trait.map(|t| naming::handler_param(&t)))
        })
        .collect();
    let fields: Vec<_> = served
        .iter()
        .map(|s| ident(&s.consumer().spec.name, Role::ConsumerField))
        .collect();
    let field_docs = served.iter().zip(&traits).map(|(s, t)| {
        compose(
            &format!("The handler of {}: a [`consumers::{t}`].", s.named()),
            None,
            "",
        )
    });
    let registrations = fields
        .iter()
        .map(|field| quote! { consumers::register::#field(worker, self.#field); });
    // `emit` generates no `Handlers` without a consumer: there is at least one parameter.
    let generics = quote! { <#( #params ),*> };
    let bounds = quote! { <#( #params: consumers::#traits ),*> };
    let mut text = format!(
        "The handler of every {which}. Each field is required, so a consumer without a \
         handler is a compile error."
    );
    if let (Some(param), Some(handler_trait)) = (params.first(), traits.first()) {
        text.push_str(&format!(
            "\n\nEach type parameter is the type of one consumer's handler, named after the \
             trait it implements: `{param}` implements [`consumers::{handler_trait}`]."
        ));
    }
    text.push_str(
        "\n\nTo register one consumer's handler alone, call its function in \
         [`consumers::register`].",
    );
    let docs = compose(&text, None, "");
    quote! {
        #docs
        pub struct Handlers #generics {
            #( #field_docs pub #fields: #params, )*
        }

        impl #bounds Handlers #generics {
            /// Adds every consumer to `worker`, each as its function in
            /// [`consumers::register`] adds it.
            pub fn register(self, worker: &mut ::warren_runtime::Worker) {
                #( #registrations )*
            }

            /// Adds every consumer to `worker`, then returns the worker's run, which runs
            /// them until it stops.
            // Not an `async fn`: its future would hold every handler's type, and rustc's
            // analysis of it grows with their count times itself (58 of the 85 s a
            // 300-consumer contract took to check).
            pub fn run(self, mut worker: ::warren_runtime::Worker) -> ::warren_runtime::codegen::Running {
                self.register(&mut worker);
                ::warren_runtime::codegen::run(worker)
            }
        }
    }
}

/// `consumers::register::<consumer>`: registers the consumer's handler on a worker, alone.
/// `Handlers::register` calls these, so both ways register a consumer the same way.
fn register(served: &Served<'_>) -> TokenStream {
    let consumer = served.consumer();
    let handler_trait = ident(&consumer.spec.name, Role::ConsumerTrait);
    let kind = served.kind();
    let add = kind.add_function();
    let spec = &consumer.spec;
    let adapter = quote! { super::super::__adapters::#handler_trait(handler) };
    if let Served::Several(_, messages) = served {
        let members = members(consumer, messages);
        // A dead letter that is none of them comes raw.
        let raw = match kind {
            Kind::SeveralDeadLetters => {
                let one_of = one_of_ident(consumer);
                quote! { super::#one_of::Raw, }
            }
            _ => TokenStream::new(),
        };
        let call = quote! {
            ::warren_runtime::codegen::#add(worker, #spec, [#( #members ),*], #raw #adapter);
        };
        return registration(served, call);
    }
    let marker = served.marker(&quote! { super::super });
    // A batch consumer's batch, and an inbox consumer's key pointer, after the spec.
    let batch = match (kind, &consumer.batch) {
        (Kind::Batch | Kind::InboxBatch, Some(batch)) => quote! { #batch, },
        _ => TokenStream::new(),
    };
    let key = match consumer
        .inbox
        .as_ref()
        .map(|inbox| inbox.pointer.as_deref())
    {
        _ if !matches!(kind, Kind::Inbox | Kind::InboxBatch) => TokenStream::new(),
        Some(Some(pointer)) => quote! { ::core::option::Option::Some(#pointer), },
        _ => quote! { ::core::option::Option::None, },
    };
    if let Some(message) = served.one_at_a_time() {
        return register_invocation(served, &ident(&message.name, Role::Message));
    }
    let call = quote! {
        ::warren_runtime::codegen::#add(worker, #marker, #spec, #batch #key #adapter);
    };
    registration(served, call)
}

/// A one-at-a-time consumer's register function, through the runtime's `register!`: the
/// consumer's code for its message (decoding it, the work of each delivery) is compiled with
/// the contract, once, rather than in each binary with its handler's type.
fn register_invocation(served: &Served<'_>, marker: &Ident) -> TokenStream {
    let consumer = served.consumer();
    let function = ident(&consumer.spec.name, Role::ConsumerField);
    let handler_trait = ident(&consumer.spec.name, Role::ConsumerTrait);
    let docs = registration_doc(served, &handler_trait);
    let spec = &consumer.spec;
    quote! {
        register! {
            #docs
            #function: #handler_trait, #marker = #spec
        }
    }
}

/// The members of a consumer of several, one per message: its marker, how a delivery
/// without a `type` is recognised as it, and the variant it is handed to the adapter in.
fn members(consumer: &Consumer, messages: &[&Message]) -> Vec<TokenStream> {
    let one_of = one_of_ident(consumer);
    (messages.iter().zip(&consumer.messages))
        .map(|(message, consumed)| {
            let marker = ident(&message.name, Role::Message);
            let selector = match &consumed.selector {
                Some(selector) => quote! { ::core::option::Option::Some(#selector) },
                None => quote! { ::core::option::Option::None },
            };
            quote! {
                ::warren_runtime::codegen::member(
                    super::super::messages::#marker,
                    #selector,
                    super::#one_of::#marker,
                )
            }
        })
        .collect()
}

/// The doc of the register function of `served`, whose handler implements `handler_trait`.
fn registration_doc(served: &Served<'_>, handler_trait: &Ident) -> TokenStream {
    compose(
        &format!(
            "Registers `handler`, a [`{handler_trait}`](super::{handler_trait}), as the handler \
             of {} on `worker`, alone.",
            served.named()
        ),
        None,
        "",
    )
}

/// The register function of `served`, whose body is `call`.
fn registration(served: &Served<'_>, call: TokenStream) -> TokenStream {
    let consumer = served.consumer();
    let function = ident(&consumer.spec.name, Role::ConsumerField);
    let handler_trait = ident(&consumer.spec.name, Role::ConsumerTrait);
    let docs = registration_doc(served, &handler_trait);
    quote! {
        #docs
        pub fn #function(
            worker: &mut ::warren_runtime::Worker,
            handler: impl super::#handler_trait,
        ) {
            // The model's tokens name its items unqualified.
            use ::warren_runtime::model::*;
            #call
        }
    }
}
