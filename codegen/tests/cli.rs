//! The `warren` binary: exit codes and what it prints.

use std::path::Path;
use std::process::{Command, Output};

fn warren(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(args)
        // Paths in messages are shown as given, relative to the workspace root.
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("the warren binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn validate_accepts_the_example_contract() {
    let output = warren(&["validate", "examples/orders/warren.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "examples/orders/warren.yaml: valid (2 exchanges, 9 queues, 2 messages, 2 publishers, 3 consumers)\n"
    );
}

#[test]
fn validate_exits_1_with_every_problem() {
    let output = warren(&[
        "validate",
        "--color",
        "never",
        "tests/fixtures/checks/unknown-names.yaml",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(text.ends_with("9 errors, 0 warnings\n"), "{text}");
    assert!(
        text.contains("tests/fixtures/checks/unknown-names.yaml:16:20"),
        "{text}"
    );
}

#[test]
fn validate_shows_warnings_and_still_succeeds() {
    let output = warren(&["validate", "tests/fixtures/checks/warnings.yaml"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stderr(&output).contains("0 errors, 5 warnings"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn unreadable_contract_and_bad_usage_exit_2() {
    let missing = warren(&["validate", "no/such/warren.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(
        stderr(&missing),
        "error: cannot read contract `no/such/warren.yaml`: No such file or directory (os error 2)\n"
    );
    assert_eq!(warren(&["validate"]).status.code(), Some(2));
    assert_eq!(warren(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn schema_prints_the_checked_in_format_schema() {
    let output = warren(&["schema"]);
    assert_eq!(output.status.code(), Some(0));
    let checked_in = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/warren.schema.json"),
    )
    .expect("schemas/warren.schema.json is checked in");
    assert_eq!(String::from_utf8_lossy(&output.stdout), checked_in);
}
