//! A service linked against `warren-dylib`: warren-runtime and everything below it (lapin,
//! tokio, the JSON Schema validator) come from one shared library, and the service works as
//! it does linked statically. Only this test binary links it: a crate is taken from the
//! shared library when a crate of the build uses it, as the `use` below does.

use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::ShortString;
use warren_broker_tests::types::JobBehaviour;
use warren_broker_tests::{Harness, header, job};
#[allow(unused_imports)]
use warren_dylib as _;

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_linked_to_the_shared_runtime_handles_and_dead_letters() {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("this process's mappings");
    assert!(
        maps.lines().any(|line| line.contains("libwarren_dylib")),
        "the runtime is not linked from libwarren_dylib:\n{maps}"
    );

    // The whole path through the shared library: the generated publisher validates and
    // publishes with confirms, the worker (spawned on the test's runtime, tokio's one copy
    // in the library) decodes, validates and handles; a payload its schema refuses is
    // dead-lettered with its reason, and a handler's fatal failure too.
    let h = Harness::start("dynamic-linking").await;
    h.submit("none", job("linked", JobBehaviour::Ok)).await;
    h.submit("none", job("fatal", JobBehaviour::Fatal)).await;
    let mut out_of_bounds = job("bounds", JobBehaviour::Ok);
    out_of_bounds.amount = 1001;
    let json = BasicProperties::default().with_content_type(ShortString::from("application/json"));
    let body = serde_json::to_vec(&out_of_bounds).expect("json");
    h.publish_raw("job.none", &body, json).await;

    let handled = h.recorder.wait_attempts("linked", 1, WAIT).await;
    assert_eq!(handled.len(), 1, "the valid job is handled once");
    assert_eq!(handled[0].tenant, "acme", "typed headers arrive");
    let dead = h.dead_letters(2, WAIT).await;
    let mut reasons: Vec<String> = dead
        .iter()
        .filter_map(|message| header(message, "x-failure-reason"))
        .collect();
    reasons.sort();
    assert_eq!(reasons, ["non-retryable", "validation"]);
    assert!(
        h.recorder.attempts("bounds").is_empty(),
        "poison never reaches the handler"
    );
    h.stop().await.expect("clean shutdown");
}
