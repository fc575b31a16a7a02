//! The build-script API, driven by a real Cargo: a crate whose `build.rs` calls
//! `warren_build::compile` is rebuilt only when the contract or a schema it reads (even
//! transitively) changes, and the generated file is rewritten only when its bytes change.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

/// The workspace's `target` folder, shared so the probe crate reuses compiled dependencies.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    // target/debug/deps/rerun-<hash>
    exe.ancestors()
        .nth(3)
        .expect("inside a target folder")
        .to_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("folder created");
    std::fs::write(path, text).expect("file written");
}

fn cargo_build(probe: &Path) -> std::process::Output {
    Command::new(env!("CARGO"))
        .args(["build", "--offline", "--quiet"])
        .current_dir(probe)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("cargo runs")
}

/// Builds the probe crate and returns the build script's run log.
fn build(probe: &Path) -> Vec<String> {
    let output = cargo_build(probe);
    assert!(
        output.status.success(),
        "probe build failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_to_string(probe.join("runs.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .expect("file exists")
}

/// Waits long enough that the next write gets a later modification time than the last build.
fn tick() {
    std::thread::sleep(Duration::from_millis(1100));
}

#[test]
fn build_script_reruns_only_when_an_input_changes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let build_support = root.join("build-support").canonicalize().expect("exists");
    let probe = tempfile::tempdir().expect("a temporary folder");
    let probe = probe.path();
    write(
        &probe.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"rerun-probe\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
             [workspace]\n\n[build-dependencies]\nwarren-build = {{ path = {:?} }}\n",
            build_support.display().to_string()
        ),
    );
    // The workspace's lock file pins the same dependency versions, so nothing new is fetched.
    std::fs::copy(root.join("Cargo.lock"), probe.join("Cargo.lock")).expect("lock copied");
    write(
        &probe.join("build.rs"),
        r#"
use std::io::Write;
fn main() {
    let out = warren_build::compile("contract/warren.yaml").unwrap();
    let mut log = std::fs::OpenOptions::new().create(true).append(true).open("runs.log").unwrap();
    writeln!(log, "{}", out.display()).unwrap();
}
"#,
    );
    write(&probe.join("src/lib.rs"), "//! A probe.\n");
    write(
        &probe.join("contract/warren.yaml"),
        "queues:\n  work: { on_poison: drop }\nmessages:\n  event: { payload: schemas/event.json }\n\
         consumers:\n  handle: { queue: work, message: event }\n",
    );
    write(
        &probe.join("contract/schemas/event.json"),
        r#"{"title": "Event", "type": "object", "properties": {"total": {"$ref": "money.json"}}}"#,
    );
    let money = probe.join("contract/schemas/money.json");
    write(&money, r#"{"title": "Money", "type": "integer"}"#);

    let runs = build(probe);
    assert_eq!(runs.len(), 1, "the first build runs the script");
    let generated = PathBuf::from(&runs[0]);
    assert_eq!(
        generated.file_name().and_then(|n| n.to_str()),
        Some("contract.rs")
    );
    let first_write = modified(&generated);

    assert_eq!(build(probe).len(), 1, "nothing changed: no rerun");

    tick();
    write(&probe.join("src/lib.rs"), "//! A probe, edited.\n");
    assert_eq!(
        build(probe).len(),
        1,
        "a file the contract does not read: no rerun"
    );

    tick();
    write(&money, r#"{"title": "Money", "type": "integer"}"#);
    assert_eq!(
        build(probe).len(),
        2,
        "a transitively read schema was touched: rerun"
    );
    assert_eq!(
        modified(&generated),
        first_write,
        "same bytes: the file is not rewritten"
    );

    tick();
    write(
        &money,
        r#"{"title": "Money", "type": "integer", "description": "Cents."}"#,
    );
    assert_eq!(build(probe).len(), 3, "a schema changed: rerun");
    assert!(
        modified(&generated) > first_write,
        "new bytes: the file is rewritten"
    );
    let code = std::fs::read_to_string(&generated).expect("generated");
    assert!(code.contains("Cents."), "{code}");

    // A broken schema fails the build with the rendered diagnostics, not a Debug dump; and
    // since the schema is watched, fixing it reruns the script.
    tick();
    write(
        &money,
        r#"{"title": "Money", "type": "integer", "$ref": "nowhere.json"}"#,
    );
    let failed = cargo_build(probe);
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("warren::bad-ref"), "{stderr}");
    assert!(
        stderr.contains("`$ref` `nowhere.json` points to"),
        "{stderr}"
    );
    assert!(!stderr.contains("Error {"), "{stderr}");
    tick();
    write(&money, r#"{"title": "Money", "type": "integer"}"#);
    assert_eq!(build(probe).len(), 4, "the fixed schema reruns the script");
}
