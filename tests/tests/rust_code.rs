//! `warren diff` says a change breaks "code using the Rust types" of a message exactly when
//! it does: for every fixture pair under `fixtures/diff/`, a user's crate written against
//! the old version's generated file (mechanically, by `usage`) is compiled against the old
//! file and against the new one, and the new one fails to compile exactly when the report
//! names a `rust-code` party. All the crates are checked by one `cargo check`, in a
//! workspace of their own under the target directory, offline, with the workspace's
//! lockfile.

mod common;
#[path = "rust_code/usage.rs"]
mod usage;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use warren_codegen::{Checked, Settings, check_contract};
use warren_tools::diff::{PartyKind, Version, diff};

/// One version of a fixture pair, checked and generated.
struct Side {
    path: String,
    checked: Checked,
    code: String,
}

impl Side {
    fn of(pair: &str, side: &str) -> Self {
        let path = format!("fixtures/diff/{pair}/{side}/warren.yaml");
        let checked = check_contract(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let code = checked
            .clone()
            .generate(&Settings::new())
            .unwrap_or_else(|e| panic!("{path} generates: {e}"))
            .code;
        Self {
            path,
            checked,
            code,
        }
    }

    fn version(&self) -> Version<'_> {
        Version {
            shown: &self.path,
            contract: &self.checked.contract,
        }
    }
}

/// Writes `text` to `path` unless it already holds it, so cargo checks only what changed.
fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
    warren_codegen::write_if_changed(path, text.as_bytes()).expect("written");
}

/// A crate `name` of `generated` code and `usage` beside it, in `root`.
fn user_crate(root: &Path, name: &str, generated: &str, usage: &str) {
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime");
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\npath = \"lib.rs\"\n\n[dependencies]\nwarren-runtime = {{ path = {:?} }}\n",
        runtime.display().to_string()
    );
    write(&root.join(name).join("Cargo.toml"), &manifest);
    // The user's own lints are not the point: only whether the code compiles.
    let lib = format!(
        "#![allow(warnings)]\n\ninclude!(\"generated.rs\");\n\n// The user's code.\n{usage}"
    );
    write(&root.join(name).join("generated.rs"), generated);
    write(&root.join(name).join("lib.rs"), &lib);
}

/// The errors of each crate of the workspace at `root` that failed to check, by crate name.
fn check(root: &Path, members: &[String]) -> BTreeMap<String, Vec<String>> {
    let list: Vec<String> = members.iter().map(|m| format!("{m:?}")).collect();
    write(
        &root.join("Cargo.toml"),
        &format!(
            "[workspace]\nresolver = \"3\"\nmembers = [{}]\n",
            list.join(", ")
        ),
    );
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock");
    if !root.join("Cargo.lock").exists() {
        std::fs::copy(lock, root.join("Cargo.lock")).expect("the lockfile copied");
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["check", "--workspace", "--keep-going", "--offline"])
        .args(["--message-format=json", "--quiet"])
        .current_dir(root)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .output()
        .expect("cargo runs");
    let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] == "compiler-message" && message["message"]["level"] == "error" {
            let target = message["target"]["name"].as_str().unwrap_or_default();
            let rendered = message["message"]["rendered"].as_str().unwrap_or_default();
            errors
                .entry(target.replace('_', "-"))
                .or_default()
                .push(rendered.to_owned());
        }
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() || !errors.is_empty(),
        "cargo check failed before compiling the user crates:\n{stderr}"
    );
    let known: BTreeSet<&String> = members.iter().collect();
    for name in errors.keys() {
        assert!(
            known.contains(name),
            "warren-runtime itself failed:\n{errors:?}"
        );
    }
    errors
}

#[test]
fn rust_code_verdicts_are_exactly_the_compile_failures() {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rust-code");
    let mut members = Vec::new();
    let mut verdicts = BTreeMap::new();
    for pair in common::diff_pairs() {
        let (old, new) = (Side::of(&pair, "old"), Side::of(&pair, "new"));
        let report = diff(Some(old.version()), new.version());
        let breaks_rust = report
            .changes
            .iter()
            .flat_map(|c| &c.breaks)
            .any(|party| party.kind == PartyKind::RustCode);
        let file = syn::parse_file(&old.code).expect("the generated file parses");
        let usage = usage::of(&file);
        for (side, code) in [("old", &old.code), ("new", &new.code)] {
            let name = format!("usage-{pair}-{side}");
            user_crate(&root, &name, code, &usage);
            members.push(name);
        }
        verdicts.insert(pair, (breaks_rust, report.table()));
    }
    let errors = check(&root, &members);
    let mut wrong = Vec::new();
    for (pair, (breaks_rust, table)) in &verdicts {
        if let Some(errors) = errors.get(&format!("usage-{pair}-old")) {
            wrong.push(format!(
                "{pair}: the usage does not compile against its own version:\n{}",
                errors.join("\n")
            ));
        }
        let failed = errors.get(&format!("usage-{pair}-new"));
        match (breaks_rust, failed) {
            (true, None) => wrong.push(format!(
                "{pair}: warren diff says it breaks Rust code, yet code written against the old \
                 version compiles against the new one:\n{table}"
            )),
            (false, Some(errors)) => wrong.push(format!(
                "{pair}: warren diff says nothing of Rust code, yet code written against the \
                 old version fails against the new one:\n{table}\n{}",
                errors.join("\n")
            )),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
