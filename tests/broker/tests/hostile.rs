//! Hostile producers: raw publishes into the queues a warren worker consumes, with what lapin
//! cannot survive.

use std::process::Command;

/// Headers nested deep enough to overflow lapin's parser aborted the whole worker process,
/// and the message stayed queued to abort it again on every restart; headers lapin cannot
/// parse closed its connection. The worker runs in a child process, so that its death fails
/// this test rather than killing the test binary.
#[test]
fn headers_lapin_cannot_survive_are_dead_lettered_and_the_worker_lives() {
    let output = Command::new(env!("CARGO_BIN_EXE_hostile_worker"))
        .output()
        .expect("the child worker starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the worker process failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("the worker survived every hostile header"));
}
