//! What can go wrong declaring, checking or deleting a topology, said as the broker's refusal
//! means it: which exchange or queue, and which argument.

use lapin::ErrorKind;
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};

use crate::amqp;
use crate::model::TopologyError;

/// What part of a topology a [`DeclareError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TopologyEntity {
    /// An exchange.
    Exchange,
    /// A queue.
    Queue,
    /// A binding (named by its source exchange).
    Binding,
}

impl std::fmt::Display for TopologyEntity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Exchange => "exchange",
            Self::Queue => "queue",
            Self::Binding => "binding",
        })
    }
}

/// Why declaring or checking a topology failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeclareError {
    /// The queue or exchange exists with other arguments or flags (`PRECONDITION_FAILED`).
    #[error("{kind} `{name}` already exists with {}", argument.as_ref().map_or("different settings".to_owned(), |a| format!("a different `{a}`")))]
    Mismatch {
        /// A queue or an exchange.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// The argument that differs, when the broker named it.
        argument: Option<String>,
        /// The broker's refusal, its message naming what differs.
        #[source]
        source: lapin::Error,
    },
    /// A passive check found the queue or exchange missing (`NOT_FOUND`).
    #[error("{kind} `{name}` does not exist")]
    Missing {
        /// A queue or an exchange.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// The broker's answer.
        #[source]
        source: lapin::Error,
    },
    /// The queue exists, but on a cluster node that is down (a classic queue's node): it
    /// cannot be declared or checked until its node is back. Declaring a topology passes over
    /// such a queue (and its bindings) with a warning rather than failing on it: it is there
    /// already, and no declare can bring its node back.
    #[error("{kind} `{name}` is on a cluster node that is down")]
    NodeDown {
        /// A queue.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// The broker's answer.
        #[source]
        source: lapin::Error,
    },
    /// Any other broker or connection failure.
    #[error("declaring {kind} `{name}` failed")]
    Broker {
        /// A queue, an exchange or a binding.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// The error.
        #[source]
        source: lapin::Error,
    },
    /// An exchange the topology imports from the contract that owns it is not on the broker
    /// as that contract declares it. Nothing of the importing contract was declared: deploy
    /// (or fix) the owning contract first, or ask its team.
    #[error("{kind} `{name}`, which this contract imports from {contract}, {problem}")]
    Imported {
        /// The owning contract, as the importing contract names it, with its path.
        contract: String,
        /// An exchange.
        kind: TopologyEntity,
        /// Its name.
        name: String,
        /// Whether it is missing or different.
        problem: ImportProblem,
        /// The broker's answer.
        #[source]
        source: lapin::Error,
    },
    /// The channel to declare on could not be opened.
    #[error("cannot open a channel to declare on")]
    Channel(#[source] lapin::Error),
    /// The topology contradicts itself ([`Topology::validate`](crate::Topology::validate)): nothing was declared.
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// What is wrong with an imported exchange on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImportProblem {
    /// It does not exist (`NOT_FOUND`).
    Missing,
    /// It exists with other flags or arguments than its owner declares (`PRECONDITION_FAILED`);
    /// the argument when the broker named it.
    Differs(Option<String>),
}

impl std::fmt::Display for ImportProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => f.write_str("does not exist on the broker (is the owner deployed?)"),
            Self::Differs(None) => {
                f.write_str("exists on the broker with other settings than its owner declares")
            }
            Self::Differs(Some(argument)) => write!(
                f,
                "exists on the broker with another `{argument}` than its owner declares"
            ),
        }
    }
}

pub(super) fn channel_error(source: lapin::Error) -> DeclareError {
    DeclareError::Channel(source)
}

/// Turns the broker's `PRECONDITION_FAILED` and `NOT_FOUND` into errors that say what and
/// where, instead of a bare channel error.
pub(crate) fn classify(kind: TopologyEntity, name: &str, error: lapin::Error) -> DeclareError {
    if let ErrorKind::ProtocolError(amqp_error) = error.kind() {
        match amqp_error.kind() {
            AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED) => {
                let argument = amqp_error
                    .get_message()
                    .as_str()
                    .split_once("inequivalent arg '")
                    .and_then(|(_, rest)| rest.split_once('\''))
                    .map(|(argument, _)| argument.to_owned());
                return DeclareError::Mismatch {
                    kind,
                    name: name.to_owned(),
                    argument,
                    source: error,
                };
            }
            AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) => {
                let name = name.to_owned();
                return match amqp::not_found(&error) {
                    Some(amqp::NotFound::NodeDown) => DeclareError::NodeDown {
                        kind,
                        name,
                        source: error,
                    },
                    _ => DeclareError::Missing {
                        kind,
                        name,
                        source: error,
                    },
                };
            }
            _ => {}
        }
    }
    DeclareError::Broker {
        kind,
        name: name.to_owned(),
        source: error,
    }
}
