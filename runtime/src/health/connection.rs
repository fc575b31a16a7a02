//! A connection's health: its link, as the connection's supervisor records it.

use serde::Serialize;

use super::LastError;

/// A connection's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectionHealth {
    /// The connection's name.
    pub name: String,
    /// Whether the link to the broker is up.
    pub connected: bool,
    /// The URL of the broker node the link is on, its password hidden; `None` while it
    /// reconnects. On a cluster: which node this connection's workers and publishers
    /// depend on.
    pub url: Option<String>,
    /// Whether [`crate::Connection::close`] was called: it will not reconnect.
    pub closed: bool,
    /// Why the broker blocks publishing (a resource alarm), while it does.
    pub blocked: Option<String>,
    /// Failed reconnect attempts since the link was lost; 0 while connected.
    pub reconnect_attempts: u32,
    /// Times the link was lost and restored since the connection opened.
    pub reconnects: u64,
    /// Why the link was last lost, or the last reconnect attempt failed.
    pub last_error: Option<LastError>,
}

/// What a connection remembers about its link's failures, for [`ConnectionHealth`].
#[derive(Debug, Default)]
pub(crate) struct LinkRecord {
    pub reconnect_attempts: u32,
    pub reconnects: u64,
    pub last_error: Option<LastError>,
    /// The index of the URL the link is on; `None` while it is down.
    pub url: Option<usize>,
}

impl LinkRecord {
    /// The first link, to URL `url`.
    pub(crate) fn opened(url: usize) -> Self {
        Self {
            url: Some(url),
            ..Self::default()
        }
    }

    /// The link was lost, or a reconnect attempt failed (`attempt`, counted from 1).
    pub(crate) fn failed(&mut self, error: &str, attempt: Option<u32>) {
        self.last_error = Some(LastError::now(error));
        self.url = None;
        if let Some(attempt) = attempt {
            self.reconnect_attempts = attempt;
        }
    }

    /// The link is back, on URL `url`.
    pub(crate) fn restored(&mut self, url: usize) {
        self.reconnect_attempts = 0;
        self.reconnects = self.reconnects.saturating_add(1);
        self.url = Some(url);
    }
}
