//! Whether the node a direct reply-to address names is running, asked before an RPC server
//! replies to it.
//!
//! RabbitMQ 3.10 closes the whole connection of a publisher whose direct reply-to address
//! names a node hash no running node has (`crate::rpc::reply_to`): a forged address, or a
//! caller whose node left the cluster while its request waited. A server publishing that
//! reply on its copies connection would lose it, and every retry, dead letter and reply in
//! flight with it, again at each redelivery. So the first request naming a node is probed
//! on a connection of its own (a passive declare of its address, which RabbitMQ decodes the
//! same way): a probe the broker answers, `NOT_FOUND` included (the caller's channel is
//! gone, the node is there), says the node runs; one that costs the probe its connection
//! says it does not. What a probe learnt is believed for [`BELIEVED_FOR`] and forgotten when
//! the copies connection reconnects, so a node that leaves costs at most one connection.

use std::collections::BTreeMap;
use std::time::Duration;

use lapin::options::QueueDeclareOptions;
use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
use lapin::types::{FieldTable, ShortString};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::Connection;
use crate::error::Chain;

/// How long what a probe learnt of a node is believed.
const BELIEVED_FOR: Duration = Duration::from_secs(10);
/// How many nodes are remembered at once: a cluster has a handful, and forged hashes must
/// not grow the memory without bound.
const MAX_REMEMBERED: usize = 64;
/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a reply to a node may be published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NodeCheck {
    /// A running node: the reply can be published.
    Running,
    /// No running node has the address's hash: publishing the reply would cost the
    /// connection.
    NotRunning,
    /// The probe could not tell (its connection could not be opened, it timed out): why.
    Unknown(String),
}

/// The nodes an RPC server's replies have named, and the connection that probes new ones.
pub(super) struct ReplyNodes {
    copies: Connection,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Node hash → whether it runs, and when that was learnt.
    known: BTreeMap<u64, (bool, Instant)>,
    /// The copies connection's reconnects when `known` was filled.
    reconnects: u64,
    probe: Option<crate::connection::Aside>,
}

impl ReplyNodes {
    /// Checks nodes for replies published on `copies`.
    pub(super) fn new(copies: Connection) -> Self {
        Self {
            copies,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether `node` (the hash `address` names) runs: from memory, or probed.
    pub(super) async fn check(&self, node: u64, address: &str) -> NodeCheck {
        let mut state = self.state.lock().await;
        let reconnects = self.copies.reconnects();
        if state.reconnects != reconnects || state.known.len() >= MAX_REMEMBERED {
            state.known.clear();
            state.reconnects = reconnects;
        }
        if let Some((running, learnt)) = state.known.get(&node)
            && learnt.elapsed() < BELIEVED_FOR
        {
            return if *running {
                NodeCheck::Running
            } else {
                NodeCheck::NotRunning
            };
        }
        let probed = tokio::time::timeout(PROBE_TIMEOUT, self.probe(&mut state, address)).await;
        let check = probed.unwrap_or_else(|_| {
            state.probe = None;
            NodeCheck::Unknown(format!("the probe took over {PROBE_TIMEOUT:?}"))
        });
        match check {
            NodeCheck::Running => state.known.insert(node, (true, Instant::now())),
            NodeCheck::NotRunning => state.known.insert(node, (false, Instant::now())),
            NodeCheck::Unknown(_) => None,
        };
        check
    }

    /// Declares `address` passively on the probe connection (opened when there is none).
    async fn probe(&self, state: &mut State, address: &str) -> NodeCheck {
        let connection = match state.probe.take().filter(|c| c.status().connected()) {
            Some(connection) => connection,
            None => match self.copies.open_aside("reply probe").await {
                Ok(connection) => connection,
                Err(error) => return NodeCheck::Unknown(Chain(&error).to_string()),
            },
        };
        let channel = match connection.create_channel().await {
            Ok(channel) => channel,
            Err(error) => return NodeCheck::Unknown(Chain(&error).to_string()),
        };
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = channel
            .queue_declare(ShortString::from(address), passive, FieldTable::default())
            .await;
        let check = match declared {
            Ok(_) => {
                let _ = channel.close(200, ShortString::from("probed")).await;
                NodeCheck::Running
            }
            Err(error) => match protocol_error(&error) {
                Some(AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND)) => NodeCheck::Running,
                Some(AMQPErrorKind::Hard(AMQPHardError::INTERNALERROR)) => NodeCheck::NotRunning,
                _ => NodeCheck::Unknown(Chain(&error).to_string()),
            },
        };
        if connection.status().connected() {
            state.probe = Some(connection);
        }
        check
    }
}

fn protocol_error(error: &lapin::Error) -> Option<&AMQPErrorKind> {
    match error.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => Some(amqp.kind()),
        _ => None,
    }
}
