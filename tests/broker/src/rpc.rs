//! A hand-written RPC operation over the test contract's `quotes` queue and its
//! `quote_request`, `price_quote` and `quote_error` messages, with a server and a way to
//! call it: what the generator will emit (`rpcs::QuotePrice`, `QuotePriceError`) once it
//! emits RPCs, so that the runtime's RPC is tested on its own (tests/rpc.rs, tests/metrics.rs).

use std::num::NonZeroU64;
use std::time::Duration;

use warren_runtime::codegen::{
    ConsumerSpec, DeclaredErrors, Operation, RpcHandler, Target, call, decode_payload,
    encode_payload,
};
use warren_runtime::{
    CallOptions, Delivery, HandlerError, Message, PublishError, RpcClient, RpcError,
    RpcHandlerError,
};
use warren_testkit::Seen;

use crate::{messages, types};

/// The operation: what the generator will emit as `rpcs::QuotePrice`.
pub struct QuotePrice;

impl Operation for QuotePrice {
    type Request = messages::QuoteRequest;
    type Response = messages::PriceQuote;
    type Error = QuotePriceError;
    const NAME: &'static str = "quote_price";
}

/// Its declared errors: what the generator will emit as `rpcs::QuotePriceError`.
#[derive(Debug)]
pub enum QuotePriceError {
    /// `unknown_sku`.
    UnknownSku(types::QuoteError),
}

impl std::fmt::Display for QuotePriceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownSku(error) => write!(f, "unknown_sku: {}", error.reason.as_str()),
        }
    }
}

impl std::error::Error for QuotePriceError {}

impl DeclaredErrors for QuotePriceError {
    fn code(&self) -> &'static str {
        match self {
            Self::UnknownSku(_) => "unknown_sku",
        }
    }

    fn encode(&self) -> Result<Vec<u8>, PublishError> {
        match self {
            Self::UnknownSku(error) => encode_payload::<messages::QuoteError>(error),
        }
    }

    fn decode(code: &str, body: &[u8]) -> Option<Result<Self, String>> {
        match code {
            "unknown_sku" => {
                Some(decode_payload::<messages::QuoteError>(body).map(Self::UnknownSku))
            }
            _ => None,
        }
    }

    fn message_name(&self) -> Option<&'static str> {
        match self {
            Self::UnknownSku(_) => Some(messages::QuoteError::NAME),
        }
    }

    fn content_type(&self) -> Option<&'static str> {
        match self {
            Self::UnknownSku(_) => Some(messages::QuoteError::CONTENT_TYPE),
        }
    }
}

/// The server, as the generated `consumers::register::quote_price` will add it.
pub const SERVER: ConsumerSpec = ConsumerSpec {
    name: "quote_price",
    queue: "quotes",
    prefetch: 50,
    concurrency: 20,
    circuit_breaker: None,
};

/// One request the server's handler saw.
#[derive(Debug, Clone)]
pub struct Served {
    /// The request's id.
    pub id: String,
    /// Its `tenant` header.
    pub tenant: String,
    /// Its retry count.
    pub retry_count: u32,
}

/// The test server: records each request, then answers as its `behaviour` says, after its
/// `delay_ms`.
#[derive(Clone, Default)]
pub struct Quoter {
    /// Every request handled, in order.
    pub seen: Seen<Served>,
}

impl RpcHandler<QuotePrice> for Quoter {
    async fn handle(
        &self,
        request: Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, RpcHandlerError<QuotePriceError>> {
        let payload = request.payload().clone();
        self.seen.record(Served {
            id: payload.id.clone(),
            tenant: request.headers().tenant.clone(),
            retry_count: request.retry_count(),
        });
        if let Some(delay) = payload.delay_ms {
            let delay = u64::try_from(delay).unwrap_or_default();
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let price = i64::try_from(payload.quantity.get()).unwrap_or(i64::MAX) * 10;
        use types::QuoteRequestBehaviour as B;
        match payload.behaviour {
            B::Ok | B::Slow => Ok(types::PriceQuote {
                id: payload.id,
                price,
            }),
            B::Declared => Err(RpcHandlerError::Declared(QuotePriceError::UnknownSku(
                types::QuoteError {
                    id: payload.id,
                    reason: "no such sku".try_into().expect("a short reason"),
                },
            ))),
            // Breaks the response schema (`minimum: 0`): a bug of the server.
            B::Invalid => Ok(types::PriceQuote {
                id: payload.id,
                price: -1,
            }),
            B::Retryable => Err(HandlerError::retryable(std::io::Error::other(
                "the pricing service is down",
            ))
            .into()),
            B::Fatal => Err(HandlerError::non_retryable("no price for this basket").into()),
        }
    }
}

/// A request of `behaviour` for 3 items.
pub fn request(id: &str, behaviour: types::QuoteRequestBehaviour) -> types::QuoteRequest {
    types::QuoteRequest {
        id: id.to_owned(),
        quantity: NonZeroU64::new(3).expect("not zero"),
        behaviour,
        delay_ms: None,
    }
}

/// A request answered after `delay`.
pub fn slow(id: &str, delay: Duration) -> types::QuoteRequest {
    types::QuoteRequest {
        delay_ms: Some(i64::try_from(delay.as_millis()).expect("a short delay")),
        ..request(id, types::QuoteRequestBehaviour::Slow)
    }
}

/// Calls the operation with `timeout`, as a generated client method does.
pub async fn quote(
    client: &RpcClient,
    request: &types::QuoteRequest,
    timeout: Duration,
) -> Result<types::PriceQuote, RpcError<QuotePriceError>> {
    let target = Target {
        exchange: "",
        routing_key: "quotes",
        timeout,
        max_priority: None,
    };
    call::<QuotePrice>(
        client,
        target,
        request,
        &crate::headers(),
        &CallOptions::default(),
    )
    .await
}
