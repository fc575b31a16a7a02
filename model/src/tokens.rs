//! `quote::ToTokens` for the topology and the specs: the generator writes a contract's
//! `topology()`, and what each consumer, publisher and rpc hands the runtime, from the
//! model itself.
//!
//! Each impl destructures its type without `..`, so a field added to the model that is not
//! written into generated code fails to compile here. The tokens name the model's items
//! unqualified (`Queue { .. }`, `Retry::None`): generated code glob-imports this crate (as
//! the runtime re-exports it) in the function that builds the topology, and standard types are
//! written with absolute paths.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};

use crate::{
    ArgValue, Arguments, Backoff, BatchSpec, Binding, CircuitBreaker, Compression, ConsumerSpec,
    DeadLetter, DeliveryLimit, Destination, Exchange, ExchangeKind, Exhausted, Import,
    MessageSelector, OnPoison, OrderingKey, Publication, Queue, QueueKind, QueueRole, Retry,
    RetryCountSource, RpcTarget, Topology, WaitTier,
};

impl ToTokens for Topology {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            exchanges,
            queues,
            bindings,
            imports,
            // Set only by `namespaced`, which rewrote the names already: written again, it
            // would prefix them twice. What the generator writes has none.
            namespace: _,
        } = self;
        // The wait queues are what each declared queue's retry policy lays out: written as
        // the policy, and laid out again when the topology is built. A topology whose wait
        // queues are anything else (not what the generator builds) is written out whole.
        let declared: Vec<Queue> = queues
            .iter()
            .filter(|q| q.role == QueueRole::Declared)
            .cloned()
            .collect();
        let laid_out = Topology::with_wait_queues(Vec::new(), declared.clone(), Vec::new()).queues;
        let exchanges = list(exchanges, &quote! { Exchange });
        let bindings = list(bindings, &quote! { Binding });
        tokens.extend(if laid_out == *queues {
            let declared: Vec<PolicyQueue<'_>> = declared.iter().map(PolicyQueue).collect();
            let declared = list(&declared, &quote! { Queue });
            quote! { Topology::with_wait_queues(#exchanges, #declared, #bindings) }
        } else {
            let queues = list(queues, &quote! { Queue });
            quote! { Topology::new(#exchanges, #queues, #bindings) }
        });
        // Only a contract that imports says so: the others' `topology()` reads as before.
        if !imports.is_empty() {
            tokens.extend(quote! { .importing(::std::vec::Vec::from([ #( #imports ),* ])) });
        }
    }
}

/// How many items of a list one function builds.
const LIST_CHUNK: usize = 32;

/// A `Vec` of `items` (each of type `item`): written out, or, when it is long, built by
/// functions of [`LIST_CHUNK`] items each, nested in a block. A contract's queues and
/// bindings in one function made it the largest a crate compiles: on a contract of 300
/// queues, code generation for it alone raised the compiler's peak memory by 170 MB.
fn list<T: ToTokens>(items: &[T], item: &TokenStream) -> TokenStream {
    if items.len() <= LIST_CHUNK {
        return quote! { ::std::vec::Vec::from([ #( #items ),* ]) };
    }
    let parts: Vec<proc_macro2::Ident> = (0..items.len().div_ceil(LIST_CHUNK))
        .map(|n| quote::format_ident!("part_{n}"))
        .collect();
    let bodies = items.chunks(LIST_CHUNK);
    quote! {
        {
            #(
                fn #parts() -> ::std::vec::Vec<#item> {
                    ::std::vec::Vec::from([ #( #bodies ),* ])
                }
            )*
            ::std::vec::Vec::from_iter([ #( #parts() ),* ].into_iter().flatten())
        }
    }
}

/// A declared queue written with its retry policy as a [`Backoff::new`] call, when that is
/// what lays out its wait tiers: the tiers follow from the policy, and writing both would
/// say one thing twice.
struct PolicyQueue<'a>(&'a Queue);

impl ToTokens for PolicyQueue<'_> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let queue = self.0;
        let Retry::TtlBackoff(backoff) = &queue.retry else {
            return queue.to_tokens(tokens);
        };
        let Backoff {
            max_retries,
            initial_delay,
            max_delay,
            multiplier,
            jitter,
            exhausted,
            tiers: _,
        } = backoff;
        let laid_out = Backoff::new(
            &queue.name,
            *max_retries,
            *initial_delay,
            *max_delay,
            *multiplier,
            *jitter,
            *exhausted,
        );
        if laid_out != *backoff {
            return queue.to_tokens(tokens);
        }
        let name = &queue.name;
        let (initial_delay, max_delay) = (duration(*initial_delay), duration(*max_delay));
        let multiplier = float(*multiplier);
        let retry = quote! {
            Retry::TtlBackoff(Backoff::new(
                #name,
                #max_retries,
                #initial_delay,
                #max_delay,
                #multiplier,
                #jitter,
                #exhausted,
            ))
        };
        queue_tokens(queue, retry, tokens);
    }
}

impl ToTokens for Import {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            contract,
            exchanges,
        } = self;
        tokens.extend(quote! {
            Import {
                contract: #contract.into(),
                exchanges: ::std::vec::Vec::from([ #( #exchanges ),* ]),
            }
        });
    }
}

impl ToTokens for Exchange {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            name,
            kind,
            durable,
            auto_delete,
            internal,
            alternate_exchange,
            arguments,
        } = self;
        let alternate_exchange = optional_string(alternate_exchange.as_deref());
        let arguments = ArgumentsTokens(arguments);
        tokens.extend(quote! {
            Exchange {
                name: #name.into(),
                kind: #kind,
                durable: #durable,
                auto_delete: #auto_delete,
                internal: #internal,
                alternate_exchange: #alternate_exchange,
                arguments: #arguments,
            }
        });
    }
}

impl ToTokens for ExchangeKind {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::Topic => quote! { ExchangeKind::Topic },
            Self::Direct => quote! { ExchangeKind::Direct },
            Self::Fanout => quote! { ExchangeKind::Fanout },
            Self::Headers => quote! { ExchangeKind::Headers },
        });
    }
}

impl ToTokens for QueueKind {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::Quorum => quote! { QueueKind::Quorum },
            Self::Classic => quote! { QueueKind::Classic },
            Self::Stream => quote! { QueueKind::Stream },
        });
    }
}

impl ToTokens for OnPoison {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::DeadLetter => quote! { OnPoison::DeadLetter },
            Self::Drop => quote! { OnPoison::Drop },
        });
    }
}

impl ToTokens for Exhausted {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::DeadLetter => quote! { Exhausted::DeadLetter },
            Self::Drop => quote! { Exhausted::Drop },
            Self::Requeue => quote! { Exhausted::Requeue },
        });
    }
}

impl ToTokens for DeliveryLimit {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::Derived => quote! { DeliveryLimit::Derived },
            Self::Count(limit) => quote! { DeliveryLimit::Count(#limit) },
            Self::BrokerDefault => quote! { DeliveryLimit::BrokerDefault },
        });
    }
}

impl ToTokens for Queue {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        queue_tokens(self, self.retry.to_token_stream(), tokens);
    }
}

/// `queue` as a struct literal, its retry policy written as `retry`: the fields
/// [`Queue::new`] does not set as the queue has them, then `..Queue::new(name, kind)` (or
/// that call alone). A contract's queues mostly differ from it in their dead-letter target
/// and retry policy, and a large contract has hundreds of them.
fn queue_tokens(queue: &Queue, retry: TokenStream, tokens: &mut TokenStream) {
    let Queue {
        name,
        kind,
        durable,
        exclusive,
        auto_delete,
        dead_letter,
        delivery_limit,
        // Written as the caller says: the policy itself, or the call that builds it.
        retry: _,
        retry_counts_from,
        on_poison,
        role,
        arguments,
    } = queue;
    let unset = Queue::new(name.as_str(), *kind);
    let mut fields = Vec::new();
    if *durable != unset.durable {
        fields.push(quote! { durable: #durable });
    }
    if *exclusive != unset.exclusive {
        fields.push(quote! { exclusive: #exclusive });
    }
    if *auto_delete != unset.auto_delete {
        fields.push(quote! { auto_delete: #auto_delete });
    }
    if *dead_letter != unset.dead_letter {
        let dead_letter = optional(dead_letter.as_ref());
        fields.push(quote! { dead_letter: #dead_letter });
    }
    if *delivery_limit != unset.delivery_limit {
        fields.push(quote! { delivery_limit: #delivery_limit });
    }
    if queue.retry != unset.retry {
        fields.push(quote! { retry: #retry });
    }
    if *retry_counts_from != unset.retry_counts_from {
        fields.push(quote! {
            retry_counts_from: ::std::vec::Vec::from([ #( #retry_counts_from ),* ])
        });
    }
    if *on_poison != unset.on_poison {
        fields.push(quote! { on_poison: #on_poison });
    }
    if *role != unset.role {
        fields.push(quote! { role: #role });
    }
    if *arguments != unset.arguments {
        let arguments = ArgumentsTokens(arguments);
        fields.push(quote! { arguments: #arguments });
    }
    let unset = quote! { Queue::new(#name, #kind) };
    tokens.extend(match fields.is_empty() {
        true => unset,
        false => quote! { Queue { #( #fields, )* ..#unset } },
    });
}

impl ToTokens for RetryCountSource {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self { exchange, header } = self;
        tokens.extend(quote! {
            RetryCountSource { exchange: #exchange.into(), header: #header.into() }
        });
    }
}

impl ToTokens for DeadLetter {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            exchange,
            routing_key,
            queue_argument,
        } = self;
        let routing_key = optional_string(routing_key.as_deref());
        let new = quote! { DeadLetter::new(#exchange, #routing_key) };
        tokens.extend(if *queue_argument {
            new
        } else {
            quote! { DeadLetter { queue_argument: false, ..#new } }
        });
    }
}

impl ToTokens for QueueRole {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::Declared => quote! { QueueRole::Declared },
            Self::Wait { queue, delay } => {
                let delay = duration(*delay);
                quote! { QueueRole::Wait { queue: #queue.into(), delay: #delay } }
            }
        });
    }
}

impl ToTokens for Retry {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::None => quote! { Retry::None },
            Self::ImmediateRequeue {
                max_retries,
                exhausted,
            } => quote! {
                Retry::ImmediateRequeue { max_retries: #max_retries, exhausted: #exhausted }
            },
            Self::TtlBackoff(backoff) => quote! { Retry::TtlBackoff(#backoff) },
            Self::QuorumNative => quote! { Retry::QuorumNative },
        });
    }
}

impl ToTokens for Backoff {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            max_retries,
            initial_delay,
            max_delay,
            multiplier,
            jitter,
            exhausted,
            tiers,
        } = self;
        let initial_delay = duration(*initial_delay);
        let max_delay = duration(*max_delay);
        let multiplier = float(*multiplier);
        tokens.extend(quote! {
            Backoff {
                max_retries: #max_retries,
                initial_delay: #initial_delay,
                max_delay: #max_delay,
                multiplier: #multiplier,
                jitter: #jitter,
                exhausted: #exhausted,
                tiers: ::std::vec::Vec::from([ #( #tiers ),* ]),
            }
        });
    }
}

impl ToTokens for WaitTier {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self { queue, delay } = self;
        let delay = duration(*delay);
        tokens.extend(quote! {
            WaitTier {
                queue: #queue.into(),
                delay: #delay,
            }
        });
    }
}

impl ToTokens for Binding {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            exchange,
            destination,
            routing_key,
            arguments,
        } = self;
        // Most bindings have no arguments: one call each, where a struct literal was five
        // (a thousand of them made `topology()` the largest function a crate compiles).
        if arguments.is_empty() {
            return tokens.extend(match destination {
                Destination::Queue(queue) => {
                    quote! { Binding::to_queue(#exchange, #queue, #routing_key) }
                }
                Destination::Exchange(to) => {
                    quote! { Binding::to_exchange(#exchange, #to, #routing_key) }
                }
            });
        }
        let arguments = ArgumentsTokens(arguments);
        tokens.extend(quote! {
            Binding {
                exchange: #exchange.into(),
                destination: #destination,
                routing_key: #routing_key.into(),
                arguments: #arguments,
            }
        });
    }
}

impl ToTokens for Destination {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::Queue(queue) => quote! { Destination::Queue(#queue.into()) },
            Self::Exchange(to) => quote! { Destination::Exchange(#to.into()) },
        });
    }
}

impl ToTokens for ArgValue {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::Bool(b) => quote! { ArgValue::Bool(#b) },
            Self::Int(i) => quote! { ArgValue::Int(#i) },
            Self::Float(f) => {
                let f = float(*f);
                quote! { ArgValue::Float(#f) }
            }
            Self::String(s) => quote! { ArgValue::String(#s.into()) },
        });
    }
}

impl<S: ToTokens> ToTokens for ConsumerSpec<S> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            name,
            queue,
            prefetch,
            concurrency,
            circuit_breaker,
            ordering_key,
        } = self;
        // What the contract leaves unset is not spelled out: a setter for each it sets.
        let circuit_breaker = circuit_breaker
            .as_ref()
            .map(|breaker| quote! { .circuit_breaker(#breaker) });
        let ordering_key = ordering_key
            .as_ref()
            .map(|key| quote! { .ordering_key(#key) });
        tokens.extend(quote! {
            ConsumerSpec::new(#name, #queue, #prefetch, #concurrency)
                #circuit_breaker
                #ordering_key
        });
    }
}

impl<S: ToTokens> ToTokens for MessageSelector<S> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::RoutingKey(pattern) => quote! { MessageSelector::RoutingKey(#pattern) },
            Self::Header(name, value) => quote! { MessageSelector::Header(#name, #value) },
        });
    }
}

impl<S: ToTokens> ToTokens for OrderingKey<S> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::Payload(pointer) => quote! { OrderingKey::Payload(#pointer) },
            Self::Header(name) => quote! { OrderingKey::Header(#name) },
        });
    }
}

impl ToTokens for CircuitBreaker {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            failures,
            cool_down,
        } = self;
        let cool_down = duration(*cool_down);
        tokens.extend(quote! {
            CircuitBreaker { failures: #failures, cool_down: #cool_down }
        });
    }
}

impl ToTokens for BatchSpec {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self { size, timeout } = self;
        let timeout = duration(*timeout);
        tokens.extend(quote! { BatchSpec { size: #size, timeout: #timeout } });
    }
}

impl ToTokens for Compression {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.extend(match self {
            Self::Gzip => quote! { Compression::Gzip },
            Self::Deflate => quote! { Compression::Deflate },
        });
    }
}

impl<S: ToTokens> ToTokens for Publication<S> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            exchange,
            routing_key,
            compression,
            max_priority,
            ordering_key,
        } = self;
        if compression.is_none() && max_priority.is_none() && ordering_key.is_none() {
            return tokens.extend(quote! { Publication::to(#exchange, #routing_key) });
        }
        let compression = optional(compression.as_ref());
        let max_priority = optional(max_priority.as_ref());
        let ordering_key = optional(ordering_key.as_ref());
        tokens.extend(quote! {
            Publication {
                exchange: #exchange,
                routing_key: #routing_key,
                compression: #compression,
                max_priority: #max_priority,
                ordering_key: #ordering_key,
            }
        });
    }
}

impl<S: ToTokens> ToTokens for RpcTarget<S> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        let Self {
            exchange,
            routing_key,
            timeout,
            max_priority,
        } = self;
        let timeout = duration(*timeout);
        let max_priority = optional(max_priority.as_ref());
        tokens.extend(quote! {
            RpcTarget {
                exchange: #exchange,
                routing_key: #routing_key,
                timeout: #timeout,
                max_priority: #max_priority,
            }
        });
    }
}

/// [`Arguments`] (a type alias, so it cannot have an impl of its own): `Arguments::new()`
/// when empty, else built from pairs with [`crate::arguments`].
struct ArgumentsTokens<'a>(&'a Arguments);

impl ToTokens for ArgumentsTokens<'_> {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        if self.0.is_empty() {
            tokens.extend(quote! { Arguments::new() });
            return;
        }
        let pairs = self.0.iter().map(|(key, value)| quote! { (#key, #value) });
        tokens.extend(quote! { arguments([ #( #pairs ),* ]) });
    }
}

fn duration(duration: std::time::Duration) -> TokenStream {
    let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    quote! { ::core::time::Duration::from_millis(#millis) }
}

fn optional<T: ToTokens>(value: Option<&T>) -> TokenStream {
    match value {
        Some(value) => quote! { ::core::option::Option::Some(#value) },
        None => quote! { ::core::option::Option::None },
    }
}

fn optional_string(text: Option<&str>) -> TokenStream {
    match text {
        Some(text) => quote! { ::core::option::Option::Some(#text.into()) },
        None => quote! { ::core::option::Option::None },
    }
}

/// A float literal; `quote!` cannot write infinities or NaN (the generator's checks refuse
/// them, so this is only a guard against a panic).
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
