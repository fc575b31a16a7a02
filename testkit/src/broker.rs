//! The broker a test runs against: found from the environment, never skipped.

use std::time::Duration;

use warren_runtime::lapin::options::QueueDeclareOptions;
use warren_runtime::lapin::types::{FieldTable, ShortString};
use warren_runtime::{Connection, Topology};

use crate::Deployed;

/// The environment variable naming the broker tests run against.
pub const AMQP_URL_VAR: &str = "AMQP_URL";

/// The broker tests use when [`AMQP_URL_VAR`] is not set: RabbitMQ's defaults on loopback.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The broker a test runs against, from `AMQP_URL` (else [`DEFAULT_AMQP_URL`]).
pub fn amqp_url() -> String {
    std::env::var(AMQP_URL_VAR).unwrap_or_else(|_| DEFAULT_AMQP_URL.to_owned())
}

/// The environment variable naming the management API of the broker tests run against.
pub const MANAGEMENT_URL_VAR: &str = "MANAGEMENT_URL";

/// The management API of the broker tests run against: [`MANAGEMENT_URL_VAR`] when set,
/// else the [`amqp_url`] host on port 15672 with its credentials and virtual host (where
/// `build-support/scripts/test.sh` makes sure the plugin runs).
///
/// # Panics
///
/// When the URL cannot be read.
pub fn management() -> warren_runtime::management::Management {
    use warren_runtime::management::{DEFAULT_PORT, Management};
    let for_amqp = Management::for_amqp_url(&amqp_url(), DEFAULT_PORT)
        .expect("AMQP_URL is a URL the management API can be found from");
    match std::env::var(MANAGEMENT_URL_VAR) {
        Ok(url) => Management::new(&url, for_amqp.vhost()).expect("MANAGEMENT_URL is a URL"),
        Err(_) => for_amqp,
    }
}

/// A connection to a real RabbitMQ, for one test.
///
/// A test gets one of its own ([`TestBroker::from_env`]), then deploys its contract's topology
/// under a namespace of its own ([`TestBroker::deploy`]), so tests running at once on one
/// broker never see each other's messages. The connection recovers by itself, quickly (within
/// a second of the broker answering again), so a test that restarts a broker
/// ([`crate::PrivateBroker`]) sees its worker and publishers come back.
#[derive(Debug, Clone)]
pub struct TestBroker {
    connection: Connection,
    url: String,
}

impl TestBroker {
    /// Connects to the broker at `AMQP_URL`, or [`DEFAULT_AMQP_URL`].
    ///
    /// # Panics
    ///
    /// When no broker answers there, with a message saying how to start one. A broker test
    /// never skips itself: a CI job without a broker fails instead of passing while testing
    /// nothing.
    pub async fn from_env() -> Self {
        Self::at(&amqp_url()).await
    }

    /// Connects to the broker at `url` (a [`crate::PrivateBroker`]'s, say).
    ///
    /// # Panics
    ///
    /// When no broker answers at `url`; [`TestBroker::connect`] returns the error instead.
    pub async fn at(url: &str) -> Self {
        match Self::connect(url).await {
            Ok(broker) => broker,
            Err(error) => panic!("{}", no_broker(url, &error)),
        }
    }

    /// Connects to the broker at `url`, or says why not.
    pub async fn connect(url: &str) -> Result<Self, warren_runtime::lapin::Error> {
        let connection = test_connection("warren-testkit", &[url]).await?;
        Ok(Self {
            connection,
            url: url.to_owned(),
        })
    }

    /// Connects to the nodes of a cluster (a [`crate::PrivateCluster`]'s, say) at `urls`,
    /// the first that answers first, the others in turn when it fails.
    ///
    /// # Panics
    ///
    /// When no node answers.
    pub async fn at_nodes(urls: &[String]) -> Self {
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        match test_connection("warren-testkit", &urls).await {
            Ok(connection) => Self {
                connection,
                url: urls.first().copied().unwrap_or_default().to_owned(),
            },
            Err(error) => panic!("{}", no_broker(&urls.join(", "), &error)),
        }
    }

    /// The broker's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The connection, for a worker or publisher of the test's own (the ones
    /// [`Deployed::worker`] and [`Deployed::publisher`] make use it too).
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Declares `topology` (a contract's generated `topology()`) under a namespace of its own,
    /// `test.<test>.<uuid>.`, and returns it deployed. Remove it with [`Deployed::cleanup`]
    /// at the end of the test; a test that panics before still removes it, best effort, when
    /// the [`Deployed`] is dropped.
    ///
    /// `test` names the test in the namespace, so what a failed test left behind is
    /// recognisable in `rabbitmqctl list_queues`; keep it short (AMQP names end at 255 bytes).
    ///
    /// # Panics
    ///
    /// When the topology does not declare (it conflicts with what the broker has, or the
    /// connection is lost), with the broker's reason.
    pub async fn deploy(&self, test: &str, topology: &Topology) -> Deployed {
        let namespace = format!("test.{test}.{}.", uuid::Uuid::now_v7().simple());
        let topology = topology.namespaced(&namespace);
        if let Err(error) = warren_runtime::declare(&self.connection, &topology).await {
            panic!("the topology of test `{test}` does not declare under `{namespace}`: {error}");
        }
        Deployed::new(self.clone(), topology, namespace)
    }

    /// Whether a queue named `name` (in full, namespace included) exists on the broker.
    pub async fn queue_exists(&self, name: &str) -> bool {
        queue_exists(&self.connection, name).await
    }

    /// Closes the connection (workers and publishers on it stop too).
    pub async fn close(&self) {
        let _ = self.connection.close().await;
    }
}

/// A connection named `name` through `urls` (tried in turn) that reconnects as a test wants:
/// within a second of a broker answering again.
///
/// # Errors
///
/// When none of `urls` answers.
pub async fn test_connection(
    name: &str,
    urls: &[&str],
) -> Result<Connection, warren_runtime::lapin::Error> {
    let builder = urls
        .iter()
        .fold(Connection::builder(name), |builder, url| builder.url(url));
    builder
        .reconnect_backoff(Duration::from_millis(50), Duration::from_secs(1))
        .connect()
        .await
}

/// What a test says when no broker answers: the URL tried, why, and how to start one.
fn no_broker(url: &str, error: &warren_runtime::lapin::Error) -> String {
    format!(
        "no RabbitMQ answers at {url} ({error}).\n\
         warren's broker tests need a real broker; they do not skip themselves.\n\
         Start one on this machine with `bash build-support/scripts/rabbitmq-local.sh start` \
         (from the warren repository: it installs Debian's rabbitmq-server if needed), \
         or run RabbitMQ in a container (`docker run -p 5672:5672 rabbitmq:3`), \
         or point {AMQP_URL_VAR} at one (amqp://user:pass@host:port/vhost)."
    )
}

/// Whether a queue named `name` (in full) exists, asked with a passive declare on a channel of
/// its own (a miss closes that channel). For a test that checks what was, or was not, declared.
pub async fn queue_exists(connection: &Connection, name: &str) -> bool {
    let Ok(channel) = connection.create_channel().await else {
        return false;
    };
    let declared = channel
        .queue_declare(
            ShortString::from(name),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .is_ok();
    if declared {
        let _ = channel.close(200, ShortString::from("checked")).await;
    }
    declared
}
