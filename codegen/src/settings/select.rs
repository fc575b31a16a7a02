//! Which of a contract's consumers and publishers a crate generates: one contract may hold
//! consumers that run in different services, and each service generates (and must handle)
//! only its own.
//!
//! An rpc is both: its server is a consumer (chosen with `consumer(name)`, left out by
//! `no_consumers`) and its client method a publisher (`publisher(name)`, `no_publishers`),
//! so a service that serves an rpc and one that calls it each generate their side alone.

use std::collections::BTreeSet;

use crate::check::{list, shown, suggest};
use crate::contract::Contract;
use crate::diagnostics::{Diagnostic, Diagnostics};

/// The most names a diagnostic about an unknown consumer or publisher lists.
const MAX_LISTED: usize = 12;

/// A choice among the consumers (or the publishers) of a contract, as the settings hold it:
/// unchecked names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum Choice {
    /// Every one of the contract's (the default).
    #[default]
    All,
    /// Only these, by contract name; empty for none.
    Only(BTreeSet<String>),
}

impl Choice {
    /// Adds `name` to the choice: from "all", the choice becomes `name` alone.
    pub(super) fn add(&mut self, name: String) {
        match self {
            Self::All => *self = Self::Only(BTreeSet::from([name])),
            Self::Only(names) => {
                names.insert(name);
            }
        }
    }

    /// Chooses none (later [`add`](Self::add)s choose again).
    pub(super) fn none(&mut self) {
        *self = Self::Only(BTreeSet::new());
    }
}

/// What is chosen: consumers or publishers.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Consumer,
    Publisher,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Self::Consumer => "consumer",
            Self::Publisher => "publisher",
        }
    }

    fn other(self) -> Self {
        match self {
            Self::Consumer => Self::Publisher,
            Self::Publisher => Self::Consumer,
        }
    }

    /// Whether the contract has one of this kind named `name`: an rpc is both.
    fn has(self, contract: &Contract, name: &str) -> bool {
        contract.rpcs.contains_key(name)
            || match self {
                Self::Consumer => contract.consumers.contains_key(name),
                Self::Publisher => contract.publishers.contains_key(name),
            }
    }

    /// The contract's names of this kind, its rpcs' included, sorted.
    fn names(self, contract: &Contract) -> Vec<&String> {
        let mut names: Vec<&String> = match self {
            Self::Consumer => contract.consumers.keys().collect(),
            Self::Publisher => contract.publishers.keys().collect(),
        };
        names.extend(contract.rpcs.keys());
        names.sort();
        names
    }
}

/// The consumers and publishers to generate, checked against the contract.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    /// `None`: every consumer of the contract.
    consumers: Option<BTreeSet<String>>,
    /// `None`: every publisher of the contract.
    publishers: Option<BTreeSet<String>>,
}

impl Selection {
    /// Checks both choices against `contract`: every name chosen must be one of its consumers
    /// (publishers). Each unknown name is a problem in `problems`, all of them reported.
    pub(super) fn resolve(
        consumers: &Choice,
        publishers: &Choice,
        contract: &Contract,
        problems: &mut Diagnostics,
    ) -> Self {
        Self {
            consumers: checked(consumers, Kind::Consumer, contract, problems),
            publishers: checked(publishers, Kind::Publisher, contract, problems),
        }
    }

    /// Whether consumer `name` is generated.
    pub(crate) fn consumer(&self, name: &str) -> bool {
        self.consumers.as_ref().is_none_or(|c| c.contains(name))
    }

    /// Whether publisher `name` is generated.
    pub(crate) fn publisher(&self, name: &str) -> bool {
        self.publishers.as_ref().is_none_or(|p| p.contains(name))
    }

    /// Whether a setting chose among the consumers (rather than taking them all).
    pub(crate) fn chooses_consumers(&self) -> bool {
        self.consumers.is_some()
    }

    /// Whether a setting chose among the publishers (rather than taking them all).
    pub(crate) fn chooses_publishers(&self) -> bool {
        self.publishers.is_some()
    }
}

/// `choice` checked against the contract's names of `kind`; `None` for all of them.
fn checked(
    choice: &Choice,
    kind: Kind,
    contract: &Contract,
    problems: &mut Diagnostics,
) -> Option<BTreeSet<String>> {
    let Choice::Only(names) = choice else {
        return None;
    };
    for name in names {
        if !kind.has(contract, name) {
            problems.push(unknown(name, kind, contract));
        }
    }
    Some(names.clone())
}

/// Why `name` cannot be chosen as a `kind`: the contract has none of that name.
fn unknown(name: &str, kind: Kind, contract: &Contract) -> Diagnostic {
    let noun = kind.noun();
    let other = kind.other().noun();
    let known = kind.names(contract);
    let help = if kind.other().has(contract, name) {
        // `--consumer place_order` for a publisher: the likeliest slip of all.
        format!(
            "`{}` is a {other}: choose it with `{other}(…)` (`--{other}` on the command line)",
            shown(name)
        )
    } else {
        match suggest(name, known.iter().copied()) {
            Some(close) => format!("did you mean `{}`?", shown(close)),
            // A large contract's list would bury the message.
            None if known.len() > MAX_LISTED => {
                format!("name one of the contract's {} {noun}s", known.len())
            }
            None => format!(
                "the contract's {noun}s are {}",
                list(known.iter().map(|k| k.as_str()))
            ),
        }
    };
    super::bad(format!(
        "cannot choose {noun} `{}`: the contract has no {noun} of that name",
        shown(name)
    ))
    .with_help(help)
}
