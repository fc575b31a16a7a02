//! The front end's output: bundled schemas and the plain model.

use std::fmt::Write as _;

use warren_codegen::model::{Contract, Destination, QueueRole, RetryPolicy};
use warren_codegen::{Checked, check_contract};

fn checked(path: &str) -> Checked {
    match check_contract(path) {
        Ok(checked) => checked,
        Err(error) => panic!("{path} should be valid:\n{error}"),
    }
}

/// Schemas shared across folders bundle into one root: every cross-file `$ref` rewritten
/// to a local definition, one definition however many paths reach it, identical copies in
/// two folders merged, and cycles between files (legal for recursive types) kept as refs.
#[test]
fn shared_schemas_bundle_into_one_root() {
    let checked = checked("fixtures/contracts/shared-schemas/service/warren.yaml");
    let contract = &checked.contract;
    let names: Vec<_> = contract.schemas.definitions.keys().cloned().collect();
    assert_eq!(
        names,
        [
            "Category",
            "Currency",
            "InvoiceIssued",
            "Money",
            "Person",
            "Team",
            "TeamChanged"
        ]
    );
    insta::assert_json_snapshot!("shared_schemas_bundle", contract.schemas.root());
    let message = &contract.messages["team_changed"];
    assert_eq!(message.payload.type_name, "TeamChanged");
    insta::assert_json_snapshot!("team_changed_standalone", message.payload.schema);
    let files: Vec<String> = contract
        .schemas
        .files
        .iter()
        .map(|f| {
            let parts: Vec<_> = f.iter().rev().take(2).collect();
            format!(
                "{}/{}",
                parts[1].to_string_lossy(),
                parts[0].to_string_lossy()
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            "billing/money.json",
            "common/category.json",
            "common/money.json",
            "common/person.json",
            "common/team.json",
            "schemas/invoice_issued.json",
            "schemas/team_changed.yaml",
        ]
    );
}

/// The model of the example contract: defaults applied, queue arguments resolved, and the
/// retry infrastructure derived.
#[test]
fn orders_example_model() {
    let checked = checked("../examples/orders/warren.yaml");
    assert!(checked.warnings.is_empty(), "{}", checked.warnings);
    insta::assert_snapshot!(summary(&checked.contract));
}

fn summary(contract: &Contract) -> String {
    let mut out = String::new();
    for exchange in contract.exchanges.values() {
        let _ = writeln!(
            out,
            "exchange {} {:?} durable={} args={:?}",
            exchange.name, exchange.kind, exchange.durable, exchange.arguments
        );
    }
    for queue in contract.queues.values() {
        let _ = writeln!(
            out,
            "queue {} {:?} durable={}",
            queue.name, queue.kind, queue.durable
        );
        for (key, value) in &queue.arguments {
            let _ = writeln!(out, "  {key} = {value:?}");
        }
        match &queue.role {
            QueueRole::Declared => {}
            QueueRole::Wait { queue, delay } => {
                let _ = writeln!(out, "  wait queue of {queue} for {delay}");
            }
        }
        match &queue.retry {
            RetryPolicy::None => {}
            RetryPolicy::TtlBackoff {
                tiers,
                max_retries,
                jitter,
                ..
            } => {
                let delays: Vec<String> = tiers.iter().map(|t| t.delay.to_string()).collect();
                let _ = writeln!(
                    out,
                    "  retry ttl-backoff max_retries={max_retries} jitter={jitter} tiers=[{}]",
                    delays.join(", ")
                );
            }
            other => {
                let _ = writeln!(out, "  retry {other:?}");
            }
        }
    }
    for binding in &contract.bindings {
        let to = match &binding.destination {
            Destination::Queue(q) => format!("queue {q}"),
            Destination::Exchange(e) => format!("exchange {e}"),
        };
        let _ = writeln!(
            out,
            "binding {} -> {to} key={:?}",
            binding.exchange, binding.routing_key
        );
    }
    for message in contract.messages.values() {
        let _ = writeln!(
            out,
            "message {} payload={} headers={:?} content_type={}",
            message.name,
            message.payload.type_name,
            message.headers.as_ref().map(|h| &h.type_name),
            message.content_type
        );
    }
    for publisher in contract.publishers.values() {
        let placeholders: Vec<_> = publisher.routing_key.placeholders().collect();
        let _ = writeln!(
            out,
            "publisher {} -> {} key={:?} placeholders={placeholders:?} compression={:?}",
            publisher.name, publisher.exchange, publisher.routing_key_text, publisher.compression
        );
    }
    for consumer in contract.consumers.values() {
        let _ = writeln!(
            out,
            "consumer {} <- {} message={} prefetch={} concurrency={} batch={:?}",
            consumer.name,
            consumer.queue,
            consumer.message,
            consumer.prefetch,
            consumer.concurrency,
            consumer.batch
        );
    }
    out
}

/// The generator names the jitter wait queues and the runtime picks among them: both must use
/// the same buckets.
#[test]
fn generator_and_runtime_agree_on_jitter_buckets() {
    assert_eq!(
        warren_codegen::model::JITTER_BUCKETS,
        warren_runtime::topology::JITTER_BUCKETS
    );
    let base = std::time::Duration::from_millis(1000);
    for bucket in warren_codegen::model::JITTER_BUCKETS {
        assert_eq!(
            warren_codegen::model::jitter_bucket(
                warren_codegen::model::Duration::from_millis(1000),
                bucket
            )
            .as_millis(),
            u64::try_from(warren_runtime::topology::jitter_bucket(base, bucket).as_millis())
                .unwrap_or(u64::MAX)
        );
    }
}
