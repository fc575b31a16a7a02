//! Every diagnostic code warren reports, in one list.

use std::fmt;

/// Declares [`Code`], its text and [`Code::ALL`] from one list, so a code cannot be added to
/// one and missed in another.
macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $text:literal,)*) => {
        /// A stable identifier of one check, rendered in kebab case (`warren::unroutable-publisher`).
        ///
        /// The rendered text of a code never changes: scripts and CI logs match on it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Code {
            $($(#[$doc])* $variant,)*
        }

        impl Code {
            /// Every code, in the order of this list.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The code as rendered: kebab case, such as `unroutable-publisher`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $text,)*
                }
            }
        }
    };
}

codes! {
    // Loading the contract file.
    /// The contract is not valid YAML or does not match the contract format.
    InvalidContract = "invalid-contract",
    /// A document nested deeper than warren reads, refused before it is parsed.
    TooDeep = "too-deep",

    // What the contract says about itself.
    /// An `info` entry another tool cannot use: an empty title or version, a contact email
    /// that is no address, a contact URL that is not `http` or `https`.
    BadInfo = "bad-info",

    // Names.
    /// A key written twice under one mapping: YAML would keep the last one silently.
    DuplicateName = "duplicate-name",
    /// An exchange or queue name that is empty.
    BadName = "bad-name",
    /// A name longer than the 255 bytes of an AMQP short string, derived wait queues included.
    NameTooLong = "name-too-long",
    /// An exchange or queue name in RabbitMQ's reserved `amq.` space.
    ReservedName = "reserved-name",
    /// A wait queue a `ttl-backoff` retry derives takes the name of a declared queue.
    WaitQueueClash = "wait-queue-clash",
    /// A name that cannot become a Rust identifier.
    BadIdentifier = "bad-identifier",
    /// Two names that would become the same Rust identifier.
    IdentifierClash = "identifier-clash",

    // Imports.
    /// An `imports` entry that cannot be used: its name, its path, a cycle, or an imported
    /// contract with errors of its own.
    BadImport = "bad-import",
    /// An import or a schema root outside the contract's project folder (the git work tree
    /// holding it, or the folder chosen), which is never read.
    OutsideProject = "outside-project",
    /// A qualified name (`orders::order_placed`) whose contract is not imported.
    UnknownImport = "unknown-import",
    /// A contract declares (or names by qualified name) what another contract owns.
    OwnedElsewhere = "owned-elsewhere",

    // References.
    /// A reference to an exchange that is not declared.
    UnknownExchange = "unknown-exchange",
    /// A reference to a queue that is not declared.
    UnknownQueue = "unknown-queue",
    /// A reference to a message that is not declared.
    UnknownMessage = "unknown-message",

    // Exchanges and queues.
    /// A raw argument that a typed field already sets.
    DuplicateArgument = "duplicate-argument",
    /// An exchange that is its own alternate exchange.
    BadAlternateExchange = "bad-alternate-exchange",
    /// A queue property its queue type does not support, or an out-of-range value.
    BadQueueProperty = "bad-queue-property",
    /// A duration that must be above zero (or below a bound) and is not.
    BadDuration = "bad-duration",
    /// (Warning) `overflow` without a length limit, which has no effect.
    OverflowWithoutLimit = "overflow-without-limit",
    /// (Warning) settings under which RabbitMQ itself discards messages.
    BrokerDropsMessages = "broker-drops-messages",
    /// (Warning) `delivery_limit: broker-default`: the broker's own limit, which differs
    /// between RabbitMQ 3.x (none) and 4.x (20).
    BrokerDeliveryLimit = "broker-delivery-limit",
    /// (Warning) a quorum queue whose `initial_group_size` survives no node down (1), or no
    /// more than one replica fewer would (an even number).
    UnreplicatedQueue = "unreplicated-queue",

    // Retry.
    /// Retry settings that contradict each other or the queue type.
    BadRetry = "bad-retry",
    /// (Warning) retry settings under `mode: none`, which ignores them.
    RetryIgnored = "retry-ignored",
    /// (Warning) `exhausted: requeue`, which returns a failing message to its queue forever.
    ExhaustedRequeue = "exhausted-requeue",
    /// Exhausted messages are dead-lettered by a queue without a dead-letter exchange.
    ExhaustedWithoutDlx = "exhausted-without-dlx",

    // Bindings.
    /// A binding with no destination or two, on the default exchange, or of the wrong shape
    /// for its exchange type.
    BadBinding = "bad-binding",
    /// (Warning) `*` or `#` where they match literally.
    LiteralWildcard = "literal-wildcard",
    /// (Warning) a headers binding without headers, which matches every message.
    HeadersBindingMatchesAll = "headers-binding-matches-all",

    // Publishers.
    /// A publisher publishing to an internal exchange, which refuses publishes.
    InternalExchange = "internal-exchange",
    /// A publisher to a default, topic or direct exchange without a routing key.
    MissingRoutingKey = "missing-routing-key",
    /// A routing key or placeholder that does not parse or cannot become a parameter.
    BadRoutingKey = "bad-routing-key",
    /// A publisher whose messages reach no queue.
    UnroutablePublisher = "unroutable-publisher",
    /// An `ordering_key` that is not a JSON pointer into the payload (or, on a consumer, a
    /// header name), or one on a batch consumer.
    BadOrderingKey = "bad-ordering-key",

    // Consumers and dead letters.
    /// An `inbox` or `inbox_key` that cannot work: a key without the inbox, a key that is
    /// not a JSON pointer, an inbox on a dead-letter consumer.
    BadInbox = "bad-inbox",
    /// Consumer settings that could never work (prefetch, concurrency, batch, breaker).
    BadConsumer = "bad-consumer",
    /// (Warning) more concurrent handlers than prefetched messages.
    ConcurrencyAbovePrefetch = "concurrency-above-prefetch",
    /// A consumed queue that would lose messages that cannot be decoded or validated.
    PoisonLoss = "poison-loss",
    /// A consumer expecting one message type on a queue that publishers fill with another.
    MessageMismatch = "message-mismatch",
    /// Consumers of one queue that expect different message types.
    ConflictingConsumers = "conflicting-consumers",
    /// A dead-letter target that routes dead letters to no queue.
    UnroutableDeadLetter = "unroutable-dead-letter",
    /// (Warning) a dead-letter exchange, used without `dead_letter.routing_key`, whose
    /// bindings do not match every key: a dead letter the broker makes (delivery limit,
    /// expiry, overflow) keeps its own key, and one no binding matches is dropped.
    UncaughtDeadLetterKey = "uncaught-dead-letter-key",
    /// (Warning) a dead-letter consumer (`dead_letters: true`) whose queue no queue of the
    /// contract dead-letters into.
    NoDeadLetters = "no-dead-letters",
    /// (Warning) a dead-letter consumer whose queue receives dead letters of messages it does
    /// not list: they reach its handler raw.
    UntypedDeadLetters = "untyped-dead-letters",

    // Request/reply operations (`rpcs`).
    /// An rpc that could never work: `exchange` without `routing_key` (or the reverse), a
    /// response or error message with a headers schema (replies carry no typed headers).
    BadRpc = "bad-rpc",
    /// An rpc error code that is not a `snake_case` name, or two codes that would become one
    /// variant of the errors' enum.
    BadErrorCode = "bad-error-code",
    /// An rpc whose requests do not reach its queue.
    UnroutableRpc = "unroutable-rpc",
    /// A queue an rpc server consumes that a consumer or another rpc consumes too.
    SharedRpcQueue = "shared-rpc-queue",

    // Schemas.
    /// A `schema_roots` entry that is not a folder.
    MissingSchemaRoot = "missing-schema-root",
    /// A message's schema file that is missing, outside the schema roots or invalid.
    BadSchemaFile = "bad-schema-file",
    /// A schema file that cannot be read.
    UnreadableSchema = "unreadable-schema",
    /// A schema file that is not valid JSON or YAML, too deep, or not a schema.
    InvalidSchemaFile = "invalid-schema-file",
    /// A `$ref` that cannot be followed.
    BadRef = "bad-ref",
    /// A loop of `$ref`s and combinators that never reaches a property or an item.
    RefCycle = "ref-cycle",
    /// A message schema too large once its `$ref`s are followed (shared definitions nested
    /// in combinators multiply): its Rust type would not fit a stack, its validation would
    /// take seconds.
    SchemaTooLarge = "schema-too-large",
    /// A schema definition whose name cannot become a Rust type name.
    BadDefinitionName = "bad-definition-name",
    /// Two different schemas that would become the same Rust type.
    TypeNameClash = "type-name-clash",

    // Several contracts checked as one system (`warren validate A B`, `warren validate DIR`).
    /// (Warning) a publisher marked `external_consumers: true` whose messages reach no queue
    /// in any contract of the system.
    UnconsumedInSystem = "unconsumed-in-system",
    /// (Warning) a consumer whose queue no publisher or rpc of the system reaches, or an rpc's
    /// server whose queue no publisher or rpc but its own reaches.
    UnfedConsumer = "unfed-consumer",
    /// A publisher and a consumer in different contracts whose schemas for the message they
    /// share differ.
    SchemaMismatch = "schema-mismatch",
    /// An exchange or queue that two contracts declare differently.
    ConflictingDeclaration = "conflicting-declaration",
    /// An rpc of one contract whose requests reach the server of an rpc of another, where
    /// the two declare a different request, response or errors.
    RpcMismatch = "rpc-mismatch",

    // Generator settings (`warren_codegen::Settings`), not the contract.
    /// A derive, attribute or type replacement that does not parse, or replaces no type of
    /// the contract; a chosen consumer or publisher the contract does not have.
    BadSetting = "bad-setting",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Code;

    #[test]
    fn codes_are_distinct_kebab_case() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            let text = code.as_str();
            assert!(seen.insert(text), "`{text}` is listed twice");
            assert!(
                text.split('-')
                    .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase())),
                "`{text}` is not kebab case"
            );
        }
    }
}
