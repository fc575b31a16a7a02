//! Turns the contract into `$OUT_DIR/tasks.rs`, which src/lib.rs includes. The build reruns
//! when the contract or a schema changes, and fails with `warren validate`'s diagnostics when
//! the contract has errors.

fn main() -> Result<(), warren_build::Error> {
    // Named here, so the name src/lib.rs includes does not depend on this folder's.
    warren_build::Config::new()
        .file_name("tasks.rs")
        .compile("warren.yaml")?;
    Ok(())
}
