//! The contracts the test binaries share.

// Each binary uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;

/// The example, every valid contract fixture, and the contract imported from a FastStream
/// service (`broker/contracts/shop/`).
pub fn every_contract() -> Vec<PathBuf> {
    let mut paths = vec![
        PathBuf::from("../examples/orders/warren.yaml"),
        PathBuf::from("broker/contracts/shop/warren.yaml"),
    ];
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir("fixtures/contracts")
        .expect("fixtures/contracts is readable")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .flat_map(|dir| [dir.join("warren.yaml"), dir.join("service/warren.yaml")])
        .filter(|path| path.is_file())
        .collect();
    fixtures.sort();
    paths.extend(fixtures);
    assert!(paths.len() >= 7, "fixtures not found: {paths:?}");
    paths
}

/// The `warren diff` fixture pairs, each a folder of `fixtures/diff/` with an `old/` and a
/// `new/` version, in order.
pub fn diff_pairs() -> Vec<String> {
    let mut pairs: Vec<String> = std::fs::read_dir("fixtures/diff")
        .expect("the diff fixtures")
        .map(|entry| {
            let entry = entry.expect("an entry");
            entry.file_name().to_string_lossy().into_owned()
        })
        .collect();
    pairs.sort();
    pairs
}
