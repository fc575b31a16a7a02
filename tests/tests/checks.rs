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
