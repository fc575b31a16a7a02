//! Generates the Rust of every fixture contract (each `warren.yaml` under
//! `../fixtures/contracts/`, plus the orders example) into `OUT_DIR`, and a `fixtures.rs` that
//! includes each in a module of its own, so `src/lib.rs` compiles them all with warnings
//! denied. A new fixture folder is picked up without touching this crate.

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixtures = Path::new("../fixtures/contracts");
    println!("cargo:rerun-if-changed={}", fixtures.display());
    let mut contracts = vec![(
        "orders_example".to_owned(),
        PathBuf::from("../../examples/orders/warren.yaml"),
    )];
    find_contracts(fixtures, fixtures, &mut contracts)?;
    contracts.sort();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut modules = String::new();
    for (module, contract) in &contracts {
        warren_build::Config::new()
            .file_name(format!("{module}.rs"))
            .compile(contract)?;
        modules.push_str(&format!(
            "pub mod {module} {{ include!(concat!(env!(\"OUT_DIR\"), \"/{module}.rs\")); }}\n"
        ));
    }
    std::fs::write(out_dir.join("fixtures.rs"), modules)?;
    Ok(())
}

/// Every `warren.yaml` below `dir`, named after its folder relative to `root`.
fn find_contracts(
    root: &Path,
    dir: &Path,
    out: &mut Vec<(String, PathBuf)>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            find_contracts(root, &path, out)?;
        } else if path.file_name().is_some_and(|n| n == "warren.yaml") {
            let folder = path.parent().and_then(|p| p.strip_prefix(root).ok());
            let module: String = folder
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            out.push((module, path));
        }
    }
    Ok(())
}
