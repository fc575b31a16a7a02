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
    let h = Harness::start_with("flood", |w| w.max_body_bytes(CAP)).await;
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

/// Set in the child process that [`a_small_body_inflating_to_millions_of_items_costs_little`]
/// runs itself in.
const BOMB_CHILD: &str = "WARREN_TEST_BOMB_CHILD";

/// A 7.9 KB gzip body inflating to `{"tags":[1,1,…]}` with 4 million items, every one of them
/// breaking the schema (`tags` are strings): describing every error took 34 s of CPU and
/// 1.9 GB in one delivery. Under the default 64 MiB cap it is now dead-lettered as
/// `validation` at about the cost of parsing it; twice as many items are more than the cap
/// allows (one per 16 bytes of it), and are refused as `too-large` before anything is parsed.
/// The worker goes on after each. The test runs itself again in a process of its own, so that
/// the peak memory it reports is the bombs' and not the flood's beside it.
#[test]
fn a_small_body_inflating_to_millions_of_items_costs_little() {
    if std::env::var_os(BOMB_CHILD).is_some() {
        return tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(bombs());
    }
    let child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "a_small_body_inflating_to_millions_of_items_costs_little",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(BOMB_CHILD, "1")
        .output()
        .expect("the test runs in a child process");
    let stderr = String::from_utf8_lossy(&child.stderr);
    for line in stderr.lines().filter(|l| l.starts_with("bomb")) {
        eprintln!("{line}");
    }
    assert!(
        child.status.success(),
        "the child failed:\n{}\n{stderr}",
        String::from_utf8_lossy(&child.stdout)
    );
}

async fn bombs() {
    // The default cap, 64 MiB: room for 4 Mi values.
    let h = Harness::start("bomb").await;
    // Warm: the validators compiled, the channels open, before anything is measured.
    h.submit("none", job("before", JobBehaviour::Ok)).await;
    h.recorder
        .wait_attempts("before", 1, Duration::from_secs(10))
        .await;
    let (error, cpu, peak) = bomb(&h, 4_000_000, "validation").await;
    assert!(error.contains("further errors not looked for"), "{error}");
    // 4 million `serde_json::Value`s take 122 MiB, or 275 MiB with `preserve_order` (on in
    // this build), and a second or so to parse in a debug build; every error collected took
    // 1.5 GB and 20 s more.
    assert!(peak < 400 * 1024 * 1024, "peak memory {peak} bytes");
    assert!(cpu < Duration::from_secs(10), "{cpu:?} of CPU");
    let (error, cpu, peak) = bomb(&h, 8_000_000, "too-large").await;
    assert!(error.contains("JSON body of more than"), "{error}");
    // Inflated (16 MB) and scanned, never parsed.
    assert!(peak < 64 * 1024 * 1024, "peak memory {peak} bytes");
    assert!(cpu < Duration::from_secs(3), "{cpu:?} of CPU");
    h.stop().await.expect("clean shutdown");
}

/// Sends `{"tags":[1,1,…]}` with `items` items, gzipped, then a valid job; waits for the bomb's
/// dead letter (with `reason`) and for the job to be handled. Returns the dead letter's error,
/// and the CPU time and the peak memory (above what was resident before) it took.
async fn bomb(h: &Harness, items: usize, reason: &str) -> (String, Duration, u64) {
    let inflated = format!(r#"{{"tags":[{}1]}}"#, "1,".repeat(items - 1)).into_bytes();
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&inflated).expect("compressed");
    let body = encoder.finish().expect("compressed");
    let inflated = {
        let len = inflated.len();
        drop(inflated);
        len
    };
    let json =
        || BasicProperties::default().with_content_type(ShortString::from("application/json"));
    let after = format!("after-{items}");
    let after_body = serde_json::to_vec(&job(&after, JobBehaviour::Ok)).expect("json");
    let baseline = reset_peak_memory();
    let cpu = cpu_time();
    let started = Instant::now();
    h.publish_raw(
        "job.none",
        &body,
        json().with_content_encoding(ShortString::from("gzip")),
    )
    .await;
    h.publish_raw("job.none", &after_body, json()).await;
    let dead = h.dead_letters(1, Duration::from_secs(120)).await;
    let elapsed = started.elapsed();
    let cpu = cpu_time() - cpu;
    let peak = memory("VmHWM:").saturating_sub(baseline);
    h.recorder
        .wait_attempts(&after, 1, Duration::from_secs(10))
        .await;
    eprintln!(
        "bomb: {} bytes gzipped, {inflated} inflated, {items} items: dead-lettered in \
         {elapsed:?}, {cpu:?} of CPU, peak memory {:.0} MiB above the resident size before it",
        body.len(),
        peak as f64 / (1024.0 * 1024.0),
    );
    assert_eq!(dead.len(), 1, "the bomb is dead-lettered");
    assert_eq!(
        header(&dead[0], "x-failure-reason").as_deref(),
        Some(reason)
    );
    assert_eq!(h.recorder.attempts(&after).len(), 1, "the worker went on");
    let error = header(&dead[0], "x-last-error").unwrap_or_default();
    (error, cpu, peak)
}

/// A figure of `/proc/self/status` (`VmRSS:`, `VmHWM:`), in bytes.
fn memory(name: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a memory figure");
    kib * 1024
}

/// Resets the process's peak resident memory to its current size (`clear_refs` 5), and
/// returns that size, in bytes.
fn reset_peak_memory() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("the peak is reset");
    memory("VmRSS:")
}

/// The CPU time the process has used, user and system (`/proc/self/stat`, in the kernel's
/// 100 Hz ticks).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .collect();
    let ticks =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}
