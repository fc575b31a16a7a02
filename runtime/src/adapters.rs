//! The adapters from a generated file's handler traits to the runtime's, written once here.
//!
//! A generated trait (`consumers::BillOrders`) cannot implement the runtime's `Handler<M>`
//! for every type that implements it (the orphan rule), so each consumer has a wrapper type
//! that does, forwarding to the trait. Every wrapper is the same dozen lines but for the
//! trait, the runtime trait and the message: the generator names those three in one entry of
//! [`adapters!`](crate::__warren_adapters), which expands to the wrappers.

/// One wrapper per entry, `Name: RuntimeTrait<Target>`: `pub(super) struct Name<__H>(__H)`,
/// implementing `RuntimeTrait<Target>` for every `__H` implementing the generated trait
/// `super::consumers::Name` by calling it. `RuntimeTrait` is `Handler`, `BatchHandler`,
/// `DeadLetterHandler`, `InboxHandler` or `InboxBatchHandler` of a message marker,
/// `RpcHandler` of an rpc marker, `SeveralHandler` of a consumer of several messages' enum,
/// with its variants' methods (`Name: SeveralHandler<Enum> { Variant => method, .. }`), or
/// `SeveralDeadLetterHandler` of a dead-letter consumer of several's enum.
///
/// For generated code alone (`warren_runtime::codegen::adapters`): `super::consumers` is the
/// generated file's module, as paths in a `macro_rules!` expansion resolve where it is
/// invoked.
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_adapters {
    ($( $name:ident : $runtime_trait:ident < $target:ty > $({ $($arms:tt)* })? ),* $(,)?) => {
        $(
            // The generic is the generator's own name, which no consumer's trait can be (a
            // consumer `h` would otherwise make `H<H>`).
            pub(super) struct $name<__H>(pub(super) __H);
            $crate::__warren_adapters!(@impl $runtime_trait $name $target $({ $($arms)* })?);
        )*
    };
    (@impl SeveralDeadLetterHandler $name:ident $message:ty) => {
        impl<__H: super::consumers::$name> $crate::codegen::SeveralDeadLetterHandler<$message>
            for $name<__H>
        {
            fn handle(
                &self,
                failure: $crate::FailureContext,
                message: $message,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<(), $crate::HandlerError>,
            > + ::core::marker::Send {
                super::consumers::$name::handle(&self.0, failure, message)
            }
        }
    };
    (@impl SeveralHandler $name:ident $message:ty { $( $variant:ident => $method:ident ),* $(,)? }) => {
        impl<__H: super::consumers::$name> $crate::codegen::SeveralHandler<$message> for $name<__H> {
            fn handle(
                &self,
                message: $message,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<(), $crate::HandlerError>,
            > + ::core::marker::Send {
                // An alias names the variants in patterns, whatever path names the enum.
                type __Message = $message;
                async move {
                    match message {
                        $( __Message::$variant(delivery) => {
                            super::consumers::$name::$method(&self.0, delivery).await
                        } )*
                    }
                }
            }
        }
    };
    (@impl Handler $name:ident $message:ty) => {
        impl<__H: super::consumers::$name> $crate::codegen::Handler<$message> for $name<__H> {
            fn handle(
                &self,
                delivery: $crate::codegen::DeliveryOf<$message>,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<(), $crate::HandlerError>,
            > + ::core::marker::Send {
                super::consumers::$name::handle(&self.0, delivery)
            }
        }
    };
    (@impl BatchHandler $name:ident $message:ty) => {
        impl<__H: super::consumers::$name> $crate::codegen::BatchHandler<$message> for $name<__H> {
            fn handle_batch(
                &self,
                batch: ::std::vec::Vec<$crate::codegen::DeliveryOf<$message>>,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<(), $crate::HandlerError>,
            > + ::core::marker::Send {
                super::consumers::$name::handle_batch(&self.0, batch)
            }
        }
    };
    (@impl DeadLetterHandler $name:ident $message:ty) => {
        impl<__H: super::consumers::$name> $crate::codegen::DeadLetterHandler<$message>
            for $name<__H>
        {
            fn handle(
                &self,
                dead_letter: $crate::DeadLetter<
                    <$message as $crate::Message>::Payload,
                    <$message as $crate::Message>::Headers,
                >,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<(), $crate::HandlerError>,
            > + ::core::marker::Send {
                super::consumers::$name::handle(&self.0, dead_letter)
            }
        }
    };
    (@impl InboxHandler $name:ident $message:ty) => {
        impl<__H: super::consumers::$name> $crate::codegen::InboxHandler<$message> for $name<__H> {
            type Database = <__H as super::consumers::$name>::Database;
            fn inbox(&self) -> $crate::inbox::Inbox<Self::Database> {
                super::consumers::$name::inbox(&self.0)
            }
            fn handle<'a>(
                &'a self,
                delivery: $crate::codegen::DeliveryOf<$message>,
                transaction: &'a mut $crate::inbox::InboxTransaction<Self::Database>,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<(), $crate::HandlerError>,
            > + ::core::marker::Send + 'a {
                super::consumers::$name::handle(&self.0, delivery, transaction)
            }
        }
    };
    (@impl InboxBatchHandler $name:ident $message:ty) => {
        impl<__H: super::consumers::$name> $crate::codegen::InboxBatchHandler<$message>
            for $name<__H>
        {
            type Database = <__H as super::consumers::$name>::Database;
            fn inbox(&self) -> $crate::inbox::Inbox<Self::Database> {
                super::consumers::$name::inbox(&self.0)
            }
            fn handle_batch<'a>(
                &'a self,
                batch: ::std::vec::Vec<$crate::codegen::DeliveryOf<$message>>,
                transaction: &'a mut $crate::inbox::InboxTransaction<Self::Database>,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<(), $crate::HandlerError>,
            > + ::core::marker::Send + 'a {
                super::consumers::$name::handle_batch(&self.0, batch, transaction)
            }
        }
    };
    (@impl RpcHandler $name:ident $rpc:ty) => {
        impl<__H: super::consumers::$name> $crate::codegen::RpcHandler<$rpc> for $name<__H> {
            fn handle(
                &self,
                request: $crate::codegen::DeliveryOf<<$rpc as $crate::codegen::Operation>::Request>,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<
                    <<$rpc as $crate::codegen::Operation>::Response as $crate::Message>::Payload,
                    $crate::RpcHandlerError<<$rpc as $crate::codegen::Operation>::Error>,
                >,
            > + ::core::marker::Send {
                super::consumers::$name::handle(&self.0, request)
            }
        }
    };
}

/// `consumers::register::$function`, registering the handler of a consumer that takes one
/// delivery at a time, alone: `function: Trait, Marker = spec`, its docs before. The
/// handler is wrapped in its adapter (`__adapters::Trait`, [`adapters!`](crate::__warren_adapters))
/// and erased (`Erased`) here, so that the consumer's code for its message is compiled with
/// the contract, once, through a non-generic function, rather than in each binary with the
/// handler's type.
///
/// For generated code alone (`warren_runtime::codegen::register`): it is invoked in the
/// generated `consumers::register` module, and names its siblings from there.
#[doc(hidden)]
#[macro_export]
macro_rules! __warren_register {
    ($(#[$attr:meta])* $function:ident : $handler_trait:ident, $marker:ident = $spec:expr) => {
        $(#[$attr])*
        pub fn $function(worker: &mut $crate::Worker, handler: impl super::$handler_trait) {
            // The model's tokens name its items unqualified.
            use $crate::model::*;
            fn erased(
                worker: &mut $crate::Worker,
                handler: $crate::codegen::Erased<super::super::messages::$marker>,
            ) {
                $crate::codegen::add(worker, super::super::messages::$marker, $spec, handler);
            }
            erased(
                worker,
                $crate::codegen::Erased::new(super::super::__adapters::$handler_trait(handler)),
            );
        }
    };
}

/// The delivery of message `M`: its payload and headers types.
pub type DeliveryOf<M> =
    crate::Delivery<<M as crate::Message>::Payload, <M as crate::Message>::Headers>;
