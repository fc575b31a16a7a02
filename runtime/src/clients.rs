//! What every generated `Publishers` and `RpcClients` has besides its contract's methods,
//! written once here: how one is made, given options, and (for publishers) pointed at another
//! sink. The generator declares the struct, documented for its contract, and invokes
//! [`publishers!`](crate::__warren_publishers) or [`rpc_clients!`](crate::__warren_rpc_clients)
//! beside it. Each publisher's method is one [`publisher!`](crate::__warren_publisher): the
//! same signature and body for every publisher but for its names, types and publication.

/// `new`, `with` and `through` of a generated `pub struct $name<S = Publisher> { sink: S,
/// options: PublishOptions }`. For generated code alone
/// (`warren_runtime::codegen::publishers`).
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_publishers {
    ($name:ident) => {
        impl $name {
            /// Publishes through `publisher`, with a fresh message id and the current time on
            /// every message.
            pub fn new(publisher: $crate::Publisher) -> Self {
                Self {
                    sink: publisher,
                    options: $crate::PublishOptions::default(),
                }
            }
        }
        impl<S: $crate::Sink + ::core::clone::Clone> $name<S> {
            /// The same publishers, setting `options` (a message id to deduplicate on, a
            /// timestamp, a priority…) on what they publish, added to those they had.
            pub fn with(&self, options: $crate::PublishOptions) -> Self {
                Self {
                    sink: ::core::clone::Clone::clone(&self.sink),
                    options: self.options.clone().overridden_by(options),
                }
            }
        }
        impl<S: $crate::Sink> $name<S> {
            /// The same publishers, with their options, sending through `sink` instead: an
            /// outbox writer on the caller's transaction.
            pub fn through<T: $crate::Sink>(&self, sink: T) -> $name<T> {
                $name {
                    sink,
                    options: self.options.clone(),
                }
            }
        }
    };
}

/// One publisher's method of a generated `Publishers<S>`, invoked inside its `impl<S: Sink>`:
/// `name(placeholders): marker, Payload = publication`, with `, Headers` after the payload
/// type when the message has a headers schema, and its docs before. The method takes a value
/// for each routing key placeholder, the payload (and headers), and returns the publish's
/// future, which waits for the broker's confirm. For generated code alone
/// (`warren_runtime::codegen::publisher`): paths resolve where it is invoked.
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_publisher {
    (
        $(#[$attr:meta])*
        $name:ident ( $($placeholder:ident),* ) : $marker:path, $payload:ty $(, $headers:ty)?
            = $publication:expr
    ) => {
        $(#[$attr])*
        // Not an `async fn`: the runtime's `publish` is the one state machine of every method.
        // The lifetime is named, as a crate of edition 2021 captures no other in the future.
        pub fn $name<'a>(
            &'a self,
            $( $placeholder: &'a str, )*
            payload: &'a $payload,
            $( headers: &'a $headers, )?
        ) -> impl ::core::future::Future<
            Output = ::core::result::Result<(), $crate::PublishError>,
        > + 'a {
            // The model's tokens name its items unqualified.
            use $crate::model::*;
            $crate::codegen::publish(
                &self.sink,
                $marker,
                $publication,
                [$( $placeholder ),*],
                payload,
                $crate::__warren_publisher!(@headers $( headers $headers )?),
                &self.options,
            )
        }
    };
    // The parameter's name comes from the caller's expansion, as a local's must.
    (@headers $parameter:ident $headers:ty) => { $parameter };
    (@headers) => { &$crate::NoHeaders {} };
}

/// `new`, `with` and `client` of a generated `pub struct $name { client: RpcClient, options:
/// CallOptions }`. For generated code alone (`warren_runtime::codegen::rpc_clients`).
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_rpc_clients {
    ($name:ident) => {
        impl $name {
            /// Calls through `client`, with each rpc's timeout from the contract.
            pub fn new(client: $crate::RpcClient) -> Self {
                Self {
                    client,
                    options: $crate::CallOptions::default(),
                }
            }
            /// The same clients, calling with `options` (a timeout instead of the
            /// contract's, a message id, a priority) added to those they had.
            pub fn with(&self, options: $crate::CallOptions) -> Self {
                Self {
                    client: self.client.clone(),
                    options: self.options.clone().overridden_by(options),
                }
            }
            /// The client they call through (its late replies, say).
            pub fn client(&self) -> &$crate::RpcClient {
                &self.client
            }
        }
    };
}
