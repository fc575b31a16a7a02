//! Turns `warren.yaml` into `$OUT_DIR/invoicing.rs`. The contract imports the orders contract;
//! the orders team's crate already holds its generated code, so the types read from its
//! schemas are taken from there (`warren_example_orders::types::OrderPlaced`) rather than
//! generated again: one message, one Rust type.

fn main() -> Result<(), warren_build::Error> {
    warren_build::Config::new()
        .extern_contract("orders", "::warren_example_orders")
        .compile("warren.yaml")?;
    Ok(())
}
