//! Turns `warren.yaml` into `$OUT_DIR/orders.rs` (named after this folder).

fn main() -> Result<(), warren_build::Error> {
    warren_build::compile("warren.yaml")?;
    Ok(())
}
