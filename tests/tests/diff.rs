//! `warren diff`, one fixture pair per rule under `fixtures/diff/<rule>/{old,new}/`: the JSON
//! report of every pair is pinned, the table of a few, and whether each breaks someone.

mod common;

use warren_codegen::check_contract;
use warren_tools::diff::{Report, Version, diff};

/// The report of fixture pair `rule`, its versions shown by their fixture paths.
fn report(rule: &str) -> Report {
    let side = |side: &str| format!("fixtures/diff/{rule}/{side}/warren.yaml");
    let (old_path, new_path) = (side("old"), side("new"));
    let checked =
        |path: &str| check_contract(path).unwrap_or_else(|e| panic!("{path} must be valid:\n{e}"));
    let (old, new) = (checked(&old_path), checked(&new_path));
    diff(
        Some(Version {
            shown: &old_path,
            contract: &old.contract,
        }),
        Version {
            shown: &new_path,
            contract: &new.contract,
        },
    )
}

/// Every fixture pair, with whether it breaks someone (`warren diff` exits 1) or not (0).
const PAIRS: &[(&str, bool)] = &[
    ("additions", false),
    ("content-type", true),
    ("exchange-redeclare", true),
    ("message-removed", true),
    ("message-renamed", true),
    ("message-switched", true),
    ("queue-redeclare", true),
    ("queue-removed", true),
    ("queue-renamed", true),
    ("routing", true),
    ("rpc", true),
    // The schema pairs show `diff/schema.rs`'s verdicts, and who they break.
    ("schema-bound-tightened", true),
    ("schema-default-added", false),
    ("schema-description", false),
    ("schema-enum-narrowed", true),
    ("schema-enum-widened", true),
    ("schema-headers-added", true),
    ("schema-nested-optional", false),
    ("schema-open-property", true),
    ("schema-optional-added-closed", true),
    ("schema-optional-now", true),
    ("schema-optional-removed", true),
    ("schema-pattern-added", true),
    ("schema-property", true),
    ("schema-property-renamed", true),
    ("schema-reordered", false),
    ("schema-required-now", true),
    ("schema-retyped", true),
    ("schema-widened", true),
    ("unchanged", false),
    ("wait-queue-removed", true),
];

#[test]
fn every_pair_is_listed() {
    let on_disk = common::diff_pairs();
    let listed: Vec<&str> = PAIRS.iter().map(|(rule, _)| *rule).collect();
    assert_eq!(on_disk, listed);
}

#[test]
fn json_of_every_pair() {
    for (rule, breaking) in PAIRS {
        let report = report(rule);
        assert_eq!(
            report.is_breaking(),
            *breaking,
            "{rule}:\n{}",
            report.table()
        );
        let json = report.json();
        assert_eq!(json["breaking"], *breaking, "{rule}");
        insta::assert_json_snapshot!(format!("json-{rule}"), json);
    }
}

#[test]
fn table_of_a_few_pairs() {
    for rule in [
        "queue-redeclare",
        "routing",
        "additions",
        "unchanged",
        "message-renamed",
    ] {
        insta::assert_snapshot!(format!("table-{rule}"), report(rule).table());
    }
}

/// A contract that did not exist before: everything is an addition, nothing breaks.
#[test]
fn a_new_contract_breaks_nobody() {
    let path = "fixtures/diff/routing/new/warren.yaml";
    let new = check_contract(path).expect("valid");
    let report = diff(
        None,
        Version {
            shown: path,
            contract: &new.contract,
        },
    );
    assert!(!report.is_breaking(), "{}", report.table());
    assert_eq!(report.json()["old"], "(none)");
    assert!(
        report
            .changes
            .iter()
            .any(|c| c.summary == "queue `work` added")
    );
}

/// Names from the contract reach the terminal escaped.
#[test]
fn the_table_escapes_names() {
    let path = "fixtures/diff/unchanged/new/warren.yaml";
    let new = check_contract(path).expect("valid");
    let report = diff(
        None,
        Version {
            shown: "evil\u{1b}[2J.yaml",
            contract: &new.contract,
        },
    );
    let table = report.table();
    assert!(!table.contains('\u{1b}'), "{table}");
    assert!(table.contains("evil\\u{1b}[2J.yaml"), "{table}");
}
