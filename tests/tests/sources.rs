//! The in-memory entry point (`warren_codegen::Sources`, `check_sources`): the same stages as
//! from files, with diagnostics that name the virtual paths.

use std::path::{Path, PathBuf};

use warren_codegen::{Code, Error, RenderStyle, Settings, Severity, Sources, check_sources};

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
    let mut files = Vec::new();
    files_below(Path::new("../examples/orders/schemas"), &mut files);
    files_below(Path::new("../examples/common"), &mut files);
    for (path, text) in files {
        sources.file(path, text);
    }
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

/// Every file below `dir`, recursively, by its path from this crate's folder.
fn files_below(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a fixture folder")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_below(&path, out);
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path, text));
        }
    }
}

/// What a user would see from checking and generating.
fn outcome(result: Result<warren_codegen::Generated, Error>) -> String {
    match result {
        Ok(generated) => format!(
            "{}{}",
            generated.checked.warnings.render(RenderStyle::Plain),
            generated.code
        ),
        Err(Error::Invalid(problems)) => problems.render(RenderStyle::Plain),
        Err(other) => other.to_string(),
    }
}

/// Fixtures about what only a disk holds: a symlink out of the schema roots (memory has no
/// links), a file that is not UTF-8 (sources are text), and files outside the project folder
/// (in memory nothing but the sources exists, so nothing outside them can be reached).
const DISK_ONLY: &[&str] = &[
    "fixtures/checks/outside-project.yaml",
    "fixtures/checks/schema-refs.yaml",
    "fixtures/checks/unreadable-schema.yaml",
];

/// Every other fixture, valid or not, checks and generates the same from memory as from
/// files: the same diagnostics at the same places, or the same code.
#[test]
fn every_fixture_gives_the_same_outcome_from_memory() {
    let mut files = Vec::new();
    files_below(Path::new("fixtures"), &mut files);
    let contracts = files.iter().filter(|(path, _)| {
        let name = path.to_string_lossy();
        (name.starts_with("fixtures/checks/")
            && path.parent() == Some(Path::new("fixtures/checks")))
            || (!name.starts_with("fixtures/checks/") && path.ends_with("warren.yaml"))
    });
    let (mut compared, mut differ) = (0, Vec::new());
    for (contract, text) in contracts {
        if contract.extension().is_none_or(|e| e != "yaml")
            || DISK_ONLY.contains(&contract.to_string_lossy().as_ref())
        {
            continue;
        }
        let mut sources = Sources::new(contract, text.clone());
        for (path, text) in &files {
            sources.file(path, text.clone());
        }
        let from_files = outcome(warren_codegen::generate(contract));
        let from_memory =
            outcome(check_sources(&sources).and_then(|checked| checked.generate(&Settings::new())));
        if from_memory != from_files {
            differ.push(contract.display().to_string());
        }
        compared += 1;
    }
    assert!(differ.is_empty(), "{differ:?}");
    assert!(compared > 30, "{compared} fixtures");
}

/// What a refusal says, without the paths (shown differently from disk and from memory): each
/// error's code and whether it says the file is missing or outside the schema roots.
fn refusal(result: Result<warren_codegen::Checked, Error>) -> Vec<(Code, bool, bool)> {
    match result {
        Err(Error::Invalid(problems)) => problems
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| {
                (
                    d.code,
                    d.message.contains("does not exist"),
                    d.message.contains("outside the schema roots"),
                )
            })
            .collect(),
        other => panic!("refused: {other:?}"),
    }
}

/// Checks the contract `contract` among `files` from memory, then the same layout from disk
/// (relative paths under `<tmp>/work`), and asserts both refuse it alike; returns the
/// refusal.
fn refused_alike(
    tmp: &Path,
    contract: (&str, &str),
    files: &[(&str, &str)],
) -> Vec<(Code, bool, bool)> {
    let mut sources = Sources::new(contract.0, contract.1);
    for (path, text) in files {
        sources.file(*path, *text);
    }
    let from_memory = refusal(check_sources(&sources));
    let work = tmp.join("work");
    for (path, text) in std::iter::once(&contract).chain(files) {
        let path = work.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("a folder");
        std::fs::write(&path, text).expect("written");
    }
    let from_disk = refusal(warren_codegen::check_contract(work.join(contract.0)));
    assert_eq!(from_memory, from_disk);
    assert!(!from_memory.is_empty());
    from_memory
}

const PING: &str = r#"{ "title": "Ping", "type": "object" }"#;

/// A `..` that climbs above the folders the sources name reaches nothing, as on disk: the
/// working folder is not the root.
#[test]
fn a_climb_past_the_sources_finds_nothing() {
    let tmp = tempfile::tempdir().expect("a folder");
    let refused = refused_alike(
        tmp.path(),
        (
            "warren.yaml",
            "messages:\n  ping: { payload: ../ping.json }\n",
        ),
        &[("ping.json", PING)],
    );
    assert_eq!(refused, [(Code::BadSchemaFile, true, false)]);
    let tmp = tempfile::tempdir().expect("a folder");
    let refused = refused_alike(
        tmp.path(),
        (
            "orders/warren.yaml",
            "messages:\n  ping: { payload: ../../../../ping.json }\n",
        ),
        &[("../ping.json", PING)],
    );
    assert_eq!(refused, [(Code::BadSchemaFile, true, false)]);
}

/// An absolute `$ref` to a file outside the contract's folder is outside the schema roots,
/// from memory as from disk.
#[test]
fn an_absolute_path_is_outside_the_roots() {
    let tmp = tempfile::tempdir().expect("a folder");
    let outside = tmp.path().join("etc/x.json");
    let outside = outside.to_str().expect("a UTF-8 path");
    let ping = format!(r#"{{ "title": "Ping", "$ref": "{outside}" }}"#);
    let refused = refused_alike(
        tmp.path(),
        ("warren.yaml", "messages:\n  ping: { payload: ping.json }\n"),
        &[("ping.json", &ping), (outside, PING)],
    );
    assert_eq!(refused, [(Code::BadRef, false, true)]);
    // Named from the root of the virtual file system, as the reviewer's case.
    let mut sources = Sources::new("warren.yaml", "messages:\n  ping: { payload: ping.json }\n");
    sources
        .file("ping.json", r#"{ "title": "Ping", "$ref": "/etc/x.json" }"#)
        .file("/etc/x.json", PING);
    assert_eq!(
        refusal(check_sources(&sources)),
        [(Code::BadRef, false, true)]
    );
}

/// A source path through a folder named like the working folder's placeholder is a file of
/// its own, not the file of the same name in the working folder.
#[test]
fn a_source_path_through_the_placeholder_is_another_file() {
    let tmp = tempfile::tempdir().expect("a folder");
    let refused = refused_alike(
        tmp.path(),
        (
            "warren.yaml",
            "messages:\n  ping: { payload: x.json }\n  pong: { payload: ../<memory>/x.json }\n",
        ),
        &[("x.json", PING), ("../<memory>/x.json", PING)],
    );
    assert_eq!(refused, [(Code::BadSchemaFile, false, true)]);
}
