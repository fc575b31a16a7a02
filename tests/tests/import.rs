//! `warren import asyncapi`: the export of the example and of every contract fixture,
//! imported and exported again, is the same document (a fixed point), and the import of
//! warren's own export notes nothing it could not map.

mod common;

use common::every_contract;
use warren_codegen::{check_contract, check_sources};
use warren_tools::export::asyncapi::{Info, document};
use warren_tools::import::asyncapi::import;

#[test]
fn export_import_export_is_a_fixed_point() {
    for path in every_contract() {
        let shown = path.display();
        let checked = check_contract(&path).unwrap_or_else(|e| panic!("{shown}: {e}"));
        let exported = document(&checked.contract, &Info::of(&checked.contract, "test"));
        let imported = import(&exported).unwrap_or_else(|e| panic!("{shown}: {e}"));
        let notes: Vec<String> = imported.notes.iter().map(ToString::to_string).collect();
        assert!(
            notes.is_empty(),
            "{shown}: the import noted\n{}",
            notes.join("\n")
        );
        let again = check_sources(&imported.sources()).unwrap_or_else(|e| {
            let files = imported.files("test");
            panic!(
                "{shown}: the import does not validate:\n{e}\n{}",
                files["warren.yaml"]
            )
        });
        let exported_again = document(&again.contract, &Info::of(&again.contract, "test"));
        if exported_again != exported {
            let text = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
            let diff = similar::TextDiff::from_lines(&text(&exported), &text(&exported_again))
                .unified_diff()
                .context_radius(3)
                .to_string();
            panic!("{shown}: export → import → export differs:\n{diff}");
        }
    }
}
