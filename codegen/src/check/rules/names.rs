//! Names: keys written twice, AMQP name syntax, derived wait-queue names, and the Rust
//! identifiers names become.

use std::collections::BTreeMap;

use super::{Checker, Kind, MAX_NAME_BYTES, entry};
use crate::check::shown;
use crate::contract::{Backoff, Retry, retry_policy};
use crate::diagnostics::Code;
use crate::diagnostics::{Diagnostic, YamlPath};
use crate::naming::{Role, role_ident};
use warren_model::HOLDING_SUFFIX;

impl Checker<'_> {
    /// Keys written twice: YAML keeps the last one silently, so a second queue `orders`
    /// would replace the first without a word.
    pub(in crate::check) fn duplicates(&mut self) {
        for duplicate in self.contract.spans.duplicates() {
            let section = match duplicate.parent.segments() {
                [crate::diagnostics::Segment::Key(section)] => section.as_str(),
                _ => "",
            };
            let what = match section {
                "exchanges" => "exchange",
                "queues" => "queue",
                "messages" => "message",
                "publishers" => "publisher",
                "consumers" => "consumer",
                "rpcs" => "rpc",
                _ => "key",
            };
            let diagnostic = Diagnostic::error(
                Code::DuplicateName,
                self.contract.path(),
                format!(
                    "{what} `{}` is written twice; the second entry would silently replace the first",
                    shown(&duplicate.key)
                ),
            )
            .with_help("rename one of them, or merge them into one entry")
            .at(crate::diagnostics::Place::Yaml {
                path: duplicate.path(),
                span: Some(duplicate.span),
            });
            self.push(diagnostic);
        }
    }

    /// Name syntax: empty, too long for AMQP, or in the broker's reserved `amq.` space; and
    /// derived wait queues, which must fit AMQP's limit and not take a declared queue's name.
    pub(in crate::check) fn names(&mut self) {
        self.amqp_names();
        self.wait_queue_names();
        self.warren_names();
    }

    /// Exchange and queue names: empty, longer than AMQP allows, or reserved by RabbitMQ.
    fn amqp_names(&mut self) {
        let file = self.file;
        let amqp_names = [
            (Kind::Exchange, file.exchanges.keys().collect::<Vec<_>>()),
            (Kind::Queue, file.queues.keys().collect()),
        ];
        for (kind, names) in amqp_names {
            let (what, section) = kind.words();
            for name in names {
                let path = match self.imports.messages.get(name) {
                    Some((alias, _)) => YamlPath::root().key("imports").key(alias),
                    None => entry(section, name),
                };
                if name.trim().is_empty() {
                    self.error(
                        Code::BadName,
                        &path,
                        format!("{what} name `{name}` is empty"),
                        format!("give every {what} a name"),
                    );
                } else if name.len() > MAX_NAME_BYTES {
                    self.error(
                        Code::NameTooLong,
                        &path,
                        format!(
                            "{what} name is {} bytes; AMQP names hold at most {MAX_NAME_BYTES}",
                            name.len()
                        ),
                        format!("shorten the name of {what} `{}`", shown(name)),
                    );
                } else if name.starts_with("amq.") {
                    self.error(
                        Code::ReservedName,
                        &path,
                        format!("{what} name `{name}` starts with `amq.`, which RabbitMQ reserves"),
                        format!("choose {what} names without the `amq.` prefix"),
                    );
                } else if let Some(held) = name.strip_suffix(HOLDING_SUFFIX)
                    && matches!(kind, Kind::Queue)
                {
                    self.error(
                        Code::ReservedName,
                        &path,
                        format!(
                            "queue name `{}` ends with `{HOLDING_SUFFIX}`, which `warren plan` reserves for the holding queue of `{}` while it migrates that queue",
                            shown(name),
                            shown(held)
                        ),
                        format!("choose queue names that do not end with `{HOLDING_SUFFIX}`"),
                    );
                }
            }
        }
    }

    /// The wait queues a `ttl-backoff` retry derives: few enough, short enough, and not
    /// named like a declared queue.
    fn wait_queue_names(&mut self) {
        let file = self.file;
        for (name, queue) in &file.queues {
            let Retry::TtlBackoff(Backoff { tiers, .. }) = retry_policy(name, queue) else {
                continue;
            };
            let path = entry("queues", name);
            if tiers.len() > crate::contract::MAX_WAIT_TIERS {
                self.error(
                    Code::BadRetry,
                    &path.key("retry"),
                    format!(
                        "this backoff needs more than {} wait queues, one per distinct delay",
                        crate::contract::MAX_WAIT_TIERS
                    ),
                    "raise `multiplier`, lower `max_delay`, or lower `max_retries`",
                );
            }
            if let Some(long) = tiers.iter().find(|t| t.queue.len() > MAX_NAME_BYTES) {
                self.error(
                    Code::NameTooLong,
                    &path,
                    format!(
                        "queue `{}` needs a wait queue `{}` of {} bytes; AMQP names hold at most {MAX_NAME_BYTES}",
                        shown(name),
                        shown(&long.queue),
                        long.queue.len()
                    ),
                    "shorten the queue name: wait queues are named `<queue>.wait.<delay>`",
                );
            }
            if let Some(taken) = tiers.iter().find(|t| file.queues.contains_key(&t.queue)) {
                self.error(
                    Code::WaitQueueClash,
                    &path,
                    format!(
                        "queue `{}` needs a wait queue `{}`, and a queue of that name is declared",
                        shown(name),
                        shown(&taken.queue)
                    ),
                    "rename the declared queue: wait queues are named `<queue>.wait.<delay>`",
                );
            }
        }
    }

    /// Message, publisher, consumer and rpc names, which warren alone reads: at most
    /// [`MAX_NAME_BYTES`] like every other name.
    fn warren_names(&mut self) {
        let file = self.file;
        let sections = [
            ("messages", file.messages.keys().collect::<Vec<_>>()),
            ("publishers", file.publishers.keys().collect()),
            ("consumers", file.consumers.keys().collect()),
            ("rpcs", file.rpcs.keys().collect()),
        ];
        for (section, names) in sections {
            for name in names.into_iter().filter(|n| n.len() > MAX_NAME_BYTES) {
                self.error(
                    Code::NameTooLong,
                    &entry(section, name),
                    format!(
                        "name is {} bytes; warren names hold at most {MAX_NAME_BYTES}",
                        name.len()
                    ),
                    "shorten the name",
                );
            }
        }
    }

    /// Names that become Rust identifiers must give valid, distinct ones. Names are split
    /// into words and re-cased, so `order-placed`, `order_placed` and `OrderPlaced` are one
    /// name to Rust: the later one (in sorted order) is reported, naming the other.
    ///
    /// An rpc's server is registered like a consumer (a trait in `consumers`, a field of
    /// `Handlers`, a name on the worker), so rpcs and consumers share those names; in `rpcs`,
    /// an rpc's marker type and its errors' enum (`QuotePrice`, `QuotePriceError`) share one
    /// namespace with every other rpc's.
    pub(in crate::check) fn identifiers(&mut self) {
        let file = self.file;
        let consumers_and_rpcs = || {
            named("consumers", file.consumers.keys())
                .chain(named("rpcs", file.rpcs.keys()))
                .collect::<Vec<_>>()
        };
        // Each entry: the section, the name, and the text its identifier is derived from.
        let groups: [(Role, Vec<Named<'_>>); 6] = [
            (
                Role::Message,
                // Imported messages get identifiers here too (`orders::order_placed` is
                // `OrdersOrderPlaced`).
                named(
                    "messages",
                    file.messages.keys().chain(self.imports.messages.keys()),
                )
                .collect(),
            ),
            (
                Role::Publisher,
                named("publishers", file.publishers.keys()).collect(),
            ),
            (Role::ConsumerTrait, consumers_and_rpcs()),
            (Role::ConsumerField, consumers_and_rpcs()),
            (Role::RpcMethod, named("rpcs", file.rpcs.keys()).collect()),
            (
                Role::Rpc,
                file.rpcs
                    .iter()
                    .flat_map(|(name, rpc)| {
                        let marker = ("rpcs", name.as_str(), name.clone());
                        // The errors' enum: the marker's words and `error`.
                        let errors = (!rpc.errors.is_empty())
                            .then(|| ("rpcs", name.as_str(), format!("{name}_error")));
                        std::iter::once(marker).chain(errors)
                    })
                    .collect(),
            ),
        ];
        for (role, names) in groups {
            let noun = role.noun();
            let mut taken: BTreeMap<String, (&str, &str)> = BTreeMap::new();
            for (section, name, text) in names {
                let path = entry(section, name);
                match role_ident(&text, role) {
                    Err(problem) => {
                        // A name fails alike in every role of its case: report it once, as a
                        // message, publisher, consumer trait or rpc method.
                        let first_role =
                            matches!(role, Role::Message | Role::Publisher | Role::ConsumerTrait);
                        if first_role {
                            self.error(
                                Code::BadIdentifier,
                                &path,
                                format!(
                                    "`{}` cannot become a Rust {noun} name: {problem}",
                                    shown(name)
                                ),
                                "use ASCII letters and digits, starting with a letter",
                            );
                        }
                    }
                    Ok(id) => {
                        if let Some((first_section, first)) =
                            taken.insert(id.text.clone(), (section, name))
                        {
                            let what = if first_section == section {
                                format!("{section} `{}` and `{}`", shown(first), shown(name))
                            } else {
                                format!(
                                    "{} `{}` and {} `{}`",
                                    singular(first_section),
                                    shown(first),
                                    singular(section),
                                    shown(name)
                                )
                            };
                            let why = if role == Role::Rpc {
                                " (an rpc's errors' enum is its name followed by `Error`)"
                            } else {
                                ""
                            };
                            self.error(
                                Code::IdentifierClash,
                                &path,
                                format!("{what} would both become the Rust {noun} `{id}`{why}"),
                                format!(
                                    "Rust names are made of the words of a name, re-cased, so these two are the same name; rename one of them (at `{}` or here) so their words differ",
                                    entry(first_section, first)
                                ),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// A name to derive an identifier from: its contract section, the name, and the text the
/// identifier comes from (the name, or for an rpc's errors' enum the name and `error`).
type Named<'n> = (&'static str, &'n str, String);

/// Each of `names` of contract section `section`, with the text its identifier comes from
/// (the name itself).
fn named<'n>(
    section: &'static str,
    names: impl IntoIterator<Item = &'n String>,
) -> impl Iterator<Item = Named<'n>> {
    names
        .into_iter()
        .map(move |n| (section, n.as_str(), n.clone()))
}

/// The noun of one entry of `section`: `consumer` for `consumers`.
fn singular(section: &str) -> &str {
    section.strip_suffix('s').unwrap_or(section)
}
