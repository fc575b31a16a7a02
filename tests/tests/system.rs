//! Several contracts checked as one system: one folder per case under `fixtures/system/`,
//! each holding a contract per team in its own subfolder, and the rendered diagnostics (or
//! the warnings of a valid system) as its snapshot.

use std::path::Path;

use warren_codegen::{Code, Error, RenderStyle, check_system};

/// Checks the contracts under `folder` as one system and renders what a user would see.
fn report(folder: &Path) -> String {
    match check_system([folder]) {
        Ok(system) => format!(
            "valid: {} contracts\n{}",
            system.contracts.len(),
            system.warnings.render(RenderStyle::Plain)
        ),
        Err(Error::Invalid(problems)) => problems.render(RenderStyle::Plain),
        Err(other) => format!("{other}\n"),
    }
}

/// The codes a case reports.
fn codes(folder: &str) -> Vec<Code> {
    let problems = match check_system([Path::new("fixtures/system").join(folder)]) {
        Ok(system) => system.warnings,
        Err(Error::Invalid(problems)) => problems,
        Err(other) => panic!("{folder}: {other}"),
    };
    let mut codes: Vec<Code> = problems.iter().map(|d| d.code).collect();
    codes.dedup();
    codes
}

#[test]
fn system_fixtures() {
    let mut cases: Vec<_> = std::fs::read_dir("fixtures/system")
        .expect("the fixtures folder")
        .map(|entry| entry.expect("a case").path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "{cases:?}");
    for case in cases {
        let name = case
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        insta::assert_snapshot!(name.clone(), report(&case));
    }
}

/// Each rule fires on its own case and stays silent where the contracts agree.
#[test]
fn each_rule_fires_on_its_case_only() {
    assert_eq!(codes("agree"), []);
    assert_eq!(
        codes("unroutable"),
        [Code::UnroutablePublisher, Code::UnconsumedInSystem]
    );
    assert_eq!(codes("unfed"), [Code::UnfedConsumer]);
    assert_eq!(codes("schema-mismatch"), [Code::SchemaMismatch]);
    assert_eq!(codes("conflicting"), [Code::ConflictingDeclaration]);
    assert_eq!(codes("rpc-agree"), []);
    assert_eq!(codes("rpc-mismatch"), [Code::RpcMismatch]);
    assert_eq!(codes("rpc-unfed"), [Code::UnfedConsumer]);
    assert_eq!(
        codes("rpc-wide-binding"),
        [Code::SchemaMismatch, Code::RpcMismatch, Code::UnfedConsumer]
    );
}

/// Every diagnostic of the system rules names both contracts, with their lines. (Not
/// `rpc-unfed`: an rpc server no contract calls, on the default exchange, involves its own
/// contract alone.)
#[test]
fn system_diagnostics_name_both_files() {
    for case in [
        "unroutable",
        "schema-mismatch",
        "conflicting",
        "unfed",
        "rpc-mismatch",
        "rpc-wide-binding",
    ] {
        let problems = match check_system([Path::new("fixtures/system").join(case)]) {
            Ok(system) => system.warnings,
            Err(Error::Invalid(problems)) => problems,
            Err(other) => panic!("{case}: {other}"),
        };
        for diagnostic in problems.iter() {
            if diagnostic.code == Code::UnconsumedInSystem {
                // No other contract declares what it reaches: only its own file is involved.
                continue;
            }
            let files: std::collections::BTreeSet<_> = std::iter::once(&diagnostic.file)
                .chain(diagnostic.related.iter().map(|r| &r.file))
                .collect();
            assert!(files.len() >= 2, "{case}: {diagnostic}");
            assert!(
                diagnostic.to_string().contains("also at fixtures/system/"),
                "{diagnostic}"
            );
        }
    }
}

/// One contract, named alone or as the only one in a folder, is checked as before: a
/// publisher reaching none of its queues is refused, as `check_contract` refuses it.
#[test]
fn one_contract_is_checked_as_before() {
    let alone = warren_codegen::check_contract("fixtures/system/agree/orders/warren.yaml")
        .expect_err("the publisher reaches no queue of its own contract");
    let Error::Invalid(alone) = alone else {
        panic!("{alone}")
    };
    let Err(Error::Invalid(in_folder)) = check_system(["fixtures/system/agree/orders"]) else {
        panic!("the same error in a folder of one")
    };
    assert_eq!(alone.to_string(), in_folder.to_string());
    assert_eq!(
        alone.iter().next().map(|d| d.code),
        Some(Code::UnroutablePublisher)
    );
}

/// Naming a contract twice, or once directly and once through its folder, checks it once.
#[test]
fn a_contract_named_twice_is_one_contract() {
    let system = check_system([
        "fixtures/system/agree",
        "fixtures/system/agree/billing/warren.yaml",
        "fixtures/system/agree/./orders/warren.yaml",
    ])
    .expect("valid");
    assert_eq!(system.contracts.len(), 2);
}

/// Every caller's team keeps its copy of an rpc, and one copy drifted: it is reported once
/// (against the first copy), not once per other copy.
#[test]
fn a_drifted_copy_of_an_rpc_is_reported_once() {
    let root = tempfile::tempdir().expect("a temporary folder");
    let copy = |from: &str, to: &str| {
        let (from, to) = (
            Path::new("fixtures/system").join(from),
            root.path().join(to),
        );
        std::fs::create_dir_all(&to).expect("a folder");
        for name in [
            "warren.yaml",
            "quote_request.json",
            "quote.json",
            "not_found.json",
        ] {
            std::fs::copy(from.join(name), to.join(name)).expect("a copy");
        }
    };
    for team in 0..5 {
        copy("rpc-agree/pricing", &format!("team{team}"));
    }
    copy("rpc-mismatch/shop", "team2-drifted");
    let Err(Error::Invalid(problems)) = check_system([root.path()]) else {
        panic!("the drifted copy disagrees")
    };
    let found: Vec<_> = problems
        .iter()
        .map(|d| (d.code, d.file.display().to_string()))
        .collect();
    assert_eq!(
        found,
        [(
            Code::RpcMismatch,
            root.path()
                .join("team2-drifted/warren.yaml")
                .display()
                .to_string()
        )],
        "{problems}"
    );
}

/// A hostile tree: a symlink loop, a hidden folder and a `target/` holding contracts, a
/// dangling link, and a folder nested deeper than the walk goes. The walk ends, and finds
/// only the contracts it should.
#[cfg(unix)]
#[test]
fn the_walk_is_bounded_and_skips_what_it_should() {
    use std::os::unix::fs::symlink;
    let root = tempfile::tempdir().expect("a temporary folder");
    let agree = std::fs::canonicalize("fixtures/system/agree").expect("the fixture");
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).expect("a folder");
        for name in ["warren.yaml", "order_placed.json"] {
            std::fs::copy(from.join(name), to.join(name)).expect("a copy");
        }
    };
    copy(&agree.join("orders"), &root.path().join("a/orders"));
    copy(&agree.join("billing"), &root.path().join("b/billing"));
    // Contracts where the walk must not look.
    copy(&agree.join("orders"), &root.path().join(".git/orders"));
    copy(&agree.join("orders"), &root.path().join("target/orders"));
    let mut deep = root.path().join("c");
    for level in 0..20 {
        deep.push(format!("{level}"));
    }
    copy(&agree.join("orders"), &deep);
    // A loop back to the root, and a link to nowhere.
    symlink(root.path(), root.path().join("a/loop")).expect("a link");
    symlink(root.path().join("nowhere"), root.path().join("b/dangling")).expect("a link");
    let system = check_system([root.path()]).expect("the two contracts agree");
    let sources: Vec<_> = system
        .contracts
        .iter()
        .map(|c| {
            c.contract
                .source
                .strip_prefix(root.path())
                .expect("under the root")
                .to_owned()
        })
        .collect();
    assert_eq!(
        sources,
        [
            Path::new("a/orders/warren.yaml"),
            Path::new("b/billing/warren.yaml")
        ]
    );
}

/// A folder without a contract is an error that says where warren looked.
#[test]
fn a_folder_without_contracts_is_an_error() {
    let empty = tempfile::tempdir().expect("a temporary folder");
    std::fs::create_dir(empty.path().join("target")).expect("a folder");
    std::fs::write(empty.path().join("target/warren.yaml"), "").expect("a file");
    let error = check_system([empty.path()]).expect_err("nothing to check");
    assert!(matches!(error, Error::Io { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("no `warren.yaml` in this folder or its subfolders"),
        "{error}"
    );
}

/// Thousands of contracts cost about a thousand times one: the system rules index bindings
/// by exchange rather than pairing every publisher with every queue.
#[test]
fn a_large_system_is_checked_quickly() {
    let root = tempfile::tempdir().expect("a temporary folder");
    let schema = std::fs::read_to_string("fixtures/system/agree/orders/order_placed.json")
        .expect("the schema");
    for team in 0..1_000 {
        let folder = root.path().join(format!("team{team:04}"));
        std::fs::create_dir(&folder).expect("a folder");
        std::fs::write(folder.join("order_placed.json"), &schema).expect("a schema");
        std::fs::write(
            folder.join("warren.yaml"),
            format!(
                "exchanges:\n  orders: {{ type: topic }}\n\
                 queues:\n  q{team}: {{ on_poison: drop }}\n\
                 bindings:\n  - {{ exchange: orders, queue: q{team}, routing_key: \"t{team}.*\" }}\n\
                 messages:\n  order_placed: {{ payload: order_placed.json }}\n\
                 publishers:\n  p: {{ exchange: orders, routing_key: \"t{next}.{{x}}\", message: order_placed }}\n\
                 consumers:\n  c: {{ queue: q{team}, message: order_placed }}\n",
                next = (team + 1) % 1_000
            ),
        )
        .expect("a contract");
    }
    let started = std::time::Instant::now();
    let system = check_system([root.path()]).expect("every publisher reaches the next team");
    assert_eq!(system.contracts.len(), 1_000);
    assert!(system.warnings.is_empty(), "{}", system.warnings);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

/// A related place's file, label and snippet come from hostile files too: rendered, they are
/// escaped as the main place is.
#[test]
fn related_places_are_escaped() {
    use warren_codegen::diagnostics::{Diagnostic, Diagnostics, Place, Span};
    let hostile = "evil\u{1b}[31m\u{202e}";
    let mut problems = Diagnostics::new();
    problems.add_source(
        format!("{hostile}.yaml"),
        format!("queues:\n  {hostile}: {{}}\n").into(),
    );
    let span = Span {
        offset: 10,
        len: 12,
        line: 2,
        column: 3,
    };
    problems.push(
        Diagnostic::error(Code::ConflictingDeclaration, "a.yaml", "differs").also_at(
            format!("{hostile}.yaml"),
            Place::Position(span),
            format!("queue `{hostile}` here"),
        ),
    );
    let rendered = problems.render(RenderStyle::Plain);
    let one_line = problems.iter().map(ToString::to_string).collect::<String>();
    for text in [&rendered, &one_line] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{text}"
        );
        assert!(text.contains(r"evil\u{1b}[31m\u{202e}"), "{text}");
    }
}
