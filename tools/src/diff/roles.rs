//! Who produces and who consumes each message, across a set of contracts.
//!
//! Built from every contract given (today one; later the contracts that import it too), so
//! a change can name the consumer it breaks and the contract that consumer is in.

use std::collections::{BTreeMap, BTreeSet};

use super::report::{Party, PartyKind};
use warren_codegen::contract::Contract;

/// Publishers and consumers of each message (an rpc's callers and server among them), and
/// consumers of each queue.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    publishers: BTreeMap<String, BTreeSet<Party>>,
    consumers: BTreeMap<String, BTreeSet<Party>>,
    queue_consumers: BTreeMap<String, BTreeSet<Party>>,
    /// Messages some contract says producers outside the contracts publish.
    external_producers: BTreeSet<String>,
}

impl Roles {
    /// The roles in `contracts`, each given with the name it is shown by.
    pub fn new<'a>(contracts: impl IntoIterator<Item = (&'a str, &'a Contract)>) -> Self {
        let mut roles = Self::default();
        for (shown, contract) in contracts {
            roles.add(shown, contract);
        }
        roles
    }

    /// Adds the publishers and consumers of `contract`, shown as `shown`. A party already
    /// known by kind and name (the same consumer in the other version of a contract) is
    /// kept as first added.
    pub fn add(&mut self, shown: &str, contract: &Contract) {
        let party = |kind, name: &str| Party {
            kind,
            name: name.to_owned(),
            contract: shown.to_owned(),
        };
        let insert = |map: &mut BTreeMap<String, BTreeSet<Party>>, key: &str, party: Party| {
            let set = map.entry(key.to_owned()).or_default();
            if !set
                .iter()
                .any(|p| p.kind == party.kind && p.name == party.name)
            {
                set.insert(party);
            }
        };
        for message in contract.messages.values() {
            if message.external_producers {
                self.external_producers.insert(message.name.clone());
            }
        }
        for publisher in contract.publishers.values() {
            let writer = party(PartyKind::Publisher, &publisher.name);
            insert(&mut self.publishers, &publisher.message, writer);
        }
        for consumer in contract.consumers.values() {
            let reader = party(PartyKind::Consumer, &consumer.spec.name);
            for consumed in &consumer.messages {
                insert(&mut self.consumers, &consumed.message, reader.clone());
            }
            insert(&mut self.queue_consumers, &consumer.spec.queue, reader);
        }
        // An rpc is both ways round: its callers publish the request and read the answers
        // (response and declared errors), its server reads the request from its queue and
        // publishes the answers. Both are named after the rpc.
        for rpc in contract.rpcs.values() {
            let writer = party(PartyKind::Publisher, &rpc.name);
            let reader = party(PartyKind::Consumer, &rpc.name);
            insert(&mut self.publishers, &rpc.request, writer.clone());
            insert(&mut self.consumers, &rpc.request, reader.clone());
            insert(
                &mut self.queue_consumers,
                &rpc.server.spec.queue,
                reader.clone(),
            );
            for answer in std::iter::once(&rpc.response).chain(rpc.errors.values()) {
                insert(&mut self.publishers, answer, writer.clone());
                insert(&mut self.consumers, answer, reader.clone());
            }
        }
    }

    /// The publishers of `message`.
    pub fn publishers(&self, message: &str) -> Vec<Party> {
        self.publishers
            .get(message)
            .map(|p| p.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether every producer of `message` is a publisher (or rpc caller or server) of the
    /// contracts, writing with the generated types: one is, and no contract says producers
    /// outside them publish it too.
    pub fn typed_producers_only(&self, message: &str) -> bool {
        self.publishers.get(message).is_some_and(|p| !p.is_empty())
            && !self.external_producers.contains(message)
    }

    /// The consumers of `message`; when none of the contracts consumes it, the consumers
    /// elsewhere, as one party.
    pub fn consumers(&self, message: &str) -> Vec<Party> {
        match self.consumers.get(message) {
            Some(found) if !found.is_empty() => found.iter().cloned().collect(),
            _ => vec![Party {
                kind: PartyKind::UnknownConsumers,
                name: message.to_owned(),
                contract: String::new(),
            }],
        }
    }

    /// The consumers reading `queue` (none when nobody does).
    pub fn queue_consumers(&self, queue: &str) -> Vec<Party> {
        self.queue_consumers
            .get(queue)
            .map(|p| p.iter().cloned().collect())
            .unwrap_or_default()
    }
}
