//! `warren diff`: what changed between two versions of a contract, and whom it breaks.

pub(crate) mod schema;
