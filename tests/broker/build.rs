//! Generates the test contracts' Rust: the jobs contract, the contract `warren import
//! asyncapi` wrote from the FastStream service in `tests/py/shop.py` (tests/faststream.rs),
//! the contract of queues amqp-contract declared (tests/shared_queues.rs), and the ledger whose
//! handlers write through the inbox (tests/inbox.rs, tests/kill.rs).

fn main() -> Result<(), warren_build::Error> {
    warren_build::Config::new()
        .file_name("jobs.rs")
        .compile("contracts/warren.yaml")?;
    warren_build::Config::new()
        .file_name("shop.rs")
        .compile("contracts/shop/warren.yaml")?;
    warren_build::Config::new()
        .file_name("shared.rs")
        .compile("contracts/shared/warren.yaml")?;
    warren_build::Config::new()
        .file_name("ledger.rs")
        .compile("contracts/ledger/warren.yaml")?;
    Ok(())
}
