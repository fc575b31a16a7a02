//! The test contract's rpcs as a service uses them: [`Quoter`], the server of the generated
//! `consumers::QuotePrice`, `consumers::RushQuote` and `consumers::LossyQuote` traits (registered with
//! `consumers::register::quote_price` or as `Handlers` fields), and the generated
//! `RpcClients` to call them (tests/rpc.rs, tests/metrics.rs).

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use warren_runtime::NoErrors;
use warren_runtime::{Delivery, HandlerError, RpcClient, RpcHandlerError};
use warren_testkit::Seen;

use crate::rpcs::QuotePriceError;
use crate::{Harness, RpcClients, consumers, types};

/// One request the server's handler saw.
#[derive(Debug, Clone)]
pub struct Served {
    /// The request's id.
    pub id: String,
    /// Its `tenant` header.
    pub tenant: String,
    /// Its retry count.
    pub retry_count: u32,
    /// Its priority.
    pub priority: Option<u8>,
}

/// The test server of both rpcs: records each request, then answers as its `behaviour`
/// says, after its `delay_ms` (a `hold` request once [`Quoter::open`] was called).
#[derive(Clone)]
pub struct Quoter {
    /// Every request handled, in order.
    pub seen: Seen<Served>,
    /// What `hold` requests wait for: closed (no permits) until [`Quoter::open`].
    gate: Arc<Semaphore>,
}

impl Default for Quoter {
    fn default() -> Self {
        Self {
            seen: Seen::default(),
            gate: Arc::new(Semaphore::new(0)),
        }
    }
}

/// What the handler answers instead of a quote: the declared error (`unknown_sku`), or a
/// failure.
enum Refusal {
    UnknownSku(types::QuoteError),
    Failed(HandlerError),
}

impl Quoter {
    /// Opens the gate: every `hold` request, waiting or to come, is answered.
    pub fn open(&self) {
        self.gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    /// Records `request`, waits its delay, and answers it.
    async fn answer(
        &self,
        request: &Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, Refusal> {
        let payload = request.payload().clone();
        self.seen.record(Served {
            id: payload.id.clone(),
            tenant: request.headers().tenant.clone(),
            retry_count: request.retry_count(),
            priority: request.priority(),
        });
        if let Some(delay) = payload.delay_ms {
            let delay = u64::try_from(delay).unwrap_or_default();
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if payload.behaviour == types::QuoteRequestBehaviour::Hold {
            // A permit is handed back at once: an open gate stays open.
            drop(self.gate.acquire().await);
        }
        let price = i64::try_from(payload.quantity.get()).unwrap_or(i64::MAX) * 10;
        use types::QuoteRequestBehaviour as B;
        match payload.behaviour {
            B::Ok | B::Slow | B::Hold => Ok(types::PriceQuote {
                id: payload.id,
                price,
                note: None,
            }),
            // Valid, and larger than any body cap the tests set.
            B::Huge => Ok(types::PriceQuote {
                id: payload.id,
                price,
                note: Some("x".repeat(1 << 20)),
            }),
            B::Declared => Err(Refusal::UnknownSku(types::QuoteError {
                id: payload.id,
                reason: "no such sku".try_into().expect("a short reason"),
            })),
            // Breaks the response schema (`minimum: 0`): a bug of the server.
            B::Invalid => Ok(types::PriceQuote {
                id: payload.id,
                price: -1,
                note: None,
            }),
            B::Retryable => Err(Refusal::Failed(HandlerError::retryable(
                std::io::Error::other("the pricing service is down"),
            ))),
            B::Fatal => Err(Refusal::Failed(HandlerError::non_retryable(
                "no price for this basket",
            ))),
        }
    }
}

impl consumers::QuotePrice for Quoter {
    async fn handle(
        &self,
        request: Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, RpcHandlerError<QuotePriceError>> {
        self.answer(&request)
            .await
            .map_err(|refusal| match refusal {
                Refusal::UnknownSku(error) => QuotePriceError::UnknownSku(error).into(),
                Refusal::Failed(error) => error.into(),
            })
    }
}

impl Quoter {
    /// The answer of an rpc that declares no error: the one `quote_price` declares is a
    /// failure there.
    async fn answer_undeclared(
        &self,
        request: &Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, RpcHandlerError<NoErrors>> {
        self.answer(request).await.map_err(|refusal| match refusal {
            Refusal::UnknownSku(_) => HandlerError::non_retryable("no such sku").into(),
            Refusal::Failed(error) => error.into(),
        })
    }
}

impl consumers::RushQuote for Quoter {
    async fn handle(
        &self,
        request: Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, RpcHandlerError<NoErrors>> {
        self.answer_undeclared(&request).await
    }
}

impl consumers::LossyQuote for Quoter {
    async fn handle(
        &self,
        request: Delivery<types::QuoteRequest, types::JobHeaders>,
    ) -> Result<types::PriceQuote, RpcHandlerError<NoErrors>> {
        self.answer_undeclared(&request).await
    }
}

/// A client on `h`'s connection and topology, and the generated `RpcClients` calling through
/// it (the client kept for what `RpcClients` does not show: its late replies).
pub async fn clients(h: &Harness) -> (RpcClient, RpcClients) {
    let client = RpcClient::new(&h.connection, &h.topology)
        .await
        .expect("a client channel");
    (client.clone(), RpcClients::new(client))
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
