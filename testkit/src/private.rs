//! A RabbitMQ node of a test's own, for the tests that kill, restart or block it: its own
//! port, data dir and node name, started with warren's `build-support/scripts/rabbitmq-local.sh`
//! (built into the kit). The shared broker on 5672 is never touched.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The script that starts, stops and drives a throw-away node: warren's own, so the kit
/// needs nothing from the repository it was built in. ([`crate::PrivateCluster`]'s script
/// runs each of its nodes with it.)
pub(crate) const SCRIPT: &str = include_str!("../../build-support/scripts/rabbitmq-local.sh");

/// A RabbitMQ node of a test's own, stopped and deleted on drop: for a test that kills the
/// broker under a worker ([`PrivateBroker::kill`]), restarts it ([`PrivateBroker::up`]), or
/// drives it with `rabbitmqctl` ([`PrivateBroker::ctl`]: raise a memory alarm, close
/// connections).
///
/// Needs RabbitMQ's Debian package (`rabbitmq-server`) on the machine, which the script
/// installs when it runs as root; it runs no container. Connect to it with
/// [`crate::TestBroker::at`]`(&broker.url())`.
#[derive(Debug)]
pub struct PrivateBroker {
    port: u16,
    dir: PathBuf,
    script_file: PathBuf,
}

impl PrivateBroker {
    /// Starts a fresh node on `port` (its distribution port is `port + 20000`). Blocks for
    /// the few seconds a node takes to boot.
    ///
    /// # Panics
    ///
    /// When it does not start, with the script's output.
    pub fn start(port: u16) -> Self {
        let dir =
            std::env::temp_dir().join(format!("warren-private-{port}-{}", std::process::id()));
        let script_file = dir.with_extension("sh");
        std::fs::write(&script_file, SCRIPT).expect("the broker script is written to the temp dir");
        let broker = Self {
            port,
            dir,
            script_file,
        };
        // A node left over from a killed run on the same port would answer instead.
        let _ = broker.script("stop").output();
        let _ = std::fs::remove_dir_all(&broker.dir);
        broker.up();
        broker
    }

    /// Its AMQP URL.
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    /// `kill -9` of the node: no goodbye to clients, nothing flushed that was not already.
    ///
    /// # Panics
    ///
    /// When the node is not running.
    pub fn kill(&self) {
        let pid = self.signal("-KILL");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(self.dir.join("rabbit.pid"));
    }

    /// Freezes the node (`SIGSTOP`), or thaws it (`SIGCONT`): while frozen it reads, writes
    /// and answers nothing, and its connections stay open, as a node stalled by its host.
    ///
    /// # Panics
    ///
    /// When the node is not running.
    pub fn freeze(&self, frozen: bool) {
        self.signal(if frozen { "-STOP" } else { "-CONT" });
    }

    /// Sends `signal` to the node's process; returns its pid.
    fn signal(&self, signal: &str) -> String {
        let pid = std::fs::read_to_string(self.dir.join("rabbit.pid"))
            .expect("the node's pid file")
            .trim()
            .to_owned();
        let status = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid}");
        pid
    }

    /// Starts the node again on the same data dir (after [`PrivateBroker::kill`]).
    ///
    /// # Panics
    ///
    /// When it does not start, with the script's output.
    pub fn up(&self) {
        let output = self
            .script("start")
            .output()
            .expect("the broker script runs");
        assert!(
            output.status.success(),
            "the private broker on port {} did not start:\n{}",
            self.port,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Runs `rabbitmqctl` against the node, and returns what it printed.
    ///
    /// # Panics
    ///
    /// When `rabbitmqctl` fails, with what it said.
    pub fn ctl(&self, args: &[&str]) -> String {
        let output = self
            .script("ctl")
            .args(args)
            .output()
            .expect("the broker script runs");
        assert!(
            output.status.success(),
            "rabbitmqctl {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn script(&self, command: &str) -> Command {
        let mut command_line = Command::new("bash");
        command_line
            .arg(&self.script_file)
            .arg(command)
            .env("RMQ_PORT", self.port.to_string())
            .env("RMQ_DIR", &self.dir)
            .env("RMQ_NODENAME", format!("warren-{}@localhost", self.port))
            .env("RMQ_MGMT_PORT", "0")
            .env("RMQ_REUSE", "0");
        command_line
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        let _ = self.script("stop").output();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.script_file);
    }
}
