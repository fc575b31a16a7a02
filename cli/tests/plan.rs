//! `warren plan` against the real broker (AMQP_URL, by default the local one): version 1 of
//! a contract deployed by `--apply`, then version 2 with other retries planned without
//! `--apply`: the table says what will be migrated, created and drained, the JSON says the
//! same, and nothing changed (version 1 still plans as nothing to do).

use std::path::Path;
use std::process::{Command, Output};

const V1: &str = r##"
exchanges:
  jobs: { type: topic }
  jobs.dlx: { type: topic }
queues:
  work:
    dead_letter: { exchange: jobs.dlx }
    retry: { mode: ttl-backoff, max_retries: 3, initial_delay: 5m, max_delay: 10m, jitter: false }
  native:
    delivery_limit: 2
    dead_letter: { exchange: jobs.dlx }
    retry: { mode: quorum-native }
  dead: { type: classic }
bindings:
  - { exchange: jobs, queue: work, routing_key: "job.work" }
  - { exchange: jobs, queue: native, routing_key: "job.native" }
  - { exchange: jobs.dlx, queue: dead, routing_key: "#" }
"##;

fn url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

fn warren(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_warren"))
        .args(args)
        .output()
        .expect("warren runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn write(folder: &Path, name: &str, contract: &str) -> String {
    let dir = folder.join(name);
    std::fs::create_dir_all(&dir).expect("a folder");
    let path = dir.join("warren.yaml");
    std::fs::write(&path, contract).expect("written");
    path.display().to_string()
}

#[tokio::test]
async fn plan_without_apply_says_what_it_will_do_and_changes_nothing() {
    let folder = tempfile::tempdir().expect("a temporary folder");
    let v1 = write(folder.path(), "v1", V1);
    let v2 = write(
        folder.path(),
        "v2",
        &V1.replace(
            "max_retries: 3, initial_delay: 5m, max_delay: 10m",
            "max_retries: 2, initial_delay: 300ms, max_delay: 600ms",
        )
        .replace(
            "    delivery_limit: 2\n    dead_letter: { exchange: jobs.dlx }\n    retry: { mode: quorum-native }",
            "    dead_letter: { exchange: jobs.dlx }\n    retry: { mode: ttl-backoff, max_retries: 2, initial_delay: 200ms, jitter: false }",
        ),
    );
    let namespace = format!("test.cli-plan.{}.", std::process::id());
    let url = url();
    let base = [
        "plan",
        "--url",
        url.as_str(),
        "--namespace",
        namespace.as_str(),
    ];
    let with = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        warren(&args)
    };

    let deployed = with(&[v1.as_str(), "--apply"]);
    assert!(deployed.status.success(), "{}", text(&deployed));
    assert!(
        text(&deployed).contains("7 to create"),
        "{}",
        text(&deployed)
    );

    // Without the previous version, a queue to migrate is blocked: its wait queues are
    // unknown. Exit status 1.
    let blind = with(&[v2.as_str()]);
    assert_eq!(blind.status.code(), Some(1), "{}", text(&blind));
    assert!(text(&blind).contains("BLOCKED"), "{}", text(&blind));
    assert!(text(&blind).contains("--from"), "{}", text(&blind));

    let planned = with(&[v2.as_str(), "--from", v1.as_str()]);
    let shown = text(&planned);
    assert!(planned.status.success(), "{shown}");
    let line = |action: &str, name: &str| {
        shown.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.len() >= 3 && words[0] == action && words[2] == format!("{namespace}{name}")
        })
    };
    for (action, name) in [
        ("MIGRATE", "work"),
        ("MIGRATE", "native"),
        ("unchanged", "dead"),
        ("unchanged", "jobs"),
        ("create", "work.wait.300ms"),
        ("create", "work.wait.600ms"),
        ("create", "native.wait.200ms"),
        ("DRAIN", "work.wait.5m"),
        ("DRAIN", "work.wait.10m"),
    ] {
        assert!(line(action, name), "{action} {name}:\n{shown}");
    }
    assert!(
        shown.contains("inequivalent arg 'x-delivery-limit'"),
        "{shown}"
    );
    assert!(shown.contains("Nothing was changed"), "{shown}");

    let json = with(&[v2.as_str(), "--from", v1.as_str(), "--format", "json"]);
    assert!(json.status.success(), "{}", text(&json));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let items = report["plan"]["items"].as_array().expect("items");
    let action = |name: &str| {
        items
            .iter()
            .find(|i| i["name"] == format!("{namespace}{name}"))
            .map(|i| i["action"].clone())
    };
    assert_eq!(action("work"), Some("migrate".into()));
    assert_eq!(action("work.wait.5m"), Some("drain".into()));
    assert_eq!(report["plan"]["noop"], false);

    // Nothing changed: version 1 is still exactly what the broker has.
    let still = with(&[v1.as_str()]);
    assert!(still.status.success(), "{}", text(&still));
    assert!(text(&still).contains("Nothing to do."), "{}", text(&still));

    let connection = warren_runtime::Connection::connect(&url, "warren-test-cli-plan")
        .await
        .expect("the broker answers");
    let checked = warren_codegen::check_contract(Path::new(&v1)).expect("valid");
    let topology = checked.contract.topology.namespaced(&namespace);
    warren_runtime::delete(&connection, &topology)
        .await
        .expect("deleted");
}
