//! `warren diff`, one fixture pair per rule under `fixtures/diff/<rule>/{old,new}/`: the JSON
//! report of every pair is pinned, the table of a few, and whether each breaks someone.

mod common;

use warren_codegen::check_contract;
use warren_tools::diff::{PartyKind, Report, Version, diff};

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
    ("schema-bound-loosened", true),
    ("schema-bound-tightened", true),
    ("schema-default-added", false),
    ("schema-description", false),
    ("schema-enum-narrowed", true),
    ("schema-enum-widened", true),
    ("schema-format-added", true),
    ("schema-headers-added", true),
    ("schema-nested-optional", false),
    ("schema-open-property", true),
    ("schema-optional-added-closed", true),
    ("schema-optional-now", true),
    ("schema-optional-removed", true),
    ("schema-pattern-added", true),
    ("schema-property", true),
    ("schema-property-renamed", true),
    ("schema-ref-renamed", true),
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

/// Markdown: `yes` in bold, `no` plain.
fn yes_no(value: bool) -> &'static str {
    if value { "**yes**" } else { "no" }
}

/// What `kind` is called in the docs' tables.
fn role(kind: PartyKind) -> &'static str {
    match kind {
        PartyKind::Publisher => "publishers",
        PartyKind::Consumer => "consumers",
        PartyKind::UnknownConsumers => "consumers elsewhere",
        PartyKind::RustCode => "Rust code",
        PartyKind::Deploy => "the deploy",
        PartyKind::QueuedMessages => "queued messages",
    }
}

/// The verdicts of the fixture pairs, as Markdown tables whose fixture links start with
/// `fixtures` (the path from the document to `tests/fixtures/diff`): `schema` the schema
/// changes, with the readers each breaks, and `other` every other change, with whom.
fn verdict_table(which: &str, fixtures: &str) -> String {
    let mut out = if which == "schema" {
        "| change | breaks old readers | breaks new readers | breaks Rust code | fixture |\n\
         |---|---|---|---|---|\n"
            .to_owned()
    } else {
        "| change | breaks | fixture |\n|---|---|---|\n".to_owned()
    };
    for (pair, _) in PAIRS {
        if (which == "schema") != pair.starts_with("schema-") {
            continue;
        }
        let link = format!("[`{pair}`]({fixtures}/{pair}/)");
        for change in report(pair).changes {
            let summary = change.summary.replace('|', "\\|");
            let mut roles: Vec<&str> = change.breaks.iter().map(|p| role(p.kind)).collect();
            roles.dedup();
            let row = match change.readers {
                Some(readers) => format!(
                    "| {summary} | {} | {} | {} | {link} |\n",
                    yes_no(readers.old),
                    yes_no(readers.new),
                    yes_no(roles.contains(&"Rust code"))
                ),
                None if roles.is_empty() => format!("| {summary} | nobody | {link} |\n"),
                None => format!("| {summary} | **{}** | {link} |\n", roles.join(", ")),
            };
            out.push_str(&row);
        }
    }
    out
}

/// The README and `docs/teams.md` show the verdicts as `warren diff` computes them: each
/// table between `<!-- verdicts: NAME -->` and `<!-- /verdicts -->` is [`verdict_table`]
/// (`UPDATE_DOCS=1` writes them).
#[test]
fn the_docs_show_the_verdicts_the_tool_computes() {
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for (doc, fixtures) in [
        ("../README.md", "tests/fixtures/diff"),
        ("../docs/teams.md", "../tests/fixtures/diff"),
    ] {
        let text = std::fs::read_to_string(doc).expect("the document");
        let mut rewritten = String::new();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("<!-- verdicts: ") {
            let (before, marked) = rest.split_at(start);
            let open_end = marked.find("-->").expect("a closed marker") + 3;
            let which = marked["<!-- verdicts: ".len()..open_end - 3].trim();
            let close = marked.find("<!-- /verdicts -->").expect("an end marker");
            rewritten.push_str(before);
            rewritten.push_str(&marked[..open_end]);
            rewritten.push('\n');
            rewritten.push_str(&verdict_table(which, fixtures));
            rest = &marked[close..];
        }
        rewritten.push_str(rest);
        assert!(
            rewritten.contains("<!-- verdicts: schema -->"),
            "{doc}: no schema table"
        );
        if rewritten != text {
            if update {
                std::fs::write(doc, &rewritten).expect("written");
            } else {
                stale.push(doc);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} show other verdicts than warren diff computes: \
         UPDATE_DOCS=1 cargo test -p warren-tests --test diff rewrites their tables"
    );
}
