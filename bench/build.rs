//! Generates the benchmark contract's Rust.

fn main() -> Result<(), warren_build::Error> {
    warren_build::Config::new()
        .file_name("bench.rs")
        // Every consumer and rpc server but `price_order_lapin`'s: the hand-written lapin
        // code serves that one (`src/rpc.rs`), and warren only calls it.
        .consumer("consume_order")
        .consumer("retry_requeue")
        .consumer("retry_backoff")
        .consumer("retry_timing")
        .consumer("retry_timing_jitter")
        .consumer("price_order")
        .consumer("consume_backlog")
        .consumer("burn_1")
        .consumer("burn_2")
        .consumer("burn_4")
        .compile("contract/warren.yaml")?;
    // The effects scenario's: the inbox and the outbox against PostgreSQL.
    warren_build::Config::new()
        .file_name("effects.rs")
        .compile("contract/effects.yaml")?;
    Ok(())
}
