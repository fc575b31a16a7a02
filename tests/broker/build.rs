//! Generates the test contract's Rust.

fn main() -> Result<(), warren_build::Error> {
    warren_build::Config::new()
        .file_name("jobs.rs")
        .compile("contracts/warren.yaml")?;
    Ok(())
}
