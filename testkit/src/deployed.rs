//! A topology declared under a test's own namespace, and what a test does with it: run a
//! worker, publish, count a queue, remove it all at the end.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use warren_runtime::lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use warren_runtime::lapin::types::{FieldTable, ShortString};
use warren_runtime::lapin::{BasicProperties, Channel};
use warren_runtime::{Connection, Publisher, RpcClient, Topology, Worker};

use crate::{RunningWorker, TestBroker};

/// How long the cleanup of a test that panicked may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A contract's topology declared under a namespace of the test's own (see
/// [`TestBroker::deploy`]).
///
/// Names given to its methods are the contract's (`orders.fulfilment`); it adds the namespace.
/// Remove it with [`Deployed::cleanup`]; if the test panics first, dropping it removes it, best
/// effort, on a connection of its own.
pub struct Deployed {
    broker: TestBroker,
    topology: Topology,
    namespace: String,
    /// A plain channel in confirm mode for what warren does not do for a test (publish raw
    /// bytes, count a queue, read dead letters), reopened after a reconnect.
    raw: Mutex<Option<Channel>>,
    removed: bool,
}

impl std::fmt::Debug for Deployed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployed")
            .field("namespace", &self.namespace)
            .field("url", &self.broker.url())
            .finish_non_exhaustive()
    }
}

impl Deployed {
    pub(crate) fn new(broker: TestBroker, topology: Topology, namespace: String) -> Self {
        Self {
            broker,
            topology,
            namespace,
            raw: Mutex::new(None),
            removed: false,
        }
    }

    /// The topology as declared: every name in the test's namespace. Give it to anything of
    /// your own that takes a topology.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The namespace every name carries (`test.<test>.<uuid>.`).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `name` (a queue or exchange as the contract writes it) as declared.
    pub fn name(&self, name: &str) -> String {
        self.topology.qualified(name)
    }

    /// The connection the topology was declared on.
    pub fn connection(&self) -> &Connection {
        self.broker.connection()
    }

    /// The broker it lives on.
    pub fn broker(&self) -> &TestBroker {
        &self.broker
    }

    /// A worker on the test's topology, with no consumers yet: configure it, register the
    /// handlers under test on it (the generated `Handlers { .. }.register(&mut worker)`, or one
    /// `consumers::register::*` function), then start it with [`Deployed::start`].
    pub fn worker(&self) -> Worker {
        Worker::new(self.connection().clone(), self.topology.clone())
    }

    /// Runs `worker` in the background until [`RunningWorker::stop`].
    pub fn start(&self, worker: Worker) -> RunningWorker {
        RunningWorker::spawn(worker)
    }

    /// A worker on the test's topology with the consumers `register` adds, running in the
    /// background: `deployed.run_worker(|worker| handlers.register(worker))`. Use
    /// [`Deployed::worker`] and [`Deployed::start`] to configure the worker first.
    pub fn run_worker(&self, register: impl FnOnce(&mut Worker)) -> RunningWorker {
        let mut worker = self.worker();
        register(&mut worker);
        self.start(worker)
    }

    /// A publisher on the test's topology; the generated `Publishers::new(publisher)` gives
    /// one typed method per publisher of the contract.
    ///
    /// # Panics
    ///
    /// When no channel opens (the broker went away).
    pub async fn publisher(&self) -> Publisher {
        match Publisher::new(self.connection(), &self.topology).await {
            Ok(publisher) => publisher,
            Err(error) => panic!("no publishing channel in `{}`: {error}", self.namespace),
        }
    }

    /// An RPC client on the test's topology; the generated `RpcClients::new(client)` gives
    /// one typed method per rpc of the contract.
    ///
    /// # Panics
    ///
    /// When no channel opens (the broker went away).
    pub async fn rpc_client(&self) -> RpcClient {
        match RpcClient::new(self.connection(), &self.topology).await {
            Ok(client) => client,
            Err(error) => panic!("no rpc client channel in `{}`: {error}", self.namespace),
        }
    }

    /// Publishes `body` to `exchange` (a contract name, or `""` for the default exchange, where
    /// the routing key names a queue: give it [`Deployed::name`]) with `properties` exactly as
    /// given, bypassing every check warren makes, as a faulty or hostile producer would; waits
    /// for the broker's confirm.
    ///
    /// # Panics
    ///
    /// When the broker does not confirm it.
    pub async fn publish_raw(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) {
        let exchange = if exchange.is_empty() {
            String::new()
        } else {
            self.name(exchange)
        };
        let confirm = self
            .channel()
            .await
            .basic_publish(
                ShortString::from(exchange.as_str()),
                ShortString::from(routing_key),
                BasicPublishOptions::default(),
                body,
                properties,
            )
            .await;
        let confirmed = match confirm {
            Ok(confirm) => confirm.await,
            Err(error) => Err(error),
        };
        match confirmed {
            Ok(confirmation) if confirmation.is_nack() => {
                panic!("the broker refused the message to `{exchange}` with key `{routing_key}`")
            }
            Ok(_) => {}
            Err(error) => {
                panic!("publishing to `{exchange}` with key `{routing_key}` failed: {error}")
            }
        }
    }

    /// The messages ready in `queue` (a contract name) now: not counting those a consumer
    /// holds unacknowledged. Read with a passive declare, so it needs no management plugin.
    ///
    /// # Panics
    ///
    /// When the queue does not exist.
    pub async fn ready(&self, queue: &str) -> u32 {
        let name = self.name(queue);
        let declared = self
            .channel()
            .await
            .queue_declare(
                ShortString::from(name.as_str()),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await;
        match declared {
            Ok(queue) => queue.message_count(),
            Err(error) => {
                // A failed passive declare closes the channel: the next call opens another.
                panic!("queue `{name}` cannot be counted: {error}")
            }
        }
    }

    /// Waits until `queue` holds exactly `n` ready messages, and returns how many it holds.
    ///
    /// # Panics
    ///
    /// When it does not within `timeout`, saying how many it held last.
    pub async fn wait_until_ready(&self, queue: &str, n: u32, timeout: Duration) -> u32 {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = self.ready(queue).await;
            if ready == n {
                return ready;
            }
            if Instant::now() >= deadline {
                panic!(
                    "queue `{queue}` held {ready} ready messages after {timeout:?}, not the {n} \
                     waited for"
                );
            }
            tokio::time::sleep(crate::wait::POLL).await;
        }
    }

    /// Removes every queue and exchange of the test's topology, with their messages. Stop the
    /// test's workers first ([`RunningWorker::stop`]): a worker whose queues disappear under
    /// it reports them gone.
    ///
    /// # Panics
    ///
    /// When the broker refuses (the connection is lost).
    pub async fn cleanup(mut self) {
        self.removed = true;
        if let Err(error) = warren_runtime::delete(self.connection(), &self.topology).await {
            panic!("`{}` could not be removed: {error}", self.namespace);
        }
    }

    /// The kit's own channel, in confirm mode, opened again if the connection was lost since
    /// (waiting up to a minute while it recovers).
    pub(crate) async fn channel(&self) -> Channel {
        let current = self.raw.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(channel) = current
            && channel.status().connected()
        {
            return channel;
        }
        let opened = open_channel(self.connection()).await;
        *self.raw.lock().unwrap_or_else(|e| e.into_inner()) = Some(opened.clone());
        opened
    }
}

/// How long the kit waits for a lost connection to recover before a test fails.
pub(crate) const RECOVERY: Duration = Duration::from_secs(60);

/// A confirm-mode channel on `connection`, waiting (up to [`RECOVERY`]) while it reconnects.
pub(crate) async fn open_channel(connection: &Connection) -> Channel {
    recovering("no channel on the test broker within a minute", || async {
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map(|()| channel)
    })
    .await
}

/// `attempt` until it succeeds, retried while the connection recovers (a node killed under a
/// cluster test) for [`RECOVERY`]; then a panic saying `what` failed, and why.
pub(crate) async fn recovering<T, E, F, R>(what: &str, mut attempt: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> R,
    R: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + RECOVERY;
    loop {
        match attempt().await {
            Ok(done) => return done,
            Err(error) if Instant::now() > deadline => panic!("{what}: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

impl Drop for Deployed {
    /// A test that panicked before [`Deployed::cleanup`] still removes what it declared, so
    /// a shared broker does not collect queues run after run. On a thread and a connection of
    /// its own: the test's runtime may be the one unwinding.
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        let topology = self.topology.clone();
        let url = self.broker.url().to_owned();
        let cleanup = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            // Bounded: a broker the test left blocked or frozen must not turn a failing test
            // into one that never ends.
            let cleanup = async move {
                if let Ok(connection) = Connection::connect(&url, "warren-testkit-cleanup").await {
                    let _ = warren_runtime::delete(&connection, &topology).await;
                    let _ = connection.close().await;
                }
            };
            let _ =
                runtime.block_on(async { tokio::time::timeout(CLEANUP_TIMEOUT, cleanup).await });
        });
        let _ = cleanup.join();
    }
}
