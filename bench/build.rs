//! Generates the benchmark contract's Rust.

fn main() -> Result<(), warren_build::Error> {
    warren_build::Config::new()
        .file_name("bench.rs")
        .compile("contract/warren.yaml")?;
    Ok(())
}
