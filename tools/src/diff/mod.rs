//! `warren diff`: every change between two versions of a contract, and who it breaks.
//!
//! A change is breaking when it breaks a party ([`Party`]): a consumer that reads with the
//! old schema what new publishers send, or reads with the new schema what its queues, wait
//! queues and dead-letter queues still hold from the old one; code using the generated
//! types; the next deploy, when the broker refuses to redeclare a queue or exchange; or
//! messages left in a queue the new version drops. Who publishes and who consumes each
//! message comes from [`Roles`], computed from a set of contracts. Messages are compared here
//! (their schemas by `schema.rs`), the topology in `topology.rs`, the git revision is read by
//! `git.rs`, and the report is rendered by `report.rs`.

mod git;
mod report;
mod roles;
mod schema;
mod topology;

use std::collections::BTreeSet;

pub use git::{Exported, GitError, export};
pub use report::{Change, JSON_FORMAT_VERSION, Party, PartyKind, Readers, Report, Rule};
pub use roles::Roles;

use warren_codegen::Routes;
use warren_codegen::contract::{Contract, Rpc, SchemaType};
use warren_codegen::diagnostics::YamlPath;
use warren_model::DurationLabel;

/// One version of a contract and how it is shown.
#[derive(Debug, Clone, Copy)]
pub struct Version<'a> {
    /// How the version is named in the report: its path, or `REV:path`.
    pub shown: &'a str,
    /// The checked contract.
    pub contract: &'a Contract,
}

/// Every change from `old` (`None`: the contract did not exist, so everything is new) to
/// `new`, with who it breaks from the roles of both versions.
pub fn diff(old: Option<Version<'_>>, new: Version<'_>) -> Report {
    let mut roles = Roles::new([(new.shown, new.contract)]);
    if let Some(old) = old {
        roles.add(old.shown, old.contract);
    }
    diff_with(old, new, &roles)
}

/// [`diff`] with the roles given: publishers and consumers from other contracts too.
pub fn diff_with(old: Option<Version<'_>>, new: Version<'_>, roles: &Roles) -> Report {
    let empty = Contract::default();
    let old_contract = old.map_or(&empty, |v| v.contract);
    let mut changes = Vec::new();
    let mut cx = Context {
        old: old_contract,
        new: new.contract,
        routes: Versions {
            old: Routes::of(old_contract),
            new: Routes::of(new.contract),
        },
        roles,
        changes: &mut changes,
    };
    cx.messages();
    cx.publishers();
    cx.consumers();
    cx.rpcs();
    topology::compare(&mut cx);
    changes
        .sort_by(|a, b| (&a.location, a.rule, &a.summary).cmp(&(&b.location, b.rule, &b.summary)));
    Report {
        old: old.map_or_else(|| "(none)".to_owned(), |v| v.shown.to_owned()),
        new: new.shown.to_owned(),
        changes,
    }
}

/// What the rules share.
pub(crate) struct Context<'a> {
    pub(crate) old: &'a Contract,
    pub(crate) new: &'a Contract,
    /// Where each version's messages go: built once, for the publishers' routes and the
    /// rpcs' alike.
    pub(crate) routes: Versions<Routes>,
    pub(crate) roles: &'a Roles,
    pub(crate) changes: &'a mut Vec<Change>,
}

/// One thing of each version of the contract.
pub(crate) struct Versions<T> {
    pub(crate) old: T,
    pub(crate) new: T,
}

/// The path of `name` in contract section `section`, as diagnostics write it.
pub(crate) fn at(section: &str, name: &str) -> String {
    YamlPath::root().key(section).key(name).to_string()
}

/// Every key of either map, in order.
pub(crate) fn keys<'a, V>(
    old: &'a std::collections::BTreeMap<String, V>,
    new: &'a std::collections::BTreeMap<String, V>,
) -> BTreeSet<&'a str> {
    old.keys().chain(new.keys()).map(String::as_str).collect()
}

impl Context<'_> {
    /// Records a change; `breaks` empty makes it safe.
    pub(crate) fn push(
        &mut self,
        rule: Rule,
        location: String,
        summary: String,
        breaks: Vec<Party>,
        advice: &str,
    ) {
        let mut breaks = breaks;
        breaks.sort();
        breaks.dedup();
        self.changes.push(Change {
            rule,
            location,
            summary,
            breaks,
            advice: advice.to_owned(),
            readers: None,
        });
    }

    fn rust_code(message: &str) -> Party {
        Party {
            kind: PartyKind::RustCode,
            name: message.to_owned(),
            contract: String::new(),
        }
    }

    fn messages(&mut self) {
        for name in keys(&self.old.messages, &self.new.messages) {
            let location = at("messages", name);
            match (self.old.messages.get(name), self.new.messages.get(name)) {
                (None, Some(_)) => self.push(
                    Rule::MessageAdded,
                    location,
                    format!("message `{name}` added"),
                    Vec::new(),
                    "nothing published it before",
                ),
                (Some(_), None) => {
                    // A rename is a removal and an addition: an added message with the same
                    // wire form is named, and then only the generated names change.
                    let renamed = self.new.messages.keys().find(|added| {
                        !self.old.messages.contains_key(*added) && self.same_wire(name, added)
                    });
                    match renamed {
                        Some(to) => self.push(
                            Rule::RenamedMessage,
                            location,
                            format!("message `{name}` renamed to `{to}` (same schemas)"),
                            vec![Self::rust_code(name)],
                            "the wire is unchanged (same schemas and content type), so queued \
                             messages still decode; the generated names change",
                        ),
                        None => {
                            let mut breaks = self.roles.consumers(name);
                            breaks.push(Self::rust_code(name));
                            self.push(
                                Rule::MessageRemoved,
                                location,
                                format!("message `{name}` removed"),
                                breaks,
                                "queues and dead-letter queues may still hold it: keep the \
                                 message (and a consumer) until they are drained and nobody \
                                 publishes it",
                            );
                        }
                    }
                }
                (Some(old), Some(new)) => {
                    self.schema(name, "payload", Some(&old.payload), Some(&new.payload));
                    self.schema(name, "headers", old.headers.as_ref(), new.headers.as_ref());
                    if old.content_type != new.content_type {
                        let mut breaks = self.roles.consumers(name);
                        breaks.extend(self.roles.publishers(name));
                        self.push(
                            Rule::ContentType,
                            format!("{location}.content_type"),
                            format!(
                                "message `{name}`'s content type `{}` → `{}`",
                                old.content_type, new.content_type
                            ),
                            breaks,
                            "readers of either version refuse the other's bodies, and queues \
                             hold old ones: publish a new message instead",
                        );
                    }
                }
                (None, None) => {}
            }
        }
    }

    /// The changes of one schema of message `name`; a schema absent on one side is
    /// compared as `true` (anything goes).
    fn schema(
        &mut self,
        name: &str,
        part: &str,
        old: Option<&SchemaType>,
        new: Option<&SchemaType>,
    ) {
        let anything = serde_json::Value::Bool(true);
        let old_schema = old.map_or(&anything, |s| &s.schema);
        let new_schema = new.map_or(&anything, |s| &s.schema);
        // Only a writer outside the generated types sends a property an open payload schema
        // does not declare: when every producer is a publisher of the contracts, none can.
        // Headers are never so sure: warren and the broker add headers of their own.
        let typed_producers_only = part == "payload" && self.roles.typed_producers_only(name);
        for change in schema::compare(old_schema, new_schema) {
            let mut breaks = Vec::new();
            let mut why = Vec::new();
            let mut effect = change.effect;
            if effect.untyped_writers_only && (effect.old_readers || effect.new_readers) {
                if typed_producers_only {
                    effect.old_readers = false;
                    effect.new_readers = false;
                    why.push(
                        "safe on the wire: every producer of the message is a publisher of \
                         these contracts, and the generated types of an open schema send its \
                         declared properties alone",
                    );
                } else {
                    why.push(if part == "payload" {
                        "a producer outside these contracts (none of them publishes the \
                         message, or it is marked `external_producers`) may send an \
                         undeclared property of that name with another type"
                    } else {
                        "warren and the broker add headers of their own, and a producer \
                         outside the generated types may send any: one of that name may \
                         have another type"
                    });
                }
            }
            if effect.old_readers {
                breaks.extend(self.roles.consumers(name));
                why.push(
                    "consumers still on the old schema reject what new publishers send: \
                     deploy every consumer before any publisher",
                );
            }
            if effect.new_readers {
                breaks.extend(self.roles.consumers(name));
                why.push(
                    "consumers on the new schema reject messages written under the old one, \
                     which their queues, wait queues and dead-letter queues still hold (and \
                     redrive sends back): drain them first, or accept both shapes",
                );
            }
            if effect.rust_api {
                breaks.push(Self::rust_code(name));
                breaks.extend(self.roles.publishers(name));
                why.push("the generated Rust types change: code using them must be updated");
            }
            let advice = if why.is_empty() {
                "readers of either version accept the other's messages".to_owned()
            } else {
                why.join("; ")
            };
            let pointer = if change.pointer.is_empty() {
                String::new()
            } else {
                format!("#{}", change.pointer)
            };
            self.push(
                Rule::Schema,
                format!("{}.{part}{pointer}", at("messages", name)),
                // `describe` starts with where in the schema the change is.
                format!("message `{name}` {part}, {}", change.describe()),
                breaks,
                &advice,
            );
            if let Some(recorded) = self.changes.last_mut() {
                recorded.readers = Some(Readers {
                    old: effect.old_readers,
                    new: effect.new_readers,
                });
            }
        }
    }

    /// Whether message `old` of the old version and message `new` of the new one have the
    /// same wire form: schemas and content type.
    fn same_wire(&self, old: &str, new: &str) -> bool {
        match (self.old.messages.get(old), self.new.messages.get(new)) {
            (Some(a), Some(b)) => {
                a.payload.schema == b.payload.schema
                    && a.headers.as_ref().map(|h| &h.schema)
                        == b.headers.as_ref().map(|h| &h.schema)
                    && a.content_type == b.content_type
            }
            _ => false,
        }
    }

    fn publishers(&mut self) {
        for name in keys(&self.old.publishers, &self.new.publishers) {
            let location = at("publishers", name);
            match (self.old.publishers.get(name), self.new.publishers.get(name)) {
                (None, Some(p)) => self.push(
                    Rule::Publisher,
                    location,
                    format!("publisher `{name}` of `{}` added", p.message),
                    Vec::new(),
                    "a new source of a known message",
                ),
                (Some(p), None) => self.push(
                    Rule::Publisher,
                    location,
                    format!("publisher `{name}` of `{}` removed", p.message),
                    vec![Self::rust_code(name)],
                    "its consumers stop receiving its messages; nothing already sent is lost; \
                     its method of `Publishers` goes, so code calling it must go first",
                ),
                (Some(old), Some(new))
                    if old.message != new.message && self.same_wire(&old.message, &new.message) =>
                {
                    self.renamed_message(&location, "publisher", name, &old.message, &new.message);
                }
                (Some(old), Some(new)) if old.message != new.message => {
                    let mut breaks = self.roles.consumers(&old.message);
                    breaks.push(Self::rust_code(&old.message));
                    self.push(
                        Rule::PublisherMessage,
                        format!("{location}.message"),
                        format!(
                            "publisher `{name}` sends `{}` instead of `{}`",
                            new.message, old.message
                        ),
                        breaks,
                        "the queues it reaches are read as the old message: add a publisher \
                         (and queues) for the new message instead",
                    );
                }
                _ => {}
            }
        }
    }

    /// A publisher or consumer that moved to a message of the same wire form (a renamed
    /// message): only the generated code changes.
    fn renamed_message(&mut self, location: &str, role: &str, name: &str, old: &str, new: &str) {
        self.push(
            Rule::RenamedMessage,
            format!("{location}.message"),
            format!("{role} `{name}` uses `{new}` instead of `{old}`, of the same schemas"),
            vec![Self::rust_code(old)],
            "the wire is unchanged, so queued messages still decode; code naming the old \
             message's generated items must be updated",
        );
    }

    fn consumers(&mut self) {
        for name in keys(&self.old.consumers, &self.new.consumers) {
            let location = at("consumers", name);
            match (self.old.consumers.get(name), self.new.consumers.get(name)) {
                (None, Some(c)) => self.push(
                    Rule::Consumer,
                    location,
                    format!("consumer `{name}` of queue `{}` added", c.spec.queue),
                    Vec::new(),
                    "a new reader",
                ),
                (Some(c), None) => {
                    let queue_stays = self.new.topology.queue(&c.spec.queue).is_some()
                        && self
                            .roles
                            .queue_consumers(&c.spec.queue)
                            .iter()
                            .all(|p| p.name == name);
                    // Its handler trait and `Handlers` field go with it.
                    let mut breaks = vec![Self::rust_code(name)];
                    if queue_stays {
                        breaks.push(queued(&c.spec.queue));
                    }
                    self.push(
                        Rule::Consumer,
                        location,
                        format!("consumer `{name}` of queue `{}` removed", c.spec.queue),
                        breaks,
                        if queue_stays {
                            "its queue stays and keeps receiving: messages pile up unread; \
                             remove the queue's bindings too, and delete it once drained; its \
                             handler trait goes, so its implementation must go first"
                        } else {
                            "its queue goes with it, or another consumer reads it; its handler \
                             trait goes, so its implementation must go first"
                        },
                    );
                }
                (Some(old), Some(new))
                    if !old.takes_several()
                        && !new.takes_several()
                        && old.message() != new.message()
                        && self.same_wire(old.message(), new.message()) =>
                {
                    self.renamed_message(&location, "consumer", name, old.message(), new.message());
                }
                (Some(old), Some(new)) if consumed(old) != consumed(new) => {
                    let reader = self
                        .roles
                        .consumers(new.message())
                        .into_iter()
                        .find(|p| p.kind == PartyKind::Consumer && p.name == name)
                        .unwrap_or_else(|| Party {
                            kind: PartyKind::Consumer,
                            name: name.to_owned(),
                            contract: String::new(),
                        });
                    // Its handler's deliveries change type.
                    let breaks = vec![reader, queued(&new.spec.queue), Self::rust_code(name)];
                    self.push(
                        Rule::ConsumerMessage,
                        format!("{location}.message"),
                        format!(
                            "consumer `{name}` reads `{}` instead of `{}`",
                            consumed(new),
                            consumed(old)
                        ),
                        breaks,
                        "its queue (and its wait and dead-letter queues) still hold the old \
                         message: consume the new one from a new queue",
                    );
                }
                (Some(old), Some(new)) if old.spec.queue != new.spec.queue => self.push(
                    Rule::Consumer,
                    format!("{location}.queue"),
                    format!(
                        "consumer `{name}` reads queue `{}` instead of `{}`",
                        new.spec.queue, old.spec.queue
                    ),
                    vec![queued(&old.spec.queue)],
                    "messages left in the old queue are no longer read: drain it first",
                ),
                _ => {}
            }
        }
    }
}

impl Context<'_> {
    /// The party of rpc `name` as the roles know it (its contract named), of `kind`: its
    /// callers (`Publisher`: they publish its requests) or its server (`Consumer`).
    fn rpc_party(&self, kind: PartyKind, request: &str, name: &str) -> Party {
        let known = match kind {
            PartyKind::Publisher => self.roles.publishers(request),
            _ => self.roles.consumers(request),
        };
        known
            .into_iter()
            .find(|p| p.kind == kind && p.name == name)
            .unwrap_or_else(|| Party {
                kind,
                name: name.to_owned(),
                contract: String::new(),
            })
    }

    /// Rpcs added, removed, or changed in what they send, answer, or where requests go.
    /// Callers and servers are deployed apart: a change one side must see before the other
    /// breaks the side that is late.
    fn rpcs(&mut self) {
        for name in keys(&self.old.rpcs, &self.new.rpcs) {
            match (self.old.rpcs.get(name), self.new.rpcs.get(name)) {
                (None, Some(rpc)) => self.rpc_added(name, rpc),
                (Some(rpc), None) => self.rpc_removed(name, rpc),
                (Some(old), Some(new)) => self.rpc_changed(name, old, new),
                (None, None) => {}
            }
        }
    }

    /// An rpc only the new version has.
    fn rpc_added(&mut self, name: &str, rpc: &Rpc) {
        let location = at("rpcs", name);
        self.push(
            Rule::Rpc,
            location,
            format!("rpc `{name}` of `{}` added", rpc.request),
            Vec::new(),
            "a new operation: deploy its server before its callers, whose calls \
             fail as unroutable until its queue exists",
        );
    }

    /// An rpc only the old version has.
    fn rpc_removed(&mut self, name: &str, rpc: &Rpc) {
        let location = at("rpcs", name);
        let caller = self.rpc_party(PartyKind::Publisher, &rpc.request, name);
        self.push(
            Rule::Rpc,
            location,
            format!("rpc `{name}` of `{}` removed", rpc.request),
            vec![
                caller,
                Self::rust_code(&rpc.request),
                queued(&rpc.server.spec.queue),
            ],
            "callers still deployed get no answer (their requests time out or \
             are unroutable), and requests in its queue are never answered: \
             remove every caller first",
        );
    }

    /// An rpc in both versions: its messages, its declared errors, its route, its queue and
    /// its timeout, each compared.
    fn rpc_changed(&mut self, name: &str, old: &Rpc, new: &Rpc) {
        let location = at("rpcs", name);
        let caller = self.rpc_party(PartyKind::Publisher, &new.request, name);
        let server = self.rpc_party(PartyKind::Consumer, &new.request, name);
        self.rpc_messages(name, &location, (old, new), (&caller, &server));
        self.rpc_errors(name, &location, (old, new), (&caller, &server));
        self.rpc_route(name, &location, (old, new), &caller);
        if old.server.spec.queue != new.server.spec.queue {
            self.push(
                Rule::Rpc,
                format!("{location}.queue"),
                format!(
                    "rpc `{name}` is served from queue `{}` instead of `{}`",
                    new.server.spec.queue, old.server.spec.queue
                ),
                vec![queued(&old.server.spec.queue)],
                "requests left in the old queue are no longer answered (their callers \
                 time out): drain it first",
            );
        }
        if old.target.timeout != new.target.timeout {
            self.push(
                Rule::Rpc,
                format!("{location}.timeout"),
                format!(
                    "rpc `{name}`'s timeout is {} instead of {}",
                    DurationLabel(new.target.timeout),
                    DurationLabel(old.target.timeout)
                ),
                Vec::new(),
                "each caller waits as its own version says",
            );
        }
    }

    /// The request and response messages of an rpc in both versions.
    fn rpc_messages(
        &mut self,
        name: &str,
        location: &str,
        (old, new): (&Rpc, &Rpc),
        (caller, server): (&Party, &Party),
    ) {
        let messages = [
            ("request", &old.request, &new.request),
            ("response", &old.response, &new.response),
        ];
        for (part, before, after) in messages {
            if before == after {
                continue;
            }
            let same = self.same_wire(before, after);
            let breaks = if same {
                vec![Self::rust_code(before)]
            } else {
                vec![caller.clone(), server.clone(), Self::rust_code(before)]
            };
            self.push(
                if same {
                    Rule::RenamedMessage
                } else {
                    Rule::Rpc
                },
                format!("{location}.{part}"),
                format!("rpc `{name}`'s {part} is `{after}` instead of `{before}`"),
                breaks,
                if same {
                    "the wire is unchanged (same schemas), so callers and servers of \
                     either version still understand each other; the generated names \
                     change"
                } else {
                    "callers and servers of different versions no longer understand \
                     each other: add a new rpc instead, and retire the old one once no \
                     caller uses it"
                },
            );
        }
    }

    /// The declared errors of an rpc in both versions, code by code.
    fn rpc_errors(
        &mut self,
        name: &str,
        location: &str,
        (old, new): (&Rpc, &Rpc),
        (caller, server): (&Party, &Party),
    ) {
        for code in keys(&old.errors, &new.errors) {
            let at_code = format!("{location}.errors.{code}");
            match (old.errors.get(code), new.errors.get(code)) {
                (None, Some(message)) => self.push(
                    Rule::Rpc,
                    at_code,
                    format!("rpc `{name}` declares error `{code}` (`{message}`)"),
                    vec![caller.clone(), Self::rust_code(message)],
                    "callers still on the old version read this error as an invalid \
                     reply, and code matching the errors' enum must handle the new \
                     variant: deploy the callers before the server sends it",
                ),
                (Some(message), None) => self.push(
                    Rule::Rpc,
                    at_code,
                    format!("rpc `{name}` no longer declares error `{code}` (`{message}`)"),
                    vec![server.clone(), Self::rust_code(message)],
                    "servers still on the old version send it, and new callers read it \
                     as an invalid reply: deploy the servers first; code naming the \
                     variant must be updated",
                ),
                (Some(before), Some(after)) if before != after => self.push(
                    Rule::Rpc,
                    at_code,
                    format!("rpc `{name}`'s error `{code}` is `{after}` instead of `{before}`"),
                    if self.same_wire(before, after) {
                        vec![Self::rust_code(before)]
                    } else {
                        vec![caller.clone(), server.clone(), Self::rust_code(before)]
                    },
                    "callers and servers of different versions read each other's error \
                     as an invalid reply unless the two messages have the same schemas",
                ),
                _ => {}
            }
        }
    }

    /// Where an rpc's requests go in both versions.
    fn rpc_route(&mut self, name: &str, location: &str, (old, new): (&Rpc, &Rpc), caller: &Party) {
        if old.target != new.target {
            // Callers still on the old version keep the old route: it breaks them when
            // the new topology no longer takes it to the new server's queue.
            let reached = self
                .routes
                .new
                .queues(&old.target.exchange, &old.routing_key)
                .contains(&new.server.spec.queue);
            self.push(
                Rule::Rpc,
                format!("{location}.routing_key"),
                format!(
                    "rpc `{name}` sends requests to `{}` with `{}` instead of `{}` with `{}`",
                    new.target.exchange,
                    new.target.routing_key,
                    old.target.exchange,
                    old.target.routing_key
                ),
                if reached {
                    Vec::new()
                } else {
                    vec![caller.clone()]
                },
                if reached {
                    "the old route still reaches the server's queue, so callers of either \
                     version are answered"
                } else {
                    "callers still on the old version send where the new server does not \
                     listen: keep the old route bound until every caller is redeployed"
                },
            );
        }
    }
}

/// The messages sitting in `queue`.
pub(crate) fn queued(queue: &str) -> Party {
    Party {
        kind: PartyKind::QueuedMessages,
        name: queue.to_owned(),
        contract: String::new(),
    }
}

/// The messages `consumer` reads, as the report names them: `a`, or `a`, `b` for several.
fn consumed(consumer: &warren_codegen::contract::Consumer) -> String {
    let names: Vec<&str> = consumer
        .messages
        .iter()
        .map(|c| c.message.as_str())
        .collect();
    names.join("`, `")
}
