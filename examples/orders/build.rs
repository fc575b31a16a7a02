//! Turns `warren.yaml` into `$OUT_DIR/orders.rs` (named after this folder), with builders
//! for the payload types, so the demo builds its orders field by field.

fn main() -> Result<(), warren_build::Error> {
    warren_build::Config::new()
        .builders(true)
        .compile("warren.yaml")?;
    Ok(())
}
