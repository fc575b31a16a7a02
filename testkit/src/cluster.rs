//! A three-node RabbitMQ cluster of a test's own, for the tests that kill a node under a
//! worker and watch quorum queues fail over: started with warren's
//! `build-support/scripts/rabbitmq-cluster.sh` (built into the kit, with the
//! `rabbitmq-local.sh` it runs each node with). The shared broker on 5672 is never touched.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The script that forms, breaks and mends the cluster; it starts each node with
/// `rabbitmq-local.sh`, which it expects next to itself.
const CLUSTER_SCRIPT: &str = include_str!("../../build-support/scripts/rabbitmq-cluster.sh");

/// What this kit names its nodes: `warren-cluster-<AMQP port>@localhost`.
const NODE_PREFIX: &str = "warren-cluster";

/// A three-node RabbitMQ cluster of a test's own on loopback, stopped and deleted on drop
/// (also when the test panicked): for a test that kills the node holding a quorum queue's
/// leader ([`PrivateCluster::leader_of`], [`PrivateCluster::kill`]), brings it back
/// ([`PrivateCluster::up`]), or drives a node with `rabbitmqctl` ([`PrivateCluster::ctl`]).
///
/// Nodes are numbered 0, 1 and 2, in the order of [`PrivateCluster::urls`]; node `n`
/// listens for AMQP on `base_port + n` (and for Erlang distribution on
/// `base_port + 20000 + n`). Needs RabbitMQ's Debian package (`rabbitmq-server`) on the
/// machine, which the script installs when it runs as root; it runs no container. Connect
/// to a node with [`crate::TestBroker::at`]`(&cluster.url(n))`.
#[derive(Debug)]
pub struct PrivateCluster {
    base_port: u16,
    dir: PathBuf,
    scripts: PathBuf,
    urls: Vec<String>,
    names: Vec<String>,
}

impl PrivateCluster {
    /// How many nodes a cluster has.
    pub const NODES: usize = 3;

    /// Starts three fresh nodes on `base_port`, `base_port + 1` and `base_port + 2`, joins
    /// them into one cluster, and returns once it has formed: every node running, listed as
    /// running by every node's `rabbitmqctl cluster_status`, and accepting AMQP. Blocks for
    /// the 12 to 20 seconds that takes (measured on two busy cores).
    ///
    /// # Panics
    ///
    /// When the cluster does not form, with the script's output.
    pub fn start(base_port: u16) -> Self {
        let dir = std::env::temp_dir().join(format!("warren-cluster-{base_port}"));
        // Not under `dir`, which `reset` deletes while the script runs.
        let scripts = dir.with_extension("scripts");
        std::fs::create_dir_all(&scripts).expect("the cluster's script dir is created");
        std::fs::write(scripts.join("rabbitmq-cluster.sh"), CLUSTER_SCRIPT)
            .expect("the cluster script is written to the temp dir");
        std::fs::write(scripts.join("rabbitmq-local.sh"), crate::private::SCRIPT)
            .expect("the node script is written to the temp dir");
        let mut cluster = Self {
            base_port,
            dir,
            scripts,
            urls: Vec::new(),
            names: Vec::new(),
        };
        // A cluster left over from a run that was killed before its drop would answer
        // instead (its dir does not depend on the process, so it is found and removed).
        let _ = cluster.script("reset").output();
        let output = cluster
            .script("start")
            .output()
            .expect("the cluster script runs");
        assert!(
            output.status.success(),
            "the private cluster on ports {base_port}..{} did not form:\n{}",
            usize::from(base_port) + Self::NODES - 1,
            String::from_utf8_lossy(&output.stderr)
        );
        // The URLs and node names as the script made them: one place says what they are.
        let env = cluster.run(&["env"]);
        cluster.urls = env_list(&env, "CLUSTER_AMQP_URLS");
        cluster.names = env_list(&env, "CLUSTER_NODES");
        assert_eq!(cluster.urls.len(), Self::NODES, "the script's URLs: {env}");
        assert_eq!(
            cluster.names.len(),
            Self::NODES,
            "the script's nodes: {env}"
        );
        cluster
    }

    /// The AMQP URLs of the nodes, node 0 first.
    pub fn urls(&self) -> Vec<String> {
        self.urls.clone()
    }

    /// Node `n`'s AMQP URL.
    ///
    /// # Panics
    ///
    /// When there is no node `n`.
    pub fn url(&self, n: usize) -> String {
        self.urls[self.check(n)].clone()
    }

    /// Node `n`'s Erlang node name (`warren-cluster-<its AMQP port>@localhost`): what
    /// `rabbitmqctl` and the management API call it.
    ///
    /// # Panics
    ///
    /// When there is no node `n`.
    pub fn node_name(&self, n: usize) -> String {
        self.names[self.check(n)].clone()
    }

    /// `kill -9` of node `n`: no goodbye to clients or peers, nothing flushed that was not
    /// already. Returns once the process is gone.
    ///
    /// # Panics
    ///
    /// When node `n` is not running.
    pub fn kill(&self, n: usize) {
        self.run(&["kill", &(self.check(n) + 1).to_string()]);
    }

    /// Starts node `n` again on its data dir (after [`PrivateCluster::kill`]), and returns
    /// once it has rejoined: every node lists it as running, and it accepts AMQP.
    ///
    /// # Panics
    ///
    /// When it does not start or rejoin, with the script's output.
    pub fn up(&self, n: usize) {
        self.run(&["up", &(self.check(n) + 1).to_string()]);
    }

    /// Runs `rabbitmqctl` against node `n`, and returns what it printed.
    ///
    /// # Panics
    ///
    /// When `rabbitmqctl` fails, with what it said.
    pub fn ctl(&self, n: usize, args: &[&str]) -> String {
        let node = (self.check(n) + 1).to_string();
        let mut command = vec!["ctl", node.as_str()];
        command.extend_from_slice(args);
        self.run(&command)
    }

    /// Whether node `n`'s process is alive (it may still be booting).
    ///
    /// # Panics
    ///
    /// When there is no node `n`.
    pub fn is_alive(&self, n: usize) -> bool {
        let pid_file = self
            .dir
            .join(format!("node{}", self.check(n) + 1))
            .join("rabbit.pid");
        std::fs::read_to_string(pid_file)
            .is_ok_and(|pid| Path::new(&format!("/proc/{}", pid.trim())).exists())
    }

    /// The nodes that node `n`'s `rabbitmqctl cluster_status` lists as running, in node
    /// order.
    ///
    /// # Panics
    ///
    /// When `rabbitmqctl` fails on node `n` (it is down, say), or prints what is not
    /// `cluster_status`'s JSON.
    pub fn running_nodes(&self, n: usize) -> Vec<usize> {
        let status = self.ctl(n, &["-q", "cluster_status", "--formatter", "json"]);
        let status: serde_json::Value = serde_json::from_str(&status)
            .unwrap_or_else(|e| panic!("cluster_status is JSON ({e}): {status}"));
        let running: Vec<&str> = status["running_nodes"]
            .as_array()
            .unwrap_or_else(|| panic!("cluster_status lists running_nodes: {status}"))
            .iter()
            .filter_map(serde_json::Value::as_str)
            .collect();
        (0..Self::NODES)
            .filter(|&m| running.contains(&self.names[m].as_str()))
            .collect()
    }

    /// The node that holds the leader of quorum queue `queue` (on the default vhost `/`),
    /// as the first live node's `rabbitmqctl list_queues name leader` tells; `None` when no
    /// live node lists the queue with a leader of this cluster (the queue does not exist,
    /// is not a quorum queue, or no node answers).
    pub fn leader_of(&self, queue: &str) -> Option<usize> {
        (0..Self::NODES)
            .filter(|&n| self.is_alive(n))
            .find_map(|n| {
                let output = self
                    .script("ctl")
                    .arg((n + 1).to_string())
                    .args(["-q", "list_queues", "name", "leader", "--formatter", "json"])
                    .output()
                    .ok()
                    .filter(|output| output.status.success())?;
                let queues: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
                let leader = queues
                    .as_array()?
                    .iter()
                    .find(|q| q["name"].as_str() == Some(queue))?["leader"]
                    .as_str()?
                    .to_owned();
                self.names.iter().position(|name| *name == leader)
            })
    }

    /// `n`, when there is such a node.
    fn check(&self, n: usize) -> usize {
        assert!(
            n < Self::NODES,
            "the cluster on {} has nodes 0..{}, not {n}",
            self.base_port,
            Self::NODES
        );
        n
    }

    /// Runs the script with `args`, and returns what it printed.
    ///
    /// # Panics
    ///
    /// When it fails, with what it said.
    fn run(&self, args: &[&str]) -> String {
        let output = self
            .script(args[0])
            .args(&args[1..])
            .output()
            .expect("the cluster script runs");
        assert!(
            output.status.success(),
            "rabbitmq-cluster.sh {args:?} failed on the cluster on {}:\n{}",
            self.base_port,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn script(&self, command: &str) -> Command {
        let mut command_line = Command::new("bash");
        command_line
            .arg(self.scripts.join("rabbitmq-cluster.sh"))
            .arg(command)
            .env("CLUSTER_PORT", self.base_port.to_string())
            .env("CLUSTER_DIR", &self.dir)
            .env("CLUSTER_NODE_PREFIX", NODE_PREFIX)
            .env("CLUSTER_MGMT_PORT", "0");
        command_line
    }
}

/// The comma-separated values of `export NAME="a,b,c"` in the script's `env` output.
fn env_list(env: &str, name: &str) -> Vec<String> {
    let prefix = format!("export {name}=");
    env.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(|value| {
            value
                .trim_matches('"')
                .split(',')
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        // kill -9 first: the data is deleted anyway, and a graceful stop of three nodes
        // costs seconds a failing test has no use for. `reset` then cleans up the rest
        // (epmd, if the script started it) and deletes the dirs.
        for n in 0..Self::NODES {
            if self.is_alive(n) {
                let _ = self.script("kill").arg((n + 1).to_string()).output();
            }
        }
        let _ = self.script("reset").output();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(&self.scripts);
    }
}

#[cfg(test)]
mod tests {
    use super::env_list;

    #[test]
    fn the_script_s_env_lines_are_read_as_lists() {
        let env = "export CLUSTER_AMQP_URLS=\"amqp://a/%2f,amqp://b/%2f\"\n\
                   export CLUSTER_NODES=\"x@localhost,y@localhost\"\n";
        assert_eq!(
            env_list(env, "CLUSTER_AMQP_URLS"),
            ["amqp://a/%2f", "amqp://b/%2f"]
        );
        assert_eq!(
            env_list(env, "CLUSTER_NODES"),
            ["x@localhost", "y@localhost"]
        );
        assert!(env_list(env, "CLUSTER_DIR").is_empty());
    }
}
