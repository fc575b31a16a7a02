//! A consumer of several messages (`messages:` in the contract) on the real broker: each
//! delivery reaches the method of its message, recognised by the `type` warren's publishers
//! set, or, from another stack that sets none, by its routing key or a header; one recognised
//! as none of them is dead-lettered as `unknown-message` without reaching the handler. A trial
//! decides each case as the worker does.

use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use warren_broker_tests::types::{self, JobBehaviour};
use warren_broker_tests::{Harness, consumers, header, headers, job, messages};
use warren_runtime::model::FailureReason;
use warren_runtime::trial::{Arrival, Verdict};
use warren_testkit::Trial;

const WAIT: Duration = Duration::from_secs(30);

fn note(id: &str) -> types::Note {
    types::Note {
        id: id.try_into().expect("a note id"),
        text: "remember the milk".try_into().expect("a note's text"),
    }
}

/// A JSON body as another stack publishes it: no `type`, the headers `extra` adds.
fn foreign(extra: &[(&str, &str)]) -> BasicProperties {
    let mut table = FieldTable::default();
    table.insert(
        ShortString::from("tenant"),
        AMQPValue::LongString("acme".into()),
    );
    for (name, value) in extra {
        table.insert(
            ShortString::from(*name),
            AMQPValue::LongString((*value).into()),
        );
    }
    BasicProperties::default()
        .with_content_type(ShortString::from("application/json"))
        .with_headers(table)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_message_reaches_its_method_and_an_unknown_one_is_dead_lettered() {
    let h = Harness::start_registering("several", |recorder, worker| {
        consumers::register::run_mixed(worker, recorder.clone());
    })
    .await;
    let recorder = &h.recorder;
    let handled_by_mixed = |id: &str| {
        let attempts = recorder.attempts(id);
        attempts.iter().filter(|a| a.consumer == "RunMixed").count()
    };

    // Warren's publishers: the `type` says which.
    h.submit("mixed", job("typed-job", JobBehaviour::Ok)).await;
    h.publishers
        .submit_note("post-it", &note("typed-note"), &headers())
        .await
        .expect("a note is published");
    // Another stack's: a job by its routing key, a note by its header.
    let job_body = serde_json::to_vec(&job("foreign-job", JobBehaviour::Ok)).expect("json");
    h.publish_raw("job.mixed", &job_body, foreign(&[])).await;
    let note_body = serde_json::to_vec(&note("foreign-note")).expect("json");
    let as_note = foreign(&[("x-kind", "note")]);
    h.publish_raw("note.scribble", &note_body, as_note.clone())
        .await;
    recorder
        .wait(WAIT, || {
            handled_by_mixed("typed-job") == 1
                && handled_by_mixed("foreign-job") == 1
                && recorder.notes().len() == 2
        })
        .await;
    assert_eq!(handled_by_mixed("typed-job"), 1);
    assert_eq!(handled_by_mixed("foreign-job"), 1);
    let mut notes = recorder.notes();
    notes.sort();
    assert_eq!(notes, ["foreign-note", "typed-note"]);

    // A type none of them is, and a note without its header (its key selects nothing).
    let invoice = foreign(&[]).with_type(ShortString::from("invoice"));
    h.publish_raw("note.invoice", &note_body, invoice.clone())
        .await;
    h.publish_raw("note.bare", &note_body, foreign(&[])).await;
    let dead = h.deployed.take_dead_letters("mixed.dead", 2, WAIT).await;
    assert_eq!(dead.len(), 2, "both dead-lettered");
    for letter in &dead {
        assert_eq!(
            header(letter, "x-failure-reason").as_deref(),
            Some("unknown-message")
        );
        assert_eq!(header(letter, "x-consumer").as_deref(), Some("run_mixed"));
    }
    let mut errors: Vec<String> = dead
        .iter()
        .filter_map(|d| d.last_error().map(str::to_owned))
        .collect();
    errors.sort();
    assert!(
        errors[0].starts_with("message type `invoice` is none of"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with("no message type, and neither its routing key `note.bare`"),
        "{errors:?}"
    );
    assert_eq!(recorder.notes().len(), 2, "neither reached the handler");

    // A trial decides each as the worker did.
    let mut trial = Trial::new(h.topology.clone());
    consumers::register::run_mixed(trial.worker(), warren_broker_tests::Recorder::default());
    let exchange = h.name("jobs");
    let typed = Arrival::of(messages::Note, &note("t"), &headers()).expect("a valid note");
    let cases = [
        (typed, None),
        (
            Arrival::raw(note_body.clone(), as_note).via(&exchange, "note.x"),
            None,
        ),
        (
            Arrival::raw(note_body.clone(), invoice).via(&exchange, "note.x"),
            Some(FailureReason::UnknownMessage),
        ),
        (
            Arrival::raw(note_body.clone(), foreign(&[])).via(&exchange, "note.x"),
            Some(FailureReason::UnknownMessage),
        ),
    ];
    for (arrival, reason) in &cases {
        let verdict = trial.arrive("run_mixed", arrival).await;
        match reason {
            None => assert_eq!(verdict, Verdict::Acked),
            Some(reason) => assert_eq!(verdict.reason(), Some(*reason), "{verdict:?}"),
        }
    }
    h.stop().await.expect("cleaned up");
}

/// A dead-letter consumer of several (`read_mixed_dead`, `messages: [job, note]`): each dead
/// letter typed as the message it was, and one that is none of them raw, each with why it
/// died.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_consumer_of_several_gets_each_typed_or_raw() {
    let h = Harness::start_registering("several-dead", |recorder, worker| {
        consumers::register::run_mixed(worker, recorder.clone());
        consumers::register::read_mixed_dead(worker, recorder.clone());
    })
    .await;
    h.submit("mixed", job("fatal-job", JobBehaviour::Fatal))
        .await;
    let mut refused = note("refused-note");
    refused.text = "refuse".try_into().expect("a note's text");
    h.publishers
        .submit_note("post-it", &refused, &headers())
        .await
        .expect("a note is published");
    let note_body = serde_json::to_vec(&note("invoice")).expect("json");
    let invoice = foreign(&[]).with_type(ShortString::from("invoice"));
    h.publish_raw("note.invoice", &note_body, invoice).await;

    let recorder = &h.recorder;
    recorder
        .wait(WAIT, || recorder.mixed_dead().len() == 3)
        .await;
    let mut dead = recorder.mixed_dead();
    dead.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        dead,
        [
            (
                "job fatal-job".to_owned(),
                Some(FailureReason::NonRetryable)
            ),
            (
                "note refused-note".to_owned(),
                Some(FailureReason::NonRetryable)
            ),
            ("raw".to_owned(), Some(FailureReason::UnknownMessage)),
        ]
    );
    h.stop().await.expect("cleaned up");
}
