//! A diff's result, [`Report`], and its two renderings: a table for people
//! ([`Report::table`]) and JSON for tools ([`Report::json`], fields documented in
//! `docs/architecture.md`).

use serde_json::{Value, json};

use warren_codegen::diagnostics::escape;

/// Who a change breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PartyKind {
    /// A publisher of a message.
    Publisher,
    /// A consumer, reading a queue.
    Consumer,
    /// Consumers of a message in contracts not compared (none of the given contracts
    /// consumes it, so whoever does is elsewhere).
    UnknownConsumers,
    /// Code that uses the generated Rust of a message (its types), a publisher (its method),
    /// a consumer (its handler trait) or an rpc: it no longer compiles.
    RustCode,
    /// The next deploy: the broker refuses to redeclare (PRECONDITION_FAILED).
    Deploy,
    /// Messages sitting in a queue (or a wait queue) that would be lost or stranded.
    QueuedMessages,
}

impl PartyKind {
    /// The name in JSON and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Publisher => "publisher",
            Self::Consumer => "consumer",
            Self::UnknownConsumers => "unknown-consumers",
            Self::RustCode => "rust-code",
            Self::Deploy => "deploy",
            Self::QueuedMessages => "queued-messages",
        }
    }
}

/// One party a change breaks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Party {
    /// What kind of party.
    pub kind: PartyKind,
    /// Its name: a publisher, consumer, message or queue of the contract.
    pub name: String,
    /// The contract it is in, as shown.
    pub contract: String,
}

impl Party {
    fn shown(&self) -> String {
        let name = escape(&self.name);
        let contract = escape(&self.contract);
        match self.kind {
            PartyKind::Publisher => format!("publisher `{name}` ({contract})"),
            PartyKind::Consumer => format!("consumer `{name}` ({contract})"),
            PartyKind::UnknownConsumers => {
                format!("consumers of `{name}` outside the compared contracts")
            }
            PartyKind::RustCode => format!("code using the generated Rust of `{name}`"),
            PartyKind::Deploy => format!("the deploy declaring `{name}`"),
            PartyKind::QueuedMessages => format!("messages in `{name}`"),
        }
    }
}

/// The rule a change falls under, a stable name for tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// A message's payload or headers schema changed.
    Schema,
    /// A message was added.
    MessageAdded,
    /// A message was removed.
    MessageRemoved,
    /// A message's content type changed.
    ContentType,
    /// A publisher now publishes another message.
    PublisherMessage,
    /// A publisher or consumer now uses another message of the same wire form (a rename).
    RenamedMessage,
    /// A consumer now reads another message.
    ConsumerMessage,
    /// A publisher was added or removed.
    Publisher,
    /// A consumer was added or removed, or its queue changed.
    Consumer,
    /// A queue was added.
    QueueAdded,
    /// A queue was removed while it may hold messages.
    QueueRemoved,
    /// A wait queue (a ttl-backoff tier) was removed while retries may wait in it.
    WaitQueueRemoved,
    /// A queue property or argument the broker compares on redeclare.
    QueueRedeclare,
    /// A queue argument the broker does not compare on redeclare (it keeps the old value).
    QueueArgumentIgnored,
    /// A queue setting the broker never sees (the worker's retry or poison handling).
    QueueBehaviour,
    /// An exchange argument the broker does not compare on redeclare.
    ExchangeArgumentIgnored,
    /// An exchange was added.
    ExchangeAdded,
    /// An exchange was removed.
    ExchangeRemoved,
    /// An exchange property or argument the broker compares on redeclare.
    ExchangeRedeclare,
    /// A binding was added.
    BindingAdded,
    /// A binding was removed.
    BindingRemoved,
    /// A publisher's routing key reaches other queues.
    Routing,
    /// An rpc was added or removed, or what it sends, answers or where its requests go
    /// changed.
    Rpc,
}

impl Rule {
    /// The name in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Schema => "schema",
            Self::MessageAdded => "message-added",
            Self::MessageRemoved => "message-removed",
            Self::ContentType => "content-type",
            Self::PublisherMessage => "publisher-message",
            Self::RenamedMessage => "renamed-message",
            Self::ConsumerMessage => "consumer-message",
            Self::Publisher => "publisher",
            Self::Consumer => "consumer",
            Self::QueueAdded => "queue-added",
            Self::QueueRemoved => "queue-removed",
            Self::WaitQueueRemoved => "wait-queue-removed",
            Self::QueueRedeclare => "queue-redeclare",
            Self::QueueArgumentIgnored => "queue-argument-ignored",
            Self::QueueBehaviour => "queue-behaviour",
            Self::ExchangeArgumentIgnored => "exchange-argument-ignored",
            Self::ExchangeAdded => "exchange-added",
            Self::ExchangeRemoved => "exchange-removed",
            Self::ExchangeRedeclare => "exchange-redeclare",
            Self::BindingAdded => "binding-added",
            Self::BindingRemoved => "binding-removed",
            Self::Routing => "routing",
            Self::Rpc => "rpc",
        }
    }
}

/// One change between the two versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The rule it falls under.
    pub rule: Rule,
    /// Where: a contract path (`queues.orders`), with a schema location after `#` for
    /// schema changes.
    pub location: String,
    /// What changed, one sentence.
    pub summary: String,
    /// Who it breaks; empty for a safe change.
    pub breaks: Vec<Party>,
    /// Why it breaks them, and what to do; for a safe change, why it is safe.
    pub advice: String,
    /// For a schema change, which readers of the message it breaks: what decides the order
    /// of a deploy. `None` for the other rules.
    pub readers: Option<Readers>,
}

/// Which readers of a message a schema change breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readers {
    /// Consumers still on the old schema reject what publishers on the new one send: deploy
    /// every consumer before any publisher.
    pub old: bool,
    /// Consumers on the new schema reject messages written under the old one, which queues,
    /// wait queues and dead-letter queues still hold: drain them first.
    pub new: bool,
}

impl Change {
    /// Whether the change breaks someone.
    pub fn is_breaking(&self) -> bool {
        !self.breaks.is_empty()
    }
}

/// Every change between two versions of a contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The old version, as shown (a path, or `REV:path`).
    pub old: String,
    /// The new version, as shown.
    pub new: String,
    /// The changes, in a stable order: by location, then rule.
    pub changes: Vec<Change>,
}

/// The version of [`Report::json`]'s layout; it changes only when a field changes meaning or
/// goes away.
pub const JSON_FORMAT_VERSION: u32 = 1;

impl Report {
    /// Whether any change breaks someone: `warren diff` exits 1.
    pub fn is_breaking(&self) -> bool {
        self.changes.iter().any(Change::is_breaking)
    }

    /// The report as JSON: `{format_version, old, new, breaking, summary: {changes,
    /// breaking}, changes: [{rule, breaking, location, summary, breaks: [{role, name,
    /// contract}], advice, readers?: {old, new}}]}`, `readers` on schema changes alone.
    pub fn json(&self) -> Value {
        let changes: Vec<Value> = self
            .changes
            .iter()
            .map(|c| {
                let breaks: Vec<Value> = c
                    .breaks
                    .iter()
                    .map(|p| json!({ "role": p.kind.as_str(), "name": p.name, "contract": p.contract }))
                    .collect();
                let mut change = json!({
                    "rule": c.rule.as_str(),
                    "breaking": c.is_breaking(),
                    "location": c.location,
                    "summary": c.summary,
                    "breaks": breaks,
                    "advice": c.advice,
                });
                if let Some(readers) = c.readers {
                    change["readers"] = json!({ "old": readers.old, "new": readers.new });
                }
                change
            })
            .collect();
        json!({
            "format_version": JSON_FORMAT_VERSION,
            "old": self.old,
            "new": self.new,
            "breaking": self.is_breaking(),
            "summary": {
                "changes": self.changes.len(),
                "breaking": self.changes.iter().filter(|c| c.is_breaking()).count(),
            },
            "changes": changes,
        })
    }

    /// The report for a terminal: one row per change (status, change, where), then who it
    /// breaks and why or what to do, indented. Every name is escaped.
    pub fn table(&self) -> String {
        let mut out = format!("{} → {}\n", escape(&self.old), escape(&self.new));
        if self.changes.is_empty() {
            out.push_str("no changes\n");
            return out;
        }
        let rows: Vec<(&str, String, String)> = self
            .changes
            .iter()
            .map(|c| {
                let status = if c.is_breaking() { "BREAKING" } else { "safe" };
                (
                    status,
                    escape(&c.summary).into_owned(),
                    escape(&c.location).into_owned(),
                )
            })
            .collect();
        let width = rows
            .iter()
            .map(|(_, summary, _)| summary.chars().count())
            .max()
            .unwrap_or(0)
            .min(72);
        out.push_str(&format!("{:<8}  {:<width$}  WHERE\n", "STATUS", "CHANGE"));
        for ((status, summary, location), change) in rows.iter().zip(&self.changes) {
            out.push_str(&format!("{status:<8}  {summary:<width$}  {location}\n"));
            if !change.breaks.is_empty() {
                let parties: Vec<String> = change.breaks.iter().map(Party::shown).collect();
                out.push_str(&format!("          breaks: {}\n", parties.join("; ")));
            }
            let label = if change.is_breaking() { "do" } else { "why" };
            out.push_str(&format!("          {label}: {}\n", escape(&change.advice)));
        }
        let breaking = self.changes.iter().filter(|c| c.is_breaking()).count();
        out.push_str(&format!(
            "{} changes, {breaking} breaking\n",
            self.changes.len()
        ));
        out
    }
}
