//! `topology()`: the runtime's description of every exchange, queue and binding.

use proc_macro2::TokenStream;
use quote::quote;

use crate::model::{
    ArgumentValue, Binding, Contract, DeadLetter, Destination, Exchange, ExchangeKind, Exhausted,
    OnPoison, Queue, QueueKind, QueueRole, RetryPolicy,
};

/// `pub fn topology()`.
pub(super) fn emit(contract: &Contract) -> TokenStream {
    let exchanges = contract.exchanges.values().map(exchange);
    let queues = contract.queues.values().map(queue);
    let bindings = contract.bindings.iter().map(binding);
    quote! {
        /// Every exchange, queue (with its declaration arguments and retry policy, wait
        /// queues included) and binding of the contract.
        pub fn topology() -> ::warren_runtime::Topology {
            use ::warren_runtime::topology::*;
            Topology {
                exchanges: ::std::vec::Vec::from([ #( #exchanges ),* ]),
                queues: ::std::vec::Vec::from([ #( #queues ),* ]),
                bindings: ::std::vec::Vec::from([ #( #bindings ),* ]),
                namespace: ::std::string::String::new(),
            }
        }
    }
}

fn exchange(exchange: &Exchange) -> TokenStream {
    let name = &exchange.name;
    let kind = match exchange.kind {
        ExchangeKind::Topic => quote! { ExchangeKind::Topic },
        ExchangeKind::Direct => quote! { ExchangeKind::Direct },
        ExchangeKind::Fanout => quote! { ExchangeKind::Fanout },
        ExchangeKind::Headers => quote! { ExchangeKind::Headers },
    };
    let (durable, auto_delete, internal) =
        (exchange.durable, exchange.auto_delete, exchange.internal);
    let arguments = arguments(&exchange.arguments);
    quote! {
        Exchange {
            name: #name.into(),
            kind: #kind,
            durable: #durable,
            auto_delete: #auto_delete,
            internal: #internal,
            arguments: #arguments,
        }
    }
}

fn queue(queue: &Queue) -> TokenStream {
    let name = &queue.name;
    let kind = match queue.kind {
        QueueKind::Quorum => quote! { QueueKind::Quorum },
        QueueKind::Classic => quote! { QueueKind::Classic },
        QueueKind::Stream => quote! { QueueKind::Stream },
    };
    let (durable, exclusive, auto_delete) = (queue.durable, queue.exclusive, queue.auto_delete);
    let arguments = arguments(&queue.arguments);
    let dead_letter = match &queue.dead_letter {
        None => quote! { ::core::option::Option::None },
        Some(DeadLetter {
            exchange,
            routing_key,
        }) => {
            let routing_key = optional_string(routing_key.as_deref());
            quote! {
                ::core::option::Option::Some(DeadLetter {
                    exchange: #exchange.into(),
                    routing_key: #routing_key,
                })
            }
        }
    };
    let retry = retry(&queue.retry);
    let on_poison = match queue.on_poison {
        OnPoison::DeadLetter => quote! { OnPoison::DeadLetter },
        OnPoison::Drop => quote! { OnPoison::Drop },
    };
    let wait_queue_of = match &queue.role {
        QueueRole::Declared => optional_string(None),
        QueueRole::Wait { queue, .. } => optional_string(Some(queue)),
    };
    quote! {
        Queue {
            name: #name.into(),
            kind: #kind,
            durable: #durable,
            exclusive: #exclusive,
            auto_delete: #auto_delete,
            arguments: #arguments,
            dead_letter: #dead_letter,
            retry: #retry,
            on_poison: #on_poison,
            wait_queue_of: #wait_queue_of,
        }
    }
}

fn retry(policy: &RetryPolicy) -> TokenStream {
    match policy {
        RetryPolicy::None => quote! { Retry::None },
        RetryPolicy::ImmediateRequeue {
            max_retries,
            exhausted,
        } => {
            let exhausted = exhausted_tokens(*exhausted);
            quote! { Retry::ImmediateRequeue { max_retries: #max_retries, exhausted: #exhausted } }
        }
        RetryPolicy::TtlBackoff {
            max_retries,
            initial_delay,
            max_delay,
            multiplier,
            jitter,
            exhausted,
            tiers,
        } => {
            let exhausted = exhausted_tokens(*exhausted);
            let multiplier = float(*multiplier);
            let initial = initial_delay.as_millis();
            let max = max_delay.as_millis();
            let tiers = tiers.iter().map(|tier| {
                let queue = &tier.queue;
                let delay = tier.delay.as_millis();
                quote! {
                    WaitTier {
                        queue: #queue.into(),
                        delay: ::core::time::Duration::from_millis(#delay),
                    }
                }
            });
            quote! {
                Retry::TtlBackoff(Backoff {
                    max_retries: #max_retries,
                    initial_delay: ::core::time::Duration::from_millis(#initial),
                    max_delay: ::core::time::Duration::from_millis(#max),
                    multiplier: #multiplier,
                    jitter: #jitter,
                    exhausted: #exhausted,
                    tiers: ::std::vec::Vec::from([ #( #tiers ),* ]),
                })
            }
        }
        RetryPolicy::QuorumNative { delivery_limit } => {
            quote! { Retry::QuorumNative { delivery_limit: #delivery_limit } }
        }
    }
}

fn exhausted_tokens(exhausted: Exhausted) -> TokenStream {
    match exhausted {
        Exhausted::DeadLetter => quote! { Exhausted::DeadLetter },
        Exhausted::Drop => quote! { Exhausted::Drop },
        Exhausted::Requeue => quote! { Exhausted::Requeue },
    }
}

fn binding(binding: &Binding) -> TokenStream {
    let exchange = &binding.exchange;
    let destination = match &binding.destination {
        Destination::Queue(queue) => quote! { Destination::Queue(#queue.into()) },
        Destination::Exchange(to) => quote! { Destination::Exchange(#to.into()) },
    };
    let routing_key = &binding.routing_key;
    let arguments = arguments(&binding.arguments);
    quote! {
        Binding {
            exchange: #exchange.into(),
            destination: #destination,
            routing_key: #routing_key.into(),
            arguments: #arguments,
        }
    }
}

fn arguments(arguments: &std::collections::BTreeMap<String, ArgumentValue>) -> TokenStream {
    if arguments.is_empty() {
        return quote! { Arguments::new() };
    }
    let pairs = arguments.iter().map(|(key, value)| {
        let value = match value {
            ArgumentValue::Bool(b) => quote! { ArgValue::Bool(#b) },
            ArgumentValue::Int(i) => quote! { ArgValue::Int(#i) },
            ArgumentValue::Float(f) => {
                let f = float(*f);
                quote! { ArgValue::Float(#f) }
            }
            ArgumentValue::String(s) => quote! { ArgValue::String(#s.into()) },
        };
        quote! { (#key, #value) }
    });
    quote! { arguments([ #( #pairs ),* ]) }
}

/// A float literal; `quote!` cannot write infinities or NaN (the checks refuse them, so this
/// is only a guard against a panic).
fn float(value: f64) -> TokenStream {
    if value.is_finite() {
        quote! { #value }
    } else if value.is_nan() {
        quote! { ::core::f64::NAN }
    } else if value > 0.0 {
        quote! { ::core::f64::INFINITY }
    } else {
        quote! { ::core::f64::NEG_INFINITY }
    }
}

fn optional_string(text: Option<&str>) -> TokenStream {
    match text {
        Some(text) => quote! { ::core::option::Option::Some(#text.into()) },
        None => quote! { ::core::option::Option::None },
    }
}
