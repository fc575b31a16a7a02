//! Generates the Rust of every fixture contract (each `warren.yaml` under
//! `../fixtures/contracts/`, plus the orders example) into `OUT_DIR`, and a `fixtures.rs` that
//! includes each in a module of its own, so `src/lib.rs` compiles them all with warnings
//! denied. A new fixture folder is picked up without touching this crate.
//!
//! It also runs the name property (`warren_codegen::__fuzz::name_cases`): contracts whose
//! messages, publishers, consumers and placeholders take hostile names. Each that validates
//! is generated into a module of `names.rs`, compiled here in the same crate (one cargo
//! invocation for all of them); each that does not is listed with its diagnostics, which
//! `tests/names.rs` holds to what its kind expects. `WARREN_NAMES_SEED` picks other random
//! cases (docs/fuzzing.md).

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixtures = Path::new("../fixtures/contracts");
    println!("cargo:rerun-if-changed={}", fixtures.display());
    let mut contracts = vec![
        (
            "orders_example".to_owned(),
            PathBuf::from("../../examples/orders/warren.yaml"),
        ),
        (
            "invoicing_example".to_owned(),
            PathBuf::from("../../examples/invoicing/warren.yaml"),
        ),
    ];
    find_contracts(fixtures, fixtures, &mut contracts)?;
    contracts.sort();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let mut modules = String::new();
    // Each contract with its generated `topology()`, for `tests/topology.rs` to hold against
    // the generator's model.
    let mut topologies = String::from("&[\n");
    for (module, contract) in &contracts {
        warren_build::Config::new()
            .file_name(format!("{module}.rs"))
            .compile(contract)?;
        modules.push_str(&format!(
            "/// The generated code of `{}`.\n\
             pub mod {module} {{ include!(concat!(env!(\"OUT_DIR\"), \"/{module}.rs\")); }}\n",
            contract.display()
        ));
        let path = contract.canonicalize()?;
        topologies.push_str(&format!(
            "    ({:?}, {module}::topology as fn() -> ::warren_runtime::Topology),\n",
            path.display().to_string()
        ));
    }
    topologies.push(']');
    std::fs::write(out_dir.join("fixtures.rs"), modules)?;
    std::fs::write(out_dir.join("topologies.rs"), topologies)?;
    // The settings fixture with every generator setting at once; `src/lib.rs` holds the
    // `Money` that replaces the contract's. The derives are written as paths: the string
    // enum derives `Eq` and `Hash` already, and must not derive them twice.
    warren_build::Config::new()
        .file_name("settings.rs")
        .derive("std::cmp::Eq")
        .derive("::core::hash::Hash")
        .attribute("#[must_use]")
        .builders(true)
        .replace("Money", "crate::Money")
        .compile("../fixtures/settings/warren.yaml")?;
    // The orders example as a service running two of its three consumers and one of its two
    // publishers generates it; `src/lib.rs` shows the others left out, and a chosen consumer
    // without its handler a compile error.
    warren_build::Config::new()
        .file_name("chosen.rs")
        .consumer("fulfil_order")
        .consumer("bill_orders")
        .publisher("place_order")
        .compile("../../examples/orders/warren.yaml")?;
    // An rpc's two sides generated apart, as the services that serve and call it would: its
    // server alone (a consumer), and its client method alone (a publisher).
    warren_build::Config::new()
        .file_name("rpc_server.rs")
        .consumer("quote_price")
        .no_publishers()
        .compile("../../examples/orders/warren.yaml")?;
    warren_build::Config::new()
        .file_name("rpc_client.rs")
        .no_consumers()
        .publisher("quote_price")
        .compile("../../examples/orders/warren.yaml")?;
    // No consumer and no publisher: types, markers and `topology()` alone, still warning-free.
    warren_build::Config::new()
        .file_name("types_only.rs")
        .no_consumers()
        .no_publishers()
        .compile("../fixtures/settings/warren.yaml")?;
    // Builders of every shape a schema gives (defaults, maps, unions, recursion) and of
    // fields named like keywords: each is one `builder!` of the runtime's, which must expand
    // to what typify wrote.
    warren_build::Config::new()
        .file_name("shapes_built.rs")
        .builders(true)
        .compile("../fixtures/contracts/payload-shapes/warren.yaml")?;
    warren_build::Config::new()
        .file_name("names_built.rs")
        .builders(true)
        .compile("../fixtures/contracts/hostile-names/warren.yaml")?;
    name_cases(&out_dir)
}

/// Random name cases on top of the fixed ones; each adds a module to compile.
const RANDOM_NAME_CASES: usize = 16;

/// The seed of the random name cases, fixed so CI compiles the same code every run.
const DEFAULT_NAMES_SEED: u64 = 10;

fn name_cases(out_dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-env-changed=WARREN_NAMES_SEED");
    let seed = match std::env::var("WARREN_NAMES_SEED") {
        Ok(text) => text.parse()?,
        Err(_) => DEFAULT_NAMES_SEED,
    };
    let dir = out_dir.join("names");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    warren_codegen::__fuzz::write_schema_files(&dir)?;
    let (mut modules, mut table) = (String::new(), String::new());
    for (i, case) in warren_codegen::__fuzz::name_cases(seed, RANDOM_NAME_CASES)
        .into_iter()
        .enumerate()
    {
        let path = dir.join(format!("case_{i}.yaml"));
        std::fs::write(&path, &case.contract)?;
        let outcome = match warren_codegen::generate(&path) {
            Ok(generated) => {
                let module = format!("case_{i}");
                std::fs::write(dir.join(format!("{module}.rs")), generated.code)?;
                modules.push_str(&format!(
                    "/// The generated code of name case {i}.\n\
                     pub mod {module} {{ include!(concat!(env!(\"OUT_DIR\"), \"/names/{module}.rs\")); }}\n"
                ));
                "Generated".to_owned()
            }
            Err(warren_codegen::Error::Invalid(problems)) => {
                let codes: Vec<&str> = problems
                    .iter()
                    .filter(|d| d.severity == warren_codegen::Severity::Error)
                    .map(|d| d.code.as_str())
                    .collect();
                let text = problems.render(warren_codegen::RenderStyle::Plain);
                format!("Refused {{ codes: &{codes:?}, report: {text:?} }}")
            }
            Err(other) => format!("Failed({:?})", other.to_string()),
        };
        table.push_str(&format!(
            "NameCase {{ kind: {:?}, contract: {:?}, outcome: NameOutcome::{outcome} }},\n",
            case.kind.as_str(),
            case.contract
        ));
    }
    let text = format!(
        "/// The seed of the random cases.\npub const NAME_SEED: u64 = {seed};\n\
         /// Every name case and what became of it.\npub const NAME_CASES: &[NameCase] = &[\n{table}];\n\
         /// The generated code of each case that validated.\npub mod names {{\n{modules}}}\n"
    );
    std::fs::write(out_dir.join("names.rs"), text)?;
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
