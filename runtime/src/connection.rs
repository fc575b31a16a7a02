//! One named connection, shared by publishers, workers and declaration.

use std::sync::Arc;

use lapin::ConnectionProperties;
use lapin::types::{LongString, ShortString};

/// A connection to RabbitMQ, cheap to clone: publishers, workers and `declare` share it and
/// each open channels of their own.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<lapin::Connection>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("connected", &self.inner.status().connected())
            .finish()
    }
}

impl Connection {
    /// Connects to `url` (`amqp://user:pass@host:port/vhost`), naming the connection `name`
    /// so it is recognisable in the broker's connection list.
    pub async fn connect(url: &str, name: &str) -> Result<Self, lapin::Error> {
        let properties =
            ConnectionProperties::default().with_connection_name(LongString::from(name));
        let connection = lapin::Connection::connect(url, properties).await?;
        Ok(Self::from_lapin(connection))
    }

    /// Uses a connection the application already has.
    pub fn from_lapin(connection: lapin::Connection) -> Self {
        Self {
            inner: Arc::new(connection),
        }
    }

    /// The underlying lapin connection.
    pub fn lapin(&self) -> &lapin::Connection {
        &self.inner
    }

    /// Whether the connection is open.
    pub fn is_connected(&self) -> bool {
        self.inner.status().connected()
    }

    /// Closes the connection; channels still open are closed with it, and unacknowledged
    /// deliveries return to their queues.
    pub async fn close(&self) -> Result<(), lapin::Error> {
        self.inner
            .close(200, ShortString::from("closed by warren"))
            .await
    }
}
