//! The handler's tests, without a broker: `warren_testkit::Trial` runs a delivery through the
//! worker's own decoding, the handler and the queue's retry policy, and says what a running
//! worker would do with it. (`warren_testkit::TestBroker` runs the same on a real RabbitMQ.)

use warren_runtime::NoHeaders;
use warren_runtime::lapin::BasicProperties;
use warren_runtime::lapin::types::ShortString;
use warren_runtime::model::FailureReason;
use warren_runtime::trial::{Arrival, Verdict};
use warren_starter::types::{TaskCreated, TaskCreatedKind};
use warren_starter::{Tasks, consumers, messages, topology};
use warren_testkit::Trial;

fn trial() -> Trial {
    let mut trial = Trial::new(topology());
    consumers::register::run_tasks(trial.worker(), Tasks);
    trial
}

fn task(kind: TaskCreatedKind) -> TaskCreated {
    let task_id = "0190a0b0-0000-7000-8000-000000000001".parse().unwrap();
    TaskCreated::new(kind, task_id)
}

#[tokio::test]
async fn a_report_is_handled() {
    let verdict = trial()
        .deliver(
            "run_tasks",
            messages::TaskCreated,
            &task(TaskCreatedKind::Report),
            &NoHeaders {},
        )
        .await;
    assert_eq!(verdict, Verdict::Acked);
}

#[tokio::test]
async fn an_export_that_times_out_waits_in_a_wait_queue() {
    let verdict = trial()
        .deliver(
            "run_tasks",
            messages::TaskCreated,
            &task(TaskCreatedKind::Export),
            &NoHeaders {},
        )
        .await;
    let Verdict::Retried {
        routing_key,
        retry_count,
        ..
    } = &verdict
    else {
        panic!("retried: {verdict:?}");
    };
    assert!(routing_key.starts_with("tasks.work.wait."), "{routing_key}");
    assert_eq!(*retry_count, 1);
    assert_eq!(verdict.error(), Some("the export service timed out"));
}

#[tokio::test]
async fn a_task_that_breaks_the_schema_is_dead_lettered_without_reaching_the_handler() {
    let json = BasicProperties::default().with_content_type(ShortString::from("application/json"));
    let broken = Arrival::raw(
        br#"{"task_id": "not a uuid", "kind": "report"}"#.to_vec(),
        json,
    );
    let verdict = trial().arrive("run_tasks", &broken).await;
    assert_eq!(verdict.reason(), Some(FailureReason::Validation));
}
