//! The in-memory entry point (`warren_codegen::Sources`, `check_sources`): the same stages as
//! from files, with diagnostics that name the virtual paths.

use std::path::Path;

use warren_codegen::{Error, RenderStyle, Settings, Sources, check_sources};

/// `sources` with each file under `dir` (relative to this crate) added by its path as the
/// CLI would be given it from this crate's folder.
fn add_folder(sources: &mut Sources, dir: &str) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a fixture folder")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_file() {
            let text = std::fs::read_to_string(&path).expect("a text file");
            sources.file(path, text);
        }
    }
}

/// The orders example, whose schemas reach `../common` through `schema_roots`, generates the
/// same file from memory as from disk.
#[test]
fn sources_generate_what_files_do() {
    let contract = "../examples/orders/warren.yaml";
    let from_files = warren_codegen::generate(contract).expect("the example generates");
    let mut sources = Sources::new(
        contract,
        std::fs::read_to_string(contract).expect("the contract"),
    );
    add_folder(&mut sources, "../examples/orders/schemas");
    add_folder(&mut sources, "../examples/common");
    let from_memory = check_sources(&sources)
        .and_then(|checked| checked.generate(&Settings::new()))
        .expect("the example generates from memory");
    assert_eq!(from_memory.code, from_files.code);
    assert_eq!(
        from_memory.checked.contract.schemas.definitions,
        from_files.checked.contract.schemas.definitions
    );
}

/// Relative paths may climb above the virtual working folder, as on disk.
#[test]
fn paths_may_climb_out_of_the_contract_folder() {
    let mut sources = Sources::new(
        "warren.yaml",
        "schema_roots: [../shared]\nmessages:\n  ping: { payload: ../shared/ping.json }\n",
    );
    sources.file(
        "../shared/ping.json",
        r#"{ "title": "Ping", "type": "object" }"#,
    );
    let checked = check_sources(&sources).expect("valid");
    assert!(checked.contract.schemas.definitions.contains_key("Ping"));
    // The files read are named as they were given.
    assert_eq!(
        checked.contract.inputs,
        [Path::new("warren.yaml"), Path::new("../shared/ping.json")]
    );
}

/// Problems name the files by their virtual paths, with source context, and the
/// `schema_roots` containment holds in memory as on disk.
#[test]
fn diagnostics_name_the_virtual_paths() {
    let mut sources = Sources::new(
        "orders/warren.yaml",
        "messages:\n\
         \x20 placed: { payload: schemas/placed.json }\n\
         \x20 missing: { payload: schemas/missing.json }\n\
         \x20 outside: { payload: ../secret.json }\n",
    );
    sources
        .file(
            "orders/schemas/placed.json",
            "{\n  \"title\": \"Placed\",\n  \"properties\": { \"total\": { \"$ref\": \"../../common/money.json\" } }\n}\n",
        )
        .file("common/money.json", r#"{ "type": "integer" }"#)
        .file("secret.json", r#"{ "type": "string" }"#);
    let report = match check_sources(&sources) {
        Err(Error::Invalid(problems)) => {
            let files: Vec<&Path> = problems.iter().map(|d| d.file.as_path()).collect();
            assert!(
                files.contains(&Path::new("orders/warren.yaml")),
                "{files:?}"
            );
            assert!(
                files.contains(&Path::new("orders/schemas/placed.json")),
                "{files:?}"
            );
            problems.render(RenderStyle::Plain)
        }
        other => panic!("three problems: {other:?}"),
    };
    insta::assert_snapshot!(report);
}
