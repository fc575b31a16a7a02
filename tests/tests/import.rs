//! `warren import asyncapi`: the export of the example and of every contract fixture,
//! imported and exported again, is the same document (a fixed point), and the import of
//! warren's own export notes nothing it could not map; a real FastStream service's document
//! imports into a contract that validates.

mod common;

use std::path::Path;
use std::process::Command;

use common::every_contract;
use warren_codegen::syntax::OnPoison;
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

/// The AsyncAPI document a real FastStream service writes (`tests/py/shop.py`, FastStream as
/// `tests/py/requirements.lock` pins it), imported: the contract is the one checked in at
/// `broker/contracts/shop/`, whose generated consumer tests/broker/tests/faststream.rs runs
/// on what that service publishes, and every note is pinned.
#[test]
fn a_faststream_service_imports_as_the_contract_checked_in() {
    let python = Path::new("py/.venv/bin/python");
    let output = Command::new(python)
        .args(["py/shop.py", "spec"])
        .output()
        .unwrap_or_else(|e| panic!("{} should run (test.sh installs it): {e}", python.display()));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("FastStream writes JSON");
    let imported = import(&written).expect("an AsyncAPI 3.0 document");
    check_sources(&imported.sources()).unwrap_or_else(|e| panic!("the import validates:\n{e}"));
    let checked_in = Path::new("broker/contracts/shop");
    for (path, text) in imported.files("asyncapi.json") {
        let file = checked_in.join(&path);
        let kept = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(
            kept,
            text,
            "{} is not what the import writes now; rewrite it with \
             `warren import asyncapi asyncapi.json -o tests/broker/contracts/shop --force` \
             from `tests/py/.venv/bin/python tests/py/shop.py spec > asyncapi.json`",
            file.display()
        );
    }
    // Sorted: FastStream's order of its components varies from one environment to another
    // (the same script and packages list its publishers in either order).
    let mut notes: Vec<String> = imported.notes.iter().map(ToString::to_string).collect();
    notes.sort();
    insta::assert_snapshot!("faststream_notes", notes.join("\n"));
}

/// A hostile or foreign document is imported or refused, never trusted: a schema key cannot
/// name a file outside `schemas/`, a name cannot inject YAML, what has no place in a contract
/// is noted rather than dropped, and a document of another AsyncAPI version is refused
/// saying how to convert it.
#[test]
fn a_hostile_document_is_noted_or_refused_never_trusted() {
    let document = serde_json::json!({
        "asyncapi": "3.0.0",
        "info": { "title": "t\n# injected: true", "version": "1" },
        "channels": {
            "q": {
                "address": "q",
                "messages": { "m": { "$ref": "#/components/messages/m" } },
                "bindings": { "amqp": { "is": "queue", "queue": { "name": "q\": {}\nx", "vhost": "other" }, "bindingVersion": "0.3.0" } },
                "x-unknown": 1
            }
        },
        "operations": {
            "r": {
                "action": "receive",
                "channel": { "$ref": "#/channels/q" },
                "messages": [{ "$ref": "#/channels/q/messages/m" }],
                "security": [{}]
            }
        },
        "components": {
            "messages": { "m": { "payload": { "$ref": "#/components/schemas/..~1..~1etc~1passwd" } } },
            "schemas": {
                "../../etc/passwd": {
                    "type": "object",
                    "properties": { "a": { "$ref": "https://example.com/remote.json" } }
                }
            },
            "securitySchemes": { "basic": { "type": "userPassword" } }
        }
    });
    let imported = import(&document).expect("an AsyncAPI 3.0 document");
    for path in imported.files("doc").keys() {
        assert!(
            path == "warren.yaml"
                || path.starts_with("schemas/")
                    && !path[8..].contains(['/', '\\'])
                    && !path.contains(".."),
            "{path} is outside the import's folder"
        );
    }
    let yaml = &imported.files("doc")["warren.yaml"];
    assert!(!yaml.lines().any(|l| l.starts_with("injected")), "{yaml}");
    let pointers: Vec<&str> = imported.notes.iter().map(|n| n.pointer.as_str()).collect();
    for noted in [
        "/channels/q/x-unknown",
        "/channels/q/bindings/amqp/queue/vhost",
        "/operations/r/security",
        "/components/securitySchemes",
        "/components/schemas/..~1..~1etc~1passwd/properties/a/$ref",
    ] {
        assert!(pointers.contains(&noted), "{noted} not noted: {pointers:?}");
    }
    let old = serde_json::json!({ "asyncapi": "2.6.0", "info": { "title": "t", "version": "1" } });
    let refused = import(&old).expect_err("AsyncAPI 2 is refused");
    assert!(
        refused.to_string().contains("asyncapi convert"),
        "{refused}"
    );
    assert!(import(&serde_json::json!([1])).is_err());
}

/// A queue another stack's document consumes without a dead-letter exchange keeps what
/// warren's consumer rejects: a dead-letter queue of its own (named so as not to collide),
/// reached through the default exchange, while the queue is declared as the other stack
/// declares it. Only a stream, which cannot dead-letter, drops its poison, as it says.
#[test]
fn a_consumed_queue_without_a_dead_letter_exchange_gets_one_only_warren_uses() {
    let queue_channel = |name: &str, extra: serde_json::Value| {
        let mut channel = serde_json::json!({
            "address": name,
            "messages": { "m": { "$ref": "#/components/messages/m" } },
            "bindings": { "amqp": { "is": "queue", "queue": { "name": name }, "bindingVersion": "0.3.0" } }
        });
        if let (Some(channel), serde_json::Value::Object(extra)) = (channel.as_object_mut(), extra)
        {
            channel.extend(extra);
        }
        channel
    };
    let receive = |channel: &str| {
        serde_json::json!({
            "action": "receive",
            "channel": { "$ref": format!("#/channels/{channel}") },
            "messages": [{ "$ref": format!("#/channels/{channel}/messages/m") }]
        })
    };
    let document = serde_json::json!({
        "asyncapi": "3.0.0",
        "info": { "title": "t", "version": "1" },
        "channels": {
            "work": queue_channel("work", serde_json::json!({})),
            "taken": queue_channel("work.dead-letters", serde_json::json!({})),
            "log": queue_channel("log", serde_json::json!({ "x-warren-queue-type": "stream" }))
        },
        "operations": { "handle": receive("work"), "tail": receive("log") },
        "components": {
            "messages": { "m": { "payload": { "$ref": "#/components/schemas/M" } } },
            "schemas": { "M": { "type": "object" } }
        }
    });
    let imported = import(&document).expect("an AsyncAPI 3.0 document");
    let queues = &imported.contract.queues;
    let dead_letter = queues["work"]
        .dead_letter
        .as_ref()
        .expect("work dead-letters");
    assert_eq!(
        (
            dead_letter.exchange.as_str(),
            dead_letter.routing_key.as_deref(),
            dead_letter.queue_argument
        ),
        ("", Some("work.dead-letters-2"), Some(false))
    );
    assert!(queues.contains_key("work.dead-letters-2"), "{queues:?}");
    assert_eq!(queues["work"].on_poison, None);
    assert_eq!(queues["log"].on_poison, Some(OnPoison::Drop));
    assert_eq!(queues["log"].dead_letter, None);
    let checked = check_sources(&imported.sources()).expect("the import validates");
    let work = (checked.contract.topology.queues.iter())
        .find(|q| q.name == "work")
        .expect("queue work");
    assert!(
        !work
            .declare_arguments()
            .contains_key("x-dead-letter-exchange"),
        "declared as the other stack declares it"
    );
}
