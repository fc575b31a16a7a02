//! The runtime warren-generated code runs on: it declares the topology, publishes with
//! confirms, and runs workers with the retry and dead-letter model of the contract.
//!
//! Empty for now: the contract front end (`warren-codegen`) comes first.
