//! Turns `warren.yaml` into `$OUT_DIR/orders.rs` (named after this folder), with builders
//! for the payload types besides each type's `new`, so the demo and the test kit's docs show
//! both ways of building a payload.

fn main() -> Result<(), warren_build::Error> {
    warren_build::Config::new()
        .builders(true)
        .compile("warren.yaml")?;
    Ok(())
}
