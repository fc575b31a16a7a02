//! A message body, both directions, shared by publishers, workers, the RPC client and the
//! dead-letter tools (as tonic's `codec` serves its client and server): compression
//! ([`compression`]), JSON parsed once in place ([`document`]), and bounded, validated and
//! typed ([`json`]). Everything a body can do wrong is a [`Poison`]: its failure reason and a
//! bounded description.

mod compression;
mod document;
mod json;

pub(crate) use compression::{compress, decompress};
pub(crate) use document::{Document, Tree};
pub(crate) use json::{
    Poison, bounded, parsed, payload, poison, typed, validated, validated_payload,
};
