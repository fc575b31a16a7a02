//! The name property: a contract that validates generates code that compiles, whatever its
//! names. The cases come from `warren_codegen::__fuzz::name_cases`; the build script
//! generated each that validated into a module of this crate, so the crate compiling (with
//! warnings denied, and clippy in CI) is the proof for those. These tests hold the rest to
//! what each kind of case expects.

use warren_compile_fixtures::{NAME_CASES, NAME_SEED, NameCase, NameOutcome};

fn of_kind(kind: &str) -> impl Iterator<Item = &'static NameCase> {
    let cases: Vec<_> = NAME_CASES.iter().filter(|c| c.kind == kind).collect();
    assert!(!cases.is_empty(), "no {kind} cases");
    cases.into_iter()
}

/// Every hostile name, in every role, validates: refusing them would be a way to pass the
/// property without supporting them.
#[test]
fn every_hostile_name_validates_in_every_role() {
    for case in of_kind("cover") {
        assert!(
            matches!(case.outcome, NameOutcome::Generated),
            "{:?}\n{}",
            case.outcome,
            case.contract
        );
    }
}

/// Names that meet after case conversion are refused as a clash, naming both and the fix.
#[test]
fn names_that_meet_after_case_conversion_are_refused_clearly() {
    for case in of_kind("clash") {
        let NameOutcome::Refused { codes, report } = case.outcome else {
            panic!("not refused: {:?}\n{}", case.outcome, case.contract);
        };
        let clash = codes
            .iter()
            .all(|code| ["identifier-clash", "bad-routing-key"].contains(code));
        assert!(clash && !codes.is_empty(), "{codes:?}\n{report}");
        assert!(report.contains("would both become"), "{report}");
        assert!(report.contains("case_"), "no file: {report}");
        assert!(
            report.contains("rename one of them") || report.contains("give each placeholder"),
            "{report}"
        );
    }
}

/// Names that make no identifier are refused with a diagnostic, not turned into code.
#[test]
fn names_without_an_identifier_are_refused() {
    for case in of_kind("unsupported") {
        let NameOutcome::Refused { codes, report } = case.outcome else {
            panic!("not refused: {:?}\n{}", case.outcome, case.contract);
        };
        let named = codes.iter().all(|code| {
            [
                "bad-identifier",
                "bad-routing-key",
                "bad-name",
                "identifier-clash",
            ]
            .contains(code)
        });
        assert!(named && !codes.is_empty(), "{codes:?}\n{report}");
    }
}

/// Random names either generate or are refused for their names; never does a contract that
/// validated fail to generate. Enough of them validate for the compile to mean something.
#[test]
fn random_names_generate_or_are_refused_for_their_names() {
    let mut generated = 0;
    for case in of_kind("random") {
        match case.outcome {
            NameOutcome::Generated => generated += 1,
            NameOutcome::Refused { codes, report } => assert!(
                codes.iter().all(|code| {
                    ["bad-identifier", "identifier-clash", "bad-routing-key"].contains(code)
                }),
                "seed {NAME_SEED}: {codes:?}\n{report}"
            ),
            NameOutcome::Failed(error) => panic!("seed {NAME_SEED}: {error}\n{}", case.contract),
        }
    }
    let total = of_kind("random").count();
    assert!(
        generated * 2 >= total,
        "seed {NAME_SEED}: {generated} of {total} generated"
    );
}
