//! `topology()`: the contract's topology, written from the model itself (`warren-model`'s
//! `ToTokens`), so generated code and the generator cannot disagree.

use proc_macro2::TokenStream;
use quote::quote;

use crate::contract::Contract;

/// `pub fn topology()`.
pub(super) fn emit(contract: &Contract) -> TokenStream {
    let topology = &contract.topology;
    quote! {
        /// Every exchange, queue (with its dead-letter target and retry policy, each declared
        /// queue followed by its wait queues, shortest delay first) and binding of the
        /// contract.
        pub fn topology() -> ::warren_runtime::Topology {
            // The model's tokens name its items unqualified.
            use ::warren_runtime::model::*;
            #topology
        }
    }
}
