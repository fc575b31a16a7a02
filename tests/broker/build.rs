//! Generates the test contracts' Rust: the jobs contract, and the contract `warren import
//! asyncapi` wrote from the FastStream service in `tests/py/shop.py` (tests/faststream.rs).

fn main() -> Result<(), warren_build::Error> {
    warren_build::Config::new()
        .file_name("jobs.rs")
        .compile("contracts/warren.yaml")?;
    warren_build::Config::new()
        .file_name("shop.rs")
        .compile("contracts/shop/warren.yaml")?;
    Ok(())
}
