//! The front end's output: bundled schemas and the plain model.

use std::fmt::Write as _;

use warren_codegen::contract::{Contract, Destination, QueueRole, Retry};
use warren_codegen::{Checked, check_contract};
use warren_runtime::model::DurationLabel;

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
    let topology = &contract.topology;
    for exchange in &topology.exchanges {
        let _ = writeln!(
            out,
            "exchange {} {:?} durable={} args={:?}",
            exchange.name,
            exchange.kind,
            exchange.durable,
            exchange.declare_arguments()
        );
    }
    for queue in &topology.queues {
        let _ = writeln!(
            out,
            "queue {} {:?} durable={}",
            queue.name, queue.kind, queue.durable
        );
        // What the broker is told, derived from the typed fields.
        for (key, value) in &queue.declare_arguments() {
            let _ = writeln!(out, "  {key} = {value:?}");
        }
        match &queue.role {
            QueueRole::Declared => {}
            QueueRole::Wait { queue, delay } => {
                let _ = writeln!(out, "  wait queue of {queue} for {}", DurationLabel(*delay));
            }
        }
        match &queue.retry {
            Retry::None => {}
            Retry::TtlBackoff(backoff) => {
                let delays: Vec<String> = backoff
                    .tiers
                    .iter()
                    .map(|t| DurationLabel(t.delay).to_string())
                    .collect();
                let _ = writeln!(
                    out,
                    "  retry ttl-backoff max_retries={} jitter={} tiers=[{}]",
                    backoff.max_retries,
                    backoff.jitter,
                    delays.join(", ")
                );
            }
            other => {
                let _ = writeln!(out, "  retry {other:?}");
            }
        }
    }
    for binding in &topology.bindings {
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
            "publisher {} -> {} key={:?} placeholders={placeholders:?} compression={:?} max_priority={:?}",
            publisher.name,
            publisher.publication.exchange,
            publisher.publication.routing_key,
            publisher.publication.compression,
            publisher.publication.max_priority
        );
    }
    for consumer in contract.consumers.values() {
        let _ = writeln!(
            out,
            "consumer {} <- {} message={} prefetch={} concurrency={} batch={:?}",
            consumer.spec.name,
            consumer.spec.queue,
            consumer.message(),
            consumer.spec.prefetch,
            consumer.spec.concurrency,
            consumer.batch
        );
    }
    for rpc in contract.rpcs.values() {
        let _ = writeln!(
            out,
            "rpc {} -> {:?} key={:?} request={} response={} errors={:?} timeout={} max_priority={:?} server={:?}",
            rpc.name,
            rpc.target.exchange,
            rpc.target.routing_key,
            rpc.request,
            rpc.response,
            rpc.errors,
            warren_runtime::model::DurationLabel(rpc.target.timeout),
            rpc.target.max_priority,
            rpc.server
        );
    }
    out
}

/// A publication's and a call's `max_priority` is the highest of the queues their routes can
/// reach (typed `max_priority` or a raw `x-max-priority`), `None` when none declares one;
/// an rpc without an exchange goes through the default exchange with its queue's name.
#[test]
fn max_priority_is_the_highest_of_the_queues_reached() {
    let checked = warren_codegen::check_contract("fixtures/contracts/rpc/warren.yaml")
        .expect("the rpc fixture is valid");
    let contract = checked.contract;
    assert_eq!(
        contract.publishers["audit"].publication.max_priority,
        Some(5)
    );
    assert_eq!(contract.publishers["plain"].publication.max_priority, None);
    assert_eq!(contract.rpcs["find_user"].target.max_priority, Some(9));
    let echo = &contract.rpcs["echo"];
    assert_eq!(echo.target.max_priority, Some(3));
    assert_eq!(
        (
            echo.target.exchange.as_str(),
            echo.target.routing_key.as_str()
        ),
        ("", "echo")
    );
    assert_eq!(
        echo.target.timeout,
        warren_runtime::model::rpc::DEFAULT_TIMEOUT
    );
    assert_eq!(echo.server.spec.name, "echo");
    assert_eq!(echo.server.message(), "ping");
}
