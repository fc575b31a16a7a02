//! Every contract check, pinned: one fixture per check under `fixtures/checks/`, and the
//! rendered diagnostics (or warnings of a valid contract) as its snapshot.

use std::path::Path;

use warren_codegen::{Error, RenderStyle, check_contract};

/// Runs the front end on `path` and renders what a user would see.
fn report(path: &Path) -> String {
    match check_contract(path) {
        Ok(checked) => format!("valid\n{}", checked.warnings.render(RenderStyle::Plain)),
        Err(Error::Invalid(problems)) => problems.render(RenderStyle::Plain),
        Err(other) => format!("{other}\n"),
    }
}

#[test]
fn check_fixtures() {
    insta::glob!("../fixtures/checks", "*.yaml", |path| {
        let relative = path
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .expect("fixtures live in this crate");
        insta::assert_snapshot!(report(relative));
    });
}

#[test]
fn missing_contract_is_an_io_error() {
    let error = check_contract("fixtures/checks/no-such-contract.yaml").unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "cannot read contract `fixtures/checks/no-such-contract.yaml`: No such file or directory (os error 2)"
    );
}

/// Every diagnostic code of the contract checks is reported by at least one fixture, so each
/// check's output is pinned. (`bad-setting` is about generator settings, not a contract:
/// `tests/settings.rs` pins it; the codes of several contracts checked as one system are
/// pinned by `tests/system.rs`.)
/// Codes no single contract reports: generator settings, and the system checks.
const NOT_CONTRACT_CODES: &[warren_codegen::Code] = &[
    warren_codegen::Code::BadSetting,
    warren_codegen::Code::UnconsumedInSystem,
    warren_codegen::Code::UnfedConsumer,
    warren_codegen::Code::SchemaMismatch,
    warren_codegen::Code::ConflictingDeclaration,
    warren_codegen::Code::RpcMismatch,
];

#[test]
fn every_code_has_a_fixture() {
    let mut reported = std::collections::BTreeSet::new();
    let fixtures = std::fs::read_dir("fixtures/checks").expect("the fixtures folder");
    for entry in fixtures {
        let path = entry.expect("a fixture").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let problems = match check_contract(&path) {
            Ok(checked) => checked.warnings,
            Err(Error::Invalid(problems)) => problems,
            Err(other) => panic!("{}: {other}", path.display()),
        };
        reported.extend(problems.iter().map(|d| d.code));
    }
    let missing: Vec<&str> = warren_codegen::Code::ALL
        .iter()
        .filter(|code| !reported.contains(*code) && !NOT_CONTRACT_CODES.contains(*code))
        .map(|code| code.as_str())
        .collect();
    assert!(missing.is_empty(), "codes without a fixture: {missing:?}");
}

/// A queue named `orders.retry` and the `retry` of queue `orders` are different nodes: each
/// diagnostic points at its own line, and their paths read differently.
#[test]
fn dotted_names_are_one_key() {
    use warren_codegen::diagnostics::{Place, YamlPath};
    let Err(Error::Invalid(problems)) = check_contract("fixtures/checks/dotted-names.yaml") else {
        panic!("the fixture has errors");
    };
    let places: Vec<(String, usize)> = problems
        .iter()
        .map(|d| match &d.place {
            Place::Yaml {
                path,
                span: Some(span),
            } => (path.to_string(), span.line),
            other => panic!("a YAML place expected, got {other:?}"),
        })
        .collect();
    assert_eq!(
        places,
        [
            (r#"queues["orders.retry"].delivery_limit"#.to_owned(), 10),
            ("queues.orders.retry.exhausted".to_owned(), 16),
        ]
    );
    let queue = |name: &str| YamlPath::root().key("queues").key(name);
    assert_ne!(queue("orders.retry"), queue("orders").key("retry"));
}
