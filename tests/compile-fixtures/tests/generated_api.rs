//! The generated code is usable as users will use it: handler traits implemented with
//! `async fn`, `Handlers` built from them, payload types that round-trip their JSON, and
//! message markers whose schemas are the bundled JSON Schemas.

use warren_compile_fixtures::{
    hostile_docs, hostile_names, payload_shapes, repeated_shapes, routing,
};
use warren_runtime::{Delivery, HandlerError, Message, NoHeaders};

struct Archive;

impl routing::consumers::Archive for Archive {
    async fn handle_batch(
        &self,
        batch: Vec<Delivery<routing::types::Reading, routing::types::ReadingHeaders>>,
    ) -> Result<(), HandlerError> {
        if batch.iter().any(|d| d.payload().value.is_nan()) {
            return Err(HandlerError::non_retryable("not a number"));
        }
        Ok(())
    }
}

struct Watch;

/// A consumer of several messages: a method for each.
impl routing::consumers::Watch for Watch {
    async fn reading(
        &self,
        delivery: Delivery<routing::types::Reading, routing::types::ReadingHeaders>,
    ) -> Result<(), HandlerError> {
        // Any error converts with `?` and is retryable.
        let _: f64 = delivery.payload().sensor.parse::<f64>()?;
        Ok(())
    }

    async fn alarm(&self, delivery: Delivery<routing::types::Alarm>) -> Result<(), HandlerError> {
        match delivery.payload().level {
            routing::types::AlarmLevel::Warning => Ok(()),
            routing::types::AlarmLevel::Critical => {
                Err(HandlerError::non_retryable("page someone instead"))
            }
        }
    }
}

struct ReadDead;

/// A dead-letter consumer of several messages: one method over their enum.
impl routing::consumers::ReadDead for ReadDead {
    async fn handle(
        &self,
        failure: warren_runtime::FailureContext,
        message: routing::consumers::ReadDeadMessage,
    ) -> Result<(), HandlerError> {
        let _reason = failure.reason;
        match message {
            routing::consumers::ReadDeadMessage::Reading(reading) => {
                let _ = reading.payload().value;
            }
            routing::consumers::ReadDeadMessage::Alarm(alarm) => {
                let _ = alarm.payload().level;
            }
            routing::consumers::ReadDeadMessage::Raw(raw) => {
                let _ = raw.body.len();
            }
        }
        Ok(())
    }
}

struct Eu;

impl routing::consumers::Eu for Eu {
    async fn handle(
        &self,
        delivery: Delivery<routing::types::Reading, routing::types::ReadingHeaders>,
    ) -> Result<(), HandlerError> {
        match delivery.headers().region {
            routing::types::ReadingHeadersRegion::Eu => Ok(()),
            routing::types::ReadingHeadersRegion::Us => {
                Err(HandlerError::non_retryable("routed to the wrong region"))
            }
        }
    }
}

struct Matcher;

impl hostile_names::consumers::Match for Matcher {
    async fn handle(
        &self,
        delivery: Delivery<hostile_names::types::Event>,
    ) -> Result<(), HandlerError> {
        let _ = (&delivery.payload().type_, delivery.payload().self_);
        Ok(())
    }
}

/// The server of the hostile rpcs: `new` declares errors `self` and `type` (variants `Self_`
/// and `Type`), `Self`, `with` and `client` none.
struct Answer;

impl hostile_names::consumers::New for Answer {
    async fn handle(
        &self,
        request: Delivery<hostile_names::types::Event>,
    ) -> Result<
        hostile_names::types::Event,
        warren_runtime::RpcHandlerError<hostile_names::rpcs::NewError>,
    > {
        if request.payload().self_ == 0 {
            return Err(hostile_names::rpcs::NewError::Self_(request.payload().clone()).into());
        }
        Ok(request.payload().clone())
    }
}

/// Implements the server traits of the hostile rpcs without declared errors for [`Answer`]:
/// each echoes its request.
macro_rules! echo_servers {
    ($($server:ident),*) => {$(
        impl hostile_names::consumers::$server for Answer {
            async fn handle(
                &self,
                request: Delivery<hostile_names::types::Event>,
            ) -> Result<
                hostile_names::types::Event,
                warren_runtime::RpcHandlerError<warren_runtime::NoErrors>,
            > {
                Ok(request.payload().clone())
            }
        }
    )*};
}

echo_servers!(Self_, With, Client);

/// The hostile rpcs' client methods keep `RpcClients`' own `new`, `with` and `client`;
/// their placeholders `{request}` and `{headers}` become `request_` and `headers_`.
#[allow(dead_code)]
async fn hostile_rpc_calls(
    clients: &hostile_names::RpcClients,
    event: &hostile_names::types::Event,
) {
    let clients = hostile_names::RpcClients::with(clients, warren_runtime::CallOptions::default());
    let _ = clients.new_("r", "h", event).await;
    let _ = clients.with_(event).await;
    let _ = clients.self_(event).await;
    let _ = clients.client_(event).await;
    let _: &warren_runtime::RpcClient = clients.client();
}

#[tokio::test]
async fn handler_traits_take_async_fns_and_handlers_need_every_one() {
    let handlers = routing::Handlers {
        archive: Archive,
        eu: Eu,
        read_dead: ReadDead,
        watch: Watch,
    };
    let reading = routing::types::Reading {
        sensor: "12.5".to_owned(),
        value: 12.5,
    };
    let headers = routing::types::ReadingHeaders {
        region: routing::types::ReadingHeadersRegion::Us,
        priority: None,
    };
    let delivery = Delivery::new(reading, headers);
    use routing::consumers::{Archive as _, Eu as _, Watch as _};
    assert!(handlers.watch.reading(delivery.clone()).await.is_ok());
    let refused = handlers.eu.handle(delivery.clone()).await.unwrap_err();
    assert!(!refused.is_retryable());
    assert!(handlers.archive.handle_batch(vec![delivery]).await.is_ok());
    let hostile = hostile_names::Handlers {
        r#match: Matcher,
        h: Matcher,
        handlers: Matcher,
        new: Answer,
        self_: Answer,
        with: Answer,
        client: Answer,
    };
    let event: hostile_names::types::Event =
        serde_json::from_str(r#"{"type": "t", "self": 1}"#).unwrap();
    use hostile_names::consumers::Match as _;
    assert!(
        hostile
            .r#match
            .handle(Delivery::new(event, NoHeaders {}))
            .await
            .is_ok()
    );
}

impl hostile_names::consumers::H for Matcher {
    async fn handle(&self, _: Delivery<hostile_names::types::Event>) -> Result<(), HandlerError> {
        Ok(())
    }
}

impl hostile_names::consumers::Handlers for Matcher {
    async fn handle(&self, _: Delivery<hostile_names::types::Event>) -> Result<(), HandlerError> {
        Ok(())
    }
}

/// Publishers named like `Publishers`' own methods keep them: theirs get a trailing `_`.
#[test]
fn publishers_named_like_the_generated_methods_do_not_replace_them() {
    let _constructor: fn(warren_runtime::Publisher) -> hostile_names::Publishers =
        hostile_names::Publishers::new;
    let _options: fn(&hostile_names::Publishers, warren_runtime::PublishOptions) -> _ =
        hostile_names::Publishers::with;
    let _through: fn(&hostile_names::Publishers, warren_runtime::Publisher) -> _ =
        hostile_names::Publishers::through;
    type Direct = hostile_names::Publishers<warren_runtime::Publisher>;
    let _publishers = (Direct::new_, Direct::with_, Direct::through_);
}

#[test]
fn payload_types_round_trip_and_validate_what_serde_can() {
    let json = serde_json::json!({
        "id": "6f1c2a57-1a0e-4d55-9d1c-3bd1b1c1d6a1",
        "kind": "shapes",
        "status": "active",
        "amount": 12.5,
        "tags": ["a", "b"],
        "payment": { "method": "card", "last4": "4242" },
        "sku": "ABC-1234",
        "created": "2026-11-30T10:00:00Z",
        "tree": { "label": "root", "children": [{ "label": "leaf" }] }
    });
    let shapes: payload_shapes::types::Shapes = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(shapes.status, payload_shapes::types::ShapesStatus::Active);
    assert_eq!(shapes.tree.as_ref().unwrap().children.len(), 1);
    // Defaults the schema gives (typify's `defaults` module).
    assert_eq!((shapes.channel.as_str(), shapes.attempts), ("email", 3));
    let back = serde_json::to_value(&shapes).unwrap();
    assert_eq!(back["payment"], json["payment"]);
    assert_eq!(back["tree"], json["tree"]);
    // A pattern is enforced by the generated type itself.
    let mut bad = json;
    bad["sku"] = "abc".into();
    assert!(serde_json::from_value::<payload_shapes::types::Shapes>(bad).is_err());
}

#[test]
fn message_markers_carry_name_content_type_and_bundled_schemas() {
    type Reading = routing::messages::Reading;
    assert_eq!(Reading::NAME, "reading");
    assert_eq!(Reading::CONTENT_TYPE, "application/json");
    let payload: serde_json::Value = serde_json::from_str(Reading::PAYLOAD_SCHEMA).unwrap();
    assert_eq!(payload["$ref"], "#/$defs/Reading");
    let headers: serde_json::Value =
        serde_json::from_str(Reading::HEADERS_SCHEMA.unwrap()).unwrap();
    assert_eq!(headers["$defs"]["ReadingHeaders"]["required"][0], "region");
    assert_eq!(payload_shapes::messages::Shapes::HEADERS_SCHEMA, None);
}

/// A schema that shares definitions with others is assembled by `concat!` from its own text
/// and the definitions written once: its text is the bundle's schema of the message, as
/// compact JSON.
#[test]
fn schemas_assembled_from_shared_definitions_are_the_bundles() {
    use warren_compile_fixtures::orders_example::messages::{
        OrderCancelled, OrderPlaced, PriceQuote, QuoteError,
    };
    let checked = warren_codegen::check_contract("../../examples/orders/warren.yaml")
        .expect("the orders example is valid");
    let bundled = |message: &str| {
        let schema = &checked.contract.messages[message].payload.schema;
        serde_json::to_string(schema).unwrap()
    };
    // `Money` and `Currency` are shared by the first three; `QuoteError` shares nothing.
    assert_eq!(OrderPlaced::PAYLOAD_SCHEMA, bundled("order_placed"));
    assert_eq!(OrderCancelled::PAYLOAD_SCHEMA, bundled("order_cancelled"));
    assert_eq!(PriceQuote::PAYLOAD_SCHEMA, bundled("price_quote"));
    assert_eq!(QuoteError::PAYLOAD_SCHEMA, bundled("quote_error"));
    assert_eq!(PriceQuote::PAYLOAD_SCHEMA.matches("\"Money\":{").count(), 1);
}

#[test]
fn topology_carries_arguments_wait_queues_and_bindings() {
    use warren_runtime::model::{ArgValue, Destination, QueueRole, Retry};
    let topology = warren_compile_fixtures::retry_modes::topology();
    let backoff = topology.queue("backoff").unwrap();
    let Retry::TtlBackoff(policy) = &backoff.retry else {
        panic!("backoff uses ttl-backoff: {:?}", backoff.retry)
    };
    let delays: Vec<u128> = policy.tiers.iter().map(|t| t.delay.as_millis()).collect();
    assert_eq!(delays, [250, 750, 2250, 5000]);
    let wait = topology.queue("backoff.wait.750ms").unwrap();
    assert_eq!(
        wait.role,
        QueueRole::Wait {
            queue: "backoff".into(),
            delay: std::time::Duration::from_millis(750)
        }
    );
    assert_eq!(
        wait.declare_arguments()["x-dead-letter-routing-key"],
        ArgValue::String("backoff".into())
    );
    let native = topology.queue("native").unwrap();
    assert_eq!(
        native.declare_arguments()["x-delivery-limit"],
        ArgValue::Int(3)
    );
    let routing = routing::topology();
    assert!(
        routing.bindings.iter().any(|b| b.exchange == "telemetry"
            && b.destination == Destination::Exchange("archive".into()))
    );
}

/// A schema whose text holds what would end a raw string (`"###`), bidirectional overrides
/// and a carriage return reaches the runtime whole: the file holds them escaped, and the
/// literal's value parses to the schema as written.
#[test]
fn hostile_schema_text_reaches_the_runtime_whole() {
    let schema: serde_json::Value =
        serde_json::from_str(hostile_docs::messages::Nasty::PAYLOAD_SCHEMA).unwrap();
    let body = &schema["$defs"]["NastyTitle"];
    assert_eq!(
        body["description"],
        "\"### closes r##\"…\"##? \u{202e} reversed \u{2066} isolate \r bare CR\n*/ /** ///"
    );
    assert_eq!(body["title"], "Nasty \r\"## title");
    assert_eq!(body["properties"]["kind"]["enum"][2], "\u{202e}");
}

struct Anything;

impl hostile_docs::consumers::A for Anything {
    async fn handle(
        &self,
        _: Delivery<hostile_docs::types::NastyTitle>,
    ) -> Result<(), HandlerError> {
        Ok(())
    }
}

impl hostile_docs::consumers::AImpl for Anything {
    async fn handle(
        &self,
        _: Delivery<hostile_docs::types::NastyTitle>,
    ) -> Result<(), HandlerError> {
        Ok(())
    }
}

impl hostile_docs::consumers::Self_ for Anything {
    async fn handle(
        &self,
        _: Delivery<hostile_docs::types::NastyTitle>,
    ) -> Result<(), HandlerError> {
        Ok(())
    }
}

impl hostile_docs::consumers::Fenced for Anything {
    async fn handle(&self, _: Delivery<hostile_docs::types::Fenced>) -> Result<(), HandlerError> {
        Ok(())
    }
}

/// `Handlers`' type parameters are `AImpl`, `AImplImpl` and `SelfImpl` for consumers `a`,
/// `a_impl` (whose trait is itself `AImpl`) and `self`: distinct, and each bound by its own
/// trait.
#[test]
fn handlers_type_parameters_stay_distinct_from_each_other_and_the_traits() {
    let handlers = hostile_docs::Handlers {
        a: Anything,
        a_impl: Anything,
        self_: Anything,
        fenced: Anything,
    };
    // `register` exists only where each parameter implements its trait.
    let _register = hostile_docs::Handlers::<Anything, Anything, Anything, Anything>::register;
    let hostile_docs::Handlers {
        a,
        a_impl,
        self_,
        fenced,
    } = handlers;
    let _: (Anything, Anything, Anything, Anything) = (a, a_impl, self_, fenced);
}

/// An rpc server without declared errors answers with its response or a failure.
struct Echo;

impl warren_compile_fixtures::rpc::consumers::Echo for Echo {
    async fn handle(
        &self,
        request: Delivery<
            warren_compile_fixtures::rpc::types::Ping,
            warren_compile_fixtures::rpc::types::PingHeaders,
        >,
    ) -> Result<
        warren_compile_fixtures::rpc::types::Pong,
        warren_runtime::RpcHandlerError<warren_runtime::NoErrors>,
    > {
        if request.payload().id.is_empty() {
            // A handler error converts with `?`, as in a consumer.
            Err(HandlerError::non_retryable("no id"))?;
        }
        Ok(warren_compile_fixtures::rpc::types::Pong {
            id: request.payload().id.clone(),
        })
    }
}

/// An rpc server with declared errors returns one with `.into()`.
struct FindUser;

impl warren_compile_fixtures::rpc::consumers::FindUser for FindUser {
    async fn handle(
        &self,
        request: Delivery<warren_compile_fixtures::rpc::types::Ping>,
    ) -> Result<
        warren_compile_fixtures::rpc::types::Pong,
        warren_runtime::RpcHandlerError<warren_compile_fixtures::rpc::rpcs::FindUserError>,
    > {
        use warren_compile_fixtures::rpc::{rpcs::FindUserError, types::NotFound};
        let id = request.payload().id.clone();
        Err(FindUserError::NotFound(NotFound { id }).into())
    }
}

struct AuditLog;

impl warren_compile_fixtures::rpc::consumers::AuditLog for AuditLog {
    async fn handle(
        &self,
        _: Delivery<warren_compile_fixtures::rpc::types::Pong>,
    ) -> Result<(), HandlerError> {
        Ok(())
    }
}

/// Servers are fields of `Handlers` beside consumers; the markers say what each rpc is; the
/// declared errors say their code (never their payload) and read back only their own codes.
#[tokio::test]
async fn rpc_servers_are_handlers_and_markers_describe_their_operations() {
    use warren_compile_fixtures::rpc::{self, rpcs};
    use warren_runtime::codegen::{DeclaredErrors, Operation};

    let _handlers = rpc::Handlers {
        audit_log: AuditLog,
        echo: Echo,
        find_user: FindUser,
    };
    assert_eq!(<rpcs::Echo as Operation>::NAME, "echo");
    assert_eq!(<rpcs::FindUser as Operation>::NAME, "find_user");
    assert_eq!(
        <<rpcs::FindUser as Operation>::Request as Message>::NAME,
        "user_query"
    );
    let error = rpcs::FindUserError::Gone(rpc::types::NotFound {
        id: "secret-id".into(),
    });
    assert_eq!(error.code(), "gone");
    assert_eq!(error.to_string(), "`gone`");
    assert!(rpcs::FindUserError::decode("unknown", b"{}").is_none());
    assert!(rpcs::FindUserError::decode("not_found", b"{}").is_some());
    match warren_runtime::RpcHandlerError::from(error) {
        warren_runtime::RpcHandlerError::Declared(declared) => assert_eq!(declared.code(), "gone"),
        other => panic!("a declared error: {other:?}"),
    }
}

/// The same inline shape spelled out in two messages' schemas is one type under both names,
/// nested shapes included: a line of one order is a line of the other. A shape that differs
/// keeps a type of its own.
#[test]
fn the_same_inline_shape_in_two_schemas_is_one_type() {
    use std::any::TypeId;

    use repeated_shapes::types::{
        OrderCancelled, OrderCancelledNote, OrderCancelledReason, OrderPlaced,
        OrderPlacedLinesItem, OrderPlacedNote,
    };
    let line: OrderPlacedLinesItem =
        serde_json::from_str(r#"{"sku": "ABC-1234", "quantity": 2, "gift": {"wrap": "box"}}"#)
            .expect("a line");
    let placed = OrderPlaced::new("o-1".into(), vec![line]);
    let reason: OrderCancelledReason = "out of stock".parse().expect("a reason");
    // Compiles only when the two orders' lines are one type.
    let cancelled = OrderCancelled::new(placed.id.clone(), placed.lines.clone(), reason);
    assert_eq!(
        serde_json::to_value(&cancelled.lines).expect("lines"),
        serde_json::json!([{"sku": "ABC-1234", "quantity": 2, "gift": {"wrap": "box"}}])
    );
    assert_eq!(
        TypeId::of::<OrderPlacedNote>(),
        TypeId::of::<OrderCancelledNote>()
    );
    assert_ne!(
        TypeId::of::<OrderCancelledReason>(),
        TypeId::of::<OrderCancelledNote>(),
        "`reason` allows 300 characters, `note` 200"
    );
}
