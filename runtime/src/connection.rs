//! One named connection that recovers: shared by publishers, workers and declaration.
//!
//! A supervisor task watches the underlying lapin connection. When it drops (the broker
//! restarted, the network failed, a heartbeat was missed) the supervisor reconnects with
//! bounded, jittered, exponential backoff, trying each URL in turn, re-declares every
//! topology declared through it, and only then announces the new link. Publishers and
//! workers hold no lapin connection of their own: they ask for the current link and open
//! their channels on it again.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_lite::StreamExt;

use crate::error::Chain;
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{LongString, ShortString};
use lapin::{ConnectionProperties, ConnectionState, ErrorKind, Event};
use tokio::sync::watch;

use crate::Topology;
use crate::publish_time::{PROBE_TIMEOUT, VouchedUser, probe};
use crate::sync::lock;
use crate::wire::Severance;

/// The first pause before reconnecting, by default.
pub(crate) const DEFAULT_RECONNECT_MIN: Duration = Duration::from_millis(100);
/// The longest pause between reconnect attempts, by default.
pub(crate) const DEFAULT_RECONNECT_MAX: Duration = Duration::from_secs(10);
/// How long one connection attempt (TCP, AMQP handshake, re-declaring) may take: an endpoint
/// that accepts TCP and then says nothing must not hold recovery up. An attempt that takes
/// longer ends its socket.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often the supervisor looks at the connection's state besides its events: lapin does
/// not report every way a connection can end as an event (a close with an unusual reply
/// code, a failure before the event stream was subscribed).
const STATUS_TICK: Duration = Duration::from_secs(1);
/// Bounds of the reconnect pauses.
const MIN_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_secs(3600);
/// How long [`Connection::close`] waits for the broker's acknowledgement.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a link must stay up for the next reconnect to start from the shortest pause.
const STABLE: Duration = Duration::from_secs(30);
/// Failed attempts between two warnings while reconnecting.
const WARN_EVERY: u32 = 10;

/// A connection to RabbitMQ that recovers, cheap to clone: publishers, workers and
/// [`crate::declare`] share it and each open channels of their own.
///
/// ```no_run
/// # async fn run() -> Result<(), warren_runtime::lapin::Error> {
/// use std::time::Duration;
/// use warren_runtime::Connection;
///
/// // One URL:
/// let connection = Connection::connect("amqp://guest:guest@localhost:5672/%2f", "orders").await?;
/// // Several, tried in turn when the current one fails:
/// let connection = Connection::builder("orders")
///     .url("amqp://guest:guest@rabbit-1:5672/%2f")
///     .url("amqp://guest:guest@rabbit-2:5672/%2f")
///     .reconnect_backoff(Duration::from_millis(200), Duration::from_secs(30))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
}

/// Settings of a [`Connection`]; see [`Connection::builder`].
#[derive(Clone)]
pub struct ConnectionBuilder {
    name: String,
    urls: Vec<String>,
    reconnect_min: Duration,
    reconnect_max: Duration,
    properties: ConnectionProperties,
    tls: OwnedTLSConfig,
}

impl std::fmt::Debug for ConnectionBuilder {
    /// URLs are shown without their passwords: settings end up in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|url| redact(url)).collect();
        f.debug_struct("ConnectionBuilder")
            .field("name", &self.name)
            .field("urls", &urls)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .field(
                "tls",
                &(self.tls.identity.is_some() || self.tls.cert_chain.is_some()),
            )
            .finish_non_exhaustive()
    }
}

/// `url` with the password of its user info (`scheme://user:password@host`) replaced.
pub(crate) fn redact(url: &str) -> String {
    let authority = url.find("://").map_or(0, |at| at + 3);
    let rest = &url[authority..];
    // The user info ends at the last `@` before the path: a password may hold `@` unescaped.
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..authority], &rest[at..])
        }
        None => url.to_owned(),
    }
}

/// The link as everyone sees it.
#[derive(Clone)]
enum Link {
    /// Connected, and what ends its socket when its close is not answered.
    Up(Arc<lapin::Connection>, Severance),
    /// Lost; the supervisor is reconnecting.
    Down,
    /// Closed by [`Connection::close`]; nothing reconnects.
    Closed,
}

struct Shared {
    settings: ConnectionBuilder,
    link: watch::Sender<Link>,
    /// What [`crate::declare`] declared through this connection, re-declared on reconnect.
    topologies: Mutex<Vec<Topology>>,
    /// Why the broker blocked the connection (a resource alarm), while it is blocked.
    blocked: Mutex<Option<String>>,
    /// Reconnect attempts and the last error, for [`Connection::health`].
    record: Mutex<crate::health::LinkRecord>,
    /// The user the broker vouches for as `user_id` on the current link
    /// ([`crate::publish_time::probe`]); `None` while it is down or when it does not.
    vouched_user: VouchedUser,
}

/// Why no link was there to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unavailable {
    /// Still reconnecting when the wait ended.
    Reconnecting,
    /// Closed for good.
    Closed,
}

impl Unavailable {
    /// As a lapin error, for APIs that return one.
    pub(crate) fn into_lapin(self) -> lapin::Error {
        let state = match self {
            Self::Reconnecting => ConnectionState::Reconnecting,
            Self::Closed => ConnectionState::Closed,
        };
        ErrorKind::InvalidConnectionState(state).into()
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.shared.settings.name)
            .field("connected", &self.is_connected())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `url` (`amqp://user:pass@host:port/vhost`), naming the connection `name`
    /// so it is recognisable in the broker's connection list. It recovers with the default
    /// backoff; see [`Connection::builder`] for several URLs or another backoff.
    pub async fn connect(url: &str, name: &str) -> Result<Self, lapin::Error> {
        Self::builder(name).url(url).connect().await
    }

    /// Settings for a connection named `name`: add at least one URL, then
    /// [`ConnectionBuilder::connect`].
    pub fn builder(name: &str) -> ConnectionBuilder {
        ConnectionBuilder {
            name: name.to_owned(),
            urls: Vec::new(),
            reconnect_min: DEFAULT_RECONNECT_MIN,
            reconnect_max: DEFAULT_RECONNECT_MAX,
            properties: ConnectionProperties::default(),
            tls: OwnedTLSConfig::default(),
        }
    }

    /// A connection that never connects, closed from the start: what a worker is built on to
    /// try its handlers without a broker ([`crate::Worker::trial`]). Anything that needs the
    /// broker fails on it as on a connection closed for good.
    #[cfg(feature = "trial")]
    pub fn detached(name: &str) -> Self {
        Self {
            shared: Arc::new(Shared {
                link: watch::Sender::new(Link::Closed),
                settings: Self::builder(name),
                topologies: Mutex::new(Vec::new()),
                blocked: Mutex::new(None),
                record: Mutex::new(crate::health::LinkRecord::opened(0)),
                vouched_user: VouchedUser::new(None),
            }),
        }
    }

    /// The current lapin connection, or `None` while reconnecting or after close. Channels
    /// opened on it do not survive a reconnect.
    pub fn lapin(&self) -> Option<Arc<lapin::Connection>> {
        match &*self.shared.link.borrow() {
            Link::Up(connection, _) => Some(connection.clone()),
            Link::Down | Link::Closed => None,
        }
    }

    /// Opens a channel on the current link, failing at once while reconnecting. Such a
    /// channel does not survive a reconnect; publishers and workers reopen theirs.
    pub async fn create_channel(&self) -> Result<lapin::Channel, lapin::Error> {
        match self.lapin() {
            Some(connection) => connection.create_channel().await,
            None => Err(self.unavailable().into_lapin()),
        }
    }

    /// Whether the connection is up (not reconnecting, not closed).
    pub fn is_connected(&self) -> bool {
        self.lapin().is_some_and(|c| c.status().connected())
    }

    /// Why the broker blocked publishing on this connection (a memory or disk alarm), while
    /// it does. Publishes wait, up to their timeout, until it unblocks.
    pub fn blocked(&self) -> Option<String> {
        lock(&self.shared.blocked).clone()
    }

    /// The connection's health: connected or not, blocked or not, reconnect attempts and the
    /// last error. Cheap: no round trip to the broker.
    pub fn health(&self) -> crate::health::ConnectionHealth {
        let record = lock(&self.shared.record);
        crate::health::ConnectionHealth {
            name: self.shared.settings.name.clone(),
            connected: self.is_connected(),
            url: record
                .url
                .and_then(|index| self.shared.settings.urls.get(index))
                .map(|url| redact(url)),
            closed: self.is_closed(),
            blocked: self.blocked(),
            reconnect_attempts: record.reconnect_attempts,
            reconnects: record.reconnects,
            last_error: record.last_error.clone(),
        }
    }

    /// Closes the connection for good; channels still open are closed with it, and
    /// unacknowledged deliveries return to their queues.
    ///
    /// Bounded: a broker that does not acknowledge the close within 5 s (one that blocked
    /// the connection during a resource alarm reads nothing from it, and a link that died
    /// while closing can no longer answer) does not hold the caller; the socket is ended
    /// all the same, and the error says so.
    pub async fn close(&self) -> Result<(), lapin::Error> {
        let previous = self.shared.link.send_replace(Link::Closed);
        match previous {
            Link::Up(connection, severance) => {
                let close = connection.close(200, ShortString::from("closed by warren"));
                let closed = tokio::time::timeout(CLOSE_TIMEOUT, close).await;
                severance.sever();
                closed.unwrap_or_else(|_| {
                    Err(lapin::Error::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "the broker did not acknowledge the close within {CLOSE_TIMEOUT:?}; the connection is dropped"
                        ),
                    )))
                })
            }
            Link::Down | Link::Closed => Ok(()),
        }
    }

    /// The current link, waiting up to `timeout` while it reconnects.
    pub(crate) async fn current(
        &self,
        timeout: Duration,
    ) -> Result<Arc<lapin::Connection>, Unavailable> {
        let mut link = self.shared.link.subscribe();
        let up = link.wait_for(|link| !matches!(link, Link::Down));
        match tokio::time::timeout(timeout, up).await {
            Err(_) => Err(Unavailable::Reconnecting),
            // The sender lives in `shared`, which `self` holds: it cannot be gone.
            Ok(Err(_)) => Err(Unavailable::Closed),
            Ok(Ok(link)) => match &*link {
                Link::Up(connection, _) => Ok(connection.clone()),
                Link::Down | Link::Closed => Err(Unavailable::Closed),
            },
        }
    }

    /// The user the broker vouches for as `user_id` on the current link (the URL's user,
    /// when a probe publish carrying it was confirmed as the link opened), kept current as
    /// the link is rebuilt.
    pub(crate) fn vouched_user(&self) -> &VouchedUser {
        &self.shared.vouched_user
    }

    /// Times the link was lost and restored: what was learnt through an older link may
    /// no longer hold.
    pub(crate) fn reconnects(&self) -> u64 {
        lock(&self.shared.record).reconnects
    }

    /// Opens a plain lapin connection (no supervisor, nothing re-declared), through the same
    /// guard and settings as the link, to the URL the link is on, named `name` plus
    /// `purpose`: for a probe of the broker that may cost the connection it runs on, never
    /// the link.
    pub(crate) async fn open_aside(&self, purpose: &str) -> Result<Aside, lapin::Error> {
        let settings = &self.shared.settings;
        let index = lock(&self.shared.record).url.unwrap_or(0);
        let url = settings
            .urls
            .get(index)
            .ok_or_else(|| self.unavailable().into_lapin())?;
        Aside::open(url, settings, purpose).await
    }

    /// Whether [`Connection::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        matches!(*self.shared.link.borrow(), Link::Closed)
    }

    pub(crate) fn unavailable(&self) -> Unavailable {
        if self.is_closed() {
            Unavailable::Closed
        } else {
            Unavailable::Reconnecting
        }
    }

    /// Remembers `topology` so that every reconnect declares it again before the link is
    /// announced (a broker that lost its non-durable queues gets them back).
    pub(crate) fn remember(&self, topology: &Topology) {
        let mut topologies = lock(&self.shared.topologies);
        if !topologies.contains(topology) {
            topologies.push(topology.clone());
        }
    }

    /// Forgets `topology` (it was deleted).
    pub(crate) fn forget(&self, topology: &Topology) {
        lock(&self.shared.topologies).retain(|t| t != topology);
    }
}

impl ConnectionBuilder {
    /// Adds a broker URL. With several, a lost connection reconnects to the next one in
    /// turn (failover); the first connect tries them in order.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), warren_runtime::lapin::Error> {
    /// let connection = warren_runtime::Connection::builder("billing")
    ///     .url("amqp://guest:guest@rabbit-1:5672/%2f")
    ///     .url("amqp://guest:guest@rabbit-2:5672/%2f")
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn url(mut self, url: &str) -> Self {
        self.urls.push(url.to_owned());
        self
    }

    /// Adds every URL of a comma-separated list (spaces around them ignored, empty ones
    /// skipped), as [`ConnectionBuilder::url`] adds one: the nodes of a cluster from one
    /// setting. Give each service's workers the nodes in a different order, so that their
    /// connections spread over the cluster rather than all landing on the first node.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), warren_runtime::lapin::Error> {
    /// // AMQP_URL=amqp://u:p@rabbit-1:5672/%2f,amqp://u:p@rabbit-2:5672/%2f,amqp://u:p@rabbit-3:5672/%2f
    /// let urls = std::env::var("AMQP_URL").unwrap_or_default();
    /// let connection = warren_runtime::Connection::builder("billing")
    ///     .urls(&urls)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn urls(self, list: &str) -> Self {
        list.split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .fold(self, Self::url)
    }

    /// The pause before the first reconnect attempt (`min`, default 100 ms) and the most it
    /// grows to (`max`, default 10 s). Each attempt doubles the pause, and each pause is
    /// jittered between half and all of it, so a fleet of workers does not reconnect in step.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), warren_runtime::lapin::Error> {
    /// use std::time::Duration;
    /// let connection = warren_runtime::Connection::builder("billing")
    ///     .url("amqp://guest:guest@localhost:5672/%2f")
    ///     .reconnect_backoff(Duration::from_millis(50), Duration::from_secs(2))
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        // A zero pause would spin against a broker that refuses connections; an enormous one
        // would overflow the clock.
        self.reconnect_min = min.clamp(MIN_PAUSE, MAX_PAUSE);
        self.reconnect_max = max.clamp(self.reconnect_min, MAX_PAUSE);
        self
    }

    /// lapin's connection properties: client properties shown in the broker's connection
    /// list, the locale, an authentication provider (for OAuth 2 tokens that rotate). Warren
    /// sets the connection name from [`Connection::builder`] and recovers the connection
    /// itself, so leave lapin's own recovery off. The heartbeat and `frame_max` are URL
    /// parameters: `amqp://host/%2f?heartbeat=30&frame_max=131072`.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), warren_runtime::lapin::Error> {
    /// use warren_runtime::lapin::ConnectionProperties;
    /// let properties = ConnectionProperties::default()
    ///     .with_client_property("team".into(), "billing".into());
    /// let connection = warren_runtime::Connection::builder("billing")
    ///     .url("amqp://guest:guest@localhost:5672/%2f?heartbeat=30")
    ///     .properties(properties)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn properties(mut self, properties: ConnectionProperties) -> Self {
        self.properties = properties;
        self
    }

    /// TLS settings for `amqps://` URLs (with the `tls` feature): the certificate chain to
    /// trust besides the system's roots, and a client identity for certificate
    /// authentication.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use warren_runtime::lapin::tcp::OwnedTLSConfig;
    /// let tls = OwnedTLSConfig {
    ///     cert_chain: Some(std::fs::read_to_string("/etc/rabbitmq/ca.pem")?),
    ///     ..OwnedTLSConfig::default()
    /// };
    /// let connection = warren_runtime::Connection::builder("billing")
    ///     .url("amqps://billing:secret@rabbit.internal:5671/%2f")
    ///     .tls(tls)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn tls(mut self, tls: OwnedTLSConfig) -> Self {
        self.tls = tls;
        self
    }

    /// Connects to the first URL that answers (each is tried once; the error is the last
    /// URL's) and starts the supervisor that recovers the connection from then on.
    pub async fn connect(self) -> Result<Connection, lapin::Error> {
        self.connecting().await
    }

    /// [`ConnectionBuilder::connect`]'s body, compiled here ([`crate::rooted`]).
    fn connecting(self) -> crate::rooted::Rooted<'static, Result<Connection, lapin::Error>> {
        Box::pin(self.connect_now())
    }

    async fn connect_now(self) -> Result<Connection, lapin::Error> {
        if self.urls.is_empty() {
            return Err(lapin::Error::from(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no broker URL: add one with ConnectionBuilder::url",
            )));
        }
        let mut last_error = None;
        for (index, url) in self.urls.iter().enumerate() {
            let mut pending = Pending::default();
            let opening = open_link(url, &self, &pending.severance);
            let attempt = tokio::time::timeout(ATTEMPT_TIMEOUT, opening);
            match attempt.await.unwrap_or_else(|_| Err(timed_out())) {
                Ok(opened) => {
                    pending.handed_over = true;
                    let shared = Arc::new(Shared {
                        link: watch::Sender::new(opened.link()),
                        settings: self,
                        topologies: Mutex::new(Vec::new()),
                        blocked: Mutex::new(None),
                        record: Mutex::new(crate::health::LinkRecord::opened(index)),
                        vouched_user: VouchedUser::new(opened.vouched_user.clone()),
                    });
                    tokio::spawn(supervise(Arc::downgrade(&shared), opened, index));
                    return Ok(Connection { shared });
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| Unavailable::Closed.into_lapin()))
    }
}

/// A freshly opened lapin connection and its event stream (subscribed before anything can
/// happen on it, so no error is missed).
struct Opened {
    connection: Arc<lapin::Connection>,
    /// What ends its socket.
    severance: Severance,
    events: std::pin::Pin<Box<dyn futures_lite::Stream<Item = Event> + Send>>,
    /// The user the broker takes as `user_id` on this connection, if any.
    vouched_user: Option<Arc<str>>,
}

impl Opened {
    /// The link it makes.
    fn link(&self) -> Link {
        Link::Up(self.connection.clone(), self.severance.clone())
    }
}

/// A plain lapin connection opened beside the link ([`Connection::open_aside`]). Dropped, it
/// is closed, and its socket ended when the broker does not answer the close.
pub(crate) struct Aside {
    connection: Option<lapin::Connection>,
    severance: Severance,
}

impl Aside {
    /// A connection to `url` with `settings`, named for `purpose`.
    async fn open(
        url: &str,
        settings: &ConnectionBuilder,
        purpose: &str,
    ) -> Result<Self, lapin::Error> {
        let mut aside = settings.clone();
        aside.name = format!("{} ({purpose})", settings.name);
        // Ends the socket unless the connection is handed over: when the open fails, times
        // out, or is itself given up by a caller's timeout half way through the handshake.
        let mut pending = Pending::default();
        let opening = open(url, &aside, &pending.severance);
        let opened = tokio::time::timeout(ATTEMPT_TIMEOUT, opening).await;
        let connection = opened.unwrap_or_else(|_| Err(timed_out()))?;
        pending.handed_over = true;
        Ok(Self {
            connection: Some(connection),
            severance: pending.severance.clone(),
        })
    }
}

/// The severance of a connection being opened: it ends the socket when dropped before the
/// connection was handed over (the open failed, timed out, or was given up half way).
#[derive(Default)]
struct Pending {
    severance: Severance,
    handed_over: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.handed_over {
            self.severance.sever();
        }
    }
}

impl std::ops::Deref for Aside {
    type Target = lapin::Connection;

    fn deref(&self) -> &lapin::Connection {
        self.connection
            .as_ref()
            .expect("taken only when the aside connection is dropped")
    }
}

impl Drop for Aside {
    fn drop(&mut self) {
        let severance = self.severance.clone();
        let (Some(connection), Ok(runtime)) = (
            self.connection.take(),
            tokio::runtime::Handle::try_current(),
        ) else {
            severance.sever();
            return;
        };
        runtime.spawn(async move { abandon(&connection, &severance, "done").await });
    }
}

/// A lapin connection to `url` through the wire guard, with `settings`' properties and name,
/// its socket ended by `severance`.
async fn open(
    url: &str,
    settings: &ConnectionBuilder,
    severance: &Severance,
) -> Result<lapin::Connection, lapin::Error> {
    let properties = settings
        .properties
        .clone()
        .with_connection_name(LongString::from(settings.name.as_str()));
    crate::wire::connect(url, properties, settings.tls.clone(), severance).await
}

/// A connection to `url` to be the link: its events subscribed at once, and the user its
/// broker vouches for probed.
async fn open_link(
    url: &str,
    settings: &ConnectionBuilder,
    severance: &Severance,
) -> Result<Opened, lapin::Error> {
    let connection = open(url, settings, severance).await?;
    let events = Box::pin(connection.events_listener());
    let vouched_user = probed_user(url, settings).await;
    Ok(Opened {
        connection: Arc::new(connection),
        severance: severance.clone(),
        events,
        vouched_user,
    })
}

/// The user the broker at `url` vouches for as `user_id` ([`probe`]), asked on a connection
/// of its own: the probe publishes, and a broker in a resource alarm blocks a connection
/// that publishes, reading nothing more from it (not the declarations of a link being
/// rebuilt, not a consumer's acknowledgements) until the alarm clears. `None` when it cannot
/// tell within [`PROBE_TIMEOUT`].
async fn probed_user(url: &str, settings: &ConnectionBuilder) -> Option<Arc<str>> {
    let probed = async {
        let aside = Aside::open(url, settings, "user-id probe").await.ok()?;
        probe(&aside, url).await
    };
    tokio::time::timeout(PROBE_TIMEOUT, probed)
        .await
        .ok()
        .flatten()
}

/// Watches the link and rebuilds it when it drops, until the connection is closed or every
/// handle to it is dropped.
async fn supervise(shared: Weak<Shared>, mut opened: Opened, mut url_index: usize) {
    let mut generation = 0;
    // A link that fails soon after it came up (a flapping broker, a load balancer accepting
    // and dropping) resumes the backoff where it was rather than at its first, shortest pause.
    let mut since = tokio::time::Instant::now();
    let mut attempts = 0;
    loop {
        let Some(error) = watch_link(&shared, &mut opened).await else {
            return;
        };
        // Lost as lapin sees it; its socket may linger on a broker that stopped answering.
        opened.severance.sever();
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let name = strong.settings.name.clone();
        // A close racing with the failure wins: nothing reconnects after close.
        let lost = strong.link.send_if_modified(|link| {
            if matches!(link, Link::Closed) {
                return false;
            }
            *link = Link::Down;
            true
        });
        if !lost {
            return;
        }
        *lock(&strong.blocked) = None;
        strong.vouched_user.set(None);
        lock(&strong.record).failed(&Chain(&error).to_string(), Some(0));
        tracing::warn!(connection = %name, error = %Chain(&error), "connection lost; reconnecting");
        drop(strong);
        if since.elapsed() >= STABLE {
            attempts = 0;
        }
        let Some((next, index, made)) = reconnect(&shared, url_index, attempts).await else {
            return;
        };
        generation += 1;
        attempts = made;
        since = tokio::time::Instant::now();
        url_index = index;
        opened = next;
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let published = strong.link.send_if_modified(|link| {
            if matches!(link, Link::Closed) {
                return false;
            }
            *link = opened.link();
            true
        });
        if !published {
            abandon(&opened.connection, &opened.severance, "closed by warren").await;
            return;
        }
        lock(&strong.record).restored(index);
        strong.vouched_user.set(opened.vouched_user.clone());
        tracing::info!(connection = %name, url = index, generation, "reconnected");
    }
}

/// Follows the events of the current lapin connection until it fails (`Some(error)`), or
/// until the warren connection is closed or dropped (`None`).
async fn watch_link(shared: &Weak<Shared>, opened: &mut Opened) -> Option<lapin::Error> {
    let mut link = shared.upgrade()?.link.subscribe();
    let mut tick = tokio::time::interval(STATUS_TICK);
    loop {
        // A close that happened before this subscription counts too.
        if matches!(*link.borrow_and_update(), Link::Closed) {
            return None;
        }
        let event = tokio::select! {
            event = opened.events.next() => event,
            changed = link.changed() => {
                if changed.is_err() {
                    return None;
                }
                continue;
            }
            _ = tick.tick() => {
                let status = opened.connection.status();
                if !status.connected() && !status.closing() && !status.connecting() {
                    return Some(Unavailable::Closed.into_lapin());
                }
                continue;
            }
        };
        let shared = shared.upgrade()?;
        let name = &shared.settings.name;
        match event {
            Some(Event::Error(error)) => {
                // Channel errors are reported here too; only a failed connection matters.
                let status = opened.connection.status();
                if !status.connected() && !status.closing() {
                    return Some(error);
                }
            }
            Some(Event::ConnectionBlocked(reason)) => {
                tracing::warn!(connection = %name, %reason, "the broker blocked publishing (resource alarm)");
                *lock(&shared.blocked) = Some(reason);
            }
            Some(Event::ConnectionUnblocked) => {
                tracing::info!(connection = %name, "the broker unblocked publishing");
                *lock(&shared.blocked) = None;
            }
            Some(_) => {}
            None => return Some(Unavailable::Closed.into_lapin()),
        }
    }
}

/// Reconnects, trying the URLs in turn from the one after `failed`, with backoff between
/// attempts, and re-declares the remembered topologies. `None` when the connection was
/// closed or dropped meanwhile.
async fn reconnect(
    shared: &Weak<Shared>,
    failed: usize,
    first: u32,
) -> Option<(Opened, usize, u32)> {
    let mut link = shared.upgrade()?.link.subscribe();
    let closed = async move {
        let _ = link.wait_for(|link| matches!(link, Link::Closed)).await;
    };
    tokio::select! {
        () = closed => None,
        reconnected = attempts(shared, failed, first) => reconnected,
    }
}

/// Attempts from `first` on (it sets the first pause); returns the connection, the URL index
/// and the attempts counted.
async fn attempts(
    shared: &Weak<Shared>,
    failed: usize,
    first: u32,
) -> Option<(Opened, usize, u32)> {
    let mut attempt = first;
    loop {
        let (settings, topologies) = {
            let strong = shared.upgrade()?;
            let topologies = lock(&strong.topologies).clone();
            (strong.settings.clone(), topologies)
        };
        tokio::time::sleep(backoff(
            attempt,
            settings.reconnect_min,
            settings.reconnect_max,
        ))
        .await;
        let index = (failed + 1 + (attempt - first) as usize) % settings.urls.len();
        attempt = attempt.saturating_add(1);
        let opened = attempt_link(&settings, index, &topologies).await;
        if let (Err(error), Some(strong)) = (&opened, shared.upgrade()) {
            let failed = attempt.saturating_sub(first);
            lock(&strong.record).failed(&Chain(error).to_string(), Some(failed));
        }
        match opened {
            Ok(opened) => return Some((opened, index, attempt)),
            Err(error) if attempt == first + 1 || attempt.is_multiple_of(WARN_EVERY) => {
                tracing::warn!(connection = %settings.name, url = index, attempt, error = %Chain(&error), "reconnect attempt failed; trying again");
            }
            Err(error) => {
                tracing::debug!(connection = %settings.name, url = index, attempt, error = %Chain(&error), "reconnect attempt failed");
            }
        }
    }
}

/// One reconnect attempt, to URL `index`, re-declaring `topologies`, within
/// [`ATTEMPT_TIMEOUT`]: an attempt that fails, or is given up, ends what it opened.
async fn attempt_link(
    settings: &ConnectionBuilder,
    index: usize,
    topologies: &[Topology],
) -> Result<Opened, AttemptFailed> {
    let mut pending = Pending::default();
    let severance = &pending.severance;
    let attempt = tokio::time::timeout(ATTEMPT_TIMEOUT, async {
        let opened = open_link(&settings.urls[index], settings, severance)
            .await
            .map_err(AttemptFailed::Open)?;
        match redeclare(&opened.connection, topologies).await {
            Ok(()) => Ok(opened),
            Err(error) => {
                // A broker still starting can refuse declarations; a topology that no
                // longer matches never will, and says so in the log.
                abandon(&opened.connection, severance, "re-declare failed").await;
                Err(AttemptFailed::Redeclare(error))
            }
        }
    });
    let attempted = attempt.await.unwrap_or(Err(AttemptFailed::Silent));
    pending.handed_over = attempted.is_ok();
    attempted
}

/// Why one reconnect attempt failed: logged, and the next attempt made.
#[derive(Debug, thiserror::Error)]
enum AttemptFailed {
    #[error("opening the connection failed")]
    Open(#[source] lapin::Error),
    #[error("re-declaring the topology failed")]
    Redeclare(#[source] crate::DeclareError),
    #[error("no answer within {ATTEMPT_TIMEOUT:?}")]
    Silent,
}

/// Closes a connection that will not be used, without waiting long for the broker, and ends
/// its socket.
async fn abandon(connection: &lapin::Connection, severance: &Severance, why: &str) {
    let close = connection.close(200, ShortString::from(why));
    let _ = tokio::time::timeout(STATUS_TICK, close).await;
    severance.sever();
}

async fn redeclare(
    connection: &lapin::Connection,
    topologies: &[Topology],
) -> Result<(), crate::DeclareError> {
    for topology in topologies {
        crate::declare::declare_on(connection, topology).await?;
    }
    Ok(())
}

fn timed_out() -> lapin::Error {
    lapin::Error::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("the broker did not complete the connection within {ATTEMPT_TIMEOUT:?}"),
    ))
}

/// `now + duration`, or a time far in the future when that overflows the clock (a timeout
/// of `Duration::MAX` means "no timeout").
pub(crate) fn deadline_after(duration: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(duration)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

/// The pause before reconnect attempt `attempt` (from 0): `min · 2^attempt`, capped at `max`,
/// then jittered down by up to half.
pub(crate) fn backoff(attempt: u32, min: Duration, max: Duration) -> Duration {
    let full = min
        .saturating_mul(2u32.saturating_pow(attempt.min(20)))
        .min(max);
    full.mul_f64(0.5 + fastrand::f64() / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_passwords() {
        let builder = Connection::builder("billing")
            .url("amqp://guest:s3cr@t@rabbit-1:5672/%2f")
            .url("amqps://rabbit-2/vhost");
        let shown = format!("{builder:?}");
        assert!(!shown.contains("s3cr"), "{shown}");
        assert!(
            shown.contains("amqp://guest:***@rabbit-1:5672/%2f"),
            "{shown}"
        );
        assert!(shown.contains("amqps://rabbit-2/vhost"), "{shown}");
    }

    #[test]
    fn a_list_of_urls_adds_each_in_order() {
        let builder = Connection::builder("billing")
            .url("amqp://first/%2f")
            .urls(" amqp://a/%2f, ,amqp://b/%2f,");
        assert_eq!(
            builder.urls,
            ["amqp://first/%2f", "amqp://a/%2f", "amqp://b/%2f"]
        );
    }

    #[test]
    fn backoff_doubles_within_bounds_and_jitters_down() {
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(2));
        for attempt in 0..40 {
            let full = (min * 2u32.pow(attempt.min(20))).min(max);
            let pause = backoff(attempt, min, max);
            assert!(pause <= full, "{pause:?} > {full:?}");
            assert!(pause >= full / 2, "{pause:?} < half of {full:?}");
        }
    }
}
