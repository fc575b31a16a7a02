//! A poison flood: 10,000 invalid messages interleaved with 10,000 valid ones. Every invalid
//! one ends in the dead-letter queue with its reason, every valid one is handled, and the queue
//! never stalls behind the poison.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::{Duration, Instant};

use lapin::BasicProperties;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, header, job, raw_headers};

const EACH: usize = 10_000;
const CAP: usize = 4 * 1024;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).expect("compressed");
    encoder.finish().expect("compressed")
}

/// The `i`-th invalid message: its expected reason, body and properties.
fn poison(i: usize) -> (&'static str, Vec<u8>, BasicProperties) {
    let json = BasicProperties::default().with_content_type(ShortString::from("application/json"));
    match i % 5 {
        0 => (
            "decode",
            format!("{{\"id\": \"bad-{i}\"").into_bytes(),
            json,
        ),
        1 => (
            "validation",
            format!(r#"{{"id": "schema-{i}", "behaviour": "ok", "amount": -1}}"#).into_bytes(),
            json,
        ),
        2 => (
            "decode",
            b"\x1f\x8b not really gzip".to_vec(),
            json.with_content_encoding(ShortString::from("gzip")),
        ),
        3 => (
            "content-type",
            br#"{"id": "x", "behaviour": "ok", "amount": 1}"#.to_vec(),
            BasicProperties::default().with_content_type(ShortString::from("application/xml")),
        ),
        // Too large as sent, or a zip bomb: small as sent, far over the cap inflated.
        _ if i % 10 == 4 => ("too-large", vec![b' '; CAP * 2], json),
        _ => {
            static BOMB: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
            let bomb = BOMB.get_or_init(|| gzip(&vec![b' '; CAP * 256]));
            (
                "too-large",
                bomb.clone(),
                json.with_content_encoding(ShortString::from("gzip")),
            )
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_poison_messages_among_ten_thousand_valid_ones() {
    let h = Harness::start_with("flood", |w| w.with_max_body_bytes(CAP)).await;
    let channel = h.connection.create_channel().await.expect("a channel");
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    let headers = raw_headers();
    let exchange = ShortString::from(h.name("jobs"));
    let key = ShortString::from("job.none");
    let mut expected: BTreeMap<&str, usize> = BTreeMap::new();
    let started = Instant::now();
    let mut confirms = Vec::with_capacity(2 * EACH);
    for i in 0..EACH {
        let valid =
            serde_json::to_vec(&job(&format!("valid-{i}"), JobBehaviour::Ok)).expect("json");
        let (reason, body, properties) = poison(i);
        *expected.entry(reason).or_default() += 1;
        let valid_properties = BasicProperties::default()
            .with_content_type(ShortString::from("application/json"))
            .with_headers(headers.clone());
        for (body, properties) in [
            (
                if i % 2 == 0 {
                    valid.clone()
                } else {
                    gzip(&valid)
                },
                if i % 2 == 0 {
                    valid_properties
                } else {
                    valid_properties.with_content_encoding(ShortString::from("gzip"))
                },
            ),
            (body, properties.with_headers(headers.clone())),
        ] {
            let confirm = channel
                .basic_publish(
                    exchange.clone(),
                    key.clone(),
                    BasicPublishOptions::default(),
                    &body,
                    properties,
                )
                .await
                .expect("published");
            confirms.push(confirm);
        }
    }
    for confirm in confirms {
        assert!(confirm.await.expect("confirmed").is_ack());
    }
    let published = started.elapsed();

    let all_valid = || (0..EACH).all(|i| !h.recorder.attempts(&format!("valid-{i}")).is_empty());
    h.recorder.wait(Duration::from_secs(120), all_valid).await;
    let handled = (0..EACH)
        .filter(|i| !h.recorder.attempts(&format!("valid-{i}")).is_empty())
        .count();
    assert_eq!(handled, EACH, "every valid message handled");
    let dead = h.dead_letters(EACH, Duration::from_secs(60)).await;
    let elapsed = started.elapsed();
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for message in &dead {
        let reason = header(message, "x-failure-reason").unwrap_or_default();
        let known = expected
            .keys()
            .find(|r| **r == reason)
            .copied()
            .unwrap_or("unexpected");
        *reasons.entry(known).or_default() += 1;
    }
    assert_eq!(
        reasons, expected,
        "every invalid message dead-lettered with its reason"
    );
    assert_eq!(h.ready("none").await, 0, "nothing left behind");
    eprintln!(
        "poison flood: {} messages published in {published:?}; all handled or dead-lettered in {elapsed:?}",
        2 * EACH
    );
    h.stop().await.expect("clean shutdown");
}
